"""Per-value conversion for file ingestion: a parsed JSON value (or CSV text) into its
column's Python value, or :class:`Mismatch`, so a value that does not fit is rescued instead
of nulled. Runs on the executors (plain Python, no JVM).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from headwater.errors import HeadwaterError


class Mismatch(Exception):
    """A value that does not fit its column's type: it goes to the rescued data column."""


Converter = Callable[[Any], Any]
_INT_RANGES = {ByteType: 7, ShortType: 15, IntegerType: 31, LongType: 63}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def converter(dtype: DataType, from_text: bool = False) -> Converter:
    """A function converting a parsed JSON value (or CSV text) to ``dtype``'s Python value.

    It raises Mismatch where Spark's PERMISSIVE mode would null the field silently.
    """
    if isinstance(dtype, StringType):
        return _to_string
    for kind, bits in _INT_RANGES.items():
        if isinstance(dtype, kind):
            return _int_converter(bits, from_text)
    if isinstance(dtype, (DoubleType, FloatType)):
        return _float_from_text if from_text else _to_float
    if isinstance(dtype, BooleanType):
        return _bool_from_text if from_text else _to_bool
    if isinstance(dtype, DecimalType):
        return _decimal_converter(dtype.precision, dtype.scale)
    if isinstance(dtype, TimestampType):
        return _to_timestamp
    if isinstance(dtype, TimestampNTZType):
        return _to_timestamp_ntz
    if isinstance(dtype, DateType):
        return _to_date
    if isinstance(dtype, ArrayType):
        elem = converter(dtype.elementType)

        def to_array(value: Any) -> Any:
            if not isinstance(value, list):
                raise Mismatch
            return [None if v is None else elem(v) for v in value]
        return to_array
    if isinstance(dtype, MapType):
        key, val = converter(dtype.keyType), converter(dtype.valueType)

        def to_map(value: Any) -> Any:
            if not isinstance(value, dict):
                raise Mismatch
            return [(key(k), None if v is None else val(v)) for k, v in value.items()]
        return to_map
    if isinstance(dtype, StructType):
        return StructConverter(dtype)
    raise HeadwaterError(
        "HW_INGEST_BAD_SCHEMA", f"File ingestion cannot produce columns of type "
        f"{dtype.simpleString()}.", "Only JSON-representable types can be parsed from files.",
        "Read the column as string and convert it in the query.")


class StructConverter:
    """Converts a JSON object field by field; any misfit inside rescues the whole object."""

    def __init__(self, dtype: StructType) -> None:
        self.names = [f.name for f in dtype.fields]
        self.convs = {f.name: converter(f.dataType) for f in dtype.fields}

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise Mismatch
        out = {}
        for key, item in value.items():
            conv = self.convs.get(key)
            if conv is None:
                raise Mismatch  # an unknown or case-mismatched nested field: rescue the object
            if item is None:
                out[key] = None
                continue
            out[key] = conv(item)
        return out


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, (decimal.Decimal, dt.date, dt.time)):  # from parquet files
        return value.isoformat() if not isinstance(value, decimal.Decimal) else str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _int_converter(bits: int, from_text: bool) -> Converter:
    low, high = -(1 << bits), (1 << bits) - 1

    def to_int(value: Any) -> int:
        if from_text and isinstance(value, str):
            text = value.strip()
            if not _INTEGER.fullmatch(text):
                raise Mismatch
            value = int(text)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise Mismatch
        return value
    return to_int


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mismatch
    try:
        return float(value)
    except OverflowError:  # a 400-digit integer
        raise Mismatch from None


def _float_from_text(value: Any) -> float:
    text = str(value).strip()
    if not _NUMBER.fullmatch(text):  # float() also takes "1_000", "nan", "inf", Unicode digits
        raise Mismatch
    try:
        return float(text)
    except (OverflowError, ValueError):
        raise Mismatch from None


def _to_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Mismatch
    return value


def _bool_from_text(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise Mismatch


def _decimal_converter(precision: int, scale: int) -> Converter:
    quantum = decimal.Decimal(1).scaleb(-scale)
    context = decimal.Context(prec=precision + scale + 2, traps=[decimal.InvalidOperation])

    def to_decimal(value: Any) -> decimal.Decimal:
        if isinstance(value, bool) or not isinstance(value, (int, float, str, decimal.Decimal)):
            raise Mismatch
        text = str(value).strip()
        if not _NUMBER.fullmatch(text):
            raise Mismatch
        try:
            exact = decimal.Decimal(text)
            number = exact.quantize(quantum, context=context)
        except decimal.DecimalException:
            raise Mismatch from None
        # Rounding would change the value silently: rescue it instead (as pyarrow refuses it).
        if number != exact or len(number.as_tuple().digits) > precision:
            raise Mismatch
        return number
    return to_decimal


def _parse_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):  # from parquet files
        return value
    if not isinstance(value, str):
        raise Mismatch
    try:
        return dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise Mismatch from None


def _to_timestamp(value: Any) -> dt.datetime:
    parsed = _parse_datetime(value)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=dt.UTC)  # the session time zone is UTC
    try:
        return parsed.astimezone(dt.UTC)
    except OverflowError:  # year 1 with a positive offset
        raise Mismatch from None


def _to_timestamp_ntz(value: Any) -> dt.datetime:
    parsed = _parse_datetime(value)
    if parsed.tzinfo is not None:  # an offset has no meaning for a wall-clock time: rescue it
        raise Mismatch
    return parsed


def _to_date(value: Any) -> dt.date:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if not isinstance(value, str):
        raise Mismatch
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError:
        raise Mismatch from None
