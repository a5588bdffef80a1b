"""SQL on a lakehouse: Spark's own parser says what a statement is, a small router runs it.

``spark.sql`` (in a session with a lakehouse) and ``Lakehouse.sql`` both come here, so they
behave the same. Each statement is parsed once by Spark's parser; the class name of the plan's
root node (``CreateTableAsSelect``, ``AddColumns``, ``DropTable``, ...) is its *kind*, and
:data:`HANDLERS` (below: one table, read top to bottom) maps kinds to handlers. A handler
gets the :class:`Statement` (text, kind, parsed JVM plan) and returns a DataFrame, or None to
give the statement to Spark unchanged (e.g. ``DROP TABLE`` of a temp view). Statements nobody
handles go to Spark.

Delta's own grammar (OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY/DETAIL, CONVERT TO DELTA,
GENERATE) is not Spark's: Spark cannot parse it (or parses DESCRIBE HISTORY t as column t of a
table "history"), so :func:`parse` names those kinds by their leading keywords, before Spark's
parser; without a handler they are a clear ``HW_SQL_NOT_SUPPORTED_YET``, never a parse
error. To add a statement, write ``handler(lake, statement)`` in the module of its kind
(ddl: CREATE/DROP/ALTER/DESCRIBE/INSERT; dml: DML; delta_admin: Delta's grammar) and
add a line to :data:`HANDLERS`.

``delta.`/path``` in a query (which Spark refuses for Python data sources) is found among the
parsed plan's relations and replaced, at the relation's exact text span, by a temporary view
over a batch read of that path; table-valued functions Spark lacks (:data:`TABLE_FUNCTIONS`:
delta-spark's ``table_changes``, Databricks' ``event_log``) likewise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException, ParseException

from headwater.delta.log import DeltaLog
from headwater.errors import HeadwaterError
from headwater.lakehouse.native_reads import (
    METADATA_COLUMN,
    registered_fresh,
    row_tracked_relations,
    with_native_reads,
)
from headwater.lakehouse.sql import (
    catalogs,
    clones,
    columns,
    constraints,
    ddl,
    delta_admin,
    dml,
    insert,
    json_paths,
)
from headwater.lakehouse.sql.dml import expression_text, table_path
from headwater.lakehouse.sql.event_log import event_log_sql
from headwater.lakehouse.sql.statements import (
    DELTA_GRAMMAR,
    Handler,
    Statement,
    evaluate_timestamp,
    not_supported_yet,
    option,
    running_in,
    seq,
    walk,
)
from headwater.spark.hidden_columns import sql_with_relations
from headwater.spark.jvm import sql_parser
from headwater.spark.raw_sql import raw_sql
from headwater.spark.sql_text import tokens, without_comments

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from headwater.lakehouse.sql.statements import SqlLakehouse


# Statement kind (the parsed plan's root class, or a Delta kind of DELTA_GRAMMAR) -> handler.
# A handler returns a DataFrame, or None to give the statement to Spark unchanged.
HANDLERS: dict[str, Handler] = {
    # DDL on Delta tables (ddl.py)
    "CreateTable": ddl.create,
    "CreateTableAsSelect": ddl.create,
    "ReplaceTable": ddl.create,
    "ReplaceTableAsSelect": ddl.create,
    "DropTable": ddl.drop,
    "AddColumns": columns.add_columns,
    "AlterColumns": columns.alter_columns,
    "ReplaceColumns": columns.replace_columns,
    "RenameColumn": columns.rename_column,
    "DropColumns": columns.drop_columns,
    "RenameTable": ddl.rename,
    "SetTableLocation": ddl.set_location,
    "SetTableProperties": ddl.set_properties,
    "AlterTableClusterBy": ddl.cluster_by,
    "UnsetTableProperties": ddl.unset_properties,
    "CommentOnTable": ddl.comment_on,
    "DescribeRelation": ddl.describe,
    "InsertIntoStatement": insert.insert,  # tables with generated columns, else ddl.insert
    "AddCheckConstraint": constraints.add_constraint,
    "DropConstraint": constraints.drop_constraint,
    # DML (dml.py)
    "DeleteFromTable": dml.delete,
    "UpdateTable": dml.update,
    "MergeIntoTable": dml.merge,
    # Delta's own grammar and table information (delta_admin.py)
    "Optimize": delta_admin.optimize,
    "Reorg": delta_admin.reorg,
    "DropFeature": delta_admin.drop_feature,
    "Vacuum": delta_admin.vacuum,
    "Restore": delta_admin.restore,
    "DescribeHistory": delta_admin.describe_history,
    "DescribeDetail": delta_admin.describe_detail,
    "ConvertToDelta": clones.convert,  # by name; parquet.`path`: delta_admin.convert
    "Clone": clones.clone_table,
    "CreateTableLike": clones.create_like,
    "ShowPartitions": clones.show_partitions,
    "Generate": delta_admin.generate,
    "ShowTableProperties": delta_admin.show_properties,
    # Catalogs and their schemas (catalogs.py; USE / CREATE / DROP CATALOG: CATALOG_GRAMMAR)
    "UseCatalog": catalogs.use_catalog,
    "CreateCatalog": catalogs.create_catalog,
    "DropCatalog": catalogs.drop_catalog,
    "ShowCatalogsCommand": catalogs.show_catalogs,
    "SetNamespaceCommand": catalogs.use_namespace,
    "SetCatalogAndNamespace": catalogs.use_namespace,
    "CreateNamespace": catalogs.create_namespace,
    "DropNamespace": catalogs.drop_namespace,
    "ShowNamespacesCommand": catalogs.show_namespaces,
    "ShowTables": catalogs.show_tables,
}
# Tried for every other kind: refuses what Spark would apply to its catalog copy alone.
FALLBACK: Handler = ddl.guard


def run_sql(lake: SqlLakehouse, query: str, session: SparkSession | None = None,
            args: Any = None) -> DataFrame:
    """Run one statement in ``session`` (default the lakehouse's) with lakehouse semantics.

    args: Spark's parameter values (a dict for ``:name`` markers, a list for ``?``). Statements
    Spark runs itself get them; headwater's own handlers read the statement's text, so a
    marker there is refused rather than left unbound.
    """
    spark = session or lake.spark
    with running_in(spark):
        statement = parse(lake, spark, query)
    handler = HANDLERS.get(statement.kind, FALLBACK)
    if args is not None and (statement.kind in HANDLERS
                             or statement.kind in DELTA_GRAMMAR.values()):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED",
            f"Parameter markers (args=) are not supported in {statement.kind} statements on a "
            "lakehouse.",
            "headwater runs this statement itself from its text, where markers have no value.",
            "Put the values in the text, or use Spark's formatting: "
            "spark.sql('... {value} ...', value=...).")
    if handler is not None:
        with running_in(spark):
            result = handler(lake, statement)
        if result is not None:
            return result
    if statement.kind in DELTA_GRAMMAR.values():
        raise not_supported_yet(statement.kind, statement.text)
    # _metadata.row_id / row_commit_version of lakehouse tables with row tracking: the query
    # analyzed over their row-tracking reads (Spark's catalog relation has no _metadata)
    if statement.plan is not None and args is None and any(
            t.text.strip("`").lower() == METADATA_COLUMN for t in tokens(statement.text)):
        tracked = row_tracked_relations(lake, spark, statement.plan)
        if tracked:
            return sql_with_relations(spark, statement.text, tracked)
    # a query's reads of lakehouse tables through Spark's parquet reader where they can be
    try:
        return with_native_reads(lake, registered_fresh(
            lake, lambda: raw_sql(spark, statement.text, args),
            lambda: _lakehouse_names(lake, spark, statement)))
    except AnalysisException as exc:  # `:` on a JSON string, as Databricks reads it
        if json_paths.NOT_VARIANT not in str(exc) or statement.plan is None:
            raise
        text = json_paths.on_strings(statement.text, statement.plan)
        if text == statement.text:
            raise
        return with_native_reads(lake, raw_sql(spark, text, args))


def _lakehouse_names(lake: SqlLakehouse, spark: SparkSession, statement: Statement
                     ) -> list[str]:
    """The lakehouse tables a parsed statement names (its relations), for analyzing it again
    after its catalog copies are refreshed; none for a statement Spark could not parse, or a
    SQL script (its earlier statements may have run before a later one failed)."""
    plan = statement.plan
    if plan is None or statement.kind.startswith("Compound"):
        return []
    names: list[str] = []
    for node in walk(plan):
        if node.getClass().getSimpleName() != "UnresolvedRelation":
            continue
        try:
            name = lake.resolve([str(p) for p in seq(node.multipartIdentifier())],
                                spark).qualified
        except HeadwaterError:
            continue  # a name headwater does not read (a path, four parts)
        if name not in names and lake.exists(name):
            names.append(name)
    return names


def parse(lake: SqlLakehouse, spark: SparkSession, query: str) -> Statement:
    """Classify ``query`` with Spark's parser; ``delta.`path``` reads become temp views.
    Comments are blanked first (as Spark's lexer skips them), so a commented statement is
    read by its words wherever headwater reads the text itself (Delta's grammar)."""
    text = without_comments(query).strip().rstrip(";").strip()
    delta_kind = _delta_kind(text)
    if delta_kind is not None:  # Delta's grammar: Spark's parser would fail or misread it
        return Statement(text, delta_kind, None, spark)
    parser = sql_parser(spark)
    try:
        plan = parser.parsePlan(text)
    except ParseException:
        return Statement(text, "Unparsed", None, spark)  # Spark says why when it runs it
    kind = plan.getClass().getSimpleName()
    # Names of catalogs Spark does not have (main.sales.orders): the Spark database's
    replaced = catalogs.spark_text(lake, spark, text, plan)
    if replaced != text:
        text, plan = replaced, parser.parsePlan(replaced)
    # Rewrites of reads Spark cannot run on a Python data source, each at its exact text span
    # (time travel first: it also reads delta.`path` at a version).
    if " AS OF " in text.upper() or "@" in text:
        replaced = _with_time_travel(lake, spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    if "delta." in text.lower() and kind not in _TABLE_AS_READ:
        replaced = _with_delta_paths(spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    if any(name in text.lower() for name in TABLE_FUNCTIONS):
        replaced = _with_table_functions(lake, spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    return Statement(text, kind, plan, spark)


# Kinds whose parsed plan reads the table they change (ADD CONSTRAINT's check of the rows is
# a Filter over it): its delta.`path` stays the target, not a temp view.
_TABLE_AS_READ = {"AddCheckConstraint"}


def _delta_kind(text: str) -> str | None:
    words = tuple(w.upper() for w in text.split(None, 3)[:3])
    for prefix, kind in (*DELTA_GRAMMAR.items(), *catalogs.CATALOG_GRAMMAR.items()):
        if words[:len(prefix)] == prefix:
            return kind
    if words[:2] == ("ALTER", "TABLE") and \
            [w[0].upper() for w in delta_admin.words(text)[3:5]] == ["DROP", "FEATURE"]:
        return "DropFeature"  # delta-spark's ALTER TABLE t DROP FEATURE f [TRUNCATE HISTORY]
    if words[:1] in (("CREATE",), ("REPLACE",)) and clones.is_clone(text):
        return "Clone"  # delta-spark's CREATE ... SHALLOW CLONE, which Spark cannot parse
    return None


def _with_time_travel(lake: SqlLakehouse, spark: SparkSession, text: str, plan: Any) -> str:
    """Replace every ``t VERSION AS OF n`` / ``t TIMESTAMP AS OF ts`` / ``t@v3`` read of a
    lakehouse table or ``delta.`path``` by a temp view over a batch read at that version
    (Spark's parser makes each a ``RelationTimeTravel``; other tables are left to Spark)."""
    spans = []
    for node in walk(plan):
        if node.getClass().getSimpleName() != "RelationTimeTravel":
            continue
        relation = node.relation()
        if relation.getClass().getSimpleName() != "UnresolvedRelation":
            continue
        path = table_path(lake, [str(p) for p in seq(relation.multipartIdentifier())])
        origins = [relation.origin(), node.origin()]
        starts = [option(o.startIndex()) for o in origins]
        stops = [option(o.stopIndex()) for o in origins]
        if path is None or None in starts or None in stops:
            continue
        version, stamp = option(node.version()), option(node.timestamp())
        if version is not None:
            key, value = "versionAsOf", str(version)
        else:
            statement = Statement(text, "Query", plan, spark)
            key = "timestampAsOf"
            value = evaluate_timestamp(statement, expression_text(statement, stamp)).isoformat()
        view = "hw_tt_" + hashlib.sha1(f"{path}@{key}={value}".encode()).hexdigest()[:12]
        _at_version(spark, path, key, value).createOrReplaceTempView(view)
        spans.append((min(starts), max(stops), view))
    for start, stop, view in sorted(spans, reverse=True):
        text = f"{text[:start]}`{view}`{text[stop + 1:]}"
    return text


def _at_version(spark: SparkSession, path: str, key: str, value: str) -> DataFrame:
    """A batch read of ``path`` at a version; a version that cannot be read is a clear error
    now (HW_DELTA_VERSION_NOT_FOUND), not when the query runs."""
    if key == "versionAsOf":
        latest = DeltaLog(path).table().version()
        if int(value) > latest:
            raise HeadwaterError(
                "HW_DELTA_VERSION_NOT_FOUND",
                f"VERSION AS OF {value}: the table at {path} has versions up to {latest}.",
                "Time travel reads a version the table's log has committed.",
                "Pick a version listed by DESCRIBE HISTORY.")
    return spark.read.format("delta").option(key, value).load(path)


def _options_clause_end(text: str, stop: int) -> int:
    """The offset of the ``)`` closing a ``WITH (...)`` options clause right after a
    relation ending at ``stop`` (Spark's lexer: quoted text is one token); ``stop`` when
    there is none."""
    toks = tokens(text[stop + 1:])
    if len(toks) < 2 or toks[0].upper != "WITH" or toks[1].text != "(":
        return stop
    depth = 0
    for tok in toks[1:]:
        depth += {"(": 1, ")": -1}.get(tok.text, 0)
        if depth == 0:
            return stop + 1 + tok.start
    return stop


def _with_delta_paths(spark: SparkSession, text: str, plan: Any) -> str:
    """Replace every *read* of ``delta.`path``` by a temp view (targets of writes are kept:
    Spark marks them with required write privileges)."""
    spans = []
    for node in walk(plan):
        if node.getClass().getSimpleName() != "UnresolvedRelation":
            continue
        parts = [str(p) for p in seq(node.multipartIdentifier())]
        if len(parts) != 2 or parts[0].lower() != "delta" \
                or node.options().containsKey("__required_write_privileges__"):
            continue
        start, stop = option(node.origin().startIndex()), option(node.origin().stopIndex())
        if start is None or stop is None:
            continue
        streaming = bool(node.isStreaming())  # STREAM delta.`path` (pipeline SQL): a stream
        # WITH ('startingVersion' = '1', ...): the reader's options
        options = {str(k): str(v) for k, v in dict(node.options().asCaseSensitiveMap()).items()
                   if not str(k).startswith("__")}
        key = parts[1] + "\0" + "\0".join(f"{k}={v}" for k, v in sorted(options.items()))
        view = ("hw_stream_" if streaming else "hw_path_") + \
            hashlib.sha1(key.encode()).hexdigest()[:12]
        reader = spark.readStream if streaming else spark.read
        reader.format("delta").options(**options).load(parts[1]).createOrReplaceTempView(view)
        if options:  # the WITH (...) clause goes with the relation: the view has them
            stop = _options_clause_end(text, int(stop))
        spans.append((int(start), int(stop), view))
    for start, stop, view in sorted(spans, reverse=True):
        text = f"{text[:start]}`{view}`{text[stop + 1:]}"
    return text


def _table_changes(lake: SqlLakehouse, spark: SparkSession, args: list[Any], text: str) -> str:
    """``table_changes('t', start[, end])`` (versions or timestamps, as delta-spark takes
    them): a temp view over the batch change data feed read of table ``t``."""
    name, bounds = _changes_args("table_changes", "'orders'", args, text)
    return _changes_view(spark, lake.path(lake.resolve(name, spark).qualified), [name, *bounds],
                         bounds)


def _table_changes_by_path(lake: SqlLakehouse, spark: SparkSession, args: list[Any],
                           text: str) -> str:
    """``table_changes_by_path('/path', start[, end])``: delta-spark's change data feed
    reader of the table at a path."""
    path, bounds = _changes_args("table_changes_by_path", "'/data/orders'", args, text)
    return _changes_view(spark, path, ["path", path, *bounds], bounds)


def _changes_args(function: str, example: str, args: list[Any], text: str
                  ) -> tuple[str, list[str]]:
    """(table name or path, [start, end?]) of a ``table_changes`` call: literals only."""
    values = [a.value() if a.getClass().getSimpleName() == "Literal" else None for a in args]
    if len(args) not in (2, 3) or any(v is None for v in values):
        raise HeadwaterError(
            "HW_OPTION_INVALID",
            f"{function} takes a table {'path' if 'path' in function else 'name'} and 1 or 2 "
            f"literal versions or timestamps (in: {text}).",
            "It reads the change data feed between two points.",
            f"Write e.g. {function}({example}, 2) or {function}({example}, 2, 5).")
    first, *bounds = [str(v.toString()) if hasattr(v, "toString") else str(v) for v in values]
    return first, bounds


def _changes_view(spark: SparkSession, path: str, key: list[str], bounds: list[str]) -> str:
    """A temp view over the batch change data feed read of the table at ``path``."""
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    for which, bound in zip(("starting", "ending"), bounds):
        kind = "Version" if bound.isdigit() else "Timestamp"
        reader = reader.option(f"{which}{kind}", bound)
    view = "hw_changes_" + hashlib.sha1(repr(key).encode()).hexdigest()[:12]
    reader.load(path).createOrReplaceTempView(view)
    return f"`{view}`"


def _event_log(lake: SqlLakehouse, spark: SparkSession, args: list[Any], text: str) -> str:
    """``event_log('<pipeline>')`` / ``event_log(TABLE(t))``: a subquery over the lakehouse's
    event log in Databricks' event-log columns (see :mod:`headwater.lakehouse.sql.event_log`)."""
    return event_log_sql(lake, spark, args)


# Table-valued functions Spark does not have (lower-case name -> the text replacing the call:
# a temp view's name or a subquery), read top to bottom like HANDLERS.
TableFunction = Callable[["SqlLakehouse", "SparkSession", list[Any], str], str]
TABLE_FUNCTIONS: dict[str, TableFunction] = {
    "table_changes": _table_changes,   # delta-spark's change data feed reader
    "table_changes_by_path": _table_changes_by_path,  # ... of a path table
    "event_log": _event_log,           # Databricks' pipeline event log
}


def _with_table_functions(lake: SqlLakehouse, spark: SparkSession, text: str, plan: Any) -> str:
    """Replace each call of a :data:`TABLE_FUNCTIONS` function, at its text span, by what
    the function gives."""
    spans = []
    for node in walk(plan):
        if node.getClass().getSimpleName() != "UnresolvedTableValuedFunction":
            continue
        name = [str(p).lower() for p in seq(node.name())]
        function = TABLE_FUNCTIONS.get(name[0]) if len(name) == 1 else None
        if function is None:
            continue
        start, stop = option(node.origin().startIndex()), option(node.origin().stopIndex())
        if start is None or stop is None:
            continue
        spans.append((int(start), int(stop),
                      function(lake, spark, seq(node.functionArgs()), text)))
    for start, stop, replacement in sorted(spans, reverse=True):
        text = f"{text[:start]}{replacement}{text[stop + 1:]}"
    return text
