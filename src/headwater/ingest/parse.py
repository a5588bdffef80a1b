"""Files into Arrow batches of a fixed schema, with nothing dropped silently.

Each record either fits the schema, or keeps every misfit as JSON in the rescued data column
(with ``_file_path``): a value of the wrong type, an unknown or case-mismatched field, or a
malformed record (``_corrupt_record`` with its ``_line``). Unknown fields are also collected
as new columns, for schema evolution.

JSON lines take a fast path first: pyarrow parses a whole group of files in one call with the
schema given, and any surprise (a bad line, a new field, a type mismatch, invalid UTF-8) sends
the group back, halved, until the files that need it go through the per-record path.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa

from headwater.delta.schema import arrow_schema
from headwater.errors import HeadwaterError
from headwater.ingest.types import (
    Mismatch, StructType, converter, infer_value, merge_types,
)
from pyspark.sql.types import StringType, StructField

BATCH_ROWS = 65536
_FAST_MAX_BYTES = 1 << 30  # pyarrow's block size is an int32; larger groups are split
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # escapes of lone surrogates: slow path


def _fast_schema(schema: pa.Schema) -> pa.Schema | None:
    """The schema pyarrow parses with: dates and naive timestamps as text (cast after)."""
    fields = []
    for field in schema:
        kind = field.type
        if pa.types.is_date(kind) or (pa.types.is_timestamp(kind) and kind.tz is None):
            fields.append(pa.field(field.name, pa.string()))
        elif _has_naive_time(kind):
            return None  # nested: the per-record path only
        else:
            fields.append(field)
    return pa.schema(fields)


def _has_naive_time(kind: pa.DataType) -> bool:
    if pa.types.is_date(kind) or (pa.types.is_timestamp(kind) and kind.tz is None):
        return True
    if pa.types.is_struct(kind):
        return any(_has_naive_time(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_naive_time(kind.value_type)
    if pa.types.is_map(kind):
        return _has_naive_time(kind.key_type) or _has_naive_time(kind.item_type)
    return False


@dataclass(frozen=True)
class FileEntry:
    seq: int
    path: str
    size: int
    archived_to: str | None = None


@dataclass
class ParseSettings:
    fmt: str = "json"                       # json | csv | parquet
    rescued_column: str | None = "_rescued_data"
    evolution: str = "addNewColumns"        # addNewColumns | rescue | failOnNewColumns | none
    multi_line: bool = False
    header: bool = True
    sep: str = ","


class RecordParser:
    """Turns files into RecordBatches of ``schema`` (+ the rescued column, last)."""

    def __init__(self, schema: StructType, settings: ParseSettings) -> None:
        self.schema = schema
        self.settings = settings
        self.names = schema.fieldNames()
        self.exact = {n: i for i, n in enumerate(self.names)}
        self.lower = {n.lower() for n in self.names}
        self.json_convs = [converter(f.dataType) for f in schema.fields]
        self.text_convs = [converter(f.dataType, from_text=True) for f in schema.fields]
        full = StructType(list(schema.fields))
        if settings.rescued_column:
            full = full.add(StructField(settings.rescued_column, StringType()))
        self.out_schema = arrow_schema(full)
        self.data_schema = arrow_schema(schema)
        self.fast_schema = _fast_schema(self.data_schema)
        self.observed = StructType([])  # fields seen that the schema lacks (for evolution)
        self.new_in: str | None = None  # first file with a new field
        self.rows = self.rescued_rows = self.malformed = 0
        self._reset()

    # --- output buffer ---------------------------------------------------------------

    def _reset(self) -> None:
        self.cols: list[list[Any]] = [[] for _ in self.names]
        self.rescued: list[str | None] = []

    def _flush(self) -> pa.RecordBatch | None:
        if not self.rescued:
            return None
        arrays = []
        for field, values in zip(self.data_schema, self.cols):
            arrays.append(pa.array(values, type=field.type))
        if self.settings.rescued_column:
            arrays.append(pa.array(self.rescued, type=pa.string()))
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)

    # --- files -----------------------------------------------------------------------

    def parse(self, files: Sequence[FileEntry], read_bytes) -> Iterator[pa.RecordBatch]:
        """Batches for ``files``; ``read_bytes(entry)`` returns a file's content or None."""
        read_bytes = _without_bom(read_bytes)
        if self.settings.fmt == "json" and not self.settings.multi_line:
            contents = [(f, read_bytes(f)) for f in files]
            yield from self._json_lines_group([(f, c) for f, c in contents if c is not None])
        else:
            for entry in files:
                data = read_bytes(entry)
                if data is None:
                    continue
                if self.settings.fmt == "csv":
                    self._csv_file(entry.path, data)
                elif self.settings.fmt == "parquet":
                    yield from self._parquet_file(entry.path, data)
                else:
                    self._json_document(entry.path, data)
                if len(self.rescued) >= BATCH_ROWS:
                    yield self._flush()
        batch = self._flush()
        if batch is not None:
            yield batch

    def _json_lines_group(self, group: list[tuple[FileEntry, bytes]]) -> Iterator[pa.RecordBatch]:
        if not group:
            return
        fast = self._json_fast(group) if sum(len(d) for _, d in group) < _FAST_MAX_BYTES \
            else None
        if fast is not None:
            yield from fast
            return
        if len(group) > 1:
            middle = len(group) // 2
            yield from self._json_lines_group(group[:middle])
            yield from self._json_lines_group(group[middle:])
            return
        entry, data = group[0]
        self._json_lines_slow(entry.path, data)
        if len(self.rescued) >= BATCH_ROWS:
            yield self._flush()

    def _json_fast(self, group: list[tuple[FileEntry, bytes]]) -> list[pa.RecordBatch] | None:
        """The group parsed by pyarrow in one call, or None if any record needs the slow path.

        pyarrow must agree with the per-record path on every record it accepts, so it only
        gets groups whose every line is one whole object (it would join an object broken
        across lines or files, and crashes on a bare ``null`` line), checks UTF-8 first (it
        replaces invalid bytes silently) and reads dates and wall-clock timestamps as text
        (it would take a number as a date).
        """
        import pyarrow.json as pj

        if self.fast_schema is None:
            return None
        parts, records = [], 0
        for _, data in group:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                return None
            for line in data.split(b"\n"):
                line = line.strip()
                if line:
                    if line[:1] != b"{" or line[-1:] != b"}":
                        return None
                    records += 1
            parts.append(data if data.endswith(b"\n") else data + b"\n")
        blob = b"".join(parts)
        if not records:
            return []
        if len(blob) >= _FAST_MAX_BYTES or _SURROGATE.search(blob):
            return None
        try:
            table = pj.read_json(
                io.BytesIO(blob),
                read_options=pj.ReadOptions(use_threads=False, block_size=len(blob) + 1),
                parse_options=pj.ParseOptions(explicit_schema=self.fast_schema,
                                              unexpected_field_behavior="error"))
            if table.num_rows != records:  # two objects on one line, say
                return None
            arrays = [table.column(f.name).cast(f.type) for f in self.data_schema]
        except (pa.ArrowException, KeyError, ValueError, OverflowError):
            return None
        if self.settings.rescued_column:
            arrays.append(pa.nulls(table.num_rows, pa.string()))
        out = pa.Table.from_arrays(arrays, schema=self.out_schema)
        self.rows += table.num_rows
        return out.to_batches(max_chunksize=BATCH_ROWS)

    def _json_lines_slow(self, path: str, data: bytes) -> None:
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._malformed(path, number, raw.decode("utf-8", "backslashreplace"),
                                "not UTF-8")
                continue
            try:
                record = json.loads(text)
            except ValueError:
                self._malformed(path, number, text.rstrip("\r"), "not valid JSON")
                continue
            if not isinstance(record, dict):
                self._malformed(path, number, text.rstrip("\r"), "not a JSON object")
                continue
            if _SURROGATE.search(raw) and not _encodable(record):
                self._malformed(path, number, text.rstrip("\r"), "a lone surrogate escape")
                continue
            self._record(record, path, self.json_convs, number)

    def _json_document(self, path: str, data: bytes) -> None:
        """multiLine: the file is one JSON object or an array of objects. A file of JSON
        lines (most lines whole objects) is read as lines instead."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self._malformed(path, 1, data.decode("utf-8", "backslashreplace"), "not UTF-8")
            return
        if not text.strip():
            return
        try:
            document = json.loads(text)
        except ValueError:
            if _looks_like_json_lines(text):
                self._json_lines_slow(path, data)
            else:
                self._malformed(path, 1, text, "not valid JSON")
            return
        records = document if isinstance(document, list) else [document]
        for record in records:
            if isinstance(record, dict):
                self._record(record, path, self.json_convs)
            else:
                self._malformed(path, 1, json.dumps(record), "not a JSON object")

    def _csv_file(self, path: str, data: bytes) -> None:
        text = data.decode("utf-8", "surrogateescape")  # bad bytes: found per row below
        lines = _split_lines(text)
        reader = csv.reader(iter(lines), delimiter=self.settings.sep)
        header: list[str] | None = None if self.settings.header else list(self.names)
        consumed = 0
        for row in _csv_rows(reader, path):
            raw = "".join(lines[consumed:reader.line_num]).rstrip("\r\n")
            first_line = consumed + 1
            consumed = reader.line_num
            if row is None:
                self._malformed(path, first_line, _visible(raw), "not valid CSV")
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = _header(row)
                continue
            if any("\udc80" <= ch <= "\udcff" for ch in raw):
                self._malformed(path, first_line, _visible(raw), "not UTF-8")
                continue
            if len(row) != len(header):
                self._malformed(path, first_line, raw,
                                f"{len(row)} fields where the header has {len(header)}")
                continue
            record = {name: (None if value == "" else value) for name, value in zip(header, row)}
            self._record(record, path, self.text_convs, first_line)

    def _parquet_file(self, path: str, data: bytes) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(io.BytesIO(data))
        except (pa.ArrowException, OSError) as exc:
            self._malformed(path, 1, f"<unreadable parquet file: {exc}>", "not valid parquet")
            return
        names = table.column_names
        if set(names) <= set(self.names):
            arrays = None
            if all(_lossless(table.schema.field(f.name).type, f.type)
                   for f in self.data_schema if f.name in names):
                try:
                    arrays = [table.column(f.name).cast(f.type) if f.name in names
                              else pa.nulls(table.num_rows, f.type) for f in self.data_schema]
                except pa.ArrowException:
                    arrays = None
            if arrays is not None:
                if self.settings.rescued_column:
                    arrays.append(pa.nulls(table.num_rows, pa.string()))
                self.rows += table.num_rows
                yield from pa.Table.from_arrays(arrays, schema=self.out_schema).to_batches()
                return
        for record in table.to_pylist():
            self._record(record, path, self.json_convs)

    # --- records -----------------------------------------------------------------------

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
                f"A record in {where} does not fit the schema: "
                f"{_sample(rescued)}.",
                "The rescued data column is off, so the record cannot be kept.",
                "Turn rescued data on (rescued_data_column='_rescued_data', the default), "
                "or fix the file.")
        rescued["_file_path"] = path
        if line is not None:
            rescued["_line"] = line
        self.rescued.append(json.dumps(rescued, ensure_ascii=False, default=str))
        self.rescued_rows += 1

    def _malformed(self, path: str, line: int, text: str, why: str) -> None:
        for column in self.cols:
            column.append(None)
        self.rows += 1
        self.malformed += 1
        self._rescue({"_corrupt_record": text, "_error": why}, path, line)


def _looks_like_json_lines(text: str) -> bool:
    """Most of the first lines are whole objects on their own (a broken line may come
    first); in a pretty-printed document hardly any line is."""
    lines = [ln for ln in text.split("\n", 64)[:64] if ln.strip()][:20]
    whole = 0
    for line in lines:
        try:
            whole += isinstance(json.loads(line), dict)
        except ValueError:
            pass
    return bool(lines) and whole * 2 >= len(lines)


def _lossless(source: pa.DataType, target: pa.DataType) -> bool:
    """Casts the per-record path would make too: same type, wider numbers, timestamp units."""
    if source == target:
        return True
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return pa.types.is_signed_integer(source) and source.bit_width <= target.bit_width
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return source.bit_width <= target.bit_width
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return (source.tz is None) == (target.tz is None)
    if pa.types.is_large_string(source) and pa.types.is_string(target):
        return True
    return False


def _encodable(record: dict) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _split_lines(text: str) -> list[str]:
    """Lines ending at "\\n" only (str.splitlines also splits at form feeds, U+2028, ...)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _without_bom(read_bytes):
    """Files saved by Windows tools often start with a UTF-8 byte order mark: drop it."""
    def read(entry):
        data = read_bytes(entry)
        return data[3:] if data is not None and data.startswith(b"\xef\xbb\xbf") else data
    return read


