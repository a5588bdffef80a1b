"""DELETE / UPDATE / MERGE with deltalake (delta-rs) on the driver, for statements it runs
exactly like Spark.

delta-rs evaluates predicates with DataFusion, whose SQL is not Spark's (double quotes name
columns, ``concat`` skips NULLs, ``/`` on integers truncates, ...). So a condition or value is
never passed as written: Spark's parser reads it, and :func:`to_delta_rs_sql` prints it again
from a small set of nodes both engines evaluate the same way (columns, literals, comparisons,
AND / OR / NOT, IN, IS [NOT] NULL, + - *, % by a literal). Anything else (a Column object, another function,
a table feature delta-rs lacks, schema evolution) makes :func:`eligible` say why not, and the
Spark path runs instead.

A commit delta-rs refuses because another writer committed a conflicting change meanwhile
raises delta-spark's exception for that conflict (``ConcurrentAppendException`` ...), as the
Spark path does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from deltalake.exceptions import CommitFailedError
from pyspark.sql import SparkSession

from headwater.delta.commit import delta_rs_conflict
from headwater.delta.dml.common import ColumnOrSql, DmlResult, target_column_name
from headwater.delta.dml.merge_spec import MergeSpec
from headwater.delta.dml.target import Snapshot
from headwater.delta.generated import declares_generation
from headwater.delta.log import open_table
from headwater.spark.jvm import logical_plan, parse_expression

# Table features deltalake 1.6.6 writes correctly in delete / update / merge.
# (columnMapping: delta-rs' DML reads and writes files by physical names, as measured on
# deltalake 1.6.6 for DELETE / UPDATE / MERGE, nested fields and partitions included)
_FEATURES = {"appendOnly", "invariants", "changeDataFeed", "timestampNtz", "checkConstraints",
             "columnMapping"}
_BINARY = {"EqualTo": "=", "LessThan": "<", "LessThanOrEqual": "<=", "GreaterThan": ">",
           "GreaterThanOrEqual": ">=", "And": "AND", "Or": "OR", "Add": "+", "Subtract": "-",
           "Multiply": "*"}
_LITERAL_TYPES = ("int", "bigint", "smallint", "tinyint", "string", "boolean", "void")


class NotPortable(Exception):
    """The statement is not one delta-rs runs exactly like Spark (the message says why)."""


def to_delta_rs_sql(spark: SparkSession, text: ColumnOrSql | None, aliases: Mapping[str, str],
                    columns: Mapping[str, list[str]]) -> str | None:
    """``text`` (Spark SQL) printed as DataFusion SQL with the same meaning.

    aliases: qualifier (lower case) -> the name delta-rs knows it by ("" = unqualified).
    columns: that name -> its columns. Raises :class:`NotPortable`.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise NotPortable("a Column expression")
    tree = parse_expression(spark, text)
    return _print(tree, aliases, columns)


def _kids(node: Any) -> list[Any]:
    kids = node.children()
    return [kids.apply(i) for i in range(kids.size())]


def _print(node: Any, aliases: Mapping[str, str], columns: Mapping[str, list[str]]) -> str:
    kind = node.getClass().getSimpleName()
    kids = _kids(node)
    if kind in _BINARY:
        a, b = (_print(k, aliases, columns) for k in kids)
        return f"({a} {_BINARY[kind]} {b})"
    if kind == "Remainder" and kids[1].getClass().getSimpleName() == "Literal" \
            and kids[1].value() is not None and str(kids[1].value()) not in ("0", "0.0"):
        # both truncate toward zero; a zero divisor (error vs NULL rules) stays with Spark
        a, b = (_print(k, aliases, columns) for k in kids)
        return f"({a} % {b})"
    if kind == "Not":
        return f"(NOT {_print(kids[0], aliases, columns)})"
    if kind in ("IsNull", "IsNotNull"):
        word = "IS NULL" if kind == "IsNull" else "IS NOT NULL"
        return f"({_print(kids[0], aliases, columns)} {word})"
    if kind == "In":
        items = ", ".join(_print(k, aliases, columns) for k in kids[1:])
        return f"({_print(kids[0], aliases, columns)} IN ({items}))"
    if kind == "UnaryMinus":
        return f"(- {_print(kids[0], aliases, columns)})"
    if kind == "Literal":
        return _literal(node)
    if kind == "UnresolvedAttribute":
        return _column([str(p) for p in _seq(node.nameParts())], aliases, columns)
    raise NotPortable(f"{kind} in a condition or value")


