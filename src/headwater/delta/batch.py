"""Batch reads (time travel, partition pruning, fresh snapshots per read) and batch writes
(append / overwrite / replaceWhere, idempotent with txnAppId + txnVersion)."""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow.fs as pafs
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from headwater.conf.options import parse_int
from headwater.delta.files import collect_adds, read_entries, write_task
from headwater.delta.log import DeltaLog, FileEntry, deletion_vectors
from headwater.delta.schema import arrow_schema, parse_partition_value, spark_schema
from headwater.delta.sink import (
    WriteOptions,
    _delete_files,
    check_partitioning,
    check_schema,
    commit_files,
    refuse_driver_only,
)
from headwater.delta.source import MACHINE_PARALLELISM, split_entries
from headwater.errors import HeadwaterError

# --- reading -------------------------------------------------------------------------------

_tables_lock = threading.Lock()
# uri -> (a DeltaTable kept fresh with update_incremental, the signature of its newest commit)
_latest_tables: dict[str, tuple[Any, tuple[int, int] | None]] = {}


def latest_table(log: DeltaLog):
    """The table's newest snapshot; workers are reused, so later reads only replay new commits.

    A table deleted and written again at the same path (``rm -r`` then a new first write)
    starts over at version 0: its commit files have the old numbers, so replaying "new
    commits" onto the old snapshot would list the old table's files. The newest commit file
    the cached snapshot read is therefore checked first (modification time and size); if it
    is not the same file any more, the table is loaded afresh."""
    with _tables_lock:
        cached = _latest_tables.get(log.uri)
        if cached is not None and _signature(log, cached[0].version()) == cached[1]:
            table = cached[0]
            try:
                table.update_incremental()
            except Exception:  # noqa: BLE001 - e.g. log cleaned up meanwhile: load afresh
                table = log.table()
        else:
            table = log.table()
        _latest_tables[log.uri] = (table, _signature(log, table.version()))
        return table


def _signature(log: DeltaLog, version: int) -> tuple[int, int] | None:
    info = log.fs.get_file_info(log.commit_path(version))
    if info.type == pafs.FileType.NotFound:
        return None
    return (info.mtime_ns or 0, info.size or 0)


_OPS = {
    EqualTo: lambda v, x: v is not None and v == x,
    EqualNullSafe: lambda v, x: v == x,
    GreaterThan: lambda v, x: v is not None and v > x,
    GreaterThanOrEqual: lambda v, x: v is not None and v >= x,
    LessThan: lambda v, x: v is not None and v < x,
    LessThanOrEqual: lambda v, x: v is not None and v <= x,
}


def partition_matches(filters: Iterable[Filter], values: dict[str, Any]) -> bool:
    """False only when a filter on partition columns rules the file out."""
    for flt in filters:
        column = flt.attribute[0]
        value = values.get(column)
        try:
            if type(flt) in _OPS and not _OPS[type(flt)](value, flt.value):
                return False
            if isinstance(flt, In) and value not in flt.value:
                return False
            if isinstance(flt, IsNull) and value is not None:
                return False
            if isinstance(flt, IsNotNull) and value is None:
                return False
        except TypeError:  # incomparable literal: keep the file, Spark filters rows anyway
            continue
    return True


class DeltaBatchPartition(InputPartition):
    def __init__(self, index: int, count: int, entries: list[FileEntry] | None,
                 version: int | None) -> None:
        super().__init__(index)
        self.index, self.count, self.entries, self.version = index, count, entries, version


