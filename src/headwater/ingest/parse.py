"""Files into Arrow batches of a fixed schema, with nothing dropped silently.

Each record either fits the schema, or keeps every misfit as JSON in the rescued data column
(with ``_file_path``): a value of the wrong type, an unknown or case-mismatched field, or a
malformed record (``_corrupt_record`` with its ``_line``). Unknown fields are also collected
as new columns, for schema evolution.

The formats (``ingest/formats``) say what the records of a file are; this module fits them
to the schema. JSON lines take a fast path first: pyarrow parses a whole group of files in
one call, and any surprise (a bad line, a new field, a type mismatch, invalid UTF-8) sends the
group back, halved, until the files that need it go through the per-record path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StringType, StructField, StructType

from headwater.delta.schema import arrow_schema
from headwater.errors import HeadwaterError
from headwater.ingest.convert import Mismatch, converter
from headwater.ingest.file_metadata import METADATA_FIELD, metadata_array
from headwater.ingest.formats import csv as csv_format
from headwater.ingest.formats import json as json_format
from headwater.ingest.formats import parquet as parquet_format
from headwater.ingest.formats.common import (
    BATCH_ROWS,
    FileEntry,
    Malformed,
    ParseSettings,
    ReadBytes,
    Record,
    sample,
    without_bom,
)
from headwater.ingest.infer import infer_value, merge_types


class RecordParser:
    """Turns files into RecordBatches of ``schema`` (+ the rescued column, + the ``_metadata``
    column last when ``metadata``: see ingest/file_metadata.py)."""

    def __init__(self, schema: StructType, settings: ParseSettings,
                 metadata: bool = False) -> None:
        self.schema = schema
        self.settings = settings
        self.metadata = metadata
        self.names = schema.fieldNames()
        self.exact = {n: i for i, n in enumerate(self.names)}
        self.lower = {n.lower() for n in self.names}
        self.json_convs = [converter(f.dataType) for f in schema.fields]
        self.text_convs = [converter(f.dataType, from_text=True) for f in schema.fields]
        full = StructType(list(schema.fields))
        if settings.rescued_column:
            full = full.add(StructField(settings.rescued_column, StringType()))
        if metadata:
            full = full.add(METADATA_FIELD)
        self.out_schema = arrow_schema(full)
        self.data_schema = arrow_schema(schema)
        self.fast_schema = json_format.fast_schema(self.data_schema)
        self.observed = StructType([])  # fields seen that the schema lacks (for evolution)
        self.new_in: str | None = None  # first file with a new field
        self.rows = self.rescued_rows = self.malformed = 0
        self._entry = FileEntry(0, "", 0)  # the file being read record by record
        self._reset()

    # --- output buffer ---------------------------------------------------------------

    def _reset(self) -> None:
        self.cols: list[list[Any]] = [[] for _ in self.names]
        self.rescued: list[str | None] = []
        self.row_files: list[FileEntry] = []  # the file of each row (its _metadata)

    def _flush(self) -> pa.RecordBatch | None:
        if not self.rescued:
            return None
        arrays = []
        for field, values in zip(self.data_schema, self.cols):
            arrays.append(pa.array(values, type=field.type))
        if self.settings.rescued_column:
            arrays.append(pa.array(self.rescued, type=pa.string()))
        if self.metadata:
            files: list[FileEntry] = []
            counts: list[int] = []
            for entry in self.row_files:  # runs of rows from one file
                if files and files[-1] is entry:
                    counts[-1] += 1
                else:
                    files.append(entry)
                    counts.append(1)
            arrays.append(metadata_array(files, counts))
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)

    def _whole(self, arrays: list, rows: int, files: Sequence[FileEntry],
               counts: Sequence[int]) -> list[pa.RecordBatch]:
        """Batches of columns that needed no per-record look (the rescued column null);
        ``counts[i]`` of the rows came from ``files[i]``, in order."""
        if self.settings.rescued_column:
            arrays = [*arrays, pa.nulls(rows, pa.string())]
        if self.metadata:
            arrays = [*arrays, metadata_array(files, counts)]
        self.rows += rows
        return pa.Table.from_arrays(arrays, schema=self.out_schema) \
            .to_batches(max_chunksize=BATCH_ROWS)

    # --- files -----------------------------------------------------------------------

    def parse(self, files: Sequence[FileEntry], read_bytes: ReadBytes) -> Iterator[pa.RecordBatch]:
        """Batches for ``files``; ``read_bytes(entry)`` returns a file's content or None."""
        read_bytes = without_bom(read_bytes)
        settings = self.settings
        if settings.fmt == "json" and not settings.multi_line:
            contents = [(f, read_bytes(f)) for f in files]
            yield from self._json_lines_group([(f, c) for f, c in contents if c is not None])
        else:
            for entry in files:
                data = read_bytes(entry)
                if data is None:
                    continue
                self._entry = entry
                if settings.fmt == "parquet":
                    yield from self._parquet_file(entry, data)
                elif settings.fmt == "csv":
                    names = None if settings.header else self.names
                    self._records(entry.path, csv_format.records(
                        data, settings.sep, settings.header, names), self.text_convs)
                else:
                    self._records(entry.path, json_format.document_records(data),
                                  self.json_convs)
                if len(self.rescued) >= BATCH_ROWS:
                    yield self._flush()
        batch = self._flush()
        if batch is not None:
            yield batch

    def _json_lines_group(self, group: list[tuple[FileEntry, bytes]]) -> Iterator[pa.RecordBatch]:
        if not group:
            return
        found = None
        if self.fast_schema is not None and \
                sum(len(d) for _, d in group) < json_format.FAST_MAX_BYTES:
            found = json_format.read_fast([d for _, d in group], self.fast_schema,
                                          self.data_schema)
        if found is not None:
            table, counts = found
            if table.num_rows:
                yield from self._whole(list(table.columns), table.num_rows,
                                       [f for f, _ in group], counts)
            return
        if len(group) > 1:
            middle = len(group) // 2
            yield from self._json_lines_group(group[:middle])
            yield from self._json_lines_group(group[middle:])
            return
        entry, data = group[0]
        self._entry = entry
        self._records(entry.path, json_format.line_records(data), self.json_convs)
        if len(self.rescued) >= BATCH_ROWS:
            yield self._flush()

    def _parquet_file(self, entry: FileEntry, data: bytes) -> Iterator[pa.RecordBatch]:
        table = parquet_format.read_table(data)
        if isinstance(table, Malformed):
            self._records(entry.path, iter([table]), self.json_convs)
            return
        arrays = parquet_format.cast_whole(table, self.data_schema)
        if arrays is not None:
            yield from self._whole(arrays, table.num_rows, [entry], [table.num_rows])
            return
        for record in table.to_pylist():
            self._record(record, entry.path, self.json_convs)

    # --- records -----------------------------------------------------------------------

    def _records(self, path: str, items: Iterator[Record], convs: list) -> None:
        for item in items:
            if isinstance(item, Malformed):
                self._malformed(path, item)
            else:
                self._record(item[1], path, convs, item[0])

    def _record(self, record: dict, path: str, convs: list, line: int | None = None) -> None:
        row: list[Any] = [None] * len(self.names)
        rescued: dict[str, Any] = {}
        evolving = self.settings.evolution in ("addNewColumns", "failOnNewColumns")
        for key, value in record.items():
            i = self.exact.get(key)
            if i is not None:
                if value is None:
                    continue
                try:
                    row[i] = convs[i](value)
                except Mismatch:
                    rescued[key] = value
                    if evolving and isinstance(value, dict):
                        self._observe(key, value, path)  # maybe a new nested field
                continue
            if key.lower() not in self.lower and evolving and key != self.settings.rescued_column:
                self._observe(key, value, path)
            rescued[key] = value
        for column, value in zip(self.cols, row):
            column.append(value)
        self.row_files.append(self._entry)
        self.rows += 1
        if rescued:
            self._rescue(rescued, path, line)
        else:
            self.rescued.append(None)

    def _observe(self, key: str, value: Any, path: str) -> None:
        self.observed = merge_types(self.observed,
                                    StructType([StructField(key, infer_value(value))]))
        if self.new_in is None:
            self.new_in = path

    def _rescue(self, rescued: dict[str, Any], path: str, line: int | None) -> None:
        if not self.settings.rescued_column:
            where = f"{path}:{line}" if line else path
            raise HeadwaterError(
                "HW_INGEST_BAD_RECORD",
                f"A record in {where} does not fit the schema: {sample(rescued)}.",
                "The rescued data column is off, so the record cannot be kept.",
                "Turn rescued data on (rescued_data_column='_rescued_data', the default), "
                "or fix the file.")
        rescued["_file_path"] = path
        if line is not None:
            rescued["_line"] = line
        self.rescued.append(json.dumps(rescued, ensure_ascii=False, default=str))
        self.rescued_rows += 1

    def _malformed(self, path: str, bad: Malformed) -> None:
        for column in self.cols:
            column.append(None)
        self.row_files.append(self._entry)
        self.rows += 1
        self.malformed += 1
        self._rescue({"_corrupt_record": bad.text, "_error": bad.why}, path, bad.line)
