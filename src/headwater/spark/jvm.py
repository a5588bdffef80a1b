"""The one boundary to the JVM: every py4j handle headwater uses is reached here.

pyspark keeps its JVM objects behind private attributes (``spark._jsparkSession``,
``spark._jvm``, ``df._jdf``, ``writer._jwrite``, ``reader._jreader``, ``sc._gateway``); the
functions below are named for what they read or do with them, grouped by purpose: the
session, its catalog, its SQL parser, its settings, a DataFrame's plans, building JVM
values, a writer's and a reader's state. Other modules receive JVM objects from here (a
parsed plan, an expression tree) and may walk them (``getClass().getSimpleName()``,
``children()``), but never reach for a handle themselves; tests/test_conventions.py holds
the few that implement a JVM interface in Python to an allow-list.

Reading JVM state from the driver in few py4j calls: each py4j call is a socket round trip,
and a JVM exception crossing it costs ~15 ms (pyspark converts it, looking up its class
through more calls). Iterating a Scala map through py4j takes two calls per entry; a private
field looked up by walking superclasses raises one NoSuchFieldException per class it is not
declared in. These helpers read a map in three calls and look each field up once per JVM
(the Field object is kept), so every ``df.write.format("delta")`` and micro-batch does not
pay them again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from py4j.java_gateway import (
    GatewayClient,
    JavaClass,
    JavaGateway,
    JavaObject,
    get_field,
    is_instance_of,
)
from pyspark import SparkContext
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql.streaming import DataStreamReader, DataStreamWriter
from pyspark.sql.types import DataType

__all__ = ["JavaObject"]  # the type of a JVM object py4j hands over, for annotations

_SEP = "\u0001"  # between the keys (and the values) of a map read in one call
_fields: dict[tuple[int, str, str], Any] = {}  # (gateway, class, field) -> java.lang.reflect.Field
_fields_lock = threading.Lock()


def java_class(gateway_client: GatewayClient, name: str) -> JavaClass:
    """The JVM class ``name`` (fully qualified), in no py4j call: ``spark._jvm.a.b.C`` makes
    one call per dotted part to tell packages from classes. Calling it constructs an
    instance in one call; a static method costs two (its lookup, then the call), as through
    ``spark._jvm``."""
    return JavaClass(name, gateway_client)


def java_map(spark: SparkSession, scala_map: Any) -> dict[str, str]:
    """A Scala Map[String, String] as a dict, in three py4j calls (iterating it through py4j
    costs two calls per entry and an exception at its end, ~0.1 s on a loaded machine)."""
    if scala_map.isEmpty():
        return {}
    keys = str(scala_map.keys().mkString(_SEP)).split(_SEP)
    values = str(scala_map.values().mkString(_SEP)).split(_SEP)
    if len(keys) == len(values) == scala_map.size():
        return dict(zip(keys, values))
    # a key or value holding the separator: the slow, exact way
    converted = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_map)
    return {str(k): str(v) for k, v in dict(converted).items()}


def conf_with_prefix(spark: SparkSession, prefix: str) -> dict[str, str]:
    """The session's SQL settings whose key starts with ``prefix`` (``spark.conf.getAll``
    walks every setting through py4j: ~20 ms per call)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # a Spark Connect session: no JVM here
        return {k: v for k, v in spark.conf.getAll.items() if k.startswith(prefix)}
    settings = java_map(spark, jsession.conf().getAll())
    return {k: v for k, v in settings.items() if k.startswith(prefix)}


def declared_field(obj: Any, name: str) -> Any:
    """The JVM field ``name`` of ``obj``, made accessible: DataStreamWriter keeps its settings
    in private fields (DataFrameWriter has accessors), and the field may live in a superclass
    (the readers' extraOptions, Spark 4's classic writers). Looked up once per class."""
    cls = obj.getClass()
    key = (id(obj._gateway_client), str(cls.getName()), name)
    field = _fields.get(key)
    if field is not None:
        return field
    while True:
        try:
            field = cls.getDeclaredField(name)
            break
        except Exception:  # noqa: BLE001 - py4j's wrapped NoSuchFieldException
            cls = cls.getSuperclass()
            if cls is None:
                raise
    field.setAccessible(True)
    with _fields_lock:
        _fields[key] = field
    return field


