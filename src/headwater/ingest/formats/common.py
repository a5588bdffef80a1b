"""What the file formats share: the file and parse settings types, malformed records, and
small text helpers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union

from headwater.conf.layout import RESCUED_DATA

BATCH_ROWS = 65536


@dataclass(frozen=True)
class FileEntry:
    seq: int
    path: str
    size: int
    archived_to: str | None = None
    mtime_ns: int = 0  # when it was listed (the _metadata column's file_modification_time)


@dataclass
class ParseSettings:
    fmt: str = "json"                       # json | csv | parquet
    rescued_column: str | None = RESCUED_DATA
    evolution: str = "addNewColumns"        # addNewColumns | rescue | failOnNewColumns | none
    multi_line: bool = False
    header: bool = True
    sep: str = ","


@dataclass(frozen=True)
class Malformed:
    """A record that cannot be read at all: kept as ``_corrupt_record`` with ``_error``."""

    line: int
    text: str
    why: str


# What a format yields per record: (line number or None, the record's fields) or Malformed.
Record = Union[tuple[int | None, dict], Malformed]
ReadBytes = Callable[[FileEntry], bytes | None]


def without_bom(read_bytes: ReadBytes) -> ReadBytes:
    """Files saved by Windows tools often start with a UTF-8 byte order mark: drop it."""
    def read(entry: FileEntry) -> bytes | None:
        data = read_bytes(entry)
        return data[3:] if data is not None and data.startswith(b"\xef\xbb\xbf") else data
    return read


def split_lines(text: str) -> list[str]:
    """Lines ending at "\\n" only (str.splitlines also splits at form feeds, U+2028, ...)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def visible(text: str) -> str:
    """Text with undecodable bytes shown as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def sample(values: dict[str, Any]) -> str:
    """A record, shortened for an error message."""
    text = json.dumps(values, ensure_ascii=False, default=str)
    return text if len(text) <= 300 else text[:300] + "..."


def records_only(items: Iterator[Record]) -> Iterator[dict]:
    """The well-formed records (schema inference skips malformed ones)."""
    for item in items:
        if not isinstance(item, Malformed):
            yield item[1]
