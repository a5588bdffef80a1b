"""Schema inference for file ingestion: Spark's types for JSON values and CSV text, merged
over a sample of files; and add-only evolution (new fields join, existing types never change).

Inference reads files through the same format code as the reader (``ingest/formats``), so a
record the reader would call malformed is not used to infer types either. Plain Python over
``pyspark.sql.types``: it runs in the data source's driver-side worker, no JVM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from headwater.ingest.formats import csv as csv_format
from headwater.ingest.formats import json as json_format
from headwater.ingest.formats import parquet as parquet_format
from headwater.ingest.formats.common import ParseSettings, records_only


def infer_schema(samples: Sequence[tuple[str, bytes]], settings: ParseSettings) -> StructType:
    """The schema of a sample of files (JSON values typed as Spark infers them)."""
    merged: DataType = StructType([])
    for _, data in samples:
        if settings.fmt == "parquet":
            struct = parquet_format.file_struct(data)
            if struct is not None:
                merged = merge_types(merged, struct)
        elif settings.fmt == "csv":
            for record in records_only(csv_format.records(data, settings.sep, settings.header)):
                merged = merge_types(merged, StructType(
                    [StructField(k, infer_text(v)) for k, v in record.items()]))
        else:
            for record in records_only(json_format.records(data, settings.multi_line)):
                merged = merge_types(merged, infer_value(record))
    result = finish(merged)
    assert isinstance(result, StructType)
    return result


def infer_text(value: str | None) -> DataType:
    """The Spark type of one CSV value: long, double, boolean, timestamp, else string."""
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
    if len(text) >= 16 and text[4:5] == "-":
        try:
            dt.datetime.fromisoformat(text)
            return TimestampType()
        except ValueError:
            pass
    return StringType()



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
