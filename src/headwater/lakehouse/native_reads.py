"""Batch reads of Delta tables through Spark's parquet reader, wherever a read starts.

A Delta read through headwater's Python data source moves every row through Arrow into
Python; :func:`headwater.delta.native_read.read_native` gives the same rows through Spark's own
parquet reader (a file index over the Delta log). This module sends the ways users read a
table there:

- ``spark.read.format("delta").load(path)`` (time travel options included): :func:`load`,
  called by the reader's ``load`` hook for every headwater session;
- ``Lakehouse.read`` and time travel by name (``spark.read.option("versionAsOf", 1)
  .table(t)``): :func:`read_table`;
- ``spark.table(name)``, ``spark.read.table(name)`` and SQL queries naming lakehouse tables
  (``SELECT ... FROM t``, views over them, subqueries): Spark resolves the names (current
  database, temporary views first), then :func:`with_native_reads` swaps each batch read of
  a lakehouse table in the analyzed plan for the native relation, keeping its attribute ids
  so the rest of the plan is unchanged. ``delta.`path``` and ``VERSION AS OF`` in SQL are
  already reads of :func:`load` (temporary views headwater makes).

Each read falls back to the Python data source when the table needs it (deletion vectors,
column mapping, an object store; ``natively_readable`` decides), when a change feed or an
explicit schema is asked for, or when the table does not exist (the Python source then
raises exactly what it raised before). A debug line on ``headwater.delta.native`` says which
reader each read got.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from headwater.delta import row_tracking
from headwater.delta.batch import latest_table
from headwater.delta.datasource import version_spec
from headwater.delta.file_index import scala_map
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.native_read import read_native
from headwater.delta.schema import spark_schema
from headwater.errors import HeadwaterError
from headwater.lakehouse.names import SOURCE_PREFIXES, TableLocations, parse_name
from headwater.spark.hidden_columns import aliased
from headwater.spark.jvm import (
    analyzed_plan,
    cached_rows,
    catalog_table,
    dataframe_of_plan,
    jvm_view,
    ran_a_command,
    scala_none,
)
from headwater.spark.plan import node_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("headwater.delta.native")

METADATA_COLUMN = "_metadata"  # Spark's hidden column of file (and row tracking) metadata
# options that make a read something other than rows of one snapshot
_CHANGE_FEED = ("readchangefeed", "readchangedata")


class RegisteringLocations(TableLocations, Protocol):
    """A lakehouse that can also register a table again in Spark's catalog."""

    @property
    def spark(self) -> SparkSession: ...
    def register(self, name: str) -> None: ...
    def catalog_holder(self, name: str) -> str | None: ...


def load(spark: SparkSession, path: str, options: dict[str, str]) -> DataFrame | None:
    """``spark.read.format("delta").options(...).load(path)`` natively, or None (the Python
    data source reads it)."""
    opts = {k.lower(): v for k, v in options.items()}
    if any(str(opts.get(k, "false")).lower() == "true" for k in _CHANGE_FEED):
        return None
    uri = normalize_uri(path)
    if "://" in uri and not uri.startswith("file:"):
        log.debug("read of %s: headwater's Python reader (an object store)", uri)
        return None
    if not DeltaLog(uri).exists():
        return None  # the data source says so, as before
    return _native_or_none(spark, uri, opts, None, row_ids=True)


def read_table(lake: TableLocations, spark: SparkSession, name: str,
               options: dict[str, str], row_ids: bool = True) -> DataFrame | None:
    """A lakehouse table by name (``spark.table``, ``spark.read.table``, ``Lakehouse.read``)
    natively, or None. row_ids: a row-tracking table's ``_metadata.row_id`` and
    ``row_commit_version`` (off for a relation swapped into an analyzed plan)."""
    opts = {k.lower(): v for k, v in options.items()}
    if any(str(opts.get(k, "false")).lower() == "true" for k in _CHANGE_FEED):
        return None
    tname = parse_name(name)
    qualified = tname.qualified
    uri = normalize_uri(str(lake.path(qualified)))
    if "://" in uri and not uri.startswith("file:"):
        return None
    if not DeltaLog(uri).exists():
        return None
    return _native_or_none(spark, uri, opts, (tname.source_name, qualified), row_ids)


def _native_or_none(spark: SparkSession, uri: str, opts: dict[str, str],
                    name: tuple[str, str] | None, row_ids: bool = False
                    ) -> DataFrame | None:
    """:func:`read_native`; a log or version it cannot open is left to the Python data
    source, which raises what it always raised (Spark's AnalysisException around the code).
    Missing data files are this read's own clear error (HW_DELTA_FILE_NOT_FOUND)."""
    try:
        return read_native(spark, uri, version_spec(opts), name=name, row_ids=row_ids)
    except HeadwaterError as exc:
        if exc.code == "HW_DELTA_FILE_NOT_FOUND":
            raise
        log.debug("read of %s: headwater's Python reader (%s)", uri, exc.code)
        return None