class DeltaBatchReader(DataSourceReader):
    """A pinned version (versionAsOf/timestampAsOf) plans its files up front; the latest
    version is resolved again in ``read()`` so the static side of a stream-static join sees
    new commits at every micro-batch, as delta-spark does."""

    def __init__(self, path: str, schema: StructType, table_schema: StructType,
                 partition_columns: list[str], version: int | str | None,
                 parallelism: int = MACHINE_PARALLELISM) -> None:
        self.path = path
        self.parallelism = parallelism
        self.schema = schema
        self.table_schema = table_schema
        self.partition_columns = partition_columns
        self.version = version
        self.filters: list[Filter] = []

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        parts = set(self.partition_columns)
        for flt in filters:
            attribute = getattr(flt, "attribute", None)
            if attribute and len(attribute) == 1 and attribute[0] in parts:
                self.filters.append(flt)  # used to prune files...
            yield flt  # ...and still evaluated by Spark, so results never depend on pruning

    def _entries(self, log: DeltaLog, table) -> list[FileEntry]:
        entries = log.snapshot_files(table)
        if self.filters:
            entries = [e for e in entries if partition_matches(self.filters, e.partition_values)]
        return entries

    def partitions(self) -> list[InputPartition]:
        log = DeltaLog(self.path)
        if self.version is not None:
            table = log.table(self.version)
            groups = split_entries(self._entries(log, table), self.parallelism)
            return [DeltaBatchPartition(i, len(groups), g, table.version())
                    for i, g in enumerate(groups)] or [DeltaBatchPartition(0, 1, [], None)]
        table = latest_table(log)
        count = max(1, len(split_entries(self._entries(log, table), self.parallelism)))
        return [DeltaBatchPartition(i, count, None, None) for i in range(count)]

    def read(self, partition: DeltaBatchPartition) -> Iterator:
        log = DeltaLog(self.path)
        entries = partition.entries
        table = None
        if entries is None:  # the latest snapshot, split by a stable hash of the path
            table = latest_table(log)
            entries = [e for e in self._entries(log, table)
                       if zlib.crc32(e.path.encode()) % partition.count == partition.index]
        dvs = None
        if any(e.has_dv for e in entries):
            dvs = deletion_vectors(table if table is not None else log.table(partition.version))
        return read_entries(self.path, entries, self.table_schema, arrow_schema(self.schema),
                            self.partition_columns, deletion_vectors=dvs)


# --- writing -------------------------------------------------------------------------------

_CONDITION = re.compile(
    r"^\s*`?(?P<col>[A-Za-z_][A-Za-z0-9_]*)`?\s*(?P<op>=|==|!=|<>|>=|<=|>|<|\bin\b|\bnot\s+in\b)"
    r"\s*(?P<value>.+?)\s*$",
    re.IGNORECASE,
)


