"""The Delta streaming source, named after what delta-spark's DeltaSourceSuite checks."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from tests.support import rows, write

import headwater
from headwater.delta.log import DeltaLog
from headwater.delta.schema import spark_schema
from headwater.delta.source import Offset, SourceOptions, SourcePlanner


def ids(start: int, stop: int) -> dict:
    return {"id": pa.array(range(start, stop), pa.int64()),
            "name": [f"n{i}" for i in range(start, stop)]}


def stream(spark, src, dst, checkpoint, trigger=None, **options):
    """Run src -> dst to completion; returns the query (for its progress)."""
    reader = spark.readStream.format("delta")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    with headwater.translated():
        query = (reader.load(str(src)).writeStream.format("delta")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(**(trigger or {"availableNow": True})).start(str(dst)))
        query.awaitTermination()
    return query


def data_batches(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_restart_from_checkpoint_reappends_nothing(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 10))
    stream(spark, src, dst, cp)
    write(src, ids(10, 15))
    stream(spark, src, dst, cp)
    stream(spark, src, dst, cp)  # nothing new
    assert [r[0] for r in rows(spark, str(dst))] == list(range(15))
    table = DeltaTable(str(dst))
    txns = [a for a in table.history() if a["operation"] in ("STREAMING UPDATE", "CREATE TABLE")]
    assert len(txns) == 2  # one commit per data batch, none for the empty run


def test_max_files_per_trigger_and_available_now_use_several_batches(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    for i in range(5):
        write(src, ids(i * 10, i * 10 + 10))
    query = stream(spark, src, dst, cp, maxFilesPerTrigger=2)
    assert data_batches(query) == [20, 20, 10]
    assert len(rows(spark, str(dst))) == 50


def test_max_bytes_per_trigger_reads_at_least_one_file(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    for i in range(3):
        write(src, ids(i * 10, i * 10 + 10))
    query = stream(spark, src, dst, cp, maxBytesPerTrigger=1)
    assert data_batches(query) == [10, 10, 10]


def test_trigger_once_reads_everything_in_one_batch(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    for i in range(4):
        write(src, ids(i * 10, i * 10 + 10))
    query = stream(spark, src, dst, cp, trigger={"once": True}, maxFilesPerTrigger=1)
    assert data_batches(query) == [40]


def test_starting_version_latest_and_n(spark, tmp):
    src = tmp / "src"
    write(src, ids(0, 5))       # v0
    write(src, ids(5, 10))      # v1
    write(src, ids(10, 12))     # v2
    stream(spark, src, tmp / "d1", tmp / "c1", startingVersion=1)
    assert [r[0] for r in rows(spark, str(tmp / "d1"))] == list(range(5, 12))
    # latest: only commits after the start
    reader = spark.readStream.format("delta").option("startingVersion", "latest").load(str(src))
    query = (reader.writeStream.format("delta").option("checkpointLocation", str(tmp / "c2"))
             .trigger(availableNow=True).start(str(tmp / "d2")))
    query.awaitTermination()
    write(src, ids(12, 14))
    stream(spark, src, tmp / "d2", tmp / "c2")
    assert [r[0] for r in rows(spark, str(tmp / "d2"))] == [12, 13]


def test_starting_version_after_latest_is_a_clear_error(spark, tmp):
    write(tmp / "src", ids(0, 2))
    with pytest.raises(headwater.HeadwaterError) as err:
        stream(spark, tmp / "src", tmp / "dst", tmp / "cp", startingVersion=7)
    assert err.value.code == "HW_SOURCE_VERSION_AFTER_LATEST"


def test_delete_stops_the_stream_with_version_and_options(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 10))
    stream(spark, src, dst, cp)
    DeltaTable(str(src)).delete("id < 3")  # v1 rewrites a file
    with pytest.raises(headwater.HeadwaterError) as err:
        stream(spark, src, dst, cp)
    assert err.value.code == "HW_SOURCE_NOT_APPEND_ONLY"
    assert "Version 1" in str(err.value) and "skipChangeCommits" in str(err.value)


def test_ignore_deletes_skips_whole_file_deletes(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 10), partition_by=None)
    write(src, {"id": pa.array([100], pa.int64()), "name": ["x"]})
    stream(spark, src, dst, cp)
    DeltaTable(str(src)).delete("id = 100")  # removes one whole file, adds none
    write(src, ids(10, 12))
    stream(spark, src, dst, cp, ignoreDeletes="true")
    assert [r[0] for r in rows(spark, str(dst))] == list(range(12)) + [100]


def test_skip_change_commits_skips_updates(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 5))
    DeltaTable(str(src)).update({"name": "'changed'"}, predicate="id = 1")
    write(src, ids(5, 7))
    stream(spark, src, dst, cp, startingVersion=0, skipChangeCommits="true")
    got = rows(spark, str(dst))
    assert [r[0] for r in got] == list(range(7))
    assert all(r[1] != "changed" for r in got)


def test_compaction_passes_through_without_duplicates(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    for i in range(4):
        write(src, ids(i * 5, i * 5 + 5))
    stream(spark, src, dst, cp)
    DeltaTable(str(src)).optimize.compact()  # dataChange=false
    write(src, ids(20, 22))
    stream(spark, src, dst, cp)
    assert [r[0] for r in rows(spark, str(dst))] == list(range(22))


def test_table_recreated_is_a_clear_error(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 5))
    stream(spark, src, dst, cp)
    shutil.rmtree(src)
    write(src, ids(0, 5))
    write(src, ids(5, 9))
    with pytest.raises(headwater.HeadwaterError) as err:
        stream(spark, src, dst, cp)
    assert err.value.code == "HW_SOURCE_TABLE_RECREATED"


def test_a_dataframe_restarted_on_a_recreated_table_is_a_clear_error(spark, tmp):
    """The data source keeps the table's id from when the DataFrame was made; a query started
    again from that DataFrame, after the table was recreated at the same version number, must
    still see the new id."""
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 5))
    df = spark.readStream.format("delta").load(str(src))

    def run() -> None:
        (df.writeStream.format("delta").option("checkpointLocation", str(cp))
         .trigger(availableNow=True).start(str(dst)).awaitTermination(120))

    run()
    shutil.rmtree(src)
    write(src, ids(10, 15))  # version 0 again, a new table id
    with pytest.raises(headwater.HeadwaterError) as err, headwater.translated():
        run()
    assert err.value.code == "HW_SOURCE_TABLE_RECREATED"
    assert [r[0] for r in rows(spark, str(dst))] == list(range(5))


def test_schema_change_is_a_clear_error(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 5))
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(cp))
             .trigger(processingTime="200 milliseconds").start(str(dst)))
    query.processAllAvailable()
    write(src, {**ids(5, 7), "extra": [1.0, 2.0]}, schema_mode="merge")
    with pytest.raises(headwater.HeadwaterError) as err, headwater.translated():
        query.awaitTermination(120)
    assert err.value.code == "HW_SOURCE_SCHEMA_CHANGED"
    assert "extra" in str(err.value)
    # A restart picks up the new schema; the sink enforces its own unless mergeSchema is set.
    def restart(**sink_options):
        writer = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
                  .option("checkpointLocation", str(cp)).trigger(availableNow=True))
        for key, value in sink_options.items():
            writer = writer.option(key, value)
        with headwater.translated():
            writer.start(str(dst)).awaitTermination()

    with pytest.raises(headwater.HeadwaterError) as err:
        restart()
    assert err.value.code == "HW_SINK_SCHEMA_MISMATCH" and "extra" in str(err.value)
    restart(mergeSchema="true")
    assert rows(spark, str(dst))[-1] == (6, "n6", 2.0)


def test_partitioned_source_streams_partition_values(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, {"id": pa.array([1, 2, 3], pa.int64()), "day": ["2026-01-01", "2026-01-02", None]},
          partition_by=["day"])
    stream(spark, src, dst, cp)
    assert rows(spark, str(dst)) == [(1, "2026-01-01"), (2, "2026-01-02"), (3, None)]


def test_planning_reads_only_new_log_files_after_1000_commits(tmp):
    """latestOffset reads the commits after its start, not the whole log (checkpoints help)."""
    src = tmp / "src"
    write(src, ids(0, 1))
    table = DeltaTable(str(src))
    for i in range(1, 1000):  # 999 one-file commits, written as another writer would
        name = f"f{i}.parquet"
        pq.write_table(pa.table(ids(i, i + 1)), str(src / name))
        add = {"add": {"path": name, "size": (src / name).stat().st_size, "partitionValues": {},
                       "modificationTime": 0, "dataChange": True}}
        (src / "_delta_log" / f"{i:020d}.json").write_text(json.dumps(add) + "\n")
    DeltaTable(str(src)).create_checkpoint()  # at 999, as a writer's checkpoint interval would
    table = DeltaTable(str(src))
    assert table.version() == 999
    log = DeltaLog(str(src))
    planner = SourcePlanner(log, spark_schema(table.schema().to_json()), [],
                            table.metadata().id, SourceOptions())
    start = Offset(table.metadata().id, 995, -1, False)
    end = planner.latest_offset(start, max_files=1000, max_bytes=None)
    assert end == Offset(table.metadata().id, 1000, -1, False)
    # commits 995..999, then _last_checkpoint once: is the missing commit 1000 lost to log
    # cleanup, or just not written yet? (re-read only when the file changes)
    assert log.reads == 6
    log.reads = 0
    assert planner.latest_offset(end, 1000, None) == end  # no new data
    assert log.reads == 0
    write(src, ids(1000, 1001))
    assert planner.latest_offset(end, 1000, None).version == 1001
    assert log.reads == 1


def test_log_cleanup_fails_loudly_or_skips_with_fail_on_data_loss_false(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 2))
    stream(spark, src, dst, cp)  # offset now at version 1
    for i in range(1, 6):
        write(src, ids(i * 10, i * 10 + 2))
    DeltaTable(str(src)).create_checkpoint()  # checkpoint at 5
    for version in range(0, 5):  # what log cleanup does past the retention period
        (src / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(headwater.HeadwaterError) as err:
        stream(spark, src, dst, cp)
    assert err.value.code == "HW_SOURCE_DATA_LOSS" and "Commit 1" in str(err.value)
    write(src, ids(60, 62))
    stream(spark, src, dst, cp, failOnDataLoss="false")
    assert [r[0] for r in rows(spark, str(dst))] == [0, 1, 60, 61]


def test_starting_timestamp(spark, tmp):
    src = tmp / "src"
    write(src, ids(0, 2))
    write(src, ids(2, 4))
    old = time.time() - 3600
    for version in (0, 1):
        os.utime(src / "_delta_log" / f"{version:020d}.json", (old, old))
    write(src, ids(4, 6))
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)).isoformat()
    stream(spark, src, tmp / "dst", tmp / "cp", startingTimestamp=since)
    assert [r[0] for r in rows(spark, str(tmp / "dst"))] == [4, 5]


def test_batch_zero_replanned_after_new_commits_reads_the_same_rows(spark, tmp):
    """Spark asks initialOffset() again when it plans batch 0 (and when a restart replays
    it); a commit landing in between must not be read by batch 0 and again by batch 1."""
    src = str(tmp / "src")
    for i in range(3):
        write(src, ids(i * 10, i * 10 + 10))

    def planner() -> SourcePlanner:  # a new reader instance: what a restart gets
        table = DeltaTable(src)
        return SourcePlanner(DeltaLog(src), spark_schema(table.schema().to_json()), [],
                             table.metadata().id, SourceOptions())

    first = planner()
    start = first.initial_offset()
    end = first.latest_offset(start, max_files=1000, max_bytes=None)
    planned = sorted(e.path for e in first.files_between(start, end))
    assert len(planned) == 3
    write(src, ids(30, 40))  # lands between planning and reading
    assert first.initial_offset() == start  # the same reader answers the same
    replay = planner()  # a restart replaying batch 0 asks a new reader
    restart = replay.initial_offset()
    assert restart.version > start.version  # whose answer moved
    assert sorted(e.path for e in replay.files_between(restart, end)) == planned
    following = first.latest_offset(end, max_files=1000, max_bytes=None)
    later = first.files_between(end, following)
    assert len(later) == 1 and later[0].path not in planned  # the new commit, once


def test_a_fresh_worker_plans_and_reads_a_stream_without_importing_pandas(tmp):
    """Spark starts a new Python process for every streaming query's source and every batch
    plan: pandas (0.2 s of CPU to import) must not come along with the Delta log's actions."""
    import subprocess
    import sys

    path = tmp / "t"
    write(path, {"id": [1, 2]})
    write(path, {"id": [3]})
    script = f"""
import sys
from headwater.delta.datasource import DeltaDataSource
source = DeltaDataSource({{"path": {str(path)!r}}})
schema = source.schema()
reader = source.streamReader(schema)
start = reader.initialOffset()
end = reader.latestOffset(start, reader.getDefaultReadLimit())
def count(items):  # Arrow record batches (or rows)
    return sum(getattr(item, "num_rows", 1) for item in items)
rows = sum(count(reader.read(p)) for p in reader.partitions(start, end))
batch = source.reader(schema)
rows += sum(count(batch.read(p)) for p in batch.partitions())
print(rows, "pandas" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["6", "False"]


def test_a_cleaned_up_version_is_version_not_found_and_latest_is_listed(tmp):
    """A version whose commits log cleanup removed is a missing version, not a missing table;
    the latest version comes from the log's file names (commits and checkpoints)."""
    src = tmp / "src"
    for i in range(5):
        write(src, ids(i, i + 1))
    DeltaTable(str(src)).create_checkpoint()
    for v in range(3):
        os.remove(src / "_delta_log" / f"{v:020d}.json")
    log = DeltaLog(str(src))
    assert log.latest_version() == 4
    assert log.table(4).version() == 4
    with pytest.raises(headwater.HeadwaterError) as err:
        log.table(1)
    assert err.value.code == "HW_DELTA_VERSION_NOT_FOUND"
    with pytest.raises(headwater.HeadwaterError) as err:
        DeltaLog(str(tmp / "nothing")).latest_version()
    assert err.value.code == "HW_DELTA_TABLE_NOT_FOUND"