def private_field(obj: Any, name: str) -> Any:
    """The value of ``obj``'s (private) JVM field ``name``."""
    return declared_field(obj, name).get(obj)


def set_private_field(obj: Any, name: str, value: Any) -> None:
    """Set ``obj``'s (private) JVM field ``name`` to ``value``."""
    declared_field(obj, name).set(obj, value)


# --- the session ----------------------------------------------------------------------------

def has_jvm(spark: Any) -> bool:
    """True for a classic session (its JVM on this driver); False for Spark Connect's."""
    return getattr(spark, "_jsparkSession", None) is not None


def same_session(a: SparkSession, b: SparkSession) -> bool:
    """True when two Python sessions wrap one JVM session (pyspark makes a new Python object
    for a session the JVM hands over, e.g. a foreachBatch's)."""
    return bool(a._jsparkSession.equals(b._jsparkSession))


def driver_gateway() -> JavaGateway | None:
    """The py4j gateway of this process's driver JVM; None before one is launched."""
    return SparkContext._gateway


def started_context() -> SparkContext | None:
    """This process's SparkContext once its JVM side is up (None before, or when the active
    one has no JVM here)."""
    sc = SparkContext._active_spark_context
    return sc if sc is not None and getattr(sc, "_jsc", None) is not None else None


def look_up_python_sources(sc: SparkContext) -> None:
    """Spark's one-time search (per JVM, cached) for installed Python data sources: a Python
    process that imports pyspark and lists ``pyspark_*`` packages."""
    manager = sc._jvm.org.apache.spark.sql.execution.datasources.DataSourceManager()
    manager.dataSourceExists("headwater")


def progress_json_newest_first(query: Any) -> Iterator[str] | None:
    """The JSON of a classic streaming query's kept progress updates, newest first, each
    asked of the JVM only when the caller reaches it; None for a query without a JVM here
    (Spark Connect's)."""
    jquery = getattr(query, "_jsq", None)
    if jquery is None:
        return None
    updates = jquery.recentProgress()
    return (updates[i].json() for i in range(len(updates) - 1, -1, -1))


def run_sql_in_jvm(spark: SparkSession, statement: str) -> None:
    """Run ``statement`` on the JVM session directly (no Python wrapper of ``spark.sql``
    routes it) and collect its rows."""
    spark._jsparkSession.sql(statement).collect()


@contextmanager
def kept_active(spark: Any) -> Iterator[None]:
    """The active session (pyspark's and the JVM's of this thread, or none) after the block
    as it was before it. ``spark``: any session of the JVM (a Spark Connect session has no
    JVM here: nothing is kept, nothing to keep)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        yield
        return
    sessions = jvm.SparkSession
    before, jbefore = SparkSession._activeSession, sessions.getActiveSession()
    try:
        yield
    finally:
        SparkSession._activeSession = before
        if jbefore.isDefined():
            sessions.setActiveSession(jbefore.get())
        else:
            sessions.clearActiveSession()


def set_thread_session(spark: SparkSession) -> None:
    """Make ``spark`` the JVM's active session of the calling thread."""
    spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)


def thread_session() -> Any:
    """This thread's active SparkSession as the JVM knows it, or None.

    ``SparkSession.getActiveSession()`` can return another thread's foreachBatch clone (see
    :func:`headwater.spark.session.activated`); the JVM keeps the active session per thread,
    so ask it.
    """
    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        return None
    found = sc._jvm.SparkSession.getActiveSession()
    if not found.isDefined():
        return None
    jsession = found.get()
    current = SparkSession._activeSession
    if current is not None and current._jsparkSession.equals(jsession):
        return current
    return SparkSession(sc, jsession)


@contextmanager
def active_in_thread(spark: Any) -> Iterator[None]:
    """``spark`` as the JVM's active session of this thread while the block runs; the
    thread's previous one (or none) afterwards.

    Why: Spark looks a Python data source (``format("delta")`` on a write) up in the JVM's
    active session of the calling thread, a thread-local. A Python thread of the user's (a
    ThreadPool, a web handler) starts with none, so a write there failed with
    DATA_SOURCE_NOT_FOUND although the writer's own session has the source registered.
    """
    sessions = spark._jvm.SparkSession
    previous = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


