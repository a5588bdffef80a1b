"""SQL on a lakehouse: Spark's own parser says what a statement is, a small router runs it.

``spark.sql`` (in a session with a lakehouse) and ``Lakehouse.sql`` both come here, so they
behave the same. Each statement is parsed once by Spark's parser; the class name of the plan's
root node (``CreateTableAsSelect``, ``AddColumns``, ``DropTable``, ...) is its *kind*, and
:data:`HANDLERS` maps kinds to handlers. A handler gets the :class:`Statement` (text, kind,
parsed JVM plan) and returns a DataFrame, or None to give the statement to Spark unchanged
(e.g. ``DROP TABLE`` of a temp view). Statements nobody handles go to Spark.

Delta's own grammar (OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY/DETAIL, CONVERT TO DELTA) is
not Spark's: Spark cannot parse it (or parses DESCRIBE HISTORY t as column t of a table
"history"), so :func:`parse` names those kinds by their leading keywords, before Spark's
parser; without a handler they are a clear ``HW_SQL_NOT_SUPPORTED_YET``, never a parse
error. To add a statement (issue 13: DML, maintenance, history), write
``handler(lake, statement)`` and add it with :func:`handles`.

``delta.`/path``` in a query (which Spark refuses for Python data sources) is found among the
parsed plan's relations and replaced, at the relation's exact text span, by a temporary view
over a batch read of that path.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError
from headwater.lakehouse.catalog import raw_sql
from headwater.lakehouse.statements import (
    ANY_KIND,
    DELTA_GRAMMAR,
    HANDLERS,
    SPARK_BINDS_ARGS,
    Statement,
    not_supported_yet,
    option,
    seq,
    walk,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from headwater.lakehouse import Lakehouse


def run_sql(lake: Lakehouse, query: str, session: SparkSession | None = None,
            args: Any = None) -> DataFrame:
    """Run one statement in ``session`` (default the lakehouse's) with lakehouse semantics.

    args: Spark's parameter values (a dict for ``:name`` markers, a list for ``?``). Statements
    Spark runs itself get them; headwater's own handlers read the statement's text, so a
    marker there is refused rather than left unbound.
    """
    from headwater.lakehouse import (  # noqa: F401  (they register their handlers)
        ddl,
        delta_admin_sql,
        delta_sql,
        insert_sql,
    )

    spark = session or lake.spark
    statement = parse(lake, spark, query)
    handler = HANDLERS.get(statement.kind) or HANDLERS.get(ANY_KIND)
    if args is not None and statement.kind in SPARK_BINDS_ARGS:
        handler = HANDLERS.get(ANY_KIND)  # Spark runs it, with the parameter values
    elif args is not None and (statement.kind in HANDLERS
                             or statement.kind in DELTA_GRAMMAR.values()):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED",
            f"Parameter markers (args=) are not supported in {statement.kind} statements on a "
            "lakehouse.",
            "headwater runs this statement itself from its text, where markers have no value.",
            "Put the values in the text, or use Spark's formatting: "
            "spark.sql('... {value} ...', value=...).")
    if handler is not None:
        result = handler(lake, statement)
        if result is not None:
            return result
    if statement.kind in DELTA_GRAMMAR.values():
        raise not_supported_yet(statement.kind, statement.text)
    return raw_sql(spark, statement.text, args)


def parse(lake: Lakehouse, spark: SparkSession, query: str) -> Statement:
    """Classify ``query`` with Spark's parser; ``delta.`path``` reads become temp views."""
    from pyspark.errors import ParseException

    text = query.strip().rstrip(";").strip()
    delta_kind = _delta_kind(text)
    if delta_kind is not None:  # Delta's grammar: Spark's parser would fail or misread it
        return Statement(text, delta_kind, None, spark)
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        plan = parser.parsePlan(text)
    except ParseException:
        return Statement(text, "Unparsed", None, spark)  # Spark says why when it runs it
    kind = plan.getClass().getSimpleName()
    # Rewrites of reads Spark cannot run on a Python data source, each at its exact text span
    # (time travel first: it also reads delta.`path` at a version).
    if " AS OF " in text.upper() or "@" in text:
        replaced = _with_time_travel(lake, spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    if "delta." in text.lower():
        replaced = _with_delta_paths(spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    if "table_changes" in text.lower():
        replaced = _with_table_changes(lake, spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    return Statement(text, kind, plan, spark)


def _delta_kind(text: str) -> str | None:
    words = tuple(w.upper() for w in text.split(None, 3)[:3])
    for prefix, kind in DELTA_GRAMMAR.items():
        if words[:len(prefix)] == prefix:
            return kind
    return None


def _with_time_travel(lake: Lakehouse, spark: SparkSession, text: str, plan: Any) -> str:
    """Replace every ``t VERSION AS OF n`` / ``t TIMESTAMP AS OF ts`` / ``t@v3`` read of a
    lakehouse table or ``delta.`path``` by a temp view over a batch read at that version
    (Spark's parser makes each a ``RelationTimeTravel``; other tables are left to Spark)."""
    from headwater.lakehouse.delta_sql import expression_text, table_path
    from headwater.lakehouse.statements import evaluate_timestamp

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
    from headwater.delta.log import DeltaLog
    from headwater.errors import HeadwaterError

    if key == "versionAsOf":
        latest = DeltaLog(path).table().version()
        if int(value) > latest:
            raise HeadwaterError(
                "HW_DELTA_VERSION_NOT_FOUND",
                f"VERSION AS OF {value}: the table at {path} has versions up to {latest}.",
                "Time travel reads a version the table's log has committed.",
                "Pick a version listed by DESCRIBE HISTORY.")
    return spark.read.format("delta").option(key, value).load(path)


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
        view = "hw_path_" + hashlib.sha1(parts[1].encode()).hexdigest()[:12]
        spark.read.format("delta").load(parts[1]).createOrReplaceTempView(view)
        spans.append((int(start), int(stop), view))
    for start, stop, view in sorted(spans, reverse=True):
        text = f"{text[:start]}`{view}`{text[stop + 1:]}"
    return text


def _with_table_changes(lake: Lakehouse, spark: SparkSession, text: str, plan: Any) -> str:
    """Replace ``table_changes('t', start[, end])`` (versions or timestamps, as delta-spark
    takes them) by a temp view over the batch change data feed read of table ``t``."""
    from headwater.errors import HeadwaterError

    spans = []
    for node in walk(plan):
        if node.getClass().getSimpleName() != "UnresolvedTableValuedFunction" or \
                [str(p).lower() for p in seq(node.name())] != ["table_changes"]:
            continue
        args = seq(node.functionArgs())
        values = [a.value() if a.getClass().getSimpleName() == "Literal" else None
                  for a in args]
        if len(args) not in (2, 3) or any(v is None for v in values):
            raise HeadwaterError(
                "HW_OPTION_INVALID",
                f"table_changes takes a table name and 1 or 2 literal versions or timestamps "
                f"(in: {text}).", "It reads the change data feed between two points.",
                "Write e.g. table_changes('orders', 2) or table_changes('orders', 2, 5).")
        start, stop = option(node.origin().startIndex()), option(node.origin().stopIndex())
        if start is None or stop is None:
            continue
        name, *bounds = [str(v.toString()) if hasattr(v, "toString") else str(v)
                         for v in values]
        reader = spark.read.format("delta").option("readChangeFeed", "true")
        for key, bound in zip(("starting", "ending"), bounds):
            kind = "Version" if bound.isdigit() else "Timestamp"
            reader = reader.option(f"{key}{kind}", bound)
        view = "hw_changes_" + hashlib.sha1(repr([name, *bounds]).encode()).hexdigest()[:12]
        reader.load(lake.path(name)).createOrReplaceTempView(view)
        spans.append((int(start), int(stop), view))
    for start, stop, view in sorted(spans, reverse=True):
        text = f"{text[:start]}`{view}`{text[stop + 1:]}"
    return text
