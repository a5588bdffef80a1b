"""Update output mode: foreachBatch + MERGE by key, exactly once, equal to a recomputation."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from tests.support import write

import headwater
from headwater.delta.update_mode import merge_batch, merge_predicate

UTC = dt.UTC


def create_table(spark, path, schema) -> None:
    spark.createDataFrame([], schema).write.format("delta").mode("append").save(str(path))


def table_rows(spark, path) -> list[tuple]:
    return sorted((tuple(r) for r in spark.read.format("delta").load(str(path)).collect()),
                  key=repr)


def run_update(query_df, path, keys, cp) -> list[int]:
    batch_ids: list[int] = []

    def apply(batch, batch_id):
        batch_ids.append(batch_id)
        merge_batch(batch, str(path), keys, "app", batch_id)

    with headwater.translated():
        (query_df.writeStream.outputMode("update").foreachBatch(apply)
         .option("checkpointLocation", str(cp)).trigger(availableNow=True).start()
         .awaitTermination())
    return batch_ids


def test_update_mode_group_counts(spark, tmp_path):
    src, dst, cp = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    inputs = [["a", "b", "a", None], ["b", "c", None], ["a", "d", "d"]]
    write(src, {"k": pa.array(inputs[0], pa.string())})
    counts = spark.readStream.format("delta").load(str(src)).groupBy("k").count()
    create_table(spark, dst, counts.schema)
    seen: list[int] = []
    for i, data in enumerate(inputs):
        if i:
            write(src, {"k": pa.array(data, pa.string())})
        seen += run_update(counts, dst, ["k"], cp)
        expected = spark.read.format("delta").load(str(src)).groupBy("k").count()
        assert table_rows(spark, dst) == sorted((tuple(r) for r in expected.collect()), key=repr)
    assert seen == [0, 1, 2]
    assert table_rows(spark, dst) == sorted(
        [("a", 3), ("b", 2), ("c", 1), ("d", 2), (None, 2)], key=repr)

    table = DeltaTable(str(dst))
    version = table.version()
    assert table.transaction_version("app") == 2
    batch = spark.createDataFrame([("a", 100), ("z", 1)], counts.schema)
    for old in (2, 1):  # a re-delivered (or older) batch changes nothing
        assert merge_batch(batch, str(dst), ["k"], "app", old) is False
    assert DeltaTable(str(dst)).version() == version
    assert ("a", 3) in table_rows(spark, dst)
    assert merge_batch(batch, str(dst), ["K"], "app", 3) is True  # keys ignore case
    assert DeltaTable(str(dst)).version() == version + 1
    assert {("a", 100), ("z", 1), ("b", 2)} <= set(table_rows(spark, dst))


def test_update_mode_window_counts_merge_on_struct_keys(spark, tmp_path):
    src, dst, cp = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)

    def events(minutes, keys):
        return {"ts": pa.array([base + dt.timedelta(minutes=m) for m in minutes],
                               pa.timestamp("us", tz="UTC")),
                "k": pa.array(keys, pa.string())}

    inputs = [events([1, 2, 11, 25], ["a", "b", "a", "a"]),
              events([3, 12, 31], ["a", "a", "b"]),
              events([5, 26, 33, 34], ["b", "a", "b", None])]
    write(src, inputs[0])

    def windowed(df):
        return df.groupBy(F.window("ts", "10 minutes"), "k").count()

    counts = windowed(spark.readStream.format("delta").load(str(src)))
    create_table(spark, dst, counts.schema)
    for i, data in enumerate(inputs):
        if i:
            write(src, data)
        run_update(counts, dst, ["window", "k"], cp)
        expected = windowed(spark.read.format("delta").load(str(src)))
        assert table_rows(spark, dst) == sorted((tuple(r) for r in expected.collect()),
                                                key=repr)
    got = {(r[0].start.minute, r[1]): r[2] for r in table_rows(spark, dst)}
    assert got == {(0, "a"): 2, (0, "b"): 2, (10, "a"): 2, (20, "a"): 2, (30, "b"): 2,
                   (30, None): 1}
    # the window is stored as a struct of UTC timestamps, like Spark's own column
    ts = pa.timestamp("us", tz="UTC")
    stored = DeltaTable(str(dst)).to_pyarrow_table().schema.field("window").type
    assert stored == pa.struct([("start", ts), ("end", ts)])


def test_merge_predicate_is_null_safe_and_quoted():
    assert merge_predicate(["window", "Key A"]) == (
        "tgt.`window` <=> src.`window` AND tgt.`Key A` <=> src.`Key A`")


def test_missing_table_and_bad_keys(spark, tmp_path):
    df = spark.createDataFrame([("a", 1)], "k string, count long")
    with pytest.raises(headwater.HeadwaterError) as raised:
        merge_batch(df, str(tmp_path / "nope"), ["k"], "app", 0)
    assert raised.value.code == "HW_DELTA_TABLE_NOT_FOUND"
    assert not (tmp_path / "nope").exists()  # creates nothing

    create_table(spark, tmp_path / "t", df.schema)
    for keys in (["missing"], []):
        with pytest.raises(headwater.HeadwaterError) as raised:
            merge_batch(df, str(tmp_path / "t"), keys, "app", 0)
        assert raised.value.code == "HW_MERGE_KEYS_INVALID"
    assert DeltaTable(str(tmp_path / "t")).version() == 0


def test_timestamps_keep_their_instant_whatever_the_session_zone(spark, tmp_path):
    dst = tmp_path / "t"
    schema = "ts timestamp, n long"
    create_table(spark, dst, schema)
    instant = dt.datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        spark.conf.set("spark.sql.session.timeZone", "America/New_York")
        df = spark.createDataFrame([(instant, 1)], schema)
        assert merge_batch(df, str(dst), ["ts"], "app", 0) is True
        assert merge_batch(df.withColumn("n", F.lit(2).cast("long")), str(dst), ["ts"],
                           "app", 1) is True
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    stored = DeltaTable(str(dst)).to_pyarrow_table()
    assert stored.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert stored.to_pylist() == [{"ts": instant, "n": 2}]
