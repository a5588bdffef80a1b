"""Schema hints and explicit schemas for file ingestion, written as Spark SQL DDL
(``"id bigint, ts timestamp, tags array<string>"``).

A small parser of its own: it runs in the data source's driver-side Python worker, where
Spark's (JVM) parser is out of reach.
"""

from __future__ import annotations

import re

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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from headwater.errors import HeadwaterError

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
