"""A streaming sink that hands Python each micro-batch with its own plan: foreachBatch without
its row copy.

Why: Spark's ``foreachBatch`` gives Python a DataFrame over a ``LogicalRDD`` of the batch,
and ``RDDScanExec`` projects every row once more before a write reads it: 3.5-4% of a parquet
write (benchmarks/delta_io.py, the Delta sink against Spark's parquet sink). A Spark v1
``Sink`` implemented in Python through py4j's callback server (as pyspark's foreachBatch
function is) receives the micro-batch's own Dataset. Spark's ``FileStreamSink`` writes that
Dataset as Spark's parquet sink does (:meth:`MicroBatch.write_parquet`), and
:meth:`MicroBatch.frame` gives foreachBatch's DataFrame where a caller needs one.

The query is started by DataStreamWriter's own (private) ``startQuery``, as ``start()`` does
for foreachBatch: query name, checkpoint, trigger and output mode are read where Spark reads
them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import UnknownException, convert_exception
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from headwater.spark.jvm import java_class, private_field

_SINK = "org.apache.spark.sql.execution.streaming.Sink"
_FILE_SINK = "org.apache.spark.sql.execution.streaming.sinks.FileStreamSink"
_FILE_SINK_LOG = "org.apache.spark.sql.execution.streaming.sinks.FileStreamSinkLog"
_PARQUET_FORMAT = "org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat"
_SINK_LOG = "_spark_metadata"  # FileStreamSink's log, in the folder it writes
_START_QUERY_PARAMETERS = (
    "org.apache.spark.sql.connector.catalog.Table",
    "org.apache.spark.sql.catalyst.util.CaseInsensitiveMap",
    None,  # boolean recoverFromCheckpointLocation
    "scala.Option",  # (catalog, identifier) of a toTable write
    "scala.Option",  # its CatalogTable
)


@dataclass
class MicroBatch:
    """One micro-batch as Spark's sink receives it. ``spark``: the session it runs in (the
    stream's clone of the user's, wrapped as pyspark's foreachBatch wraps it)."""

    spark: SparkSession
    jdata: Any  # the JVM Dataset[Row] of the batch: its plan runs once, where it is written
    batch_id: int

    def own_frame(self) -> DataFrame:
        """The batch's own Dataset as a DataFrame, for its schema and session: a streaming
        plan, which Spark runs once, in :meth:`write_parquet` (it refuses to run it
        anywhere else)."""
        return DataFrame(self.jdata, self.spark)

    def frame(self) -> DataFrame:
        """The batch as foreachBatch's DataFrame: a plain batch DataFrame over the micro-batch's
        rows (its plan is not run again), for writes that transform the rows first."""
        jvm = self.spark._jvm
        logical_rdd = getattr(getattr(jvm.org.apache.spark.sql.execution, "LogicalRDD$"), "MODULE$")
        # as ForeachBatchSink: not streaming, the 4th argument at its default
        node = logical_rdd.fromDataset(self.jdata.queryExecution().toRdd(), self.jdata, False,
                                       getattr(logical_rdd, "fromDataset$default$4")())
        dataset = getattr(getattr(jvm.org.apache.spark.sql.classic, "Dataset$"), "MODULE$")
        return DataFrame(dataset.ofRows(self.spark._jsparkSession, node), self.spark)

    def write_parquet(self, folder: str, partition_columns: list[str],
                      options: dict[str, str]) -> list[str]:
        """Write the batch's rows into ``folder`` (new) with Spark's parquet sink; the files
        its log (``_spark_metadata``) lists, as filesystem paths. Only those hold the batch:
        an attempt whose task result Spark discarded (a lost executor, a speculative or
        retried attempt) may leave a file beside them, which the sink never lists."""
        client = self.spark.sparkContext._gateway._gateway_client
        columns = java_class(client, "java.util.ArrayList")()
        for column in partition_columns:
            columns.add(column)
        settings = java_class(client, "java.util.HashMap")()
        for key, value in options.items():
            settings.put(key, value)
        utils = java_class(client, "org.apache.spark.api.python.PythonUtils")
        sink = java_class(client, _FILE_SINK)(
            self.spark._jsparkSession, folder, java_class(client, _PARQUET_FORMAT)(),
            utils.toSeq(columns), utils.toScalaMap(settings))
        # batch 0 of the folder's own log (every folder is new): a later id would make the
        # sink compact log entries this folder never had
        sink.addBatch(0, self.jdata)
        listed = _logged_files(folder)
        if listed is not None:
            return listed
        entries = java_class(client, _FILE_SINK_LOG)(
            1, self.spark._jsparkSession, f"{folder}/{_SINK_LOG}",
            java_class(client, "scala.Option").empty()).allFiles()
        return [_file_path(str(entry.path())) for entry in entries]