def with_native_reads(lake: TableLocations, df: DataFrame) -> DataFrame:
    """``df`` (a query's DataFrame) with every batch read of a lakehouse table by name in its
    analyzed plan (subqueries and views included) read natively instead; ``df`` itself when
    there is none (commands, streams, other sources). A read whose rows Spark has cached
    (``CACHE TABLE t``, ``spark.table(t).cache()`` of the Python reader's plan) is kept, so
    the query keeps using the cache."""
    if ran_a_command(df):
        return df  # a command ran already: a DataFrame of its plan would run it again
    spark = df.sparkSession
    plan = analyzed_plan(df)
    tracked = _row_tracked(lake, spark, plan)
    if tracked is not None:
        return tracked
    cached = cached_rows(spark)
    swaps: list[tuple[Any, Any]] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        if node_name(node) == "DataSourceV2Relation":
            if cached(node):
                continue  # CACHE TABLE t: the query reads the cached rows, as before
            swap = _native_leaf(lake, spark, node)
            if swap is not None:
                swaps.append((node, swap))
            continue
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
        subqueries = node.subqueries()
        stack.extend(subqueries.apply(i) for i in range(subqueries.size()))
    if not swaps:
        return df
    # a Scala Map is a PartialFunction: exactly the swapped leaves are replaced
    rewritten = plan.transformUpWithSubqueries(scala_map(spark, swaps))
    return dataframe_of_plan(spark, rewritten)


def registered_fresh(lake: RegisteringLocations, analyze: Callable[[], DataFrame],
                     named: Callable[[], Sequence[str]] | None = None) -> DataFrame:
    """``analyze()`` (Spark resolving a query), analyzed again after registering the
    lakehouse tables it reads whose catalog copy is older than their Delta table (a stream's
    schema evolution, another process' ALTER): the query sees the table's columns now.
    named: the lakehouse tables the query names (asked only when Spark could not analyze
    the query at all: it asks for a column only the newer table has)."""
    try:
        df = analyze()
    except AnalysisException:
        stale = [n for n in (named() if named is not None else [])
                 if _copy_is_stale(lake, n)]
        if not stale:
            raise
        for name in stale:
            lake.register(name)
        return analyze()
    stale = stale_tables(lake, df)
    if not stale:
        return df
    for name in stale:
        lake.register(name)
    return analyze()


def _copy_is_stale(lake: RegisteringLocations, name: str) -> bool:
    """True when Spark's catalog copy of lakehouse table ``name`` (a local one) has other
    columns than its Delta table now."""
    try:
        if not lake.exists(name) or \
                lake.catalog_holder(name) != parse_name(name).source_name:
            return False  # not a copy headwater registered: Spark's own error stands
        uri = normalize_uri(str(lake.path(name)))
        if "://" in uri and not uri.startswith("file:"):
            return False
        meta = catalog_table(lake.spark, parse_name(name).sql)
        if meta is None:
            return False
        registered = StructType.fromJson(json.loads(meta.schema().json()))
        current = spark_schema(latest_table(DeltaLog(uri)).schema().to_json())
    except Exception:  # noqa: BLE001 - any doubt: Spark's own error stands
        log.debug("schema check of %s failed", name, exc_info=True)
        return False
    return _shape(registered) != _shape(current)


def stale_tables(lake: TableLocations, df: DataFrame) -> list[str]:
    """The lakehouse tables ``df`` (a query just analyzed) reads by name whose catalog copy
    no longer has the Delta table's columns: a stream's schema evolution (a new column, a
    widened type) or another process' ALTER changed the table after it was registered. The
    caller registers them again and analyzes its query anew (the Python reader would read
    the old types: a widened value does not fit them)."""
    if ran_a_command(df):
        return []  # a command ran already: never run it twice
    plan = analyzed_plan(df)
    stale: list[str] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        if node_name(node) == "DataSourceV2Relation":
            name = _stale_name(lake, node)
            if name is not None and name not in stale:
                stale.append(name)
            continue
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
        subqueries = node.subqueries()
        stack.extend(subqueries.apply(i) for i in range(subqueries.size()))
    return stale


def _stale_name(lake: TableLocations, node: Any) -> str | None:
    """The qualified name of the lakehouse table ``node`` reads when its schema is not the
    table's current one (local tables: an object store's schema is its source's to say)."""
    try:
        name = _lakehouse_name(lake, node)
        if name is None:
            return None
        uri = normalize_uri(str(lake.path(name)))
        if "://" in uri and not uri.startswith("file:"):
            return None
        current = spark_schema(latest_table(DeltaLog(uri)).schema().to_json())
        registered = StructType.fromJson(json.loads(node.schema().json()))
    except Exception:  # noqa: BLE001 - any doubt: the query keeps what Spark resolved
        log.debug("schema check of %s failed", node.simpleString(25), exc_info=True)
        return None
    return name if _shape(registered) != _shape(current) else None


def _shape(schema: StructType) -> list[tuple[str, str]]:
    """Columns and types (nested ones included), without nullability or field metadata: what
    a catalog copy must agree on with its table (Spark may keep comments or nullability its
    own way)."""
    return [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]