def _seq(value: Any) -> list[Any]:
    return [value.apply(i) for i in range(value.size())]


def _literal(node: Any) -> str:
    type_name = str(node.dataType().simpleString())
    value = node.value()
    if type_name not in _LITERAL_TYPES:
        raise NotPortable(f"a {type_name} literal")
    if value is None:
        return "NULL"
    if type_name == "string":
        return "'" + str(value.toString()).replace("'", "''") + "'"
    return str(value).lower() if type_name == "boolean" else str(value)


def _column(parts: list[str], aliases: Mapping[str, str], columns: Mapping[str, list[str]]
            ) -> str:
    qualifier = "" if len(parts) == 1 else parts[0].lower()
    if len(parts) > 2 or qualifier not in aliases:
        raise NotPortable(f"the column reference {'.'.join(parts)}")
    owner = aliases[qualifier]
    by_lower = {c.lower(): c for c in columns[owner]}
    if parts[-1].lower() not in by_lower:
        raise NotPortable(f"the column {'.'.join(parts)}")
    name = '"' + by_lower[parts[-1].lower()].replace('"', '""') + '"'
    return f"{owner}.{name}" if owner else name


def check_table(snapshot: Snapshot) -> None:
    protocol = snapshot.table.protocol()
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    # generatedColumns: listed by every table-features protocol that came from writer 4;
    # a schema that declares generation is refused below
    unknown = features - _FEATURES - {"generatedColumns"}
    if unknown:
        raise NotPortable(f"table features {sorted(unknown)}")
    if any(f.has_dv for f in snapshot.files):
        raise NotPortable("deletion vectors")
    if declares_generation(snapshot.raw_schema_json):
        raise NotPortable("generated or identity columns (Spark's SQL computes them)")


def _target_names(snapshot: Snapshot, alias: str | None) -> tuple[dict, dict]:
    names = [f.name for f in snapshot.schema.fields]
    aliases = {"": ""}
    if alias:
        aliases[alias.lower()] = ""
    return aliases, {"": names}


def delete(spark: SparkSession, snapshot: Snapshot, condition: ColumnOrSql | None,
           alias: str | None) -> DmlResult:
    check_table(snapshot)
    aliases, columns = _target_names(snapshot, alias)
    predicate = to_delta_rs_sql(spark, condition, aliases, columns)
    metrics = _committed(snapshot, "DELETE", lambda: snapshot.table.delete(predicate))
    deleted = int(metrics.get("num_deleted_rows", 0))
    return _result("DELETE", snapshot, metrics, deleted=deleted)


def update(spark: SparkSession, snapshot: Snapshot, assignments: Mapping[str, ColumnOrSql],
           condition: ColumnOrSql | None, alias: str | None) -> DmlResult:
    check_table(snapshot)
    aliases, columns = _target_names(snapshot, alias)
    updates = {}
    for key, value in assignments.items():
        column = target_column_name(key, columns[""], alias, snapshot.uri)
        updates['"' + column.replace('"', '""') + '"'] = \
            to_delta_rs_sql(spark, value, aliases, columns)
    predicate = to_delta_rs_sql(spark, condition, aliases, columns)
    metrics = _committed(snapshot, "UPDATE",
                         lambda: snapshot.table.update(updates=updates, predicate=predicate))
    return _result("UPDATE", snapshot, metrics, updated=int(metrics.get("num_updated_rows", 0)))