def add_streaming_listener(spark: SparkSession, listener: Any) -> Any:
    """Register ``listener`` (a Python object implementing Spark's
    ``PythonStreamingQueryListener`` through py4j's callback server) on the session's
    streams; returns the handle :func:`remove_streaming_listener` takes."""
    context = spark.sparkContext
    ensure_callback_server_started(context._gateway)
    handle = context._jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(
        listener)
    spark._jsparkSession.streams().addListener(handle)
    return handle


def remove_streaming_listener(spark: SparkSession, handle: Any) -> None:
    spark._jsparkSession.streams().removeListener(handle)


def cached_rows(spark: SparkSession) -> Callable[[Any], bool]:
    """A test of a logical plan: are its rows in Spark's cache (``CACHE TABLE``, ``.cache()``)?
    The cache manager is asked once whether it holds anything; an empty one answers False
    to every plan without another py4j call."""
    cache = spark._jsparkSession.sharedState().cacheManager()
    if cache.isEmpty():
        return lambda plan: False
    jsession = spark._jsparkSession
    return lambda plan: bool(cache.lookupCachedData(jsession, plan).isDefined())


# --- the session's catalog (Spark's own names: ``main__sales``, not a lakehouse's) ----------

def current_database(spark: SparkSession) -> str:
    """The session's current database as Spark names it (``main__sales`` in a catalog;
    ``spark.catalog.currentDatabase()`` answers ``sales`` in a session with a lakehouse)."""
    return str(spark._jsparkSession.catalog().currentDatabase())


def set_current_database(spark: SparkSession, database: str) -> None:
    spark._jsparkSession.catalog().setCurrentDatabase(database)


def database_exists(spark: SparkSession, database: str) -> bool:
    return bool(spark._jsparkSession.catalog().databaseExists(database))


def catalog_table(spark: SparkSession, name: str) -> JavaObject | None:
    """Spark's ``CatalogTable`` of ``name`` (SQL text, e.g. ```db`.`t```) in the session
    catalog; None when the catalog has no such table."""
    state = spark._jsparkSession.sessionState()
    ident = state.sqlParser().parseTableIdentifier(name)
    if not state.catalog().tableExists(ident):
        return None
    return state.catalog().getTableMetadata(ident)


def is_temp_view(spark: SparkSession, name: str) -> bool:
    """True when ``name`` (one part, or ``global_temp.v``) names a temporary view, which
    Spark resolves before any table of that name."""
    catalog = spark._jsparkSession.sessionState().catalog()
    parts = spark._jsparkSession.sessionState().sqlParser().parseMultipartIdentifier(name)
    return bool(catalog.isTempView(parts))


def alter_catalog_schema(spark: SparkSession, name: str, schema_json: str) -> None:
    """Give the session catalog's table ``name`` (SQL text) the schema ``schema_json`` in
    place (``SessionCatalog.alterTableSchema``): readers resolving the name meanwhile never
    find it missing, as they would between a DROP and a CREATE."""
    state = spark._jsparkSession.sessionState()
    ident = state.sqlParser().parseTableIdentifier(name)
    schema = spark._jvm.org.apache.spark.sql.types.DataType.fromJson(schema_json)
    state.catalog().alterTableSchema(ident, schema)
    state.catalog().refreshTable(ident)


def interval_microseconds(spark: SparkSession, text: str) -> tuple[int, int, int] | None:
    """(months, days, microseconds) of ``text`` read by Spark's interval parser
    (``IntervalUtils.safeStringToInterval``, as delta-spark reads interval properties), or
    None when Spark cannot read it as an interval."""
    utils = spark._jvm.org.apache.spark.sql.catalyst.util.IntervalUtils
    value = utils.safeStringToInterval(
        spark._jvm.org.apache.spark.unsafe.types.UTF8String.fromString(text))
    if value is None:
        return None
    return (int(get_field(value, "months")), int(get_field(value, "days")),
            int(get_field(value, "microseconds")))


# --- the session's SQL parser ---------------------------------------------------------------

def sql_parser(spark: SparkSession) -> JavaObject:
    """Spark's ``ParserInterface`` of the session (its extensions' grammars included)."""
    return spark._jsparkSession.sessionState().sqlParser()


def parse_plan(spark: SparkSession, sql: str) -> JavaObject:
    """The unresolved logical plan of one SQL statement (ParseException when it is none)."""
    return sql_parser(spark).parsePlan(sql)


