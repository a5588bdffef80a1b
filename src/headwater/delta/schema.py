"""Schemas: Delta (Spark's JSON form) <-> Spark StructType <-> Arrow, and making batches fit.

Delta stores its schema as Spark's own JSON, so Spark types come straight from it. Arrow
batches handed back to Spark must match the declared schema exactly (nullability and the
``UTC`` time-zone name included), so every batch read from a file is conformed here.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
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
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from headwater.errors import HeadwaterError

PHYSICAL_NAME = "delta.columnMapping.physicalName"


def spark_schema(delta_schema_json: str | dict) -> StructType:
    data = json.loads(delta_schema_json) if isinstance(delta_schema_json, str) else delta_schema_json
    try:
        return StructType.fromJson(data)
    except Exception as exc:  # noqa: BLE001
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_TYPE",
            f"The table schema has a type Spark cannot represent: {exc}.",
            "headwater maps Delta types to Spark types one to one.",
            "Read the table with a newer reader or change the column type.",
        ) from exc


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for batches of ``schema`` (timestamps in UTC)."""
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except Exception as exc:  # noqa: BLE001
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_TYPE",
            f"A column type cannot be exchanged with Spark through Arrow: {exc}.",
            "Python data sources hand rows to Spark as Arrow batches.",
            "Cast or drop the column before reading it through headwater.",
        ) from exc


def as_nullable(schema: StructType) -> StructType:
    """Delta sinks store every column as nullable, as delta-spark does."""
    return StructType.fromJson(_nullable_json(schema.jsonValue()))


def _nullable_json(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _nullable_json(v) for k, v in node.items()}
        if "nullable" in out:
            out["nullable"] = True
        if "containsNull" in out:
            out["containsNull"] = True
        if "valueContainsNull" in out:
            out["valueContainsNull"] = True
        return out
    if isinstance(node, list):
        return [_nullable_json(v) for v in node]
    return node


def physical_name(field: StructField) -> str:
    return (field.metadata or {}).get(PHYSICAL_NAME, field.name)


def strip_field_metadata(schema: StructType) -> StructType:
    """The schema Spark sees: Delta's own field metadata (``delta.*``: column mapping,
    generation expressions, identity settings) removed; a column's ``comment`` and other
    keys of the user's stay, as delta-spark's ``toDF()`` keeps them."""
    data = schema.jsonValue()

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: clean(v) for k, v in node.items()}
            if isinstance(out.get("metadata"), dict) and "name" in out:
                out["metadata"] = {k: v for k, v in node["metadata"].items()
                                   if not k.startswith("delta.")}
            return out
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    return StructType.fromJson(clean(data))


def read_compatible(existing: DataType, read: DataType) -> bool:
    """Whether data written with schema ``existing`` reads with schema ``read`` (delta-spark's
    SchemaUtils.isReadCompatible, by name): every existing field is in ``read`` (any order,
    case-insensitively) with a compatible type; ``read`` may have more fields (read as NULL).
    Comments and nullability do not matter here: a stream keeps its schema across a
    reordering, a comment, a DROP NOT NULL, and stops at a new or dropped column."""
    if isinstance(existing, StructType) and isinstance(read, StructType):
        have = {f.name.lower(): f for f in read.fields}
        return all(f.name.lower() in have
                   and read_compatible(f.dataType, have[f.name.lower()].dataType)
                   for f in existing.fields)
    if isinstance(existing, ArrayType) and isinstance(read, ArrayType):
        return read_compatible(existing.elementType, read.elementType)
    if isinstance(existing, MapType) and isinstance(read, MapType):
        return read_compatible(existing.keyType, read.keyType) and \
            read_compatible(existing.valueType, read.valueType)
    if isinstance(existing, NullType):
        return True
    return existing == read


# --- conforming file data to the logical schema ---------------------------------------


def conform_column(arr: pa.ChunkedArray | pa.Array | None, field: StructField,
                   target: pa.DataType, length: int) -> pa.Array:
    """File column (by physical names, any int width / timestamp unit) -> Spark's Arrow type."""
    if arr is None:
        return pa.nulls(length, target)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    try:
        return _conform(arr, field.dataType, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_TYPE",
            f"Column {field.name!r} ({field.dataType.simpleString()}) stored as {arr.type} "
            f"cannot be converted to Spark's Arrow type {target}: {exc}.",
            "Rows reach Spark as Arrow batches of exactly the declared type.",
            "Cast the column to a supported type in the table, or read it with delta-rs.",
        ) from exc


def _conform(arr: pa.Array, dtype: DataType, target: pa.DataType) -> pa.Array:
    if arr.type == target:
        return arr
    if isinstance(dtype, StructType) and pa.types.is_struct(arr.type):
        present = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        flat = arr.flatten()  # children aligned with this (possibly sliced) array
        children = []
        for i, sub in enumerate(dtype.fields):
            idx = present.get(physical_name(sub))
            child = flat[idx] if idx is not None else None
            children.append(conform_column(child, sub, target.field(i).type, len(arr)))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            return arr.cast(target)
        # offsets index into the whole child array, so conform all of it (slices included)
        values = _conform(arr.values, dtype.elementType, target.value_type)
        cls = pa.LargeListArray if pa.types.is_large_list(arr.type) else pa.ListArray
        mask = arr.is_null() if arr.null_count else None
        return cls.from_arrays(arr.offsets, values, mask=mask).cast(target)
    if pa.types.is_map(target) and pa.types.is_map(arr.type):
        entries = arr.values
        keys = _conform(entries.field(0), dtype.keyType, target.key_type)
        items = _conform(entries.field(1), dtype.valueType, target.item_type)
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=mask).cast(target)
    if pa.types.is_timestamp(target):
        if pa.types.is_timestamp(arr.type):
            # INT96 / nanosecond files: truncate to Spark's microseconds, keep the instant.
            return arr.cast(target, safe=False)
    return arr.cast(target)


# --- partition values ------------------------------------------------------------------


def parse_partition_value(raw: str | None, dtype: DataType) -> Any:
    """A partition value as the Delta log stores it (a string) -> a Python value."""
    if raw is None:
        return None
    if isinstance(dtype, StringType):
        return raw
    if raw == "":
        return None
    if isinstance(dtype, (ByteType, ShortType, IntegerType, LongType)):
        return int(raw)
    if isinstance(dtype, (FloatType, DoubleType)):
        return float(raw)
    if isinstance(dtype, BooleanType):
        return raw.lower() == "true"
    if isinstance(dtype, DecimalType):
        return decimal.Decimal(raw)
    if isinstance(dtype, DateType):
        return dt.date.fromisoformat(raw[:10])
    if isinstance(dtype, (TimestampType, TimestampNTZType)):
        text = raw.replace("Z", "+00:00")
        value = dt.datetime.fromisoformat(text)
        if isinstance(dtype, TimestampType):
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            return value
        return value.replace(tzinfo=None)
    if isinstance(dtype, BinaryType):
        return raw.encode("utf-8")
    raise HeadwaterError(
        "HW_DELTA_UNSUPPORTED_TYPE",
        f"Partition column type {dtype.simpleString()} is not supported.",
        "Delta partition values are strings that headwater must parse.",
        "Partition by a primitive column (string, number, date, timestamp, boolean).",
    )


def format_partition_value(value: Any) -> str | None:
    """A Python partition value -> the string the Delta log stores."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def partition_array(value: Any, target: pa.DataType, length: int) -> pa.Array:
    if value is None:
        return pa.nulls(length, target)
    return pa.repeat(pa.scalar(value, type=target), length)
