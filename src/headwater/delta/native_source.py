"""``spark.readStream.format("delta")`` at Spark's native parquet speed: a v1 streaming Source.

delta-spark's ``DeltaSource`` is a Spark (v1) streaming ``Source`` on the driver: it keeps
Delta's offsets and answers each micro-batch with a DataFrame over that batch's files, which
Spark's parquet reader reads. headwater has no jar for such a class, so
:class:`NativeDeltaSource` is a Python object implementing the JVM interfaces ``Source`` and
``SupportsTriggerAvailableNow`` (which extends ``SupportsAdmissionControl``) through py4j's
callback server, as :mod:`headwater.delta.file_index` implements ``FileIndex``:

- offsets are Spark's ``SerializedOffset`` holding exactly the JSON the Python data source
  (:class:`headwater.delta.source.DeltaStreamReader`) writes, so a checkpoint written by
  either source is read by the other; the planning (initial offset, read limits,
  AvailableNow, append-only and schema checks, canonical offsets) is the same
  :class:`~headwater.delta.source.SourcePlanner`;
- ``getBatch(start, end)`` returns a streaming DataFrame over exactly the files between the
  two offsets (a :class:`~headwater.delta.file_index.DeltaFileIndex` with those files and
  their partition values from the log), so rows never pass through Python, and the query's
  ``numInputRows`` is the scan's own row count;
- the stream's DataFrame is a ``StreamingExecutionRelation`` of the source, which Spark's
  ``MicroBatchExecution`` collects as a source as it collects the ones it makes itself.

:func:`native_stream` decides at load whether a stream may read this way and returns None
otherwise (the caller keeps the Python data source): a change feed, an explicit schema, a
table Spark's reader cannot read as it is (deletion vectors, column mapping, an object
store: :func:`headwater.delta.native_read.natively_readable`), or a session with no JVM on
this driver (Spark Connect). Pipelines evaluate their definitions with the Python source
(the graph reads those plans) and swap each stream of a lakehouse table for
:func:`native_stream_leaf` when a flow's query starts. A debug line on
``headwater.delta.native`` says which path a stream got.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame

from headwater.delta.file_index import DeltaFileIndex, native_frame
from headwater.delta.log import DeltaLog, FileEntry, normalize_uri
from headwater.delta.native_read import natively_readable
from headwater.delta.schema import spark_schema, strip_field_metadata
from headwater.delta.source import DeltaStreamReader, Offset, SourcePlanner
from headwater.errors import HeadwaterError
from headwater.spark.plan import live_stream_sources, register_stream_source, swap_stream_sources

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger("headwater.delta.native")

_SOURCE = "org.apache.spark.sql.execution.streaming.Source"
_AVAILABLE_NOW = "org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow"
_CHANGE_FEED = ("readchangefeed", "readchangedata")


class NativeDeltaSource:
    """Spark's v1 streaming ``Source`` over one Delta table, implemented in Python (py4j calls
    each method from the query's micro-batch thread). See the module docstring."""

    def __init__(self, spark: SparkSession, uri: str, options: dict[str, str],
                 schema: StructType, table_schema: StructType, partition_columns: list[str],
                 table_id: str, name: tuple[str, str] | None = None) -> None:
        self._spark = spark
        self.name = name
        self._jvm = spark._jvm
        self.uri = uri
        self.schema_ = schema
        self._args = (uri, options, schema, table_schema, partition_columns)
        self._current = DeltaStreamReader(uri, options, schema, table_schema,
                                          partition_columns, table_id)
        self._stale = False  # a query stopped: the next one plans afresh
        self._lock = threading.Lock()
        self._jschema = spark._jsparkSession.parseDataType(schema.json())
        streaming = self._jvm.org.apache.spark.sql.execution.streaming
        self._serialized = streaming.runtime.SerializedOffset
        self._limits = self._jvm.org.apache.spark.sql.connector.read.streaming.ReadLimit

    @property
    def planner(self) -> SourcePlanner:
        return self._reader.planner

    def fresh(self) -> NativeDeltaSource:
        """A new source of the same stream, for another query (each query plans on its own:
        its starting point, its AvailableNow cap, as the Python source's reader per query)."""
        uri, options, schema, table_schema, partition_columns = self._args
        log_ = DeltaLog(uri)
        table_id = log_.table().metadata().id if log_.exists() else self._current.table_id
        source = NativeDeltaSource(self._spark, uri, options, schema, table_schema,
                                   partition_columns, table_id, self.name)
        register_stream_source(source)
        return source

    # --- what plan inspection reads (headwater.spark.plan.relations) ---------------------
    def relation_facts(self) -> tuple[str, tuple[str, ...] | None, str, tuple]:
        """(source, identifier, path, options) as the Python data source's relation had."""
        options = tuple(sorted((k, str(v)) for k, v in self._args[1].items() if k != "path"))
        if self.name is None:
            return "delta", None, self.uri, options
        return self.name[0], tuple(self.name[1].split(".")), self.uri, options

    # --- org.apache.spark.sql.execution.streaming.Source ----------------------------------
    def schema(self) -> Any:
        return self._jschema

    def getOffset(self) -> Any:  # noqa: N802 (Spark's names, through py4j)
        """Never called: Spark asks a source with admission control for latestOffset."""
        raise NotImplementedError("DeltaSource plans with latestOffset(start, limit)")

    def getBatch(self, start: Any, end: Any) -> Any:  # noqa: N802
        """The micro-batch's DataFrame. Its files are listed when Spark plans it, not here:
        a restarted query calls getBatch for its last logged batch only to let a source
        restore state, and that batch's log files may be gone by then."""
        with self._lock:
            begin = (Offset.from_dict(json.loads(start.get().json())) if start.isDefined()
                     else self.planner.initial_offset())
            finish = Offset.from_dict(json.loads(end.json()))
            planner = self.planner

        def files() -> list[FileEntry]:
            with self._lock:
                entries = planner.files_between(begin, finish)
            if any(e.has_dv for e in entries):  # written after the stream's DataFrame was made
                raise HeadwaterError(
                    "HW_DELTA_UNSUPPORTED_FEATURE",
                    f"The native Delta stream of {self.uri} reached files with deletion "
                    f"vectors (micro-batch up to version {finish.version}).",
                    "Spark's parquet reader would return the rows their vectors delete; the "
                    "stream's DataFrame was made before the table had any.",
                    "Make the stream again (spark.readStream...): it then reads through "
                    "headwater's Python reader, which applies deletion vectors, and resumes "
                    "from the query's checkpoint.")
            log.debug("stream of %s: micro-batch to %s, %d files", self.uri, finish,
                      len(entries))
            return entries

        index = DeltaFileIndex(self._spark, self.uri, self.schema_, self._args[4],
                               finish.version, natively_readable, entries=files)
        return native_frame(self._spark, index, streaming=True)._jdf

    def commit(self, end: Any) -> None:
        with self._lock:
            self.planner.forget_before(Offset.from_dict(json.loads(end.json())).version)

    def stop(self) -> None:
        """The query stopped: a query started again from the same DataFrame plans afresh
        (its starting point, and the table's id as it is then), as a new Python reader
        would."""
        with self._lock:
            self._stale = True

    @property
    def _reader(self) -> DeltaStreamReader:
        if self._stale:
            self._stale = False
            uri, options, schema, table_schema, partition_columns = self._args
            log_ = DeltaLog(uri)
            table_id = log_.table().metadata().id if log_.exists() else self._current.table_id
            self._current = DeltaStreamReader(uri, options, schema, table_schema,
                                              partition_columns, table_id)
        return self._current

    def initialOffset(self) -> Any:  # noqa: N802
        with self._lock:
            return self._offset(self.planner.initial_offset())

    def deserializeOffset(self, text: str) -> Any:  # noqa: N802
        return self._serialized(text)

    # --- SupportsAdmissionControl, SupportsTriggerAvailableNow ----------------------------
    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        options = self._reader.options
        if options.max_files is not None:
            return self._limits.maxFiles(options.max_files)
        if options.max_bytes is not None:
            return self._limits.maxBytes(options.max_bytes)
        return self._limits.allAvailable()

    def latestOffset(self, start: Any, limit: Any) -> Any:  # noqa: N802
        """The end of the next micro-batch from ``start`` (None: the stream's first); ``start``
        itself when there is nothing new (Spark then runs no batch)."""
        with self._lock:
            begin = (Offset.from_dict(json.loads(start.json())) if start is not None
                     else self.planner.initial_offset())
            max_files, max_bytes = self._limits_of(limit)
            reader = self._reader
            end = self.planner.latest_offset(begin, max_files, max_bytes, reader.cap_version)
        if end == begin and start is not None and reader.waits_for_commits:
            # a continuous pipeline's commit-driven flow (pipeline/run/hops.py): wait for
            # the table's next commit, outside the lock (a stop is not held up by it)
            end = reader.wait_for_commit(begin, max_files, max_bytes)
        with self._lock:
            if end == begin and start is not None:
                return start  # unchanged: no new data
            # a first batch ends at least at the stream's starting point (as the Python
            # source's first offset is its initialOffset): the checkpoint keeps where a
            # stream started from, e.g. startingVersion=latest, though nothing was read
            return self._offset(end)

    def reportLatestOffset(self) -> Any:  # noqa: N802
        return None

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        with self._lock:
            self._reader.prepareForTriggerAvailableNow()

    # --- java.lang.Object -------------------------------------------------------------------
    def toString(self) -> str:  # noqa: N802 - the source's description in query progress
        return f"DeltaSource[{self.uri}]"

    def hashCode(self) -> int:  # noqa: N802
        return id(self) & 0x7FFFFFFF

    def equals(self, other: Any) -> bool:
        return other is self

    class Java:
        implements = [_SOURCE, _AVAILABLE_NOW]

    # --- helpers ----------------------------------------------------------------------------
    def _offset(self, offset: Offset) -> Any:
        # the JSON the Python data source writes (json.dumps of the same dict)
        return self._serialized(json.dumps(offset.to_dict()))

    def _limits_of(self, limit: Any) -> tuple[int | None, int | None]:
        """(max files, max bytes) of Spark's read limit, as the Python reader reads one:
        with maxFilesPerTrigger, the maxBytesPerTrigger option applies too."""
        kind = str(limit.getClass().getSimpleName())
        if kind == "ReadMaxFiles":
            return int(limit.maxFiles()), self._reader.options.max_bytes
        if kind == "ReadMaxBytes":
            return None, int(limit.maxBytes())
        if kind == "CompositeReadLimit":
            files = data = None
            parts = limit.getReadLimits()
            for i in range(len(parts)):
                f, b = self._limits_of(parts[i])
                files, data = files if f is None else f, data if b is None else b
            return files, data
        return None, None


