"""CSV files: a header row (or given names), one record per row, every value text.

:func:`records` is what the reader converts and what schema inference types, so both agree
on rows, names and which rows are malformed (broken quoting, bad UTF-8, a wrong field count).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence

from headwater.ingest.formats.common import Malformed, Record, split_lines, visible


def records(data: bytes, sep: str, header: bool,
            names: Sequence[str] | None = None) -> Iterator[Record]:
    """(first line number, {column: text or None}) per row, or Malformed.

    header: the first non-blank row names the columns. Without it the columns are ``names``
    (the schema's), or ``_c0, _c1, ...`` as many as the first row has (inference).
    """
    text = data.decode("utf-8", "surrogateescape")  # bad bytes: found per row below
    lines = split_lines(text)
    reader = csv.reader(iter(lines), delimiter=sep)
    columns: list[str] | None = None if header or names is None else list(names)
    consumed = 0
    for row in _rows(reader):
        raw = "".join(lines[consumed:reader.line_num]).rstrip("\r\n")
        first_line = consumed + 1
        consumed = reader.line_num
        if row is None:
            yield Malformed(first_line, visible(raw), "not valid CSV")
            continue
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if columns is None:
            if header:
                columns = _header(row)
                continue
            columns = [f"_c{i}" for i in range(len(row))]
        if any("\udc80" <= ch <= "\udcff" for ch in raw):
            yield Malformed(first_line, visible(raw), "not UTF-8")
            continue
        if len(row) != len(columns):
            yield Malformed(first_line, raw,
                            f"{len(row)} fields where the header has {len(columns)}")
            continue
        yield first_line, {name: (None if value == "" else value)
                           for name, value in zip(columns, row)}


def _header(row: list[str]) -> list[str]:
    """Column names from a CSV header: visible, and a repeated name gets its position."""
    names, seen = [], set()
    for i, name in enumerate(row):
        name = visible(name.strip())
        if name in seen:
            name = f"{name}_{i}"  # an unknown column: rescued, never lost
        seen.add(name)
        names.append(name)
    return names


def _rows(reader) -> Iterator[list[str] | None]:
    """The reader's rows; None for a row the csv module cannot parse."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error:
            yield None
