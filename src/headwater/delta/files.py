"""Executor-side file work: reading data files into Spark's Arrow batches, writing parquet
files with Delta statistics taken from the footer pyarrow already holds."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import resource
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from headwater.delta.log import FileEntry, filesystem_for
from headwater.delta.schema import (
    conform_column,
    format_partition_value,
    partition_array,
    physical_name,
)
from headwater.errors import HeadwaterError

READ_BATCH_ROWS = 65536  # rows per Arrow batch handed to Spark
STATS_STRING_PREFIX = 32  # delta-spark's default prefix length for string min/max


# --- reading -----------------------------------------------------------------------------


def _open_data_file(fs: pafs.FileSystem, path: str) -> pa.NativeFile:
    """A data file to read: memory-mapped when it is local, so pages are decompressed
    straight from the page cache instead of first being copied into read buffers (5-8% of a
    Delta stream's read, benchmarks/delta_io.py). Delta never rewrites a data file in place,
    and a file VACUUM unlinks stays readable while mapped.

    Not mapped when the worker's address space is limited (``spark.executor.pyspark.memory``
    sets RLIMIT_AS, and a map takes the whole file's size of it), nor when mapping fails:
    the plain reader then reads it. The trade-off: an I/O error under a mapped file (a
    network or FUSE mount) ends the worker with SIGBUS instead of raising an OSError."""
    if isinstance(fs, pafs.LocalFileSystem) and _address_space_unlimited():
        try:
            return pa.memory_map(path)
        except FileNotFoundError:
            raise
        except OSError:
            pass
    return fs.open_input_file(path)


@functools.cache
def _address_space_unlimited() -> bool:
    return resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY


def read_entries(
    table_uri: str,
    entries: Iterable[FileEntry],
    schema: StructType,
    target: pa.Schema,
    partition_columns: list[str],
    deletion_vectors: dict[str, list[bool]] | None = None,
    batch_rows: int = READ_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Batches of the given files, in Spark's exact Arrow schema."""
    fs, _ = filesystem_for(table_uri)
    partition_set = set(partition_columns)
    for entry in entries:
        mask = (deletion_vectors or {}).get(entry.path) if entry.has_dv else None
        if entry.has_dv and mask is None:
            raise HeadwaterError(
                "HW_DELTA_DV_MISSING",
                f"Data file {entry.path} has a deletion vector that could not be loaded.",
                "Rows deleted through a deletion vector must not be returned.",
                "Check that the table's deletion-vector files are present.",
            )
        try:
            handle = _open_data_file(fs, entry.path)
        except FileNotFoundError as exc:
            raise HeadwaterError(
                "HW_DELTA_FILE_NOT_FOUND",
                f"Data file {entry.path} is listed in the Delta log but missing on storage.",
                "The file was deleted outside Delta (or vacuumed while still referenced); "
                "reading on would silently drop its rows.",
                "Restore the file, or restore the table to a version whose files exist.",
            ) from exc
        with handle:
            parquet = pq.ParquetFile(handle)
            names = set(parquet.schema_arrow.names)
            wanted = []
            sources = []
            for field in schema.fields:
                if field.name in partition_set:
                    sources.append(None)
                    continue
                # Under column mapping only the physical name counts: a logical name may be
                # another column's old physical name (renamed, then re-added).
                phys = physical_name(field)
                col = phys if phys in names else None
                sources.append(col)
                if col is not None and col not in wanted:
                    wanted.append(col)
            offset = 0
            batches = parquet.iter_batches(
                batch_size=batch_rows, columns=wanted, use_threads=True,
            )
            for batch in batches:
                n = batch.num_rows
                columns = []
                for field, source, tfield in zip(schema.fields, sources, target):
                    if field.name in partition_set:
                        value = entry.partition_values.get(field.name)
                        columns.append(partition_array(value, tfield.type, n))
                    else:
                        arr = batch.column(source) if source is not None else None
                        columns.append(conform_column(arr, field, tfield.type, n))
                out = pa.RecordBatch.from_arrays(columns, schema=target)
                if mask is not None:
                    out = out.filter(pa.array(mask[offset:offset + n], pa.bool_()))
                    offset += n
                if out.num_rows:
                    yield out


# --- writing -----------------------------------------------------------------------------


@dataclass
class DeltaFilesMessage(WriterCommitMessage):
    """What one task wrote: Delta add actions (as dicts) for the driver to commit."""

    adds: list[dict[str, Any]]
    rows: int


def _hive_escape(value: str) -> str:
    out = []
    for ch in value:
        if ch.isalnum() or ch in "-_.":
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out)


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    parts = []
    for col in partition_columns:
        value = values.get(col)
        text = "__HIVE_DEFAULT_PARTITION__" if value is None else _hive_escape(value)
        parts.append(f"{col}={text}")
    return "/".join(parts)


