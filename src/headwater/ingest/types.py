"""Types for file ingestion: inference from JSON values, add-only evolution, schema hints,
and per-value conversion whose failures are rescued instead of nulled.

Everything here is plain Python over ``pyspark.sql.types`` (no JVM): it runs in the data
source's driver-side worker (inference) and on executors (conversion).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from typing import Any, Callable

from pyspark.sql.types import (
    ArrayType, BooleanType, ByteType, DataType, DateType, DecimalType, DoubleType, FloatType,
    IntegerType, LongType, MapType, NullType, ShortType, StringType, StructField, StructType,
    TimestampNTZType, TimestampType,
)

from headwater.errors import HeadwaterError


class Mismatch(Exception):
    """A value that does not fit its column's type: it goes to the rescued data column."""


# --- inference ---------------------------------------------------------------------------


def infer_value(value: Any) -> DataType:
    """The Spark type of one JSON value, as Spark's JSON inference would choose it."""
    if value is None:
        return NullType()
    if isinstance(value, bool):
        return BooleanType()
    if isinstance(value, int):
        return LongType()
    if isinstance(value, float):
        return DoubleType()
    if isinstance(value, str):
        return StringType()
    if isinstance(value, dict):
        return StructType([StructField(k, infer_value(v)) for k, v in value.items()])
    if isinstance(value, list):
        elem: DataType = NullType()
        for item in value:
            elem = merge_types(elem, infer_value(item))
        return ArrayType(elem)
    return StringType()


def merge_types(a: DataType, b: DataType) -> DataType:
    """The narrowest type both fit (Spark's rules: long+double is double, conflicts string)."""
    if isinstance(a, NullType):
        return b
    if isinstance(b, NullType) or a == b:
        return a
    numeric = (LongType, DoubleType)
    if isinstance(a, numeric) and isinstance(b, numeric):
        return DoubleType()
    if isinstance(a, StructType) and isinstance(b, StructType):
        # Spark resolves names case-insensitively: case variants are one column, named as
        # first seen (the other spellings are rescued when read).
        fields = {f.name.lower(): (f.name, f.dataType) for f in a.fields}
        for f in b.fields:
            key = f.name.lower()
            if key in fields:
                fields[key] = (fields[key][0], merge_types(fields[key][1], f.dataType))
            else:
                fields[key] = (f.name, f.dataType)
        return StructType([StructField(n, t) for n, t in fields.values()])
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(merge_types(a.elementType, b.elementType))
    return StringType()