def parse_expression(spark: SparkSession, sql: str) -> JavaObject:
    """The unresolved expression tree of a SQL expression."""
    return sql_parser(spark).parseExpression(sql)


def parse_multipart_identifier(spark: SparkSession, name: str) -> list[str]:
    """The parts of a (possibly quoted) multi-part name, unquoted."""
    parts = sql_parser(spark).parseMultipartIdentifier(name)
    return [str(parts.apply(i)) for i in range(parts.size())]


def column_expression(spark: SparkSession, column: Column) -> JavaObject:
    """The Catalyst expression of a Column (unresolved)."""
    return spark._jsparkSession.expression(column._jc)


# --- settings -------------------------------------------------------------------------------

def hadoop_conf(spark: SparkSession) -> JavaObject:
    """A new Hadoop Configuration with the session's settings (for a Hadoop FileSystem)."""
    return spark._jsparkSession.sessionState().newHadoopConf()


# --- a DataFrame's plans --------------------------------------------------------------------

def has_jvm_plan(df: DataFrame) -> bool:
    """True when ``df``'s plan is on this driver's JVM (not under Spark Connect)."""
    return getattr(df, "_jdf", None) is not None


def analyzed_plan(df: DataFrame) -> JavaObject:
    return df._jdf.queryExecution().analyzed()


def ran_a_command(df: DataFrame) -> bool:
    """True when ``df`` is the result of a command Spark ran when the DataFrame was made
    (INSERT, CREATE, ...: its executed plan is a ``CommandResult``). Its analyzed plan is the
    command itself; a DataFrame rebuilt from that plan would run the command again."""
    return str(df._jdf.queryExecution().commandExecuted().getClass().getSimpleName()) \
        == "CommandResult"


def logical_plan(df: DataFrame) -> JavaObject:
    """``df``'s logical plan before analysis (its aliases as written)."""
    return df._jdf.queryExecution().logical()


def optimized_plan_stats(df: DataFrame) -> JavaObject:
    """Spark's estimate (``Statistics``: rowCount, sizeInBytes) from ``df``'s optimized plan;
    no job runs."""
    return df._jdf.queryExecution().optimizedPlan().stats()


def dataframe_of_plan(spark: SparkSession, plan: Any) -> DataFrame:
    """A DataFrame of a JVM logical plan (``Dataset.ofRows``: analysed now)."""
    jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan)
    return DataFrame(jdf, spark)


# --- building JVM values --------------------------------------------------------------------

def jvm_view(spark: SparkSession) -> Any:
    """The session's JVM by package (``.org.apache.spark...``), for building Catalyst nodes
    and calling static helpers by class name; None without a JVM (Spark Connect)."""
    return spark._jvm


def jvm_data_type(spark: SparkSession, data_type: DataType) -> JavaObject:
    """``data_type`` as Spark's JVM DataType."""
    return spark._jvm.org.apache.spark.sql.types.DataType.fromJson(data_type.json())


def scala_none(spark: SparkSession) -> JavaObject:
    return spark._jvm.scala.Option.empty()


def _java_list(spark: SparkSession, items: Sequence[Any]) -> Any:
    values = spark._jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return spark._jvm.scala.jdk.javaapi.CollectionConverters.asScala(values)


def scala_seq(spark: SparkSession, items: Sequence[Any]) -> JavaObject:
    """An immutable Scala Seq of ``items`` (JVM objects or primitives)."""
    return _java_list(spark, items).toSeq()


def scala_list(spark: SparkSession, items: Sequence[Any]) -> JavaObject:
    """An immutable Scala List of ``items``."""
    return _java_list(spark, items).toList()


def strings_of(spark: SparkSession, seq: Any) -> list[str]:
    """A Scala Seq (of strings, or values read as their text) as a list of str."""
    return [str(s) for s in spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq)]


def field_value(obj: JavaObject, name: str) -> Any:
    """The public JVM field ``name`` of ``obj`` (a Scala case class' field)."""
    return get_field(obj, name)


def is_jvm_instance(obj: Any, class_name: str) -> bool:
    """True when the JVM object ``obj`` is an instance of class ``class_name``."""
    return bool(is_instance_of(SparkContext._gateway, obj, class_name))


_loadable: dict[tuple[int, str], bool] = {}  # (id of the JVM gateway, class) -> found