# Spark hands the sink batches of 10,000 rows; one row group per batch makes files larger and
# encoding slower, so batches are buffered into row groups of up to this size.
ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 64 << 20
DICTIONARY_MAX_DISTINCT = 0.5  # share of distinct values above which dictionaries only cost


def dictionary_columns(batch: pa.RecordBatch) -> list[str]:
    """Primitive columns worth dictionary-encoding, judged on the first batch written."""
    chosen = []
    for name, column in zip(batch.schema.names, batch.columns):
        if pa.types.is_nested(column.type) or len(column) == 0:
            continue
        if pc.count_distinct(column).as_py() <= DICTIONARY_MAX_DISTINCT * len(column):
            chosen.append(name)
    return chosen


def collect_adds(messages: list) -> list[dict[str, Any]]:
    """All add actions from the tasks' commit messages (failed tasks send None)."""
    return [a for m in messages if isinstance(m, DeltaFilesMessage) for a in m.adds]


class _OpenFile:
    def __init__(self, fs, root: str, relpath: str, codec: str,
                 partition_values: dict[str, str | None]) -> None:
        self.fs, self.root, self.relpath, self.codec = fs, root, relpath, codec
        self.partition_values = partition_values
        self.stream = None
        self.writer: pq.ParquetWriter | None = None
        self.metadata: list[pq.FileMetaData] = []
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = self.pending_bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        self.pending_bytes += batch.nbytes
        if self.pending_rows >= ROW_GROUP_ROWS or self.pending_bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending)
        if self.writer is None:
            self.stream = self.fs.open_output_stream(f"{self.root}/{self.relpath}")
            self.writer = pq.ParquetWriter(
                self.stream, table.schema, compression=self.codec,
                use_dictionary=dictionary_columns(self.pending[0]),
                metadata_collector=self.metadata, write_statistics=True,
            )
        self.writer.write_table(table, row_group_size=table.num_rows)
        self.pending, self.pending_rows, self.pending_bytes = [], 0, 0

    @property
    def bytes_written(self) -> int:
        """Compressed bytes on storage plus an (uncompressed) estimate for what is buffered."""
        return (self.stream.tell() if self.stream is not None else 0) + self.pending_bytes

    def close(self, schema: pa.Schema) -> dict[str, Any]:
        self.flush()
        self.writer.close()
        size = self.stream.tell()
        self.stream.close()
        stats = file_stats(self.metadata[0], schema)
        return {
            "path": self.relpath,  # delta-rs percent-encodes it in the log
            "size": size,
            "partitionValues": self.partition_values,
            "modificationTime": int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps(stats, separators=(",", ":")),
        }


class FileWriter:
    """Writes one task's batches into parquet files under a table, rolling at a target size."""

    def __init__(self, table_uri: str, partition_columns: list[str], target_file_bytes: int,
                 codec: str = "snappy") -> None:
        self.fs, self.root = filesystem_for(table_uri)
        self.partition_columns = list(partition_columns)
        self.target = target_file_bytes
        self.codec = codec
        self.open: dict[tuple, _OpenFile] = {}
        self.adds: list[dict[str, Any]] = []
        self.rows = 0
        self.file_schema: pa.Schema | None = None
        self._made_dirs: set[str] = set()

    def _new_file(self, key: tuple, values: dict[str, str | None]) -> _OpenFile:
        name = f"part-{uuid.uuid4()}.{self.codec}.parquet"
        subdir = partition_dir(self.partition_columns, values) if self.partition_columns else ""
        folder = f"{self.root}/{subdir}" if subdir else self.root
        if folder not in self._made_dirs:
            self.fs.create_dir(folder, recursive=True)
            self._made_dirs.add(folder)
        relpath = f"{subdir}/{name}" if subdir else name
        handle = _OpenFile(self.fs, self.root, relpath, self.codec, values)
        self.open[key] = handle
        return handle

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        if not self.partition_columns:
            self._write_part((), {}, batch)
            return
        data = batch.drop_columns(self.partition_columns)
        self.file_schema = data.schema
        keys = pa.Table.from_batches([batch.select(self.partition_columns)])
        groups = keys.append_column("__row", pa.array(range(batch.num_rows), pa.int64())) \
            .group_by(self.partition_columns, use_threads=False).aggregate([("__row", "list")])
        for row in groups.to_pylist():
            values = {c: format_partition_value(row[c]) for c in self.partition_columns}
            key = tuple(values[c] for c in self.partition_columns)
            part = data.take(pa.array(row["__row_list"], pa.int64()))
            self._write_part(key, values, part)

    def _write_part(self, key: tuple, values: dict, data: pa.RecordBatch) -> None:
        if self.file_schema is None:
            self.file_schema = data.schema
        handle = self.open.get(key) or self._new_file(key, values)
        handle.write(data)
        if handle.bytes_written >= self.target:
            self.adds.append(handle.close(self.file_schema))
            del self.open[key]

    def close(self) -> DeltaFilesMessage:
        for handle in self.open.values():
            self.adds.append(handle.close(self.file_schema))
        self.open.clear()
        return DeltaFilesMessage(adds=self.adds, rows=self.rows)


