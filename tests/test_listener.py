"""headwater's streaming listeners: each event as its JSON, in one Py4J call."""

from __future__ import annotations

import threading
import time

from headwater.spark.listener import add_json_listener, remove_json_listener


def test_json_listener_gets_every_progress_and_the_termination_then_nothing_after_removal(
        spark, tmp):
    progresses: list[dict] = []
    ended: list[dict] = []
    done = threading.Event()

    def on_terminated(event: dict) -> None:
        ended.append(event)
        done.set()

    handle = add_json_listener(spark, progresses.append, on_terminated)
    try:
        spark.range(10).write.format("delta").mode("append").save(str(tmp / "t"))
        query = (spark.readStream.format("delta").load(str(tmp / "t")).writeStream
                 .format("noop").queryName("json_listener")
                 .option("checkpointLocation", str(tmp / "chk")).trigger(availableNow=True)
                 .start())
        query.awaitTermination()
        assert done.wait(30), "no termination event"
    finally:
        remove_json_listener(spark, handle)
    ours = [p for p in progresses if p.get("name") == "json_listener"]
    assert [p["batchId"] for p in ours] == [0] and ours[0]["numInputRows"] == 10
    assert ours[0]["sources"] and "endOffset" in ours[0]["sources"][0]
    mine = [e for e in ended if e["runId"] == str(query.runId)]
    assert len(mine) == 1 and mine[0].get("exception") is None

    seen = len(progresses)
    (spark.readStream.format("delta").load(str(tmp / "t")).writeStream.format("noop")
     .option("checkpointLocation", str(tmp / "chk2")).trigger(availableNow=True).start()
     .awaitTermination())
    time.sleep(1)  # listener events are asynchronous: give a stray one time to arrive
    assert len(progresses) == seen


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
