"""Issue 24: the session's ``spark.databricks.delta.properties.defaults.<key>`` reach a table
created by its first path write or stream (Spark's parquet writer with a driver commit, and
the Python data source writer / sink), as in delta-spark; a write's own ``delta.*`` option
wins; existing tables keep their properties."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from tests.support import collected, commits

from headwater import DeltaTable as HwDeltaTable
from headwater import translated

DEFAULTS = "spark.databricks.delta.properties.defaults."


@pytest.fixture
def defaults(spark):
    keys = {"enableChangeDataFeed": "true", "appendOnly": "true"}
    for key, value in keys.items():
        spark.conf.set(DEFAULTS + key, value)
    yield {f"delta.{k}": v for k, v in keys.items()}
    for key in keys:
        spark.conf.unset(DEFAULTS + key)


def _config(path) -> dict[str, str]:
    return dict(DeltaTable(str(path)).metadata().configuration)


def _first_commit(path) -> dict:
    actions = commits(path)[0]
    return {kind: action[kind] for action in actions for kind in action
            if kind in ("commitInfo", "protocol", "metaData")}


def test_first_batch_write_takes_the_session_defaults(spark, tmp_path, defaults):
    native, python = tmp_path / "native", tmp_path / "python"
    df = spark.range(3)
    df.write.format("delta").save(str(native))  # Spark's parquet writer, a driver commit
    # targetFileSize is honoured by the Python data source writer only: that path commits
    df.write.format("delta").option("targetFileSize", "1mb").save(str(python))
    for path in (native, python):
        assert _config(path) == defaults
        first = _first_commit(path)
        assert first["commitInfo"]["operation"] == "WRITE"
        assert first["protocol"]["minWriterVersion"] >= 4  # the change data feed needs it
        # the properties are in force: the change feed is there, appends only
        feed = spark.read.format("delta").option("readChangeFeed", "true") \
            .option("startingVersion", 0).load(str(path))
        assert collected(feed.select("id", "_change_type")) == [
            (0, "insert"), (1, "insert"), (2, "insert")]
        with pytest.raises(Exception, match="(?i)append"):
            HwDeltaTable.forPath(spark, str(path)).delete("id = 1")


def test_a_writes_own_delta_option_wins_and_existing_tables_keep_theirs(spark, tmp_path,
                                                                        defaults):
    own, existing = tmp_path / "own", tmp_path / "existing"
    spark.conf.unset(DEFAULTS + "appendOnly")
    spark.conf.unset(DEFAULTS + "enableChangeDataFeed")
    spark.range(2).write.format("delta").save(str(existing))  # no defaults: none
    for key, value in defaults.items():
        spark.conf.set(DEFAULTS + key[len("delta."):], value)
    spark.range(2).write.format("delta").mode("append").save(str(existing))
    assert _config(existing) == {}
    spark.range(2).write.format("delta").option("delta.appendOnly", "false").save(str(own))
    assert _config(own) == {**defaults, "delta.appendOnly": "false"}
    HwDeltaTable.forPath(spark, str(own)).delete("id = 1")  # not append-only: allowed
    assert collected(spark.read.format("delta").load(str(own))) == [(0,)]


def test_first_stream_write_takes_the_session_defaults(spark, tmp_path, defaults):
    source = tmp_path / "source"
    spark.range(4).write.format("delta").option("delta.appendOnly", "false").save(str(source))
    for name, options in (("native", {}), ("python", {"targetFileSize": "1mb"})):
        target = tmp_path / name
        query = (spark.readStream.format("delta").load(str(source)).writeStream
                 .format("delta").options(**options)
                 .option("checkpointLocation", str(tmp_path / f"{name}-cp"))
                 .trigger(availableNow=True).start(str(target)))
        query.awaitTermination(120)
        assert query.exception() is None
        assert _config(target) == defaults, name
        assert _first_commit(target)["protocol"]["minWriterVersion"] >= 4
        assert collected(spark.read.format("delta").load(str(target))) == [
            (0,), (1,), (2,), (3,)]


def test_a_column_mapping_default_is_refused_on_a_first_write(spark, tmp_path):
    """The first-write commit gives columns no physical names: a table with column mapping
    would be unreadable, so the write is refused and nothing is created."""
    spark.conf.set(DEFAULTS + "columnMapping.mode", "name")
    try:
        for path, extra in ((tmp_path / "native", {}),
                            (tmp_path / "python", {"targetFileSize": "1mb"})):
            with pytest.raises(Exception, match="HW_DELTA_UNSUPPORTED_FEATURE"), translated():
                spark.range(3).write.format("delta").options(**extra).save(str(path))
            assert not (path / "_delta_log" / "00000000000000000000.json").exists()
    finally:
        spark.conf.unset(DEFAULTS + "columnMapping.mode")
