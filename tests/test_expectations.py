"""Expectations: warn/drop/fail rules, quarantine, and counts in the streaming progress."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import Observation
from tests.support import rows, write

import headwater
from headwater.pipeline.expectations import (
    Expectation,
    dropped_count,
    observe,
    split,
    validate_rules,
)

RULES = [
    Expectation("has_name", "name IS NOT NULL", "warn"),
    Expectation("positive", "amount > 0", "drop"),
    Expectation("small_id", "id < 8", "drop"),
]

BATCHES = [  # one Delta commit (one file) each; maxFilesPerTrigger=1 makes one micro-batch each
    {"id": [0, 1, 2, 3, 4, 5], "amount": [10, -1, None, 5, 7, 0],
     "name": ["a", "b", None, "d", None, "f"]},
    {"id": [6, 7, 8, 9], "amount": [3, None, 4, -2], "name": ["g", None, "i", "j"]},
]


def table(data: dict) -> pa.Table:
    return pa.table({"id": pa.array(data["id"], pa.int64()),
                     "amount": pa.array(data["amount"], pa.int64()),
                     "name": pa.array(data["name"], pa.string())})


def expected_failures(row: dict) -> list[str]:
    """Python model of the rules: a NULL comparison fails."""
    out = []
    if row["name"] is None:
        out.append("has_name")
    if row["amount"] is None or not row["amount"] > 0:
        out.append("positive")
    if not row["id"] < 8:
        out.append("small_id")
    return out


def write_batch(batch, rules, table_name, batch_id, good_path, bad_path):
    good, bad = split(batch, rules, table_name, batch_id)
    for df, path, app in ((good, good_path, "good"), (bad, bad_path, "bad")):
        (df.write.format("delta").option("txnAppId", f"test-{app}")
         .option("txnVersion", batch_id).mode("append").save(path))


def test_split_and_observed_metrics_in_a_stream(spark, tmp_path):
    src, good, bad, cp = (str(tmp_path / n) for n in ("src", "good", "bad", "cp"))
    for data in BATCHES:
        write(src, table(data))
    stream = observe(spark.readStream.format("delta").option("maxFilesPerTrigger", 1)
                     .load(src), RULES, "orders")
    query = (stream.writeStream
             .foreachBatch(lambda b, i: write_batch(b, RULES, "orders", i, good, bad))
             .option("checkpointLocation", cp).trigger(availableNow=True).start())
    with headwater.translated():
        query.awaitTermination()

    inputs = [dict(zip(d, vals)) for d in BATCHES for vals in zip(*d.values())]
    kept = rows(spark, good)
    quarantined = rows(spark, bad)
    assert len(inputs) == len(kept) + len(quarantined)
    dropped = {r["id"]: expected_failures(r) for r in inputs
               if {"positive", "small_id"} & set(expected_failures(r))}
    assert [r[0] for r in kept] == sorted(set(range(10)) - set(dropped))
    assert {r[0]: r[3] for r in quarantined} == dropped  # _failed_rules: warn + drop names
    assert {r[0]: r[4] for r in quarantined} == {i: 0 if i < 6 else 1 for i in dropped}
    assert spark.read.format("delta").load(bad).columns == [
        "id", "amount", "name", "_failed_rules", "_batch_id"]
    assert (kept[0], quarantined[0][:3]) == ((0, 10, "a"), (1, -1, "b"))

    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(progress) == 2
    for p, data in zip(progress, BATCHES):
        metrics = p["observedMetrics"]["expectations:orders"].asDict()
        batch_rows = [dict(zip(data, vals)) for vals in zip(*data.values())]
        assert metrics == {
            "has_name_failed": sum("has_name" in expected_failures(r) for r in batch_rows),
            "positive_failed": sum("positive" in expected_failures(r) for r in batch_rows),
            "small_id_failed": sum("small_id" in expected_failures(r) for r in batch_rows),
            "rows": len(batch_rows),
            # rows a "drop" rule removes (positive, small_id): the event log's dropped_records
            "dropped": sum(bool({"positive", "small_id"} & set(expected_failures(r)))
                           for r in batch_rows),
        }
    assert query.lastProgress["observedMetrics"]["expectations:orders"]["rows"] == 4


def test_dropped_rows_counted_by_the_kept_rows_write_in_a_stream(spark, tmp_path):
    """A flow's order: the kept rows written first, counting the dropped ones as they are
    (no job of its own), the quarantine written only when that count is not 0. The
    progress still carries every batch's full counts."""
    src, good, bad, cp = (str(tmp_path / n) for n in ("src", "good", "bad", "cp"))
    batches = [*BATCHES, {"id": [1, 2], "amount": [4, 6], "name": [None, "y"]}]
    for data in batches:
        write(src, table(data))
    counted: list[int | None] = []

    def write_counted(batch, batch_id):
        seen = Observation()
        assert dropped_count(seen) is None  # nothing ran yet: not waited for, not guessed
        kept, quarantined = split(batch, RULES, "orders", batch_id, validated=True,
                                  count_dropped=seen)
        (kept.write.format("delta").option("txnAppId", "good")
         .option("txnVersion", batch_id).mode("append").save(good))
        counted.append(dropped_count(seen))
        if counted[-1]:
            (quarantined.write.format("delta").option("txnAppId", "bad")
             .option("txnVersion", batch_id).mode("append").save(bad))

    stream = observe(spark.readStream.format("delta").option("maxFilesPerTrigger", 1)
                     .load(src), RULES, "orders")
    query = (stream.writeStream.foreachBatch(write_counted)
             .option("checkpointLocation", cp).trigger(availableNow=True).start())
    with headwater.translated():
        query.awaitTermination()

    per_batch = [[dict(zip(d, vals)) for vals in zip(*d.values())] for d in batches]
    drops = [[r for r in b if {"positive", "small_id"} & set(expected_failures(r))]
             for b in per_batch]
    assert counted == [len(d) for d in drops] == [3, 3, 0]
    assert sorted(r[0] for r in rows(spark, bad)) == sorted(r["id"] for d in drops for r in d)
    assert len(rows(spark, good)) == sum(map(len, per_batch)) - 6
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["observedMetrics"]["expectations:orders"].asDict()["rows"]
            for p in progress] == [6, 4, 2]
    assert [p["observedMetrics"]["expectations:orders"].asDict()["dropped"]
            for p in progress] == [3, 3, 0]
    assert [p["observedMetrics"]["expectations:orders"].asDict()["has_name_failed"]
            for p in progress] == [2, 1, 1]