def _header(row: list[str]) -> list[str]:
    """Column names from a CSV header: visible, and a repeated name gets its position."""
    names, seen = [], set()
    for i, name in enumerate(row):
        name = _visible(name.strip())
        if name in seen:
            name = f"{name}_{i}"  # an unknown column: rescued, never lost
        seen.add(name)
        names.append(name)
    return names


def _csv_rows(reader, path: str) -> Iterator[list[str] | None]:
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error:
            yield None


def _visible(text: str) -> str:
    """Text with undecodable bytes shown as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _sample(values: dict[str, Any]) -> str:
    text = json.dumps(values, ensure_ascii=False, default=str)
    return text if len(text) <= 300 else text[:300] + "..."


def infer_schema(samples: Sequence[tuple[str, bytes]], settings: ParseSettings) -> StructType:
    """The schema of a sample of files (JSON values typed as Spark infers them)."""
    from headwater.ingest.types import finish

    merged = StructType([])
    for path, data in samples:
        for record in _sample_records(path, data, settings):
            merged = merge_types(merged, _infer_record(record, settings.fmt))
    return finish(merged)


def _parquet_struct(schema: pa.Schema) -> StructType:
    """Spark types of a parquet file's columns; ones Spark cannot hold are read as text."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import DoubleType, LongType

    fields = []
    for field in schema:
        kind = field.type
        if pa.types.is_unsigned_integer(kind):
            dtype = LongType()
        elif pa.types.is_float16(kind):
            dtype = DoubleType()
        else:
            try:
                dtype = from_arrow_type(kind)
            except Exception:  # noqa: BLE001 - time, duration, binary views, ...
                dtype = StringType()
        if dtype.typeName() in ("binary", "time"):
            dtype = StringType()
        fields.append(StructField(field.name, dtype))
    return StructType(fields)