def merge(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec) -> DmlResult:
    """MERGE with the source collected to the driver (the engine picks this for small
    sources and targets only)."""
    check_table(snapshot)
    if spec.schema_evolution:
        raise NotPortable("schema evolution")
    source_alias = _alias_of(spec.source)
    if not spec.target_alias or not source_alias:
        raise NotPortable("a MERGE without aliases for target and source")
    aliases = {spec.target_alias.lower(): "target", source_alias.lower(): "source"}
    columns = {"target": [f.name for f in snapshot.schema.fields],
               "source": list(spec.source.columns)}

    def sql(value: ColumnOrSql | None) -> str | None:
        return to_delta_rs_sql(spark, value, aliases, columns)

    def sets(assignments: Mapping[str, ColumnOrSql]) -> dict[str, str]:
        out = {}
        for key, value in assignments.items():
            column = target_column_name(key, columns["target"], spec.target_alias,
                                        snapshot.uri)
            out['target."' + column.replace('"', '""') + '"'] = sql(value) or "NULL"
        return out

    source = spec.source.toArrow()
    if spec.checks_multiple_matches:
        _refuse_duplicate_keys(spark, spec, source, aliases, columns)
    builder = snapshot.table.merge(source, predicate=sql(spec.condition) or "true",
                                   source_alias="source", target_alias="target")
    for clause in spec.clauses:
        cond = sql(clause.condition)
        if clause.kind == "matched":
            if clause.action == "delete":
                builder = builder.when_matched_delete(cond)
            elif clause.star:
                builder = builder.when_matched_update_all(cond)
            else:
                builder = builder.when_matched_update(sets(clause.assignments or {}), cond)
        elif clause.kind == "not_matched":
            builder = builder.when_not_matched_insert_all(cond) if clause.star else \
                builder.when_not_matched_insert(sets(clause.assignments or {}), cond)
        elif clause.action == "delete":
            builder = builder.when_not_matched_by_source_delete(cond)
        else:
            builder = builder.when_not_matched_by_source_update(
                sets(clause.assignments or {}), cond)
    metrics = _committed(snapshot, "MERGE", builder.execute)
    return _result("MERGE", snapshot, metrics,
                   updated=int(metrics.get("num_target_rows_updated", 0)),
                   deleted=int(metrics.get("num_target_rows_deleted", 0)),
                   inserted=int(metrics.get("num_target_rows_inserted", 0)))


def _refuse_duplicate_keys(spark: SparkSession, spec: MergeSpec, source: Any,
                           aliases: Mapping[str, str], columns: Mapping[str, list[str]]) -> None:
    """Delta's rule (two source rows may not change one target row), which delta-rs does not
    check: an ON of ANDed target = source column pairs, and source keys unique; else Spark."""
    tree = parse_expression(spark, str(spec.condition))
    keys: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        kind = node.getClass().getSimpleName()
        if kind == "And":
            stack.extend(_kids(node))
            continue
        sides = _kids(node) if kind == "EqualTo" else []
        names = [_print(k, aliases, columns) for k in sides
                 if k.getClass().getSimpleName() == "UnresolvedAttribute"]
        found = [n for n in names if n.startswith("source.")]
        if len(names) != 2 or len(found) != 1:
            raise NotPortable("an ON condition other than target = source column pairs")
        keys.append(found[0][len('source."'):-1].replace('""', '"'))
    table = pa.table(source)
    if table.num_rows and table.group_by(keys).aggregate([]).num_rows < table.num_rows:
        raise NotPortable("source rows with the same ON key (Spark checks the match rule)")


def _committed(snapshot: Snapshot, operation: str,
               run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()``'s metrics; a commit delta-rs lost to a conflicting concurrent one raises
    delta-spark's exception for the conflict."""
    try:
        return run()
    except CommitFailedError as exc:
        raise delta_rs_conflict(exc, operation, snapshot.uri) from exc


def _alias_of(df: Any) -> str | None:
    """The alias a DataFrame was given (``df.alias('s')``), read from its logical plan."""
    plan = logical_plan(df)
    if plan.getClass().getSimpleName() == "SubqueryAlias":
        return str(plan.alias())
    return None


def _result(operation: str, snapshot: Snapshot, metrics: dict[str, Any], updated: int = 0,
            deleted: int = 0, inserted: int = 0) -> DmlResult:

    changed = updated + deleted + inserted
    version = open_table(snapshot.uri).version()
    return DmlResult(operation, num_affected_rows=changed, num_updated_rows=updated,
                     num_deleted_rows=deleted, num_inserted_rows=inserted,
                     version=version if version != snapshot.version else None,
                     engine="delta-rs", metrics=dict(metrics))
