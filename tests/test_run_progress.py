"""A run counts each flow's micro-batches from Spark's progress updates, polled repeatedly."""

from __future__ import annotations

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
    finally:
        query.stop()
