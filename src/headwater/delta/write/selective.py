"""Selective overwrites, as delta-spark does them: what an overwrite replaces, never more.

An overwrite (``mode("overwrite")``, ``INSERT OVERWRITE``, ``saveAsTable`` / ``insertInto``
with overwrite) replaces the whole table unless the request narrows it:

- ``replaceWhere`` (``.option("replaceWhere", pred)``, ``INSERT INTO t REPLACE WHERE pred``,
  ``INSERT OVERWRITE t PARTITION (p = v)``): the rows matching ``pred`` are replaced, and
  every written row must match it (delta-spark's DELTA_REPLACE_WHERE_MISMATCH, checked while
  the files are written). A predicate of comparisons on partition columns removes whole
  partitions (deltalake's partition filters, :func:`partition_filters`); any other predicate
  (data columns, functions, OR) is evaluated by Spark on the table's files: files holding a
  matching row are removed and their other rows written again, as DELETE does
  (:mod:`headwater.delta.dml`), in the same commit as the new rows.
- dynamic partition overwrite (``partitionOverwriteMode=dynamic`` as option or session
  setting): only the partitions the written rows fall in are replaced; on an unpartitioned
  table it is a whole overwrite, as in delta-spark.

Each is one commit. A table whose files headwater cannot rewrite, or a predicate it cannot
honour, is refused: an overwrite never widens to the whole table.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    BooleanType,
    DateType,
    NumericType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from headwater.delta import physical_names
from headwater.delta.log import FILE_COLUMNS, add_actions, deletion_vector_paths
from headwater.delta.schema import format_partition_value, parse_partition_value, spark_schema
from headwater.delta.write.request import WriteRequest
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

_CONDITION = re.compile(
    r"^\s*`?(?P<col>[A-Za-z_][A-Za-z0-9_]*)`?\s*(?P<op>=|==|!=|<>|>=|<=|>|<|\bin\b|\bnot\s+in\b)"
    r"\s*(?P<value>.+?)\s*$",
    re.IGNORECASE,
)
_PLAIN_VALUE = re.compile(r"^\s*('[^']*'|\"[^\"]*\"|[-+]?[0-9][0-9.:\- ]*|true|false)\s*$",
                          re.IGNORECASE)


def _literal(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _fits(value: str, dtype: Any) -> bool:
    """A literal compares with the column as it would in Spark without a cast: quoted text
    for strings, dates and timestamps, a bare number for numbers, true / false for booleans.
    Anything else (``p > 10`` on a string column) is left to Spark's own evaluation."""
    text = value.strip()
    quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "'\""
    if isinstance(dtype, (StringType, DateType, TimestampType, TimestampNTZType)):
        return quoted
    if isinstance(dtype, NumericType):
        return not quoted and re.fullmatch(r"[-+]?[0-9]+(\.[0-9]+)?", text) is not None
    if isinstance(dtype, BooleanType):
        return text.lower() in ("true", "false")
    return False


def partition_filters(predicate: str, partition_columns: list[str],
                      types: dict[str, Any] | None = None
                      ) -> list[tuple[str, str, Any]] | None:
    """``col = 'x' AND col2 IN (1, 2)`` on partition columns -> deltalake's partition
    filters; None when the predicate is anything else (other columns, OR, functions, a
    literal of another type than its column: Spark's casts decide those). ``types``: the
    partition columns' types (by the table's spelling)."""
    filters: list[tuple[str, str, Any]] = []
    lowered = {c.lower(): c for c in partition_columns}
    for part in re.split(r"\s+and\s+", predicate.strip(), flags=re.IGNORECASE):
        match = _CONDITION.match(part)
        column = lowered.get(match.group("col").lower()) if match else None
        if match is None or column is None:
            return None
        op = re.sub(r"\s+", " ", match.group("op").lower())
        op = {"==": "=", "<>": "!="}.get(op, op)
        value = match.group("value")
        if op in ("in", "not in"):
            inner = value.strip()
            if not (inner.startswith("(") and inner.endswith(")")):
                return None
            items = inner[1:-1].split(",")
            if not all(_PLAIN_VALUE.match(v) for v in items):
                return None
            if types is not None and not all(_fits(v, types[column]) for v in items):
                return None
            filters.append((column, op, [_literal(v) for v in items]))
        else:
            if not _PLAIN_VALUE.match(value):
                return None
            if types is not None and not _fits(value, types[column]):
                return None
            filters.append((column, op, _literal(value)))
    return filters