def class_loadable(spark: Any, name: str) -> bool:
    """True when the session's JVM can load class ``name`` (a connector on its class path);
    False without a JVM. Asked once per JVM."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    key = (id(spark.sparkContext._gateway), name)
    if key not in _loadable:
        try:
            jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(name)
            _loadable[key] = True
        except Exception:  # noqa: BLE001 - ClassNotFoundException through Py4J
            _loadable[key] = False
    return _loadable[key]


# --- a writer's and a reader's state (Spark keeps it in the JVM) ----------------------------
# DataFrameWriter has accessors; DataStreamWriter keeps its settings in private fields.

def has_jvm_writer(writer: Any) -> bool:
    """True when the writer's state is in the JVM (not under Spark Connect)."""
    return getattr(writer, "_jwrite", None) is not None


def observed_if_done(observation: Observation) -> dict[str, Any] | None:
    """The metrics of ``observation`` when the action of the DataFrame it observes has
    delivered them (Spark completes them as the action returns), else None. Never waits:
    ``Observation.get`` blocks until they arrive, and an action that ran no job over the
    observed plan (a write skipped as already committed) never delivers them."""
    jo = getattr(observation, "_jo", None)
    if jo is None or not jo.future().isCompleted():
        return None
    return observation.get


def writer_source(writer: Any) -> str | None:
    """The format given to the writer, lower-cased; None without a JVM writer."""
    jwrite = getattr(writer, "_jwrite", None)
    if jwrite is None:
        return None
    return str(private_field(jwrite, "source")).lower()


def writer_options(writer: Any) -> dict[str, str]:
    """The options given to the writer (``path`` among them), as given."""
    jwrite = writer._jwrite
    options = (private_field(jwrite, "extraOptions") if isinstance(writer, DataStreamWriter)
               else jwrite.extraOptions())
    return java_map(writer._spark, options.originalMap())


def writer_mode(writer: Any) -> str:
    """A batch writer's save mode, lower-cased (``errorifexists`` by default)."""
    return str(writer._jwrite.curmode().toString()).lower()


def writer_partition_columns(writer: Any) -> list[str] | None:
    """The writer's partitionBy columns; None when partitionBy was not called."""
    jwrite = writer._jwrite
    parts = (private_field(jwrite, "partitioningColumns")
             if isinstance(writer, DataStreamWriter) else jwrite.partitioningColumns())
    return strings_of(writer._spark, parts.get()) if parts.isDefined() else None


def clear_writer_partitioning(writer: Any) -> None:
    """Forget the writer's partitionBy (Spark must not see a Python data source partitioned)."""
    set_private_field(writer._jwrite, "partitioningColumns", scala_none(writer._spark))


def stream_writer_output_mode(writer: DataStreamWriter) -> str:
    return str(private_field(writer._jwrite, "outputMode")).lower()


def stream_writer_is_continuous(writer: DataStreamWriter) -> bool:
    """True for a continuous trigger (micro-batch sinks do not take one)."""
    trigger = private_field(writer._jwrite, "trigger")
    return "Continuous" in str(trigger.getClass().getName())


def reader_source(reader: Any) -> str | None:
    """The format given to a batch reader, lower-cased; None without a JVM reader."""
    jreader = getattr(reader, "_jreader", None)
    if jreader is None:
        return None
    return str(jreader.source()).lower()


def stream_reader_source(reader: DataStreamReader) -> str | None:
    """The format given to a stream reader, lower-cased; None without a JVM reader (Spark
    Connect) or when it was given a schema or a source name (``name()``), which the native
    Delta stream does not take."""
    jreader = getattr(reader, "_jreader", None)
    if jreader is None:
        return None
    if private_field(jreader, "userSpecifiedSchema").isDefined() \
            or private_field(jreader, "userProvidedSourceName").isDefined():
        return None
    return str(private_field(jreader, "source")).lower()


def reader_has_schema(reader: Any) -> bool:
    """True when ``schema(...)`` was given to a batch reader."""
    return bool(reader._jreader.userSpecifiedSchema().isDefined())


def reader_options(reader: Any) -> dict[str, str]:
    """The options given to the reader, as given (a stream reader's from its private field,
    a batch reader's through its accessor)."""
    jreader = reader._jreader
    options = (private_field(jreader, "extraOptions") if isinstance(reader, DataStreamReader)
               else jreader.extraOptions())
    return java_map(reader._spark, options.originalMap())