def test_fail_rule_stops_the_flow_with_a_sample_row(spark, tmp_path):
    src, good, bad, cp = (str(tmp_path / n) for n in ("src", "good", "bad", "cp"))
    write(src, pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                         "amount": pa.array([5, -7, 4], pa.int64()),
                         "note": ["ok", "x" * 2000, "ok"]}))
    rules = [Expectation("positive", "amount > 0", "fail"),
             Expectation("has_note", "note IS NOT NULL", "warn")]
    stream = observe(spark.readStream.format("delta").load(src), rules, "payments")
    query = (stream.writeStream
             .foreachBatch(lambda b, i: write_batch(b, rules, "payments", i, good, bad))
             .option("checkpointLocation", cp).trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination()
    err = headwater.unwrap(raised.value)
    assert isinstance(err, headwater.HeadwaterError)
    assert err.code == "HW_EXPECTATION_FAILED"
    message = str(err)
    assert "'payments'" in message and "'positive'" in message and "batch 0" in message
    sample = message.split("sample row: ", 1)[1]
    assert sample.startswith('{"id":2,"amount":-7,"note":"xxx')
    assert "...(truncated)" in sample and len(sample) < 800
    assert "\n" not in message
    assert not (tmp_path / "good").exists()  # nothing written for the failed batch


def test_null_condition_fails_and_warn_keeps_rows(spark):
    df = spark.createDataFrame([(1, None), (2, 3), (3, -1)], "id long, amount long")
    rules = [Expectation("positive", "amount > 0", "warn")]
    good, bad = split(df, rules, "t", 5)
    assert sorted(r.id for r in good.collect()) == [1, 2, 3]
    assert bad.count() == 0
    rules = [Expectation("positive", "amount > 0", "drop"),
             Expectation("nullable_ok", "amount IS NULL OR amount > 0", "warn")]
    good, bad = split(df, rules, "t", 5)
    assert [r.id for r in good.collect()] == [2]
    assert sorted((r.id, r._failed_rules, r._batch_id) for r in bad.collect()) == [
        (1, ["positive"], 5), (3, ["positive", "nullable_ok"], 5)]


@pytest.mark.parametrize("rules, needle", [
    ([("a", "id > 0", "explode")], "action 'explode' is unknown"),
    ([("a", "id > 0", "warn"), ("A", "id < 9", "drop")], "the name is used twice"),
    ([("", "id > 0", "warn")], "the name is empty"),
    ([("bad_sql", "id >>> (", "drop")], "'bad_sql'"),
    ([("no_col", "missing_col > 0", "drop")], "missing_col"),
    ([("not_bool", "id + 1", "fail")], "is bigint, not boolean"),
    ([("agg", "count(*) > 0", "drop")], "'agg'"),
])
def test_invalid_rules(spark, rules, needle):
    df = spark.createDataFrame([(1,)], "id long")
    with pytest.raises(headwater.HeadwaterError) as raised:
        validate_rules(rules, "orders", df)
    assert raised.value.code == "HW_EXPECTATION_INVALID"
    assert "'orders'" in str(raised.value) and needle in str(raised.value)
    assert "\n" not in str(raised.value)


def test_observe_validates_against_the_stream(spark, tmp_path):
    write(tmp_path / "src", {"id": pa.array([1], pa.int64())})
    stream = spark.readStream.format("delta").load(str(tmp_path / "src"))
    with pytest.raises(headwater.HeadwaterError) as raised:
        observe(stream, [Expectation("x", "nope = 1", "drop")], "t")
    assert raised.value.code == "HW_EXPECTATION_INVALID"
    assert json.dumps(str(raised.value))  # one plain line