def native_stream(spark: SparkSession, path: str, options: dict[str, str],
                  name: tuple[str, str] | None = None) -> DataFrame | None:
    """``spark.readStream.format("delta").options(...).load(path)`` as a stream of
    :class:`NativeDeltaSource`, or None: the Python data source reads it (see the module
    docstring for when). name: (data source name, qualified name) of a lakehouse table read
    by name, for plan inspection."""
    opts = {k.lower(): v for k, v in options.items()}
    uri = normalize_uri(path)
    reason = _python_path_reason(spark, uri, opts)
    if reason is not None:
        log.debug("stream of %s: headwater's Python reader (%s)", uri, reason)
        return None
    table = DeltaLog(uri).table()
    table_schema = spark_schema(table.schema().to_json())
    source = NativeDeltaSource(spark, uri, opts, strip_field_metadata(table_schema),
                               table_schema, list(table.metadata().partition_columns),
                               table.metadata().id, name)
    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    jvm = spark._jvm
    runtime = jvm.org.apache.spark.sql.execution.streaming.runtime
    attributes = jvm.org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttributes(
        source.schema())
    relation = runtime.StreamingExecutionRelation(
        source, attributes, jvm.scala.Option.empty(),
        getattr(runtime.StreamingExecutionRelation, "apply$default$4")(),
        spark._jsparkSession)
    register_stream_source(source)
    log.debug("stream of %s: Spark's parquet reader (a native Delta source)", uri)
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(
        spark._jsparkSession, relation), spark)


