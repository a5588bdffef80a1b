"""Session hooks: ``spark.sql`` and the table writers reach the lakehouse attached to a session.

Spark alone would run ``CREATE TABLE``/``ALTER TABLE`` against its in-memory catalog only, and
``saveAsTable``/``toTable`` would create tables at a default location headwater cannot see. So
while a lakehouse is attached, ``SparkSession.sql`` and ``.table``, ``DataFrameWriter.saveAsTable``
and ``.insertInto``, ``DataStreamWriter.toTable`` (and its Databricks spelling ``.table``), the
readers' ``table``, plus ``format`` on both writers (only to remember whether a format was set)
are wrapped. Every headwater session also gets the ``format("delta")`` path writer and reader
and ``newSession`` (:func:`install_path_writer`).

The wrappers are defined here; which attribute each one goes on, its scope and the putting
back are rows of the one table in :mod:`headwater.spark.patches`.

Scope: the wrappers look up the lakehouse of the writer's / the statement's own session
(:func:`~headwater.lakehouse.catalog.lakehouse_of`); a session without one gets Spark's method
with the same arguments, unchanged. The lakehouse's wrappers exist only while at least one
lakehouse is attached and come off when the last one is detached. They are class-level because
Spark makes a new writer object per ``df.write`` and a new Python session object for cloned
sessions (foreachBatch), so an instance patch would miss both.

Writers honour what was set on them: format, mode, partitionBy and options are read back from
the writer (Spark keeps them on the JVM side; the format is remembered here because Spark's
default "parquet" looks the same as an explicit ``.format("parquet")``). A format other than
delta keeps Spark's own behaviour, except into an existing lakehouse table, which is an error.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.sql_formatter import SQLStringFormatter
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

from headwater.conf.context import current_definition, record_path_read, stream_read_options
from headwater.conf.options import parse_bool
from headwater.delta.constraints import schema_overwrite
from headwater.delta.defaults import with_defaults
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.native_source import fresh_sources, native_stream
from headwater.delta.write.native import native_sink, write_native
from headwater.delta.write.replace_table import replace_native
from headwater.delta.write.request import (
    SAVE_MODE_OPTION,
    TABLE_PROPERTIES_OPTION,
    WriteRequest,
    reset_session_txn,
    with_session_settings,
)
from headwater.errors import HeadwaterError, translated
from headwater.errors.delta import DeltaAnalysisError
from headwater.ingest.registration import register_sources
from headwater.kafka import register_message_sources
from headwater.lakehouse.catalog import lakehouse_of
from headwater.lakehouse.names import name_taken_error, parse_name, spark_name
from headwater.lakehouse.native_reads import load as native_load
from headwater.lakehouse.native_reads import read_table as native_table
from headwater.lakehouse.native_reads import registered_fresh, with_native_reads
from headwater.spark import patches
from headwater.spark.jvm import (
    active_in_thread,
    clear_writer_partitioning,
    has_jvm,
    reader_has_schema,
    reader_options,
    reader_source,
    stream_reader_source,
    stream_writer_is_continuous,
    stream_writer_output_mode,
    writer_mode,
    writer_options,
    writer_partition_columns,
    writer_source,
)
from headwater.spark.micro_batch_sink import start_with_sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# What spark.sql runs in a session with a lakehouse: handed in by Lakehouse.attach
# (headwater.lakehouse.sql.router.run_sql), so the hooks import neither the router nor the tables.
Router = Callable[..., Any]
_router: Router | None = None


# The format explicitly set on a writer (weak keys: writers are short-lived).
_formats: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def installed() -> bool:
    return patches.installed(patches.LAKEHOUSE)


def install(router: Router) -> None:
    """Wrap the methods (the ``lakehouse`` rows of :mod:`headwater.spark.patches`;
    idempotent); ``spark.sql`` in a session with a lakehouse runs
    ``router(lake, text, session=..., args=...)``."""
    global _router
    _router = router
    patches.install(patches.LAKEHOUSE)


def uninstall() -> None:
    """Take the lakehouse's wrappers off (Spark's methods back where nothing wrapped them
    since)."""
    patches.restore(patches.LAKEHOUSE)


def install_path_writer() -> None:
    """Wrap, for every headwater session (the ``session`` rows of
    :mod:`headwater.spark.patches`; idempotent), ``DataFrameWriter.save`` for
    ``format("delta")``:

    - no mode, ``error``/``errorifexists`` and ``ignore``: Spark refuses every mode but append
      and overwrite for Python data sources (UNSUPPORTED_DATA_SOURCE_SAVE_MODE). As in
      delta-spark, an existing table is an error (DELTA_PATH_EXISTS) or left alone (ignore);
      a new one is written as an append.
    - ``.partitionBy(cols)``: Spark refuses it for Python data sources; it becomes the
      ``partitionBy`` option the Delta writer reads.
    - ``.mode("overwrite").option("overwriteSchema", "true")``: the table is replaced in one
      commit (schema and partitioning too), as delta-spark does.
    - the rows go through Spark's parquet writer and one driver commit
      (:func:`headwater.delta.write.native.write_native`; generated / identity values computed on
      the DataFrame first) wherever that writer can write the table, else through the Python
      data source writer; ``writeStream.format("delta").start(path)`` in append or complete
      mode writes each micro-batch that way (Spark's parquet sink, exactly once).
    Other formats go to Spark's save / start unchanged.

    And ``DataFrameReader.load`` for ``format("delta")``: a batch read through Spark's parquet
    reader where the table allows it (:mod:`headwater.lakehouse.native_reads`); and
    ``SparkSession.newSession``: the new session gets headwater's sources."""
    patches.install(patches.SESSION)


def _onto_stream_writer(writer: DataStreamWriter, options: dict[str, Any],
                        output_mode: str | None, partition_by: Any, fmt: str | None,
                        query_name: str | None) -> None:
    """What Spark's ``start`` / ``toTable`` do with their arguments before anything else:
    put them on the writer, the one place headwater then reads settings from."""
    writer.options(**options)
    if output_mode is not None:
        writer.outputMode(output_mode)
    if partition_by is not None:
        writer.partitionBy(partition_by)
    if fmt is not None:
        writer.format(fmt)
    if query_name is not None:
        writer.queryName(query_name)


def _start(original: Callable) -> Callable:
    def start(self, path: str | None = None, format: str | None = None,  # noqa: A002
              outputMode: str | None = None, partitionBy: Any = None,  # noqa: N803
              queryName: str | None = None, **options: Any):  # noqa: N803
        # What Spark's start does first: every argument goes onto the writer.
        _onto_stream_writer(self, options, outputMode, partitionBy, format, queryName)
        if writer_source(self) == "delta":
            settings = writer_options(self)
            target = path or next((v for k, v in settings.items() if k.lower() == "path"), None)
            if target is not None:
                query = _driver_stream(self, target, settings)
                if query is not None:
                    return query
            if target is not None:  # the Python sink: a new table gets the session's defaults
                _new_table_properties(self, self._spark, target, {})
        return original(self, path)

    start.__doc__ = original.__doc__
    return start


def _driver_stream(writer: Any, path: str, settings: dict[str, str]) -> StreamingQuery | None:
    """Start ``writer``'s query on the native Delta sink: each micro-batch through Spark's
    parquet sink and one driver commit, exactly once
    (:func:`headwater.delta.write.native.native_sink`); None (the writer untouched: the Python
    sink) where that sink cannot write the table or output mode."""
    if stream_writer_is_continuous(writer):
        return None  # a micro-batch sink: Spark says what a continuous trigger supports
    sink = native_sink(writer._df, path, settings, stream_writer_output_mode(writer),
                       writer_partition_columns(writer) or [])
    if sink is None:
        return None
    return start_with_sink(writer, f"DeltaSink[{path}]", sink)


def _new_session(original: Callable) -> Callable:
    """``spark.newSession()``: Spark gives it none of the data sources registered in the
    session it came from; headwater's (delta, cloudFiles, Kafka, the lakehouse's tables) are
    registered there too, as delta-spark's ``format("delta")`` works in every session."""
    def newSession(self):  # noqa: N802 (Spark's name)
        session = original(self)
        # Spark checks a new name against the *active* session's sources ("already exists"
        # while the parent is active): the new session is the JVM's active one of this thread
        # while it gets them, and the thread's previous one (or none) after; pyspark's own
        # active session is not touched (newSession never changes it).
        with active_in_thread(session):
            register_sources(session)
            register_message_sources(session)
            lake = lakehouse_of(self)
            if lake is not None:
                lake.share_with(session)
        return session

    newSession.__doc__ = original.__doc__
    return newSession


def _load(original: Callable) -> Callable:
    def load(self, path: Any = None, format: str | None = None,  # noqa: A002
             schema: Any = None, **options: Any) -> DataFrame:
        # What Spark's load does first: every argument goes onto the reader.
        if format is not None:
            self.format(format)
        if schema is not None:
            self.schema(schema)
        self.options(**options)
        # the reader's settings through its accessors: one py4j call each (reflection on
        # its private fields costs a dozen, a failed lookup in a subclass many more)
        if reader_source(self) == "delta" and not reader_has_schema(self):
            settings = reader_options(self)
            target = path if isinstance(path, str) else None
            if path is None:
                target = next((v for k, v in settings.items() if k.lower() == "path"), None)
            if target is not None:
                record_path_read(target)
                native = native_load(self._spark, target, settings)
                if native is not None:
                    return native
        return original(self, path)

    load.__doc__ = original.__doc__
    return load


def _stream_load(original: Callable) -> Callable:
    """``spark.readStream.format("delta").load(path)``: a native Delta stream source (Spark's
    parquet reader reads each micro-batch) where the table and session allow it
    (:func:`headwater.delta.native_source.native_stream`); the Python data source otherwise."""
    def load(self, path: str | None = None, format: str | None = None,  # noqa: A002
             schema: Any = None, **options: Any) -> DataFrame:
        if format is not None:
            self.format(format)
        if schema is not None:
            self.schema(schema)
        self.options(**options)
        if stream_reader_source(self) == "delta":
            settings = reader_options(self)
            target = path if isinstance(path, str) else None
            if path is None:
                target = next((v for k, v in settings.items() if k.lower() == "path"), None)
            # inside a pipeline's definitions the graph reads streams from their plans
            # (StreamingRelationV2): those keep the Python data source
            if target is not None and current_definition() is None:
                record_path_read(target)
                native = native_stream(self._spark, target, settings)
                if native is not None:
                    return native
        return original(self, path)

    load.__doc__ = original.__doc__
    return load


def _stream_writer_init(original: Callable) -> Callable:
    """``df.writeStream``: each query started gets its own native Delta sources
    (:func:`headwater.delta.native_source.fresh_sources`), as each gets its own Python
    source reader, so one stream written to two sinks plans each query on its own."""
    def __init__(self, df: DataFrame) -> None:  # noqa: N807 - the wrapped constructor
        original(self, fresh_sources(df) if df.isStreaming else df)

    __init__.__doc__ = original.__doc__
    return __init__


def _save(original: Callable) -> Callable:
    def save(self, path: str | None = None, format: str | None = None,  # noqa: A002
             mode: str | None = None, partitionBy: Any = None,  # noqa: N803 (Spark's name)
             **options: Any) -> None:
        # What Spark's save does first: every argument goes onto the writer.
        self.mode(mode).options(**options)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        if writer_source(self) != "delta":
            return original(self, path)
        with active_in_thread(self._spark):  # Spark finds "delta" in the thread's session
            return _save_delta(self, original, path)

    save.__doc__ = original.__doc__
    return save


def _save_delta(writer: Any, original: Callable, path: str | None) -> None:
    spark = writer._spark
    given = writer_options(writer)
    mode = writer_mode(writer)
    # delta-spark's session settings (autoMerge, userMetadata, txnAppId / txnVersion,
    # partitionOverwriteMode) where the writer sets none, onto the writer too: the Python data
    # source writer reads only its options
    options = with_session_settings(given, spark.conf, overwrite=mode == "overwrite")
    given_keys = {k.lower() for k in given}
    for key, value in options.items():
        if key not in given_keys:
            writer.option(key, value)
    # delta-spark (DeltaDataSource.createRelation): a batch write's delta.* options are the
    # properties of the table it creates, over the session's properties.defaults.*
    explicit = {k: v for k, v in given.items() if k.startswith("delta.")}
    target = path or options.get("path")
    partition_by = writer_partition_columns(writer) or []
    if partition_by:  # the Delta writer's option; Spark must not see a Python source partitioned
        if "partitionby" not in options:
            writer.option("partitionBy", ",".join(partition_by))
        clear_writer_partitioning(writer)
    overwrite_schema = parse_bool("overwriteSchema", options.get("overwriteschema"), False)
    if target is None:
        return original(writer, path)  # the Python writer's HW_SINK_NO_PATH
    # every option checked before anything is written (a refused one never widens the write)
    request = WriteRequest.from_options(options, path=target, mode=mode,
                                        partition_by=partition_by)
    save_mode = None
    if mode in ("errorifexists", "error", "ignore"):
        if DeltaLog(normalize_uri(target)).exists():
            if mode == "ignore":
                return None
            raise DeltaAnalysisError(
                "HW_DELTA_PATH_EXISTS", f"Cannot write to already existent path {target} "
                "without setting OVERWRITE = 'true'.",
                "A write without a mode (Spark's default errorifexists) creates a new table "
                "only.", "Use .mode('append') to add rows, .mode('overwrite') to replace them, "
                "or .mode('ignore') to skip the write when the table exists.",
                error_class="DELTA_PATH_EXISTS")
        save_mode, mode = ("Ignore" if mode == "ignore" else "ErrorIfExists"), "append"
        request = request.but(mode="append", save_mode=save_mode)
    elif mode == "overwrite" and overwrite_schema and request.replace_where is None \
            and DeltaLog(normalize_uri(target)).exists():
        # (delta-spark ignores overwriteSchema with replaceWhere: the schema is enforced)
        with translated():
            rows, kept = schema_overwrite(writer._df, target)
            replace_native(rows, normalize_uri(target), partition_by or None,
                           configuration=kept)
        return None
    if mode in ("append", "overwrite"):
        with translated():
            written = write_native(writer._df, request.but(properties=explicit or None))
        if written is not None:
            _after_write(spark, given_keys, options)
            return None
    if save_mode is not None:  # Spark refuses these modes for a Python data source
        writer.mode("append").option(SAVE_MODE_OPTION, save_mode)  # for the history
    _new_table_properties(writer, spark, target, explicit)
    original(writer, path)
    _after_write(spark, given_keys, options)
    return None


def _after_write(spark: SparkSession, given_keys: set[str], options: dict[str, str]) -> None:
    """delta-spark's txnVersion.autoReset: a txn taken from the session is cleared after the
    write that used it."""
    if "txnappid" not in given_keys and "txnappid" in options:
        reset_session_txn(spark.conf)


def _new_table_properties(writer: Any, spark: SparkSession, target: str,
                          explicit: dict[str, str]) -> None:
    """For the Python data source writer, whose commit runs in a worker without the
    session: the properties of a table it would create (the session's properties.defaults.*
    under the write's ``explicit`` ones) as an internal option, resolved here on the driver.
    Nothing for an existing table (it keeps its own) or an object store's (not opened here:
    its credentials may reach this process only as the writer's options)."""
    uri = normalize_uri(target)
    if "://" not in uri and DeltaLog(uri).exists():
        return
    properties = with_defaults(explicit, spark)
    if properties:
        writer.option(TABLE_PROPERTIES_OPTION, json.dumps(properties))


# --- the wrappers ---------------------------------------------------------------------------

def _sql(original: Callable) -> Callable:
    def sql(self, sqlQuery: str, args: Any = None, **kwargs: Any):  # noqa: N803 (Spark's name)
        lake = lakehouse_of(self)
        if lake is None or not has_jvm(self):
            return original(self, sqlQuery, args, **kwargs)
        assert _router is not None  # set by install()
        if not kwargs:
            return _router(lake, sqlQuery, session=self, args=args)
        # ``spark.sql("... {df} ...", df=df)``: Spark's own formatter first (DataFrames become
        # temp views it drops afterwards), then the router sees plain text.
        formatter = SQLStringFormatter(self)
        try:
            return _router(lake, formatter.format(sqlQuery, **kwargs), session=self, args=args)
        finally:
            formatter.clear()

    sql.__doc__ = original.__doc__
    return sql


def _format(original: Callable) -> Callable:
    def format(self, source: str):  # noqa: A001 (Spark's name)
        _formats[self] = source
        return original(self, source)

    format.__doc__ = original.__doc__
    return format


def _save_as_table(original: Callable) -> Callable:
    def saveAsTable(self, name: str, format: str | None = None,  # noqa: N802, A002
                    mode: str | None = None, partitionBy: Any = None, **options: Any) -> None:
        lake = lakehouse_of(self._spark)
        if lake is None:
            return original(self, name, format=format, mode=mode, partitionBy=partitionBy,
                            **options)
        # What Spark's saveAsTable does first: every argument goes onto the writer, which is
        # then the one place to read settings from.
        self.mode(mode).options(**options)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        name = _user_name(lake, self._spark, name)
        if not _delta_or_unset(self, lake, name):
            return original(self, spark_name(name, self._spark))
        lake.save_as_table(
            self._df, name, mode=writer_mode(self),
            partition_by=writer_partition_columns(self) or [], options=writer_options(self))
        return None

    saveAsTable.__doc__ = original.__doc__
    return saveAsTable


def _insert_into(original: Callable) -> Callable:
    def insertInto(self, tableName: str, overwrite: bool | None = None) -> None:  # noqa: N802, N803
        lake = lakehouse_of(self._spark)
        if lake is not None:
            tableName = _user_name(lake, self._spark, tableName)  # noqa: N806 (Spark's name)
        if lake is None or not _lakehouse_table(lake, tableName):
            return original(self, tableName if lake is None
                            else spark_name(tableName, self._spark), overwrite)
        if overwrite is not None:  # as Spark's insertInto
            self.mode("overwrite" if overwrite else "append")
        if writer_partition_columns(self) is not None:
            return original(self, tableName)  # Spark's own error: insertInto with partitionBy
        replace = writer_mode(self) == "overwrite"
        lake.insert_into(self._df, tableName, overwrite=replace, options=writer_options(self))
        return None

    insertInto.__doc__ = original.__doc__
    return insertInto


def _to_table(original: Callable) -> Callable:
    def toTable(self, tableName: str, format: str | None = None,  # noqa: N802, N803, A002
                outputMode: str | None = None, partitionBy: Any = None,  # noqa: N803
                queryName: str | None = None, **options: Any):  # noqa: N803
        lake = lakehouse_of(self._spark)
        if lake is None:
            return original(self, tableName, format=format, outputMode=outputMode,
                            partitionBy=partitionBy, queryName=queryName, **options)
        # as Spark's toTable: arguments onto the writer first
        _onto_stream_writer(self, options, outputMode, partitionBy, format, queryName)
        tableName = _user_name(lake, self._spark, tableName)  # noqa: N806 (Spark's name)
        if not _delta_or_unset(self, lake, tableName):
            return original(self, spark_name(tableName, self._spark))
        lake.create_table(tableName, self._df.schema,
                          partition_by=writer_partition_columns(self) or [])
        # The Delta table now carries the partitioning; Spark's writer into a (partitionless)
        # Python table must not be given it again.
        clear_writer_partitioning(self)
        settings = writer_options(self)
        query = _driver_stream(self, lake.path(tableName), settings)
        if query is not None:
            return query
        return original(self, parse_name(tableName).sql)

    toTable.__doc__ = original.__doc__
    return toTable


_SOURCE_ONLY_OPTIONS = ("readchangefeed", "readchangedata", "versionasof", "timestampasof")


def _read_table(original: Callable) -> Callable:
    """``spark.read.table(t)``: the table Spark resolves, read by Spark's parquet reader where
    it allows it (:func:`~headwater.lakehouse.native_reads.with_native_reads`).
    ``spark.readStream.table(t)``: the native Delta stream source
    (:func:`~headwater.delta.native_source.native_stream`) where the table allows it.
    ``spark.read[Stream].option('readChangeFeed', 'true').table(t)`` and
    ``.option('versionAsOf', 3).table(t)`` of a lakehouse table: a catalog table's schema is
    fixed and Spark refuses time travel on it, so such reads go to the table directly
    (natively for a version, through its source for the change feed)."""
    def table(self, tableName: str):  # noqa: N803 (Spark's name)
        lake = lakehouse_of(self._spark)
        if lake is None:
            return original(self, tableName)
        own = _user_name(lake, self._spark, tableName)
        if _lakehouse_table(lake, own):
            if not isinstance(self, DataFrameReader):  # a stream: a continuous pipeline
                self.options(**stream_read_options())  # run's commit wait, if any
            options = reader_options(self)
            # a change feed read, or time travel (delta-spark: .option("versionAsOf", 0)
            # .table(t)): Spark refuses both on a catalog table of a Python data source
            if any(k.lower() in _SOURCE_ONLY_OPTIONS for k in options):
                if isinstance(self, DataFrameReader):
                    native = native_table(lake, self._spark, own, options)
                    if native is not None:
                        return native
                return self.format(parse_name(own).source_name).load()
            if isinstance(self, DataStreamReader) and current_definition() is None \
                    and stream_reader_source(self) is not None:
                # a stream of the table: the native Delta stream source where it can read it
                tname = parse_name(own)
                native = native_stream(self._spark, str(lake.path(own)), options,
                                       name=(tname.source_name, tname.qualified))
                if native is not None:
                    return native.alias(tname.table)
        if isinstance(self, DataFrameReader) and not reader_has_schema(self):
            # Spark resolved the name (current database, temp views): its table, natively
            return with_native_reads(lake, registered_fresh(
                lake, lambda: original(self, spark_name(tableName, self._spark))))
        return original(self, spark_name(tableName, self._spark))

    table.__doc__ = original.__doc__
    return table


def _stream_table(original: Callable | None) -> Callable:
    """``writeStream....table(name)``: Databricks' spelling of ``toTable`` (added where pyspark
    has no ``DataStreamWriter.table``), used throughout the seeds."""
    def table(self, tableName: str, *args: Any, **kwargs: Any):  # noqa: N803 (Spark's name)
        return self.toTable(tableName, *args, **kwargs)

    table.__doc__ = DataStreamWriter.toTable.__doc__
    return table


def _session_table(original: Callable) -> Callable:
    """``spark.table(t)``: the table Spark resolves (current database, temporary views), a
    lakehouse table read by Spark's parquet reader where it allows it."""
    def table(self, tableName: str):  # noqa: N803 (Spark's name)
        lake = lakehouse_of(self)
        if lake is None:
            return original(self, tableName)
        # Spark resolved the name (current database, temp views): its table, natively
        return with_native_reads(lake, registered_fresh(
            lake, lambda: original(self, spark_name(tableName, self))))

    table.__doc__ = original.__doc__
    return table


def _user_name(lake: Any, spark: SparkSession, name: str) -> str:
    """The lakehouse's name of the table a user wrote ``name`` for in ``spark`` (one- and
    two-part names in the current catalog and schema); ``name`` itself when it is no name
    headwater reads (a path, four parts: Spark's to resolve or refuse)."""
    try:
        return str(lake.resolve(name, spark).qualified)
    except HeadwaterError:
        return name


def _lakehouse_table(lake: Any, name: str) -> bool:
    """True when ``name`` is an existing lakehouse table (a name headwater refuses, such as a
    three-part one, is Spark's to resolve)."""
    try:
        return bool(lake.exists(name))
    except HeadwaterError:
        return False


def _foreign_holder(lake: Any, name: str) -> str | None:
    """What else holds ``name`` in Spark's catalog (another provider's table, a view) when
    it is no lakehouse table; None otherwise."""
    try:
        return None if lake.exists(name) else lake.foreign_holder(name)
    except HeadwaterError:
        return None  # no name headwater reads (a path): Spark's to resolve


def _delta_or_unset(writer: Any, lake: Any, name: str) -> bool:
    """True for the lakehouse (no format, or delta); False for Spark's own behaviour."""
    fmt = _formats.get(writer)
    if fmt is None or fmt.lower() == "delta":
        holder = _foreign_holder(lake, name)
        if holder is None:
            return True
        if fmt is None or (not isinstance(writer, DataStreamWriter)
                           and writer_mode(writer) == "ignore"):
            return False  # the name is a table of Spark's catalog: Spark's own behaviour
        raise name_taken_error(name, holder, "format('delta') writing table")
    if lake.exists(name):
        raise HeadwaterError(
            "HW_WRITER_FORMAT_CONFLICT",
            f"format({fmt!r}) cannot write into table {name}: it is a Delta table of the "
            f"lakehouse at {lake.root}.",
            "A lakehouse table is Delta; writing it in another format would make a second, "
            "different table under the same name.",
            "Drop .format(...) (or use .format('delta')), or write to another table name.")
    return False
