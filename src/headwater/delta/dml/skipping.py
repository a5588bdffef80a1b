"""Choosing candidate files: partition values and min/max stats rule files out on the driver.

The condition is read as Spark's own expression tree (parsed by Spark, through the classic
session's JVM), never by a hand-written parser. Only conjuncts of simple shapes are used
(``col <op> literal``, ``col IN (...)``, ``col IS NULL``, AND / OR of those); anything else
keeps every file, so pruning can only make the scan smaller, never change the rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from headwater.delta.dml.target import Snapshot, TargetFile, added_file
from headwater.spark.jvm import column_expression

if TYPE_CHECKING:
    from pyspark.sql import Column

# A test on one file: False only when no row of the file can satisfy the condition.
FileTest = Callable[[TargetFile], bool]
_NAMES = {
    "and": "and", "or": "or", "=": "eq", "==": "eq", "equalto": "eq", ">": "gt",
    "greaterthan": "gt", ">=": "ge", "greaterthanorequal": "ge", "<": "lt", "lessthan": "lt",
    "<=": "le", "lessthanorequal": "le", "in": "in", "isnull": "isnull",
}
_FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq"}
_STRING_STATS_PREFIX = 32  # max values this long may be truncated prefixes: no upper bound


def candidate_files(snapshot: Snapshot, condition: Column | None,
                    alias: str | None = None) -> list[TargetFile]:
    """The files that may hold rows matching ``condition`` (all files when unknown).

    alias: the target's alias in the condition (MERGE's ON), so ``t.part = 'a'`` counts."""
    test = file_test(snapshot, condition, alias)
    if test is None:
        return list(snapshot.files)
    return [f for f in snapshot.files if test(f)]


def file_test(snapshot: Snapshot, condition: Column | None,
              alias: str | None = None) -> FileTest | None:
    """A test of one file (False only when none of its rows can match ``condition``), or
    None when the condition rules no file out."""
    if condition is None or not snapshot.files:
        return None
    try:
        tree = _expression(condition)
        return _test(tree, _Context(snapshot, alias))
    except Exception:  # noqa: BLE001 - Spark Connect, unknown trees: no pruning
        return None


def read_filter(test: FileTest | None, snapshot: Snapshot
                ) -> Callable[[dict[str, Any]], bool] | None:
    """For the commit's conflict check: whether a file another writer added meanwhile (its
    add action) may hold rows the operation's condition reads, as delta-spark checks added
    files against a transaction's read predicates. None: any added file may."""
    if test is None:
        return None

    def may_hold(add: dict[str, Any]) -> bool:
        try:
            return test(added_file(snapshot, add))
        except Exception:  # noqa: BLE001 - values it cannot read: assume it holds rows read
            return True

    return may_hold


def _expression(column: Column):
    spark = SparkSession.getActiveSession()
    return column_expression(spark, column)  # type: ignore[arg-type]


def _op(node) -> str | None:
    cls = node.getClass().getSimpleName()
    if cls == "UnresolvedFunction":
        parts = node.nameParts()
        return _NAMES.get(str(parts.apply(parts.size() - 1)).lower())
    return _NAMES.get(cls.lower())


def _children(node) -> list:
    kids = node.children()
    return [kids.apply(i) for i in range(kids.size())]


class _Context:
    def __init__(self, snapshot: Snapshot, alias: str | None) -> None:
        self.snapshot, self.alias = snapshot, (alias or "").lower()
        self.partition_columns = snapshot.partition_columns


def _column(node, ctx: _Context) -> str | None:
    if node.getClass().getSimpleName() != "UnresolvedAttribute":
        return None
    parts = [str(node.nameParts().apply(i)) for i in range(node.nameParts().size())]
    if len(parts) == 2 and ctx.alias and parts[0].lower() == ctx.alias:
        parts = parts[1:]
    if len(parts) != 1:
        return None
    snapshot = ctx.snapshot
    name = parts[0].lower()
    return next((c for c in snapshot.schema.fieldNames() if c.lower() == name), None)


def _literal(node) -> tuple[bool, Any]:
    if node.getClass().getSimpleName() != "Literal":
        return False, None
    kind = node.dataType().typeName()
    value = node.value()
    if value is None:
        return False, None
    if kind in ("integer", "long", "short", "byte"):
        return True, int(value)
    if kind in ("double", "float"):
        return True, float(value)
    if kind == "string":
        return True, str(value.toString())
    if kind == "date":
        return True, dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    return False, None


def _test(node, snapshot: _Context) -> FileTest | None:
    op = _op(node)
    kids = _children(node)
    if op in ("and", "or") and len(kids) == 2:
        left, right = _test(kids[0], snapshot), _test(kids[1], snapshot)
        if op == "and":
            if left is None or right is None:
                return left or right
            return lambda f: left(f) and right(f)
        if left is None or right is None:
            return None
        return lambda f: left(f) or right(f)
    if op == "isnull" and len(kids) == 1:
        col = _column(kids[0], snapshot)
        if col in snapshot.partition_columns:
            idx = snapshot.partition_columns.index(col)
            return lambda f: f.typed_values[idx] is None
        return None
    if op == "in" and len(kids) >= 2:
        col = _column(kids[0], snapshot)
        values = [_literal(k) for k in kids[1:]]
        if col is None or not all(ok for ok, _ in values):
            return None
        tests = [_compare(col, "eq", v, snapshot) for _, v in values]
        if any(t is None for t in tests):
            return None
        return lambda f: any(t(f) for t in tests)  # type: ignore[misc]
    if op in _FLIP and len(kids) == 2:
        col, (ok, value) = _column(kids[0], snapshot), _literal(kids[1])
        if col is None or not ok:
            col, (ok, value), op = _column(kids[1], snapshot), _literal(kids[0]), _FLIP[op]
        if col is None or not ok:
            return None
        return _compare(col, op, value, snapshot)
    return None


def _comparable(a: Any, b: Any) -> bool:
    number = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, number) and isinstance(b, number):
        return True
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return False
    return type(a) is type(b) and isinstance(a, (str, dt.date))


def _compare(col: str, op: str, value: Any, snapshot: _Context) -> FileTest | None:
    if col in snapshot.partition_columns:
        idx = snapshot.partition_columns.index(col)

        def on_partition(f: TargetFile) -> bool:
            actual = f.typed_values[idx]
            if actual is None:
                return False  # NULL compares to nothing
            if not _comparable(actual, value):
                return True
            return {"eq": actual == value, "gt": actual > value, "ge": actual >= value,
                    "lt": actual < value, "le": actual <= value}[op]
        return on_partition

    def on_stats(f: TargetFile) -> bool:
        low, high = f.min_values.get(col), f.max_values.get(col)
        if isinstance(high, str) and len(high) >= _STRING_STATS_PREFIX:
            high = None
        if low is not None and not _comparable(low, value):
            return True
        if high is not None and not _comparable(high, value):
            return True
        if op in ("eq", "lt", "le") and low is not None:
            if (op == "lt" and not low < value) or (op != "lt" and not low <= value):
                return False
        if op in ("eq", "gt", "ge") and high is not None:
            if (op == "gt" and not high > value) or (op != "gt" and not high >= value):
                return False
        return True
    return on_stats
