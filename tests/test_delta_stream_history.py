"""Issue 24: a streaming write's commits are recorded as delta-spark's DeltaSink records them
(operation STREAMING UPDATE, operationParameters outputMode / queryId / epochId, blind
appends, its operationMetrics), by the native sink (foreachBatch, Spark's parquet writer), the
Python sink, and the driver's own commit of a table with identity columns."""

from __future__ import annotations

import pytest
from tests.support import collected, commits

from headwater import DeltaTable
from headwater.lakehouse.delta_spark.table_builder import IdentityGenerator

METRICS = {"numAddedFiles", "numRemovedFiles", "numOutputRows", "numOutputBytes"}


def _run(query) -> None:
    query.awaitTermination(180)
    assert query.exception() is None


def _info(actions: list[dict]) -> dict:
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


@pytest.mark.parametrize("sink", ["native", "python"])
def test_append_stream_commits_are_streaming_updates(spark, tmp_path, sink):
    source, target = str(tmp_path / "source"), tmp_path / "target"
    options = {"targetFileSize": "1mb"} if sink == "python" else {}
    spark.range(3).write.format("delta").save(source)
    ids = []
    for batch in range(2):
        if batch:
            spark.range(3, 5).write.format("delta").mode("append").save(source)
        query = (spark.readStream.format("delta").load(source).writeStream.format("delta")
                 .options(**options).option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start(str(target)))
        _run(query)
        ids.append(str(query.id))
    assert ids[0] == ids[1]  # the same stream, restarted
    log = commits(target)
    assert len(log) == 2
    for epoch, (actions, rows) in enumerate(zip(log, (3, 2))):
        info = _info(actions)
        assert info["operation"] == "STREAMING UPDATE"
        assert info["operationParameters"] == {"outputMode": "Append", "queryId": ids[0],
                                               "epochId": str(epoch)}
        assert info["isBlindAppend"] is True
        assert set(info["operationMetrics"]) == METRICS
        adds = [a["add"] for a in actions if "add" in a]
        assert info["operationMetrics"]["numOutputRows"] == str(rows)
        assert info["operationMetrics"]["numAddedFiles"] == str(len(adds))
        assert info["operationMetrics"]["numRemovedFiles"] == "0"
        assert info["operationMetrics"]["numOutputBytes"] == str(sum(a["size"] for a in adds))
        txn = [a["txn"] for a in actions if "txn" in a]
        assert txn and txn[0]["version"] == epoch and ids[0] in txn[0]["appId"]
    assert "readVersion" not in _info(log[0]) and _info(log[1])["readVersion"] == 0
    history = DeltaTable.forPath(spark, str(target)).history().collect()
    assert [h.operation for h in history] == ["STREAMING UPDATE"] * 2
    assert history[0].operationParameters["epochId"] == "1"
    assert collected(spark.read.format("delta").load(str(target))) == [(i,) for i in range(5)]


def test_complete_stream_commits_remove_the_previous_result(spark, tmp_path):
    source, target = str(tmp_path / "source"), tmp_path / "target"
    spark.createDataFrame([("a",), ("b",), ("a",)], "k string").write.format("delta") \
        .save(source)
    for batch in range(2):
        if batch:
            spark.createDataFrame([("b",)], "k string").write.format("delta") \
                .mode("append").save(source)
        query = (spark.readStream.format("delta").load(source).groupBy("k").count()
                 .writeStream.format("delta").outputMode("complete")
                 .option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start(str(target)))
        _run(query)
    log = commits(target)
    first_files = [a["add"]["path"] for a in log[0] if "add" in a]
    info = _info(log[-1])
    assert info["operation"] == "STREAMING UPDATE"
    assert info["operationParameters"]["outputMode"] == "Complete"
    assert info["operationParameters"]["epochId"] == "1"
    assert info["isBlindAppend"] is False  # it removes the previous result
    assert info["operationMetrics"]["numRemovedFiles"] == str(len(first_files))
    assert info["operationMetrics"]["numOutputRows"] == "2"
    assert {a["remove"]["path"] for a in log[-1] if "remove" in a} == set(first_files)
    assert collected(spark.read.format("delta").load(str(target))) == [("a", 2), ("b", 2)]


def test_stream_into_an_identity_table_is_a_streaming_update(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    (DeltaTable.create(spark).location(target)
     .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator())
     .addColumn("v", "BIGINT").execute())
    spark.range(3).withColumnRenamed("id", "v").write.format("delta").save(source)
    query = (spark.readStream.format("delta").load(source).writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start(target))
    _run(query)
    info = _info(commits(tmp_path / "target")[-1])
    assert info["operation"] == "STREAMING UPDATE"
    assert info["operationParameters"] == {"outputMode": "Append", "queryId": str(query.id),
                                           "epochId": "0"}
    assert info["operationMetrics"]["numOutputRows"] == "3"
    rows = collected(spark.read.format("delta").load(target))
    assert sorted(v for _, v in rows) == [0, 1, 2]
    assert len({i for i, _ in rows}) == 3 and min(i for i, _ in rows) >= 1  # generated, unique