# --- statistics ----------------------------------------------------------------------------


def file_stats(meta: pq.FileMetaData, schema: pa.Schema) -> dict[str, Any]:
    """Delta stats (numRecords, minValues, maxValues, nullCount) from a parquet footer."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    per_path: dict[str, list] = {}
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for ci in range(group.num_columns):
            col = group.column(ci)
            per_path.setdefault(col.path_in_schema, []).append(col.statistics)
    leaf_types = _leaf_types(schema)
    for path, stats_list in per_path.items():
        if path not in leaf_types:  # inside a list or map: Delta keeps no stats there
            continue
        keys = path.split(".")
        if any(s is None for s in stats_list):
            continue
        if all(s.has_null_count for s in stats_list):
            _put(nulls, keys, sum(s.null_count for s in stats_list))
        if meta.num_rows == 0 or not all(s.has_min_max for s in stats_list):
            continue
        arrow_type = leaf_types[path]
        lo = _json_value(min(s.min for s in stats_list), arrow_type, upper=False)
        hi = _json_value(max(s.max for s in stats_list), arrow_type, upper=True)
        if lo is not None:
            _put(mins, keys, lo)
        if hi is not None:
            _put(maxs, keys, hi)
    return {"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def _leaf_types(schema: pa.Schema) -> dict[str, pa.DataType]:
    out: dict[str, pa.DataType] = {}

    def walk(prefix: str, dtype: pa.DataType) -> None:
        if pa.types.is_struct(dtype):
            for i in range(dtype.num_fields):
                child = dtype.field(i)
                walk(f"{prefix}.{child.name}", child.type)
        elif not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_map(dtype)):
            out[prefix] = dtype

    for field in schema:
        walk(field.name, field.type)
    return out


def _put(target: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def _json_value(value: Any, arrow_type: pa.DataType, upper: bool) -> Any:
    """A parquet min/max -> Delta's JSON stats form; None when no safe bound exists."""
    if value is None:
        return None
    if pa.types.is_boolean(arrow_type) or pa.types.is_binary(arrow_type) \
            or pa.types.is_large_binary(arrow_type):
        return None
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        text = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
        if len(text) <= STATS_STRING_PREFIX:
            return text
        return None if upper else text[:STATS_STRING_PREFIX]
    if pa.types.is_timestamp(arrow_type):
        if isinstance(value, int):
            value = pa.scalar(value, pa.timestamp(arrow_type.unit)).as_py()
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        micros = value.microsecond
        value = value.replace(microsecond=micros - micros % 1000)
        if upper and micros % 1000:
            value += dt.timedelta(milliseconds=1)  # stats keep millis: round the max up
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + ("Z" if arrow_type.tz else "")
    if pa.types.is_date(arrow_type):
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if not value.is_nan() else None
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, (int, str)):
        return value
    return None


def write_task(table_uri: str, partition_columns: list[str], target_file_bytes: int,
               codec: str, batches: Iterable[pa.RecordBatch]) -> DeltaFilesMessage:
    """One Spark task's share of a write: its batches into files, their add actions back."""
    writer = FileWriter(table_uri, partition_columns, target_file_bytes, codec)
    for batch in batches:
        writer.write(batch)
    return writer.close()