def finish(dtype: DataType) -> DataType:
    """Columns only ever seen as null become strings; every field nullable."""
    if isinstance(dtype, NullType):
        return StringType()
    if isinstance(dtype, StructType):
        return StructType([StructField(f.name, finish(f.dataType)) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(finish(dtype.elementType))
    return dtype


def add_new_fields(current: StructType, observed: StructType,
                   prefix: str = "") -> tuple[StructType, list[str]]:
    """``current`` plus the fields only ``observed`` has (recursively into structs).

    Existing types never change: a value that does not fit is rescued, not widened.
    Fields differing only in case count as the existing field (they are rescued too).
    """
    fields = list(current.fields)
    by_lower = {f.name.lower(): i for i, f in enumerate(fields)}
    added: list[str] = []
    for f in observed.fields:
        i = by_lower.get(f.name.lower())
        if i is None:
            fields.append(StructField(f.name, finish(f.dataType)))
            by_lower[f.name.lower()] = len(fields) - 1
            added.append(f"{prefix}{f.name}")
            continue
        existing = fields[i]
        if existing.name == f.name and isinstance(existing.dataType, StructType) \
                and isinstance(f.dataType, StructType):
            inner, more = add_new_fields(existing.dataType, f.dataType, f"{prefix}{f.name}.")
            if more:
                fields[i] = StructField(existing.name, inner, existing.nullable, existing.metadata)
                added.extend(more)
    return StructType(fields), added


# --- schema hints: a small DDL parser (no JVM in a data source worker) --------------------

_SIMPLE = {
    "string": StringType, "varchar": StringType, "char": StringType,
    "int": IntegerType, "integer": IntegerType, "bigint": LongType, "long": LongType,
    "smallint": ShortType, "short": ShortType, "tinyint": ByteType, "byte": ByteType,
    "double": DoubleType, "float": FloatType, "real": FloatType, "boolean": BooleanType,
    "bool": BooleanType, "date": DateType, "timestamp": TimestampType,
    "timestamp_ltz": TimestampType, "timestamp_ntz": TimestampNTZType,
}
_TOKEN = re.compile(r"\s*(`[^`]*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


def parse_ddl(ddl: str, what: str = "schema_hints") -> StructType:
    """``"a long, b struct<c: string>, d decimal(10,2)"`` as a StructType."""
    tokens = _tokens(ddl, what)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take(expected: str | None = None) -> str:
        nonlocal pos
        tok = peek()
        if tok is None or (expected is not None and tok.lower() != expected):
            raise _ddl_error(ddl, what, f"expected {expected or 'more'} at token {pos + 1}")
        pos += 1
        return tok

    def name() -> str:
        tok = take()
        return tok[1:-1] if tok.startswith("`") else tok

    def dtype() -> DataType:
        word = take().lower()
        if word in _SIMPLE:
            if word in ("varchar", "char") and peek() == "(":
                take("("), take(), take(")")
            return _SIMPLE[word]()
        if word in ("decimal", "dec", "numeric"):
            if peek() == "(":
                take("(")
                precision = int(take())
                scale = 0
                if peek() == ",":
                    take(",")
                    scale = int(take())
                take(")")
                if not 0 < precision <= 38 or not 0 <= scale <= precision:
                    raise _ddl_error(ddl, what, f"decimal({precision},{scale}) needs "
                                     "1 <= precision <= 38 and 0 <= scale <= precision")
                return DecimalType(precision, scale)
            return DecimalType(10, 0)
        if word == "array":
            take("<")
            elem = dtype()
            take(">")
            return ArrayType(elem)
        if word == "map":
            take("<")
            key = dtype()
            take(",")
            value = dtype()
            take(">")
            return MapType(key, value)
        if word == "struct":
            take("<")
            fields = []
            while peek() != ">":
                field_name = name()
                if peek() == ":":
                    take(":")
                fields.append(StructField(field_name, dtype()))
                if peek() == ",":
                    take(",")
            take(">")
            return StructType(fields)
        raise _ddl_error(ddl, what, f"unknown type {word!r}")

    fields = []
    while peek() is not None:
        field_name = name()
        if peek() == ":":
            take(":")
        fields.append(StructField(field_name, dtype()))
        if peek() is not None:
            take(",")
    return StructType(fields)


def _tokens(ddl: str, what: str) -> list[str]:
    tokens, pos = [], 0
    text = ddl.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise _ddl_error(ddl, what, f"unexpected text {text[pos:pos + 12]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def _ddl_error(ddl: str, what: str, detail: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_INGEST_BAD_SCHEMA", f"{what} {ddl!r} could not be parsed: {detail}.",
        "Types are written as in Spark SQL DDL.",
        "Write e.g. \"id bigint, ts timestamp, price decimal(10,2), tags array<string>\".")


def apply_hints(schema: StructType, hints: StructType) -> StructType:
    """``schema`` with the hinted columns' types replaced (or added when absent)."""
    fields = list(schema.fields)
    index = {f.name.lower(): i for i, f in enumerate(fields)}
    for hint in hints.fields:
        i = index.get(hint.name.lower())
        if i is None:
            fields.append(StructField(hint.name, hint.dataType))
        else:
            fields[i] = StructField(fields[i].name, hint.dataType)
    return StructType(fields)


# --- conversion: one value into its column's type, or Mismatch ----------------------------

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
        return parsed.replace(tzinfo=dt.timezone.utc)  # the session time zone is UTC
    try:
        return parsed.astimezone(dt.timezone.utc)
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
