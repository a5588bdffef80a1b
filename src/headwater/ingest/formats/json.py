"""JSON files: one object per line, or (multi-line) one document per file.

The per-record path (:func:`line_records`, :func:`document_records`) decides what a record
is, for the reader and for schema inference alike. JSON lines also take a fast path
(:func:`read_fast`): pyarrow parses a whole group of files in one call with the schema given,
and returns None on any surprise so the reader falls back to the per-record path.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.json as pj

from headwater.ingest.formats.common import Malformed, Record

FAST_MAX_BYTES = 1 << 30  # pyarrow's block size is an int32; larger groups are split
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # escapes of lone surrogates: slow path


def line_records(data: bytes) -> Iterator[Record]:
    """Each non-blank line: (line number, object), each object of a line holding an array
    of objects, or Malformed (bad UTF-8, bad JSON, not an object, a lone surrogate escape)."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield Malformed(number, raw.decode("utf-8", "backslashreplace"), "not UTF-8")
            continue
        try:
            record = json.loads(text)
        except ValueError:
            yield Malformed(number, text.rstrip("\r"), "not valid JSON")
            continue
        if _SURROGATE.search(raw) and not _encodable(record):
            yield Malformed(number, text.rstrip("\r"), "a lone surrogate escape")
            continue
        if isinstance(record, list) and all(isinstance(r, dict) for r in record):
            # a line holding an array of objects (pandas' to_json(orient="records")): one
            # record per element, as Spark's JSON reader reads it
            for element in record:
                yield number, element
            continue
        if not isinstance(record, dict):
            yield Malformed(number, text.rstrip("\r"), "not a JSON object")
            continue
        yield number, record


def document_records(data: bytes) -> Iterator[Record]:
    """multiLine: the file is one JSON object or an array of objects. A file of JSON lines
    (most lines whole objects) is read as lines instead."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield Malformed(1, data.decode("utf-8", "backslashreplace"), "not UTF-8")
        return
    if not text.strip():
        return
    try:
        document = json.loads(text)
    except ValueError:
        if _looks_like_json_lines(text):
            yield from line_records(data)
        else:
            yield Malformed(1, text, "not valid JSON")
        return
    for record in document if isinstance(document, list) else [document]:
        if isinstance(record, dict):
            yield None, record
        else:
            yield Malformed(1, json.dumps(record), "not a JSON object")


def records(data: bytes, multi_line: bool) -> Iterator[Record]:
    return document_records(data) if multi_line else line_records(data)


def fast_schema(schema: pa.Schema) -> pa.Schema | None:
    """The schema pyarrow parses with: dates and naive timestamps as text (cast after);
    None when a nested field holds one (the per-record path only)."""
    fields = []
    for field in schema:
        kind = field.type
        if pa.types.is_date(kind) or (pa.types.is_timestamp(kind) and kind.tz is None):
            fields.append(pa.field(field.name, pa.string()))
        elif _has_naive_time(kind):
            return None
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


def read_fast(contents: Sequence[bytes], parse_schema: pa.Schema,
              data_schema: pa.Schema) -> tuple[pa.Table, list[int]] | None:
    """Every record of ``contents`` as a table of ``data_schema``, parsed by pyarrow in one
    call, with the number of records of each content (in order); or None if any record
    needs the per-record path.

    pyarrow must agree with the per-record path on every record it accepts, so it only gets
    groups whose every line is one whole object (it would join an object broken across lines
    or files, and crashes on a bare ``null`` line), checks UTF-8 first (it replaces invalid
    bytes silently) and reads dates and wall-clock timestamps as text (it would take a number
    as a date).
    """
    parts, counts = [], []
    for data in contents:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        count = 0
        for line in data.split(b"\n"):
            line = line.strip()
            if line:
                if line[:1] != b"{" or line[-1:] != b"}":
                    return None
                count += 1
        counts.append(count)
        parts.append(data if data.endswith(b"\n") else data + b"\n")
    blob = b"".join(parts)
    count = sum(counts)
    if not count:
        return data_schema.empty_table(), counts
    if len(blob) >= FAST_MAX_BYTES or _SURROGATE.search(blob):
        return None
    try:
        table = pj.read_json(
            io.BytesIO(blob),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(blob) + 1),
            parse_options=pj.ParseOptions(explicit_schema=parse_schema,
                                          unexpected_field_behavior="error"))
        if table.num_rows != count:  # two objects on one line, say
            return None
        arrays = [table.column(f.name).cast(f.type) for f in data_schema]
    except (pa.ArrowException, KeyError, ValueError, OverflowError):
        return None
    return pa.Table.from_arrays(arrays, schema=data_schema), counts


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


def _encodable(record: dict) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False
