"""Conforming file columns to Spark's Arrow types: slices, physical names, units."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from headwater.delta.schema import arrow_schema, conform_column

PHYS = {"delta.columnMapping.physicalName": "col-1"}


def test_sliced_struct_by_physical_name():
    inner = StructType([StructField("a", LongType(), True, PHYS)])
    field = StructField("s", inner)
    target = arrow_schema(StructType([field])).field(0).type
    data = pa.array([{"col-1": i, "a": -1} for i in range(6)],
                    pa.struct([("col-1", pa.int32()), ("a", pa.int64())]))
    out = conform_column(data.slice(2, 3), field, target, 3)
    assert out.to_pylist() == [{"a": 2}, {"a": 3}, {"a": 4}]


def test_missing_physical_column_is_null_not_a_namesake():
    field = StructField("a", LongType(), True, PHYS)
    target = arrow_schema(StructType([field])).field(0).type
    assert conform_column(None, field, target, 2).to_pylist() == [None, None]


def test_nanosecond_timestamps_become_microseconds_utc():
    field = StructField("t", TimestampType())
    target = arrow_schema(StructType([field])).field(0).type
    data = pa.array([1_000_001_999], pa.timestamp("ns"))
    out = conform_column(data, field, target, 1)
    assert out.type == pa.timestamp("us", tz="UTC") and out.cast(pa.int64()).to_pylist() == [1_000_001]