def _literal(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_replace_where(predicate: str, partition_columns: list[str]) -> list[tuple[str, str, Any]]:
    """``col = 'x' AND col2 IN (1, 2)`` on partition columns -> delta-rs partition filters."""
    filters: list[tuple[str, str, Any]] = []
    lowered = {c.lower(): c for c in partition_columns}
    for part in re.split(r"\s+and\s+", predicate.strip(), flags=re.IGNORECASE):
        match = _CONDITION.match(part)
        column = lowered.get(match.group("col").lower()) if match else None
        if match is None or column is None:
            raise HeadwaterError(
                "HW_REPLACE_WHERE_UNSUPPORTED",
                f"replaceWhere condition {part.strip()!r} is not a comparison on a partition "
                f"column ({', '.join(partition_columns) or 'the table has none'}).",
                "headwater replaces whole partitions atomically; conditions on other columns "
                "would need a row-level rewrite.",
                "Use conditions like \"date = '2026-01-01'\" or \"region IN ('eu', 'us')\" "
                "joined with AND, on partition columns.",
            )
        op = re.sub(r"\s+", " ", match.group("op").lower())
        op = {"==": "=", "<>": "!="}.get(op, op)
        value = match.group("value")
        if op in ("in", "not in"):
            inner = value.strip()
            if not (inner.startswith("(") and inner.endswith(")")):
                raise HeadwaterError(
                    "HW_REPLACE_WHERE_UNSUPPORTED",
                    f"replaceWhere IN list {value!r} must be in parentheses.",
                    "The list of partition values is parsed literally.",
                    "Write e.g. region IN ('eu', 'us').",
                )
            filters.append((column, op, [_literal(v) for v in inner[1:-1].split(",")]))
        else:
            filters.append((column, op, _literal(value)))
    return filters


def _satisfies(raw_values: dict[str, str | None], filters, types: dict[str, Any]) -> bool:
    for column, op, expected in filters:
        dtype = types[column]
        actual = parse_partition_value(raw_values.get(column), dtype)
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


def txn_option(options: dict[str, str]) -> tuple[str, int] | None:
    """(txnAppId, txnVersion) from lower-cased writer options: Delta's idempotent writes."""
    app_id, version = options.get("txnappid"), options.get("txnversion")
    if (app_id is None) != (version is None):
        raise HeadwaterError(
            "HW_OPTION_CONFLICT",
            "txnAppId and txnVersion must be given together.",
            "Together they identify one write, so a repeated write is skipped.",
            "Set both options, e.g. txnAppId=<job id> and txnVersion=<batch id>.",
        )
    if app_id is None:
        return None
    return (str(app_id), parse_int("txnVersion", version, 0, minimum=0))


def check_replace_where(path: str, adds: list[dict[str, Any]], schema: StructType,
                        filters: list[tuple[str, str, Any]], predicate: str) -> None:
    """Refuse files whose partition lies outside ``replaceWhere`` (HW_REPLACE_WHERE_MISMATCH);
    the caller deletes them."""
    types = {f.name: f.dataType for f in schema.fields}
    outside = [a for a in adds if not _satisfies(a["partitionValues"], filters, types)]
    if outside:
        raise HeadwaterError(
            "HW_REPLACE_WHERE_MISMATCH",
            f"Rows written to {path} fall outside replaceWhere "
            f"{predicate!r} (e.g. partition {outside[0]['partitionValues']}).",
            "replaceWhere must replace exactly the rows it names; other rows would be "
            "lost or duplicated.",
            "Filter the DataFrame with the same condition before writing.",
        )


def replace_where_on_missing_table(path: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_DELTA_TABLE_NOT_FOUND",
        f"replaceWhere needs an existing table at {path}.",
        "There is nothing to replace in a table that does not exist.",
        "Write the table first without replaceWhere.",
    )


class DeltaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts = WriteOptions.from_options(options)
        self.schema = schema
        self.overwrite = overwrite
        self.replace_where = options.get("replacewhere")
        self.txn = txn_option(options)
        self.partition_columns = list(self.opts.partition_by)
        self.filters: list[tuple[str, str, Any]] | None = None
        log = DeltaLog(self.opts.path)
        if log.exists():
            table = log.table()
            refuse_driver_only(self.opts.path, table)
            existing = list(table.metadata().partition_columns)
            check_partitioning(self.opts.path, existing, self.opts.partition_by)
            # Overwrites too: delta-rs keeps the table's schema, so data must fit it.
            check_schema(self.opts.path, spark_schema(table.schema().to_json()), schema,
                         self.opts.merge_schema)
            self.partition_columns = existing
            if self.replace_where:
                self.filters = parse_replace_where(self.replace_where, existing)
        elif self.replace_where:
            raise replace_where_on_missing_table(self.opts.path)

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        return write_task(self.opts.path, self.partition_columns, self.opts.target_file_bytes,
                          self.opts.codec, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = collect_adds(messages)
        if self.filters:
            try:
                check_replace_where(self.opts.path, adds, self.schema, self.filters,
                                    str(self.replace_where))
            except HeadwaterError:
                _delete_files(self.opts.path, adds)
                raise
        commit_files(
            self.opts.path, adds, self.schema,
            mode="overwrite" if self.overwrite else "append",
            partition_by=self.partition_columns, txn=self.txn,
            merge_schema=self.opts.merge_schema, partition_filters=self.filters,
            auto_compact=self.opts.auto_compact, save_mode=self.opts.save_mode,
            user_metadata=self.opts.user_metadata, properties=self.opts.table_properties,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _delete_files(self.opts.path,
                      collect_adds(messages))
