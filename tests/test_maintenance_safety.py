"""Maintenance that is safe for streams (issue 13 part 5): VACUUM refuses to delete files a
lakehouse stream (found through its checkpoint's offsets) still needs, log checkpoints and
cleanup follow the table properties, auto-compaction keeps a streamed table's file count
bounded without downstream duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.delta import maintenance

CDF = {"delta.enableChangeDataFeed": "true"}


def test_vacuum_refuses_files_a_lakehouse_stream_still_needs(spark, tmp, keep_lakehouse):
    root = tmp / "lake"
    write(root / "src", {"id": [1, 2, 3], "v": ["a", "b", "c"]}, configuration=CDF)
    lake = Lakehouse(root, spark)
    src = lake.path("src")
    first_file = RsTable(src).file_uris()[0]

    def run_stream() -> None:
        (spark.readStream.option("readChangeFeed", "true").table("src").writeStream
            .format("delta").option("checkpointLocation", lake.checkpoint("mirror"))
            .trigger(availableNow=True).start(str(tmp / "out")).awaitTermination())

    run_stream()  # read the snapshot of v0: the stream now waits for v1
    RsTable(src).delete("id = 2")  # v1 removes the first file
    # the default keeps 7 days: nothing to delete, and a shorter one must be asked for
    assert maintenance.vacuum(src, dry_run=True) == []
    with pytest.raises(HeadwaterError) as err:
        maintenance.vacuum(src, retention_hours=0)
    assert err.value.code == "HW_VACUUM_RETENTION_TOO_SHORT"
    with pytest.raises(HeadwaterError) as err:
        maintenance.vacuum(src, retention_hours=0, enforce_retention=False)
    assert err.value.code == "HW_VACUUM_READER_NEEDS_FILES"
    assert "_checkpoints/mirror" in str(err.value)
    assert Path(first_file).exists()  # refused as a whole: nothing deleted
    run_stream()  # the stream catches up (the delete read as change rows)
    out = sorted(tuple(r) for r in spark.read.format("delta").load(str(tmp / "out"))
                 .select("id", "_change_type").collect())
    assert out == [(1, "insert"), (2, "delete"), (2, "insert"), (3, "insert")]
    deleted = maintenance.vacuum(src, retention_hours=0, enforce_retention=False)
    assert any(d.split("/")[-1] == first_file.split("/")[-1] for d in deleted)
    assert not Path(first_file).exists()


def test_stream_positions_reads_delta_offsets_of_checkpoints(spark, tmp):
    src = tmp / "src"
    write(src, {"id": [1]})
    table_id = RsTable(str(src)).metadata().id
    checkpoints = tmp / "_checkpoints"
    (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
        .option("checkpointLocation", str(checkpoints / "a" / "flow1"))
        .trigger(availableNow=True).start(str(tmp / "out")).awaitTermination())
    assert maintenance.stream_positions(str(checkpoints), table_id) == {
        "the stream with checkpoint _checkpoints/a/flow1": 0}
    assert maintenance.stream_positions(str(checkpoints), "another-table") == {}


def test_checkpoint_interval_and_log_retention_follow_table_properties(tmp):
    """Commits written by headwater (DML's commit path) checkpoint every
    delta.checkpointInterval commits, as delta-rs does, and then drop log files older than
    delta.logRetentionDuration."""
    import time

    from headwater.delta.commit import Transaction, commit

    path = tmp / "t"
    write(path, {"id": [0]}, configuration={"delta.checkpointInterval": "5",
                                            "delta.logRetentionDuration": "interval 1 second"})
    for i in range(1, 4):
        write(path, {"id": [i]})
    time.sleep(1.2)
    log = path / "_delta_log"
    assert not list(log.glob("*.checkpoint.parquet"))
    version = commit(Transaction(uri=str(path), read_version=3, operation="DELETE",
                                 parameters={"predicate": "false"}, metrics={}, actions=[]))
    assert version == 4  # the fifth commit
    assert (log / f"{4:020d}.checkpoint.parquet").exists()
    assert not (log / f"{0:020d}.json").exists()  # older than the retention: cleaned up
    table = RsTable(str(path))
    assert table.version() == 4 and table.to_pyarrow_dataset().count_rows() == 4


def test_auto_compaction_bounds_files_and_downstream_reads_each_row_once(spark, tmp):
    import pyarrow as pa

    src, target, out = tmp / "src", tmp / "target", tmp / "out"
    write(target, pa.table({"id": pa.array([], pa.int64())}))
    # (delta-rs takes custom properties only through ALTER, as Spark's SET TBLPROPERTIES does)
    RsTable(str(target)).alter.set_table_properties(
        {"delta.autoOptimize.autoCompact": "true", "headwater.autoCompact.minNumFiles": "4"},
        raise_if_not_exists=False)

    def upstream() -> None:  # one micro-batch per source file
        (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(str(src))
            .writeStream.format("delta").option("checkpointLocation", str(tmp / "cp1"))
            .trigger(availableNow=True).start(str(target)).awaitTermination())

    def downstream() -> None:
        (spark.readStream.format("delta").load(str(target))
            .writeStream.format("delta").option("checkpointLocation", str(tmp / "cp2"))
            .trigger(availableNow=True).start(str(out)).awaitTermination())

    for half in range(2):
        for i in range(half * 8, half * 8 + 8):
            write(src, {"id": [i]})
        upstream()
        assert len(RsTable(str(target)).file_uris()) < 4  # bounded by minNumFiles
        downstream()
    operations = [h["operation"] for h in RsTable(str(target)).history()]
    assert operations.count("OPTIMIZE") >= 3
    ids = [r.id for r in spark.read.format("delta").load(str(out)).collect()]
    assert sorted(ids) == list(range(16))  # every row once: compactions were not re-read