def native_stream_leaf(spark: SparkSession, path: str, options: dict[str, str], output: Any,
                       name: tuple[str, str] | None = None) -> Any:
    """A native stream of ``path`` as a JVM plan leaf with ``output`` (another stream
    relation's attributes, so the plan above it resolves unchanged), or None where
    :func:`native_stream` keeps the Python data source."""
    native = native_stream(spark, path, options, name)
    if native is None:
        return None
    leaf = native._jdf.queryExecution().analyzed()
    if leaf.schema().catalogString() != output_schema(spark, output).catalogString():
        return None  # the table changed since the plan was analyzed: keep its reader
    runtime = spark._jvm.org.apache.spark.sql.execution.streaming.runtime
    return runtime.StreamingExecutionRelation(
        leaf.source(), output, spark._jvm.scala.Option.empty(),
        getattr(runtime.StreamingExecutionRelation, "apply$default$4")(), spark._jsparkSession)


def fresh_sources(df: DataFrame) -> DataFrame:
    """``df`` with a new :class:`NativeDeltaSource` for each one its plan reads: Spark keeps
    the source object of the plan it starts, so two queries started from one DataFrame
    (one stream written to two sinks) would otherwise share one source's planning state
    and read each other's starting point. Called for each stream writer made."""
    if df in _renewed or not any(isinstance(s, NativeDeltaSource)
                                 for s in live_stream_sources()):
        return df
    spark = df.sparkSession
    runtime = spark._jvm.org.apache.spark.sql.execution.streaming.runtime

    def renew(source: Any, node: Any) -> Any:
        if not isinstance(source, NativeDeltaSource):
            return None
        return runtime.StreamingExecutionRelation(
            source.fresh(), node.output(), spark._jvm.scala.Option.empty(),
            getattr(runtime.StreamingExecutionRelation, "apply$default$4")(),
            spark._jsparkSession)

    renewed = swap_stream_sources(df, renew)
    _renewed.add(renewed)  # a writer wrapped twice (two scopes) renews once
    return renewed


_renewed: weakref.WeakSet[DataFrame] = weakref.WeakSet()


def output_schema(spark: SparkSession, output: Any) -> Any:
    """The JVM StructType of a plan node's output attributes."""
    return spark._jvm.org.apache.spark.sql.catalyst.types.DataTypeUtils.fromAttributes(output)


def _python_path_reason(spark: SparkSession, uri: str, opts: dict[str, str]) -> str | None:
    """Why this stream stays on the Python data source, or None: it can read natively."""
    if getattr(spark, "_jsparkSession", None) is None:
        return "no JVM on this driver"
    if any(str(opts.get(k, "false")).lower() == "true" for k in _CHANGE_FEED):
        return "a change feed"
    if "://" in uri and not uri.startswith("file:"):
        return "an object store"
    log_ = DeltaLog(uri)
    if not log_.exists():
        return "no table there yet"
    try:
        table = log_.table()
    except Exception:  # noqa: BLE001 - the Python source raises what it always raised
        return "its log cannot be opened"
    if not natively_readable(table):
        return "the table needs it"
    return None