def parse_replace_where(predicate: str, partition_columns: list[str],
                        types: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    """:func:`partition_filters`, or HW_REPLACE_WHERE_UNSUPPORTED for a writer that can
    replace whole partitions only (the Python data source writer)."""
    filters = partition_filters(predicate, partition_columns, types)
    if filters is None:
        raise HeadwaterError(
            "HW_REPLACE_WHERE_UNSUPPORTED",
            f"replaceWhere condition {predicate.strip()!r} is not a conjunction of "
            f"comparisons on partition columns ({', '.join(partition_columns) or 'the table has none'}), "
            "and this write goes through the Python data source writer (an object store, "
            "column mapping, targetFileSize or a codec Spark's writer lacks).",
            "That writer replaces whole partitions only; a condition on other columns needs a "
            "row-level rewrite, which headwater does with Spark's parquet writer on local "
            "tables. It never widens the overwrite to the whole table.",
            "Use conditions like \"date = '2026-01-01'\" or \"region IN ('eu', 'us')\" "
            "joined with AND, on partition columns, or drop the option that sends the write "
            "to the Python writer.",
        )
    return filters


def satisfies(raw_values: dict[str, str | None], filters, types: dict[str, Any]) -> bool:
    for column, op, expected in filters:
        dtype = types[column]
        actual = parse_partition_value(raw_values.get(column), dtype)
        if actual is None:  # a comparison with NULL is NULL: never a match (SQL, Spark)
            return False
        if op in ("in", "not in"):
            members = [parse_partition_value(v, dtype) for v in expected]
            if (actual in members) != (op == "in"):
                return False
            continue
        target = parse_partition_value(expected, dtype)
        checks = {"=": actual == target, "!=": actual != target}
        if op in checks:
            if not checks[op]:
                return False
        elif actual is None or not {">": actual > target, ">=": actual >= target,
                                    "<": actual < target, "<=": actual <= target}[op]:
            return False
    return True


def mismatch_error(path: str, predicate: str, example: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_REPLACE_WHERE_MISMATCH",
        f"Rows written to {path} fall outside replaceWhere {predicate!r} ({example}).",
        "replaceWhere must replace exactly the rows it names; other rows would be lost or "
        "duplicated. Nothing was written.",
        "Filter the DataFrame with the same condition before writing.",
        error_class="DELTA_REPLACE_WHERE_MISMATCH")


def check_replace_where(path: str, adds: list[dict[str, Any]], schema: StructType,
                        filters: list[tuple[str, str, Any]], predicate: str) -> None:
    """Refuse files whose partition lies outside ``replaceWhere`` (HW_REPLACE_WHERE_MISMATCH);
    the caller deletes them."""
    types = {f.name: f.dataType for f in schema.fields}
    outside = [a for a in adds if not satisfies(a["partitionValues"], filters, types)]
    if outside:
        raise mismatch_error(path, predicate, f"e.g. partition {outside[0]['partitionValues']}")


def refuse_deletion_vector(table: Any, path: str, dv_paths: set[str]) -> None:
    """A file a selective overwrite would remove has a deletion vector: refused (its remove
    action would have to name the vector, or readers keep the file's other rows live)."""
    if dv_paths:  # (any: the log's and delta-rs's spellings of a path may differ)
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"A selective overwrite of {table.table_uri} would "
            f"remove {path}, which has a deletion vector.", "headwater's removes do not "
            "carry deletion vectors yet; a remove without it would leave rows live for other "
            "readers.", "Purge the vectors first (REORG TABLE ... APPLY (PURGE) with "
            "delta-spark), or DELETE the rows then append.")


def replace_where_on_missing_table(path: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_DELTA_TABLE_NOT_FOUND",
        f"replaceWhere needs an existing table at {path}.",
        "There is nothing to replace in a table that does not exist.",
        "Write the table first without replaceWhere.",
    )


def refused_on_own_commit(request: WriteRequest) -> HeadwaterError:
    what = (f"replaceWhere {request.replace_where!r}" if request.replace_where is not None
            else "a dynamic partition overwrite")
    return HeadwaterError(
        "HW_REPLACE_WHERE_UNSUPPORTED", f"{what} into {request.path}: the table has generated, "
        "identity or DEFAULT columns (or liquid clustering), which headwater writes on the driver "
        "without selective overwrites yet.", "headwater never widens a selective overwrite "
        "to the whole table.", "DELETE the rows to replace, then append the new ones (two "
        "commits), or overwrite the whole table.")


def removes_where(table: Any, chosen: Callable[[dict[str, str | None]], bool]
                  ) -> list[dict[str, Any]]:
    """Remove actions of the table's files whose partition values (as the log spells them,
    by logical column name) are ``chosen``; a chosen file with a deletion vector is refused.
    The removes key the values as the log does (physical names under column mapping)."""
    columns = list(table.metadata().partition_columns)
    keys = physical_names.physical_partition_columns(
        spark_schema(table.schema().to_json()), columns) \
        if physical_names.is_mapped(table) else columns
    now = int(time.time() * 1000)
    removes = []
    dv_paths = deletion_vector_paths(table)
    for row in add_actions(table, columns=FILE_COLUMNS).to_pylist():
        values = {c: format_partition_value((row.get("partition") or {}).get(c))
                  for c in columns}
        if chosen(values):
            refuse_deletion_vector(table, row["path"], dv_paths)
            removes.append({"remove": {
                "path": row["path"], "dataChange": True, "deletionTimestamp": now,
                "extendedFileMetadata": True, "size": int(row["size_bytes"]),
                "partitionValues": {k: values[c] for c, k in zip(columns, keys, strict=True)}}})
    return removes


def partition_removes(table: Any, adds: list[dict[str, Any]],
                      types: dict[str, Any]) -> list[dict[str, Any]]:
    """Remove actions of the table's files in the partitions ``adds`` fall in (values
    compared as typed values: the log's and the folder names' spellings may differ)."""
    columns = list(table.metadata().partition_columns)

    def key(values: dict[str, Any]) -> tuple:
        return tuple(parse_partition_value(
            None if values.get(c) is None else str(values.get(c)), types[c]) for c in columns)

    wanted = {key(a["partitionValues"]) for a in adds}
    return removes_where(table, lambda values: key(values) in wanted)


def partition_removes_where(table: Any, schema: StructType,
                            filters: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """Remove actions of the table's files whose partition values satisfy ``filters`` (a
    replaceWhere on partition columns)."""
    types = {f.name: f.dataType for f in schema.fields}
    return removes_where(table, lambda values: satisfies(values, filters, types))
