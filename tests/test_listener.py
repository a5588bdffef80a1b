"""headwater's streaming listeners: each event as its JSON, in one Py4J call."""

from __future__ import annotations

import time

from headwater.spark.listener import add_json_listener, remove_json_listener


def test_json_listener_gets_every_progress_and_the_termination_then_nothing_after_removal(
        spark, tmp):
    progresses: list[dict] = []
    ended: list[dict] = []
    # a second listener that stays: Spark's bus calls listeners in order, one event at a time,
    # so once it has seen a query's termination, the removed one would have seen it too
    witness_ended: list[dict] = []
    witness = add_json_listener(spark, lambda progress: None, witness_ended.append)

    def terminated(events: list[dict], run_id: str) -> list[dict]:
        deadline = time.monotonic() + 30  # listener events are asynchronous
        while time.monotonic() < deadline:
            found = [e for e in events if e.get("runId") == run_id]
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no termination event for {run_id}")

    try:
        handle = add_json_listener(spark, progresses.append, ended.append)
        try:
            spark.range(10).write.format("delta").mode("append").save(str(tmp / "t"))
            query = (spark.readStream.format("delta").load(str(tmp / "t")).writeStream
                     .format("noop").queryName("json_listener")
                     .option("checkpointLocation", str(tmp / "chk"))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            mine = terminated(ended, str(query.runId))
        finally:
            remove_json_listener(spark, handle)
        ours = [p for p in progresses if p.get("runId") == str(query.runId)]
        assert [p["batchId"] for p in ours] == [0] and ours[0]["numInputRows"] == 10
        assert ours[0]["name"] == "json_listener"
        assert ours[0]["sources"] and "endOffset" in ours[0]["sources"][0]
        assert len(mine) == 1 and mine[0].get("exception") is None

        seen = len(progresses), len(ended)
        second = (spark.readStream.format("delta").load(str(tmp / "t")).writeStream
                  .format("noop").option("checkpointLocation", str(tmp / "chk2"))
                  .trigger(availableNow=True).start())
        second.awaitTermination()
        terminated(witness_ended, str(second.runId))
        assert (len(progresses), len(ended)) == seen
    finally:
        remove_json_listener(spark, witness)


def test_a_failing_callback_is_logged_and_the_stream_goes_on(spark, tmp, caplog):
    def broken(progress: dict) -> None:
        raise ValueError("boom")

    handle = add_json_listener(spark, broken)
    try:
        spark.range(3).write.format("delta").mode("append").save(str(tmp / "t"))
        query = (spark.readStream.format("delta").load(str(tmp / "t")).writeStream
                 .format("noop").option("checkpointLocation", str(tmp / "chk"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        deadline = time.monotonic() + 30
        while "boom" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        remove_json_listener(spark, handle)
    assert query.exception() is None
    assert "a headwater streaming listener failed" in caplog.text and "boom" in caplog.text
