"""A run counts each flow's micro-batches from Spark's progress updates, polled repeatedly."""

from __future__ import annotations

import time

from headwater.pipeline.run.progress import FlowResult, count_batches


def test_each_batch_is_counted_once_however_often_the_run_polls(spark, tmp):
    src = str(tmp / "src")
    spark.range(3).write.format("delta").save(src)
    query = (spark.readStream.format("delta").load(src).writeStream.format("noop")
             .option("checkpointLocation", str(tmp / "cp")).trigger(processingTime="0 seconds")
             .start())
    try:
        result = FlowResult("t", "table")
        query.processAllAvailable()
        count_batches(result, query)
        count_batches(result, query)  # nothing new: nothing counted twice
        first = result.batches
        assert first >= 1
        for start in (3, 6, 9):  # three more batches, polled once at the end
            spark.range(start, start + 3).write.format("delta").mode("append").save(src)
            query.processAllAvailable()
        count_batches(result, query)
        executed = {p["batchId"] for p in query.recentProgress if p["numInputRows"]}
        assert executed == {0, 1, 2, 3}
        assert result.batches == first + 3
        assert len(result.counted) == result.batches
        last = query.lastProgress
        assert result.newest == (last.runId, last.batchId, last.timestamp)
    finally:
        query.stop()


def test_an_idle_heartbeat_is_not_a_batch_and_hides_none(spark, tmp):
    """Spark reports an idle query's progress every noDataProgressEventInterval, with the id
    of the batch that has not run yet: that batch, once it runs, is counted with its rows."""
    from pyspark.sql import functions as F

    src = str(tmp / "src")
    spark.range(3).write.format("delta").save(src)
    interval = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(interval)
    spark.conf.set(interval, "100ms")
    query = (spark.readStream.format("delta").load(src)
             .observe("sink:t", F.count(F.lit(1)).alias("rows"))
             .writeStream.format("noop").option("checkpointLocation", str(tmp / "cp"))
             .trigger(processingTime="50 milliseconds").start())
    try:
        result = FlowResult("t", "table")
        query.processAllAvailable()
        deadline = time.monotonic() + 60
        while not any("addBatch" not in (p.durationMs or {}) for p in query.recentProgress):
            assert time.monotonic() < deadline, "no idle heartbeat within 60 s"
            time.sleep(0.1)
        count_batches(result, query)  # batch 0 and a heartbeat naming batch 1
        spark.range(3, 6).write.format("delta").mode("append").save(src)
        query.processAllAvailable()
        count_batches(result, query)
        assert (result.batches, result.rows_written) == (2, 6)
    finally:
        query.stop()
        spark.conf.set(interval, before)
