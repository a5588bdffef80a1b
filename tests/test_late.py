"""keep_late_rows: the rows Spark drops behind the watermark land in ``<table>__late``."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from tests.support import write

from headwater.errors import HeadwaterError
from headwater.pipeline.late import LateRows

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

# One Delta commit per micro-batch (maxFilesPerTrigger=1, all commits there before the start).
# (key, seconds after T0); 5 s tumbling windows, 10 s watermark delay.
COMMITS = [
    [("a", 1), ("b", 2), ("a", 30)],                      # batch 0: watermark becomes 20 s
    # batch 1: x@3 and y@16 are behind batch 1's own watermark (20 s), but Spark drops by the
    # previous batch's (0): kept and aggregated, not late. p@45 moves the watermark to 35 s.
    [("x", 3), ("y", 16), ("p", 45)],
    # batch 2, judged by batch 1's 20 s (not its own 35 s): q, r, s late (s@17: window end
    # 20 == watermark), each in its own group; t@21 and u@40 are not late.
    [("q", 4), ("r", 12), ("s", 17), ("t", 21), ("u", 40)],
]
EXPECTED_LATE = {2: {("q", 4), ("r", 12), ("s", 17)}}
EXPECTED_WATERMARK = {2: T0 + dt.timedelta(seconds=20)}


def _source(tmp_path, commits=COMMITS) -> str:
    src = tmp_path / "events"
    for commit in commits:
        write(src, pa.table({
            "k": [k for k, _ in commit],
            "ts": pa.array([T0 + dt.timedelta(seconds=s) for _, s in commit],
                           pa.timestamp("us", tz="UTC")),
            "v": [1] * len(commit),
        }))
    return str(src)


def _aggregate(spark, src: str, key: str):
    events = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
              .withWatermark("ts", "10 seconds"))
    if key == "window":
        return events.groupBy(F.window("ts", "5 seconds"), "k").agg(F.count("*").alias("n"))
    return events.groupBy("ts", "k").agg(F.sum("v").alias("n"))


def _save(df, path: str, app: str, batch_id: int) -> None:
    (df.coalesce(1).write.format("delta").option("txnAppId", app).option("txnVersion", batch_id)
     .mode("append").save(path))


def _start(df, write_batch, mode: str, checkpoint: str):
    return (df.writeStream.foreachBatch(write_batch).outputMode(mode)
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def _dropped(query) -> dict[int, int]:
    """numRowsDroppedByWatermark per batch, once the availableNow run is over."""
    query.awaitTermination()
    return {p["batchId"]: p["stateOperators"][0]["numRowsDroppedByWatermark"]
            for p in query.recentProgress}


def _by_batch(rows, batch_col: str = "_b") -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for row in rows:
        data = row.asDict()
        batch = data.pop(batch_col)
        out.setdefault(batch, []).append(tuple(sorted(data.items())))
    return {b: sorted(r) for b, r in out.items() if r}


@pytest.mark.parametrize("key,mode", [("window", "append"), ("ts", "update")])
def test_late_rows_match_spark_drops(spark, tmp_path, key, mode):
    src = _source(tmp_path)
    kept_target = str(tmp_path / "kept")

    # The same aggregate without keep_late_rows: Spark's own output and drop counts.
    plain_rows = []

    def plain_batch(batch_df, batch_id):
        plain_rows.extend(batch_df.withColumn("_b", F.lit(batch_id)).collect())

    plain = _start(_aggregate(spark, src, key), plain_batch, mode, str(tmp_path / "cp1"))
    try:
        late = LateRows.prepare(_aggregate(spark, src, key), kept_target, output_mode=mode)
        checkpoint = str(tmp_path / "cp2")

        def kept_batch(batch_df, batch_id):
            batch_df.persist()
            try:
                agg_rows, late_rows = late.split(batch_df, batch_id, checkpoint)
                _save(agg_rows.withColumn("_b", F.lit(batch_id)), kept_target, "agg", batch_id)
                _save(late_rows, late.late_table, "late", batch_id)
            finally:
                batch_df.unpersist()

        # Both queries run at once (own checkpoints, same input): faster on 2 cores.
        dropped = _dropped(_start(late.stream_df, kept_batch, mode, checkpoint))
        plain_dropped = _dropped(plain)
    finally:
        plain.stop()

    # Packing the aggregate with its input changes neither batches nor Spark's drops.
    assert dropped == plain_dropped
    assert sorted(dropped) == list(range(len(dropped))) and len(dropped) >= len(COMMITS)
    assert sum(dropped.values()) == 3

    late_df = spark.read.format("delta").load(late.late_table)
    input_columns = (["window"] if key == "window" else []) + ["k", "ts", "v"]
    assert late_df.columns == input_columns + ["_batch_id", "_watermark"]
    per_batch: dict[int, set] = {}
    watermarks: dict[int, set] = {}
    for row in late_df.collect():
        per_batch.setdefault(row._batch_id, set()).add(
            (row.k, int((row.ts.replace(tzinfo=dt.UTC) - T0).total_seconds())))
        watermarks.setdefault(row._batch_id, set()).add(row._watermark)
        if key == "window":
            assert row.window.end <= row._watermark

    # The requirement: late rows written for batch N == numRowsDroppedByWatermark of batch N.
    for batch_id, count in dropped.items():
        assert len(per_batch.get(batch_id, ())) == count, batch_id
    assert per_batch == EXPECTED_LATE
    assert {b: {w.replace(tzinfo=dt.UTC) for w in ws} for b, ws in watermarks.items()} \
        == {b: {w} for b, w in EXPECTED_WATERMARK.items()}

    # The aggregate output is what the plain query wrote, batch by batch.
    kept = _by_batch(spark.read.format("delta").load(kept_target).collect())
    assert kept == _by_batch(plain_rows)
    assert sum(len(rows) for rows in kept.values()) > 0


def test_prepare_refuses_what_spark_never_drops(spark):
    rate = spark.readStream.format("rate").load()
    watermarked = rate.withWatermark("timestamp", "10 seconds")
    cases = {
        "batch": spark.range(3).groupBy("id").count(),
        "no watermark": rate.groupBy(F.window("timestamp", "5 seconds")).count(),
        "not aggregated": watermarked,
        "key without watermark": watermarked.groupBy("value").count(),
        "session window": watermarked.groupBy(F.session_window("timestamp", "5 seconds")).count(),
        "two aggregates": watermarked.groupBy(F.window("timestamp", "5 seconds"), "value")
        .count().groupBy("window").count(),
    }
    for name, df in cases.items():
        with pytest.raises(HeadwaterError) as err:
            LateRows.prepare(df, "t")
        assert err.value.code == "HW_LATE_ROWS_UNSUPPORTED", name

    windowed = watermarked.groupBy(F.window("timestamp", "5 seconds")).count()
    with pytest.raises(HeadwaterError, match="complete mode"):
        LateRows.prepare(windowed, "t", output_mode="complete")
    late = LateRows.prepare(windowed, "t", output_mode="update")
    assert late.late_table == "t__late"
    assert late.stream_df.columns == ["_hw_agg", "_hw_raw"] and late.stream_df.isStreaming
