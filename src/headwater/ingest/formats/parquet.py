"""Parquet files: columns cast in one piece when every cast is lossless, else record by
record (so a value that does not fit is rescued, as in the other formats)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from headwater.ingest.formats.common import Malformed


def read_table(data: bytes) -> pa.Table | Malformed:
    try:
        return pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        return Malformed(1, f"<unreadable parquet file: {exc}>", "not valid parquet")


def cast_whole(table: pa.Table, data_schema: pa.Schema) -> list | None:
    """``table``'s columns as ``data_schema`` (absent ones null) when every column casts the
    way the per-record path would; None when a record must be looked at one by one."""
    names = table.column_names
    if not set(names) <= set(data_schema.names):
        return None  # unknown columns: rescued per record
    if not all(_lossless(table.schema.field(f.name).type, f.type)
               for f in data_schema if f.name in names):
        return None
    try:
        return [table.column(f.name).cast(f.type) if f.name in names
                else pa.nulls(table.num_rows, f.type) for f in data_schema]
    except pa.ArrowException:
        return None


def _lossless(source: pa.DataType, target: pa.DataType) -> bool:
    """Casts the per-record path would make too: same type, wider numbers, timestamp units."""
    if source == target:
        return True
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return pa.types.is_signed_integer(source) and source.bit_width <= target.bit_width
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return source.bit_width <= target.bit_width
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return (source.tz is None) == (target.tz is None)
    if pa.types.is_large_string(source) and pa.types.is_string(target):
        return True
    return False


def file_struct(data: bytes) -> StructType | None:
    """Spark types of a parquet file's columns (None if unreadable); types Spark cannot hold
    are read as text."""
    try:
        schema = pq.read_schema(io.BytesIO(data))
    except (pa.ArrowException, OSError):
        return None
    fields = []
    for field in schema:
        kind = field.type
        if pa.types.is_unsigned_integer(kind):
            dtype = LongType()
        elif pa.types.is_float16(kind):
            dtype = DoubleType()
        else:
            try:
                dtype = from_arrow_type(kind)
            except Exception:  # noqa: BLE001 - time, duration, binary views, ...
                dtype = StringType()
        if dtype.typeName() in ("binary", "time"):
            dtype = StringType()
        fields.append(StructField(field.name, dtype))
    return StructType(fields)