def _file_path(uri: str) -> str:
    """A sink log entry's file (a ``file:`` URI, escaped as Hadoop's Path.toUri escapes it) as
    a filesystem path."""
    return unquote(urlparse(uri).path)


def _logged_files(folder: str) -> list[str] | None:
    """The files batch 0 of a local folder's sink log lists (filesystem paths), read as
    Spark's ``FileStreamSinkLog`` reads it (a ``v1`` line, then one JSON object per file);
    None for another version or layout, or a folder that is not a local path (Spark's reader
    then reads it): one file read instead of ~10 py4j calls."""
    if "://" in folder:
        return None
    try:
        with open(os.path.join(folder, _SINK_LOG, "0"), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        if not lines or lines[0] != "v1":
            return None
        return [_file_path(json.loads(line)["path"]) for line in lines[1:] if line]
    except (OSError, ValueError, KeyError, TypeError):  # no such file (0.compact), or odd
        return None  # Spark's own reader decides, or says what is wrong


class _Sink:
    """Spark's v1 streaming ``Sink``, implemented in Python (py4j calls each method)."""

    def __init__(self, spark: SparkSession, name: str,
                 handler: Callable[[MicroBatch], None]) -> None:
        self._spark = spark
        self._name = name
        self._handler = handler

    def addBatch(self, batch_id: int, jdata: Any) -> None:  # noqa: N802 (Spark's name)
        session = SparkSession(self._spark.sparkContext, jdata.sparkSession())
        self._handler(MicroBatch(session, jdata, int(batch_id)))

    def name(self) -> str:
        return self._name

    def toString(self) -> str:  # noqa: N802 (Java's name): the progress' sink description
        return self._name

    def schema(self) -> Any:
        return self._spark._jvm.org.apache.spark.sql.types.StructType()

    def capabilities(self) -> Any:
        return self._spark._jvm.java.util.HashSet()

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:  # noqa: N802 (Java's name)
        return id(self) & 0x7FFFFFFF

    class Java:
        implements = [_SINK]


def start_with_sink(writer: DataStreamWriter, name: str,
                    handler: Callable[[MicroBatch], None]) -> StreamingQuery:
    """Start ``writer``'s query with a sink that calls ``handler`` with each micro-batch (in
    py4j's callback thread, as foreachBatch does); ``name``: the sink's description."""
    spark = writer._spark
    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    jvm = spark._jvm
    jwrite = writer._jwrite
    types = gateway.new_array(jvm.java.lang.Class, len(_START_QUERY_PARAMETERS))
    for i, cls in enumerate(_START_QUERY_PARAMETERS):
        types[i] = jvm.java.lang.Boolean.TYPE if cls is None else jvm.java.lang.Class.forName(cls)
    method = jwrite.getClass().getDeclaredMethod("startQuery", types)
    method.setAccessible(True)
    # through a list's add (a method call): py4j registers a Python object it passes as a
    # method argument with its callback server, not one set into an array
    arguments = jvm.java.util.ArrayList()
    for argument in (_Sink(spark, name, handler), private_field(jwrite, "extraOptions"), True,
                     jvm.scala.Option.empty(), jvm.scala.Option.empty()):
        arguments.add(argument)
    try:
        return StreamingQuery(method.invoke(jwrite, arguments.toArray()))
    except Py4JJavaError as exc:  # Spark's own error (no checkpoint, ...), not reflection's
        cause = exc.java_exception.getCause()
        converted = None if cause is None else convert_exception(cause)
        if converted is None or isinstance(converted, UnknownException):
            raise  # as pyspark does with a JVM error it has no class for
        raise converted from None
