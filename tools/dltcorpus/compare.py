"""A pipeline's tables against the answers: each Delta table read with deltalake (delta-rs,
not Spark), its rows normalised and compared with the expected rows as multisets.

Normalising makes the comparison about values, not about the Arrow types a writer chose:
numbers compare at 6 significant digits (float32 columns, averages), timestamps as UTC, structs
as sorted key/value pairs, JSON text as the parsed value. Strings and numbers stay distinct.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from dltcorpus.cases.base import Row, TableCheck


@dataclass
class CheckResult:
    table: str
    ok: bool
    detail: str   # "12 rows" or what differs

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "ok": self.ok, "detail": self.detail}


def normal(value: Any) -> Any:
    """A hashable, type-insensitive form of a value (see the module's docstring)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float | Decimal):
        number = float(value)
        if math.isnan(number):
            return ("n", "nan")
        if isinstance(value, int) or (number.is_integer() and abs(number) < 1e15):
            return ("n", str(int(number)) if number.is_integer() else f"{number:.6g}")
        return ("n", f"{number:.6g}")
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return ("t", value.isoformat(sep=" "))
    if isinstance(value, date):
        return ("d", value.isoformat())
    if isinstance(value, bytes):
        return ("x", value.hex())
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, dict):
        return ("r", tuple(sorted((str(k), normal(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("l", tuple(normal(v) for v in value))
    return ("?", repr(value))


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_table(storage: Path, table: str) -> list[Row] | None:
    """The table's rows (``schema.table`` lives in ``<storage>/schema/table``); None when
    there is no Delta table there."""
    path = storage.joinpath(*table.split("."))
    if not (path / "_delta_log").is_dir():
        return None
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def check(storage: Path, expected: TableCheck) -> CheckResult:
    actual = read_table(storage, expected.table)
    if actual is None:
        return CheckResult(expected.table, False, "no such table")
    columns = expected.columns or (tuple(expected.rows[0]) if expected.rows else ())
    if not columns and actual:
        columns = tuple(actual[0])
    missing_cols = [c for c in columns if actual and c not in actual[0]]
    if missing_cols:
        return CheckResult(expected.table, False,
                           f"columns {missing_cols} missing (has {sorted(actual[0])})")

    def key(row: Row) -> tuple[Any, ...]:
        return tuple(normal(_parsed(row.get(c)) if c in expected.json_columns else row.get(c))
                     for c in columns)

    got = Counter(key(r) for r in actual)
    if expected.limit is not None:
        return _check_limit(expected, columns, got, key)
    want = Counter(key(r) for r in expected.rows)
    if got == want:
        return CheckResult(expected.table, True, f"{len(actual)} rows")
    return CheckResult(expected.table, False, _difference(columns, got, want, len(actual),
                                                          len(expected.rows)))


def _check_limit(expected: TableCheck, columns: tuple[str, ...], got: Counter[Any],
                 key: Any) -> CheckResult:
    """ORDER BY col DESC LIMIT n: n rows (or all candidates), each a candidate, and every
    candidate above the n-th value present."""
    n, column = expected.limit  # type: ignore[misc]
    candidates = sorted(expected.rows, key=lambda r: r[column], reverse=True)
    size = min(n, len(candidates))
    cut = candidates[size - 1][column] if size else None
    want_all = Counter(key(r) for r in candidates)
    must = Counter(key(r) for r in candidates if cut is not None and r[column] > cut)
    count = sum(got.values())
    problems = []
    if count != size:
        problems.append(f"{count} rows, expected {size}")
    extra = got - want_all
    if extra:
        problems.append(f"rows that are no candidates, e.g. {_show(columns, next(iter(extra)))}")
    lacking = must - got
    if lacking:
        problems.append(f"missing top rows, e.g. {_show(columns, next(iter(lacking)))}")
    if problems:
        return CheckResult(expected.table, False, "; ".join(problems))
    return CheckResult(expected.table, True, f"{count} rows (top {n} by {column})")


def _difference(columns: tuple[str, ...], got: Counter[Any], want: Counter[Any], n_got: int,
                n_want: int) -> str:
    parts = [f"{n_got} rows, expected {n_want}"]
    lacking = want - got
    extra = got - want
    if lacking:
        parts.append(f"{sum(lacking.values())} expected rows missing, e.g. "
                     f"{_show(columns, next(iter(lacking)))}")
    if extra:
        parts.append(f"{sum(extra.values())} unexpected, e.g. {_show(columns, next(iter(extra)))}")
    return "; ".join(parts)


def _show(columns: tuple[str, ...], values: tuple[Any, ...]) -> str:
    def plain(v: Any) -> Any:
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
            tag, inner = v
            if tag == "r":
                return {k: plain(x) for k, x in inner}
            if tag == "l":
                return [plain(x) for x in inner]
            return inner
        return v
    text = json.dumps({c: plain(v) for c, v in zip(columns, values)}, default=str)
    return text if len(text) < 240 else text[:237] + "..."
