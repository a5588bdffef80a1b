"""Batch reads (time travel, partition pruning, fresh snapshots per read) and batch writes
(append / overwrite / replaceWhere, idempotent with txnAppId + txnVersion)."""

from __future__ import annotations

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

from headwater.delta.constraints import Constraints, refuse_checks_on_python_writer
from headwater.delta.files import collect_adds, read_entries, write_task
from headwater.delta.log import DeltaLog, FileEntry, deletion_vectors
from headwater.delta.schema import arrow_schema, spark_schema
from headwater.delta.source import MACHINE_PARALLELISM, split_entries
from headwater.delta.write.checks import (
    check_partitioning,
    check_schema,
    prepared_batches,
    refuse_driver_only,
    table_spelling,
)
from headwater.delta.write.commit import commit_files, delete_files, delete_unreferenced
from headwater.delta.write.request import WriteRequest
from headwater.delta.write.selective import (
    check_replace_where,
    parse_replace_where,
    partition_removes,
    replace_where_on_missing_table,
)
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


class DeltaBatchWriter(DataSourceArrowWriter):
    """The Python data source writer of ``df.write.format("delta")`` (and of lakehouse tables'
    sources) where Spark's parquet writer cannot write the table (an object store, column
    mapping, targetFileSize, a codec): executors write files, the driver commits them through
    the one commit of every write (:func:`headwater.delta.write.commit.commit_files`)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.request = WriteRequest.from_options(
            options, mode="overwrite" if overwrite else "append")
        self.schema = schema
        self.filters: list[tuple[str, str, Any]] | None = None
        self.constraints = Constraints()
        self.names: list[str] | None = None
        self.read_version: int | None = None
        path = self.request.path
        log = DeltaLog(path)
        if log.exists():
            table = log.table()
            refuse_driver_only(path, table)
            refuse_checks_on_python_writer(table, path, "Python data source writer")
            self.constraints = Constraints.of_table(table)
            self.read_version = table.version()
            existing = list(table.metadata().partition_columns)
            check_partitioning(path, existing, list(self.request.partition_by))
            # Overwrites too: delta-rs keeps the table's schema, so data must fit it.
            table_schema = spark_schema(table.schema().to_json())
            check_schema(path, table_schema, schema, self.request.merge_schema)
            self.names = table_spelling(table_schema, schema.fieldNames())
            self.request = self.request.but(partition_by=tuple(existing))
            if self.request.replace_where is not None:
                self.filters = parse_replace_where(
                    self.request.replace_where, existing,
                    {f.name: f.dataType for f in table_schema.fields})
        elif self.request.replace_where is not None:
            raise replace_where_on_missing_table(path)

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        return write_task(self.request.path, list(self.request.partition_by),
                          self.request.file_bytes, self.request.codec,
                          prepared_batches(iterator, self.request.path, self.names, self.constraints))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = collect_adds(messages)
        request = self.request
        removes = None
        try:
            if self.filters:
                check_replace_where(request.path, adds, self.schema, self.filters,
                                    str(request.replace_where))
            elif request.dynamic_partitions and request.partition_by:
                table = DeltaLog(request.path).table() if DeltaLog(request.path).exists() \
                    else None
                if table is not None:
                    types = {f.name: f.dataType
                             for f in spark_schema(table.schema().to_json()).fields}
                    removes = partition_removes(table, adds, types)
        except HeadwaterError:
            delete_files(request.path, adds)
            raise
        commit_files(request, adds, self.schema, partition_filters=self.filters,
                     removes=removes, read_version=self.read_version)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        delete_unreferenced(self.request.path, collect_adds(messages))