def _infer_record(record: Any, fmt: str):
    if isinstance(record, StructType):
        return record
    if fmt != "csv":
        return infer_value(record)
    return StructType([StructField(k, _infer_text(v)) for k, v in record.items()])


def _infer_text(value: str | None):
    from pyspark.sql.types import BooleanType, DoubleType, LongType, NullType, TimestampType

    if value is None:
        return NullType()
    text = value.strip()
    for parse, dtype in ((int, LongType), (float, DoubleType)):
        try:
            parse(text)
            return dtype()
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return BooleanType()
    import datetime as dt

    if len(text) >= 16 and text[4:5] == "-":
        try:
            dt.datetime.fromisoformat(text)
            return TimestampType()
        except ValueError:
            pass
    return StringType()


def _sample_records(path: str, data: bytes, settings: ParseSettings) -> Iterator[dict]:
    if settings.fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            schema = pq.read_schema(io.BytesIO(data))
        except (pa.ArrowException, OSError):
            return
        yield _parquet_struct(schema)  # a StructType: merged as the file's type
        return
    text = data.decode("utf-8", "replace")
    if settings.fmt == "csv":
        reader = csv.reader(iter(_split_lines(text)), delimiter=settings.sep)
        header = None
        for row in _csv_rows(reader, path):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = _header(row) if settings.header else [f"_c{i}" for i in range(len(row))]
                if settings.header:
                    continue
            if len(row) == len(header):
                yield {n: (None if v == "" else v) for n, v in zip(header, row)}
        return
    if settings.multi_line:
        try:
            document = json.loads(text)
        except ValueError:
            return
        for record in document if isinstance(document, list) else [document]:
            if isinstance(record, dict):
                yield record
        return
    for line in text.split("\n"):
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record
