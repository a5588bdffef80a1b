"""Spark's parquet writer + a Delta commit from the driver, and native reads."""

from __future__ import annotations

import datetime as dt

from deltalake import DeltaTable
from tests.support import rows

from headwater.delta.native_read import read_native
from headwater.delta.write.native import write_native
from headwater.delta.write.request import WriteRequest


def test_native_write_commits_once_with_stats_and_escaped_partitions(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.createDataFrame(
        [(1, "a:b c/d%", dt.datetime(2026, 1, 1, 10, 30)), (2, "plain", None)],
        "id long, s string, ts timestamp")
    assert write_native(df, WriteRequest(path=path, txn=("app", 0), partition_by=("s",))) == 2
    assert write_native(df, WriteRequest(path=path, txn=("app", 0), partition_by=("s",))) == 0  # replayed
    table = DeltaTable(path)
    assert table.version() == 0 and table.metadata().partition_columns == ["s"]
    assert rows(spark, path) == [(1, "a:b c/d%", dt.datetime(2026, 1, 1, 10, 30)),
                                 (2, "plain", None)]
    got = table.to_pyarrow_dataset().to_table(use_threads=False).sort_by("id")
    assert got.column("s").to_pylist() == ["a:b c/d%", "plain"]
    import pyarrow as pa

    adds = pa.table(table.get_add_actions(flatten=True))
    assert sorted(adds.column("num_records").to_pylist()) == [1, 1]
    native = read_native(spark, path)  # partition values from the log, not the folders
    assert native is not None
    assert sorted(tuple(r) for r in native.collect()) == [
        (1, "a:b c/d%", dt.datetime(2026, 1, 1, 10, 30)), (2, "plain", None)]


def test_native_overwrite_and_read(spark, tmp_path):
    path = str(tmp_path / "u")
    write_native(spark.range(5).toDF("id"), WriteRequest(path=path))
    assert write_native(spark.range(3).toDF("id"), WriteRequest(path=path, mode="overwrite")) == 3
    native = read_native(spark, path)
    assert native is not None and sorted(r.id for r in native.collect()) == [0, 1, 2]
    assert DeltaTable(path).version() == 1