def _row_tracked(lake: TableLocations, spark: SparkSession, plan: Any) -> DataFrame | None:
    """``spark.table(t)`` of a lakehouse table with row tracking (the plan: the table's
    relation under its alias): the native read whose hidden ``_metadata`` has ``row_id`` and
    ``row_commit_version``, qualified by the table's name; None for any other plan."""
    if node_name(plan) != "SubqueryAlias" or node_name(plan.child()) != "DataSourceV2Relation":
        return None
    name = _lakehouse_name(lake, plan.child())
    if name is None or cached_rows(spark)(plan.child()):
        return None
    uri = normalize_uri(str(lake.path(name)))
    if "://" in uri and not uri.startswith("file:"):
        return None
    try:
        features = latest_table(DeltaLog(uri)).protocol().writer_features or []
        if row_tracking.FEATURE not in features:
            return None
        native = read_table(lake, spark, name, {}, row_ids=True)
    except Exception:  # noqa: BLE001 - any doubt: the swap of the leaf below decides
        log.debug("read of %s: no row ids", name, exc_info=True)
        return None
    if native is None or analyzed_plan(native).schema().json() != plan.schema().json():
        return None
    return aliased(native, str(plan.alias()))


def row_tracked_relations(lake: TableLocations, spark: SparkSession, plan: Any
                          ) -> dict[str, DataFrame]:
    """For a parsed query (``plan``) that names ``_metadata``: each one-part table name it
    reads that is a lakehouse table with row tracking, and that table's read with
    ``_metadata.row_id`` / ``row_commit_version`` (for
    :func:`headwater.spark.hidden_columns.sql_with_relations`); {} otherwise."""
    names: set[str] = set()
    wants = False
    stack = [plan]
    while stack:
        node = stack.pop()
        kind = node_name(node)
        if kind == "UnresolvedRelation":
            parts = node.multipartIdentifier()
            if parts.size() == 1:
                names.add(str(parts.apply(0)))
        elif kind == "UnresolvedAttribute" or kind == "UnresolvedStar":
            parts = node.nameParts() if kind == "UnresolvedAttribute" else None
            wants = wants or (parts is not None and any(  # _metadata.x, t._metadata.x
                str(parts.apply(i)).lower() == METADATA_COLUMN for i in range(min(parts.size(), 2))))
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
        if hasattr(node, "expressions") and kind not in ("UnresolvedAttribute",
                                                           "UnresolvedStar"):
            try:
                expressions = node.expressions()
            except Exception:  # noqa: BLE001 - an expression node has no expressions()
                expressions = None
            if expressions is not None:
                stack.extend(expressions.apply(i) for i in range(expressions.size()))
    if not wants:
        return {}
    found: dict[str, DataFrame] = {}
    for name in sorted(names):
        try:
            tname = parse_name(name)
            if not lake.exists(tname.qualified):
                continue
            uri = normalize_uri(str(lake.path(tname.qualified)))
            if "://" in uri and not uri.startswith("file:"):
                continue
            if row_tracking.FEATURE not in (
                    latest_table(DeltaLog(uri)).protocol().writer_features or []):
                continue
            native = read_table(lake, spark, tname.qualified, {}, row_ids=True)
        except Exception:  # noqa: BLE001 - not a table this can read: Spark resolves it
            log.debug("read of %s: no row ids", name, exc_info=True)
            continue
        if native is not None:
            found[name] = native
    return found


def _lakehouse_name(lake: TableLocations, node: Any) -> str | None:
    """The qualified name of the lakehouse table ``node`` (a DataSourceV2Relation) reads
    through headwater's data source, None for any other relation."""
    table = node.table()
    identifier = node.identifier()
    if node_name(table) != "PythonTable" or not str(table.name()).startswith(SOURCE_PREFIXES) \
            or not identifier.isDefined():
        return None
    ident = identifier.get()
    tname = parse_name(".".join([*[str(p) for p in ident.namespace()], str(ident.name())]))
    if tname.source_name != str(table.name()) or not lake.exists(tname.qualified):
        return None
    return tname.qualified


def _native_leaf(lake: TableLocations, spark: SparkSession, node: Any) -> Any:
    """The native relation replacing ``node`` (a lakehouse table's Python data source
    relation), with ``node``'s own output attributes; None to keep ``node``."""
    try:
        name = _lakehouse_name(lake, node)
        if name is None:
            return None
        native = read_table(lake, spark, name, {}, row_ids=False)
    except Exception:  # noqa: BLE001 - any doubt: the query keeps the Python reader
        log.debug("read of %s: headwater's Python reader (kept in the query)",
                  node.simpleString(25), exc_info=True)
        return None
    if native is None:
        return None
    leaf = analyzed_plan(native)
    if node_name(leaf) != "LogicalRelation":
        return None  # a column-mapped table's renaming projection: the query keeps its reader
    if leaf.schema().json() != node.schema().json():
        return None  # the table changed since the query was analyzed: keep its reader
    sources = jvm_view(spark).org.apache.spark.sql.execution.datasources
    empty = scala_none(spark)
    return sources.LogicalRelation(leaf.relation(), node.output(), empty, False, empty)
