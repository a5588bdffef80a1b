"""In-commit timestamps (issue 37, item 4): a table whose protocol has the inCommitTimestamp
writer feature (as delta-spark writes it with ``delta.enableInCommitTimestamps = true``) keeps
them through headwater's writes: every commit carries an ``inCommitTimestamp`` after the
previous one's (deltalake, which refuses the feature, is never asked to commit). Enabling
the property on a table headwater creates is refused, naming the feature."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from tests.support import commits

from headwater import HeadwaterError
from headwater.delta import dml

SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "v", "type": "string", "nullable": True, "metadata": {}}]}


def ict_table(path) -> None:
    """Version 0 of a table with in-commit timestamps, as delta-spark's CREATE TABLE writes
    it (commitInfo first, with its inCommitTimestamp)."""
    log = path / "_delta_log"
    log.mkdir(parents=True)
    stamp = 1_700_000_000_000
    actions = [
        {"commitInfo": {"inCommitTimestamp": stamp, "timestamp": stamp,
                        "operation": "CREATE TABLE", "operationParameters": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                      "writerFeatures": ["appendOnly", "inCommitTimestamp", "invariants"]}},
        {"metaData": {"id": "ict-test", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(SCHEMA), "partitionColumns": [],
                      "configuration": {"delta.enableInCommitTimestamps": "true"},
                      "createdTime": stamp}}]
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def stamps(path) -> list[int]:
    out = []
    for actions in commits(path):
        first = actions[0]
        assert "commitInfo" in first and "inCommitTimestamp" in first["commitInfo"]
        assert next(iter(first["commitInfo"])) == "inCommitTimestamp"
        out.append(first["commitInfo"]["inCommitTimestamp"])
    return out


def test_headwater_writes_keep_in_commit_timestamps(spark, lake, tmp):
    path = tmp / "ict"
    ict_table(path)
    spark.createDataFrame([(1, "a"), (2, "b")], "id LONG, v STRING") \
        .write.format("delta").mode("append").save(str(path))
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (3, 'c')")
    dml.delete(spark, str(path), "id = 2")
    dml.update(spark, str(path), {"v": "upper(v)"}, "id = 3")
    got = stamps(path)
    assert len(got) == 5 and got == sorted(set(got))  # one per commit, strictly increasing
    rows = sorted(tuple(r.values()) for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist())
    assert rows == [(1, "a"), (3, "C")]
    assert sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect()) == rows


def test_enabling_in_commit_timestamps_is_refused_by_name(spark, lake):
    with pytest.raises(HeadwaterError, match="inCommitTimestamp") as err:
        spark.sql("CREATE TABLE ict_new (id INT) USING DELTA "
                  "TBLPROPERTIES ('delta.enableInCommitTimestamps' = true)")
    assert err.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    spark.sql("CREATE TABLE ict_later (id INT) USING DELTA")
    with pytest.raises(HeadwaterError, match="inCommitTimestamp"):
        spark.sql("ALTER TABLE ict_later SET TBLPROPERTIES "
                  "('delta.enableInCommitTimestamps' = true)")


def test_vacuum_keeps_in_commit_timestamps(spark, lake, tmp):
    """VACUUM deletes what delta-spark's would and records VACUUM START / END, each with an
    in-commit timestamp (delta-rs, which cannot write them, never commits here)."""
    path = tmp / "ict_vacuum"
    ict_table(path)
    spark.createDataFrame([(1, "a"), (2, "b")], "id LONG, v STRING").coalesce(1) \
        .write.format("delta").mode("append").save(str(path))
    spark.createDataFrame([(3, "c")], "id LONG, v STRING") \
        .write.format("delta").mode("overwrite").save(str(path))
    replaced = {p for p in path.glob("*.parquet")} - {path / a for a in DeltaTable(str(path)).file_uris()}
    assert replaced  # the first write's files, removed by the overwrite
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert not any(p.exists() for p in replaced)
    operations = [actions[0]["commitInfo"]["operation"] for actions in commits(path)]
    assert operations[-2:] == ["VACUUM START", "VACUUM END"]
    got = stamps(path)
    assert got == sorted(set(got))
    assert [tuple(r) for r in spark.read.format("delta").load(str(path)).collect()] == [(3, "c")]
