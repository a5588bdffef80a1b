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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from headwater.lakehouse import Lakehouse


@dataclass(frozen=True)
class Statement:
    """One SQL statement as Spark's parser sees it.

    text: the statement (``delta.`path``` reads already replaced by temp views).
    kind: the parsed plan's root class name, or a Delta kind (``Optimize``, ``Vacuum``,
        ``Restore``, ``DescribeHistory``, ``DescribeDetail``, ``ConvertToDelta``) for Delta's
        own grammar, or ``Unparsed`` when Spark cannot parse it (Spark then reports why).
    plan: the parsed (unresolved) JVM logical plan; None for Delta grammar and Unparsed.
    session: the SparkSession the statement runs in (a cloned one inside foreachBatch).
    """

    text: str
    kind: str
    plan: Any
    session: "SparkSession"


Handler = Callable[["Lakehouse", Statement], "DataFrame | None"]
HANDLERS: dict[str, Handler] = {}
ANY_KIND = "*"  # the handler tried for kinds without one of their own (a guard, see ddl.py)

# Delta statements Spark's parser does not know, by their leading keywords.
DELTA_GRAMMAR = {
    ("OPTIMIZE",): "Optimize", ("VACUUM",): "Vacuum", ("RESTORE",): "Restore",
    ("CONVERT", "TO", "DELTA"): "ConvertToDelta", ("GENERATE",): "Generate",
    ("REORG",): "Reorg", ("DESCRIBE", "HISTORY"): "DescribeHistory",
    ("DESC", "HISTORY"): "DescribeHistory", ("DESCRIBE", "DETAIL"): "DescribeDetail",
    ("DESC", "DETAIL"): "DescribeDetail",
}
# Delta statements Spark parses but cannot run on a Python data source table.
DELTA_ON_TABLES = ("DeleteFromTable", "UpdateTable", "MergeIntoTable")
# How error messages name a kind.
STATEMENT_NAMES = {
    "Optimize": "OPTIMIZE", "Vacuum": "VACUUM", "Restore": "RESTORE",
    "ConvertToDelta": "CONVERT TO DELTA", "Generate": "GENERATE", "Reorg": "REORG",
    "DescribeHistory": "DESCRIBE HISTORY", "DescribeDetail": "DESCRIBE DETAIL",
    "DeleteFromTable": "DELETE FROM", "UpdateTable": "UPDATE", "MergeIntoTable": "MERGE INTO",
}


def handles(*kinds: str) -> Callable[[Handler], Handler]:
    """Register a handler for statement kinds (a later registration wins)."""
    def register(handler: Handler) -> Handler:
        for kind in kinds:
            HANDLERS[kind] = handler
        return handler
    return register


def run_sql(lake: "Lakehouse", query: str, session: "SparkSession | None" = None) -> "DataFrame":
    """Run one statement in ``session`` (default the lakehouse's) with lakehouse semantics."""
    from headwater.lakehouse import ddl  # noqa: F401  (registers the DDL handlers)
    from headwater.lakehouse.hooks import raw_sql

    spark = session or lake.spark
    statement = parse(lake, spark, query)
    handler = HANDLERS.get(statement.kind) or HANDLERS.get(ANY_KIND)
    if handler is not None:
        result = handler(lake, statement)
        if result is not None:
            return result
    if statement.kind in DELTA_GRAMMAR.values():
        raise not_supported_yet(statement.kind, statement.text)
    return raw_sql(spark, statement.text)


def parse(lake: "Lakehouse", spark: "SparkSession", query: str) -> Statement:
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
    if "delta." in text.lower():
        replaced = _with_delta_paths(spark, text, plan)
        if replaced != text:
            text, plan = replaced, parser.parsePlan(replaced)
    return Statement(text, kind, plan, spark)


def _delta_kind(text: str) -> str | None:
    words = tuple(w.upper() for w in text.split(None, 3)[:3])
    for prefix, kind in DELTA_GRAMMAR.items():
        if words[:len(prefix)] == prefix:
            return kind
    return None


def not_supported_yet(kind: str, text: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_SQL_NOT_SUPPORTED_YET",
        f"{STATEMENT_NAMES.get(kind, kind)} is a Delta statement headwater cannot run yet "
        f"(near {text[:60]!r}).",
        "Spark runs it only with delta-spark's jar; headwater implements Delta statements one "
        "by one in its SQL router.",
        "Use the deltalake Python API on the table's path (Lakehouse.path(name)) meanwhile.")


# --- reading parsed plans -------------------------------------------------------------------

def children(node: Any) -> Iterator[Any]:
    kids = node.children()
    for i in range(kids.size()):
        yield kids.apply(i)


def walk(plan: Any) -> Iterator[Any]:
    """Every node of a parsed plan, subqueries in expressions included, parents first."""
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))
        if hasattr(node, "subqueries"):
            subs = node.subqueries()
            stack.extend(subs.apply(i) for i in range(subs.size()))


def seq(value: Any) -> list[Any]:
    """A Scala Seq as a Python list."""
    return [value.apply(i) for i in range(value.size())]


def option(value: Any) -> Any:
    """A Scala Option as its value or None."""
    return value.get() if value.isDefined() else None


def target(plan: Any) -> tuple[list[str], str] | None:
    """(name parts, Spark's command name) of the table a command acts on, if any."""
    for node in [plan, *children(plan)]:
        kind = node.getClass().getSimpleName()
        if kind in ("UnresolvedTable", "UnresolvedTableOrView"):
            return [str(p) for p in seq(node.multipartIdentifier())], str(node.commandName())
        if kind == "UnresolvedIdentifier":
            return [str(p) for p in seq(node.nameParts())], ""
        if kind == "UnresolvedRelation" and node is not plan:
            return [str(p) for p in seq(node.multipartIdentifier())], ""
    return None


def _with_delta_paths(spark: "SparkSession", text: str, plan: Any) -> str:
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


# --- kept for pipeline/loader.py until its SQL files go through Spark's parser too ----------

def unquoted(text: str) -> Iterator[tuple[int, str, int]]:
    """(index, char, parenthesis depth) of every character outside quoted text; a backslash
    inside quotes escapes the next character, as in Spark SQL string literals."""
    depth, quote, i = 0, None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'`\"":
            quote = ch
        else:
            if ch == "(":
                depth += 1
            yield i, ch, depth
            if ch == ")":
                depth -= 1
        i += 1


def balanced(text: str) -> tuple[str, str]:
    """('a, (b)', rest) for text starting with '('."""
    for i, ch, depth in unquoted(text):
        if ch == ")" and depth == 1:
            return text[1:i], text[i + 1:].lstrip()
    raise HeadwaterError(
        "HW_SQL_UNSUPPORTED", f"Unbalanced parentheses near {text[:60]!r}.",
        "Every '(' needs its ')'.", "Check the statement's parentheses.")
