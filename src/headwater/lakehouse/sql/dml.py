"""DELETE / UPDATE / MERGE INTO in SQL on Delta tables (handlers of the SQL router).

Spark's parser already reads the three statements into plans (``DeleteFromTable``,
``UpdateTable``, ``MergeIntoTable``) with every clause kind; Spark just cannot run them on a
Python data source table. The handlers read the parsed plan (target, aliases, clauses) and take
each expression's SQL text from the statement itself, by its origin's start/stop indexes, so
conditions and values reach :mod:`headwater.delta.dml` exactly as written. The source of a
MERGE (a table, a temp view such as a foreachBatch micro-batch, or a subquery) is analysed in
the statement's own session.

Targets are lakehouse tables by name or ``delta.`path```; any other target (a Spark table of
another provider, a temp view) goes to Spark unchanged. Results are delta-spark's: one row of
num_affected_rows (and num_updated/deleted/inserted_rows for MERGE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.conf.layout import DML_ENGINE_CONF
from headwater.conf.options import parse_choice
from headwater.delta import dml
from headwater.delta.dml.engine import ENGINES
from headwater.delta.dml.merge_spec import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE
from headwater.delta.log import normalize_uri
from headwater.errors import HeadwaterError
from headwater.lakehouse.sql.ddl import dataframe, is_delta_path, lakehouse_table
from headwater.lakehouse.sql.statements import (
    STATEMENT_NAMES,
    Statement,
    children,
    option,
    seq,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.delta.dml import DmlResult
    from headwater.lakehouse.sql.statements import SqlLakehouse


def unsupported(what: str, st: Statement) -> HeadwaterError:
    """A part of a statement the router does not understand: named, never a Py4J error."""
    return HeadwaterError(
        "HW_SQL_UNSUPPORTED",
        f"{STATEMENT_NAMES.get(st.kind, st.kind)}: {what} is not supported by headwater "
        f"(near {st.text[:80]!r}).",
        "headwater runs Delta statements itself (no delta-spark jar) and reads each clause "
        "from Spark's parsed plan; this one it does not know.",
        "Rewrite the statement without it, or use headwater.DeltaTable's Python API.")


def expression_text(st: Statement, expr: Any) -> str:
    """The SQL text of a parsed expression, cut from the statement by the origins of its
    nodes: a node's own origin may cover only its operator (``IS NULL`` of ``v IS NULL``),
    so the span runs from the first start to the last stop of the whole subtree."""
    starts, stops = [], []
    stack = [expr]
    while stack:
        node = stack.pop()
        origin = node.origin()
        start, stop = option(origin.startIndex()), option(origin.stopIndex())
        if start is not None and stop is not None:
            starts.append(int(start))
            stops.append(int(stop))
        stack.extend(children(node))
    if not starts:
        raise unsupported(f"the expression {expr.toString()}", st)
    return st.text[min(starts):max(stops) + 1]


def table_path(lake: SqlLakehouse, parts: list[str]) -> str | None:
    """The folder of a lakehouse table or a ``delta.`path```, None for anything else."""
    if is_delta_path(parts):
        return normalize_uri(parts[1])
    name = lakehouse_table(lake, parts)
    return None if name is None else str(lake.path(name))


def relation_target(lake: SqlLakehouse, node: Any) -> tuple[str, str | None] | None:
    """(path, alias) of a DML target (``UnresolvedRelation`` under an optional alias)."""
    alias = None
    if node.getClass().getSimpleName() == "SubqueryAlias":
        alias = str(node.alias())
        node = node.child()
    if node.getClass().getSimpleName() != "UnresolvedRelation":
        return None
    parts = [str(p) for p in seq(node.multipartIdentifier())]
    path = table_path(lake, parts)
    if path is None:
        return None
    # Without AS, conditions may name the table itself (``t.id``), as in Spark.
    return path, alias or (None if is_delta_path(parts) else parts[-1])


def _not_delta(st: Statement, node: Any) -> None:
    """A DML target that is no Delta table: a temp view is a clear error (Spark fails with an
    internal error on it); anything else (another provider's table) is Spark's to run."""
    if node.getClass().getSimpleName() == "SubqueryAlias":
        node = node.child()
    if node.getClass().getSimpleName() == "UnresolvedRelation":
        parts = [str(p) for p in seq(node.multipartIdentifier())]
        views = {t.name.lower() for t in st.session.catalog.listTables() if t.isTemporary}
        if len(parts) == 1 and parts[0].lower() in views:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED",
                f"{STATEMENT_NAMES.get(st.kind, st.kind)} {parts[0]}: {parts[0]} is a temporary "
                "view; only Delta tables can be changed.",
                "A view has no table files to rewrite.",
                "Run the statement on the lakehouse table (or delta.`/path`) the view reads.")
    return None


def _result(st: Statement, result: DmlResult) -> DataFrame:
    return result.frame(st.session)


def _engine(st: Statement) -> str:
    """The session's choice of DML engine (``headwater.dml.engine``, default auto)."""
    value = st.session.conf.get(DML_ENGINE_CONF, "auto") or "auto"
    return str(parse_choice(DML_ENGINE_CONF, value, ENGINES, "auto"))


def _assignments(st: Statement, items: Any) -> dict[str, str]:
    """SET / INSERT assignments: target column (as named, ``t.col`` allowed) -> value text."""
    out = {}
    for assignment in seq(items):
        key = assignment.key()
        if key.getClass().getSimpleName() != "UnresolvedAttribute":
            raise unsupported(f"assigning to {key.toString()}", st)
        out[".".join(str(p) for p in seq(key.nameParts()))] = \
            expression_text(st, assignment.value())
    return out


def _condition(st: Statement, value: Any) -> str | None:
    is_option = value.getClass().getSimpleName() in ("Some", "None$")
    expr = option(value) if is_option else value
    if expr is None:
        return None
    if expr.getClass().getSimpleName() == "Literal" and str(expr.toString()) == "true" \
            and option(expr.origin().startIndex()) is None:
        return None  # DELETE without WHERE: Spark's implicit true
    return expression_text(st, expr)


def delete(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """DELETE FROM t [WHERE condition]: copy-on-write on Spark or delta-rs (the engine
    setting), one commit; delta-spark's num_affected_rows."""
    found = relation_target(lake, st.plan.table())
    if found is None:
        return _not_delta(st, st.plan.table())
    path, alias = found
    condition = _condition(st, st.plan.condition())
    return _result(st, dml.delete(st.session, path, condition, engine=_engine(st),
                                  target_alias=alias))


def update(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """UPDATE t SET c = expr, ... [WHERE condition]: copy-on-write, one commit."""
    found = relation_target(lake, st.plan.table())
    if found is None:
        return _not_delta(st, st.plan.table())
    path, alias = found
    assignments = _assignments(st, st.plan.assignments())
    condition = _condition(st, st.plan.condition())
    return _result(st, dml.update(st.session, path, assignments, condition,
                                  engine=_engine(st), target_alias=alias))


# Spark's merge actions -> (action, star?)
_ACTIONS = {"UpdateAction": ("update", False), "UpdateStarAction": ("update", True),
            "DeleteAction": ("delete", False), "InsertAction": ("insert", False),
            "InsertStarAction": ("insert", True)}


def merge(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """MERGE INTO t USING source ON condition WHEN [NOT] MATCHED [BY SOURCE] ... (WITH
    SCHEMA EVOLUTION): one commit; two source rows matching one target row fail it."""
    plan = st.plan
    found = relation_target(lake, plan.targetTable())
    if found is None:
        return _not_delta(st, plan.targetTable())
    path, alias = found
    source = dataframe(st.session, plan.sourceTable())
    spec = dml.MergeSpec(path=path, source=source,
                         condition=expression_text(st, plan.mergeCondition()),
                         target_alias=alias, schema_evolution=bool(plan.withSchemaEvolution()))
    for kind, actions in ((MATCHED, plan.matchedActions()),
                          (NOT_MATCHED, plan.notMatchedActions()),
                          (NOT_MATCHED_BY_SOURCE, plan.notMatchedBySourceActions())):
        for action in seq(actions):
            name = action.getClass().getSimpleName()
            if name not in _ACTIONS:
                raise unsupported(f"the clause {action.toString()}", st)
            verb, star = _ACTIONS[name]
            assignments = None if star or verb == "delete" else \
                _assignments(st, action.assignments())
            spec.clauses.append(dml.MergeClause(kind, verb, _condition(st, action.condition()),
                                                assignments))
    return _result(st, dml.merge(st.session, spec, engine=_engine(st)))

