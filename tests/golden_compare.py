"""Comparing tables row by row across readers: Arrow -> sorted, type-normalized rows."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa


def _value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return ("ts", value.isoformat())
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, decimal.Decimal):
        return ("dec", str(value.normalize()) if value == value else "nan")
    if isinstance(value, dict):
        return tuple(sorted((k, _value(v)) for k, v in value.items()))
    if isinstance(value, list):
        if value and isinstance(value[0], tuple) and len(value[0]) == 2:  # map as pairs
            return ("map", tuple(sorted(((_value(k), _value(v)) for k, v in value), key=repr)))
        return tuple(_value(v) for v in value)
    if isinstance(value, bytes):
        return ("bin", value.hex())
    return value


def normalize(table: pa.Table) -> list[tuple]:
    """Rows as comparable tuples, columns by name, sorted; timestamps as UTC instants."""
    names = sorted(table.column_names)
    table = table.select(names)
    out = [tuple(_value(row[n]) for n in names) for row in table.to_pylist()]
    return sorted(out, key=repr)
