"""The Delta streaming sink and batch writes, after delta-spark's DeltaSinkSuite."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from tests.support import rows, write

import headwater


def test_complete_mode_replaces_the_table_in_one_commit(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, {"id": pa.array(range(6), pa.int64()), "k": ["a", "b", "a", "c", "a", "b"]})

    def run():
        counts = spark.readStream.format("delta").load(str(src)).groupBy("k").count()
        with headwater.translated():
            (counts.writeStream.format("delta").outputMode("complete")
             .option("checkpointLocation", str(cp)).trigger(availableNow=True)
             .start(str(dst)).awaitTermination())

    run()
    assert sorted(rows(spark, str(dst), order="k")) == [("a", 3), ("b", 2), ("c", 1)]
    write(src, {"id": pa.array([6, 7], pa.int64()), "k": ["c", "d"]})
    run()
    assert sorted(rows(spark, str(dst), order="k")) == [("a", 3), ("b", 2), ("c", 2), ("d", 1)]
    table = DeltaTable(str(dst))
    last = table.history(1)[0]
    assert last["operation"] == "STREAMING UPDATE"  # as delta-spark's sink records it
    assert last["operationParameters"]["outputMode"] == "Complete"
    assert len(table.file_uris()) >= 1


def test_sink_commit_carries_txn_and_stats(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, {"id": pa.array([3, 1, 2], pa.int64()), "s": ["b", None, "a"],
                "ts": pa.array([10, 20, 30], pa.timestamp("us", tz="UTC"))})
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(cp)).trigger(availableNow=True).start(str(dst)))
    query.awaitTermination()
    table = DeltaTable(str(dst))
    app_id = f"headwater-stream-{query.id}"
    assert table.transaction_version(app_id) == 0
    actions = [json.loads(line) for line in
               (dst / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    stats = [json.loads(a["add"]["stats"]) for a in actions if "add" in a]
    assert sum(s["numRecords"] for s in stats) == 3
    merged = stats[0]
    if len(stats) == 1:
        assert merged["minValues"]["id"] == 1 and merged["maxValues"]["id"] == 3
        assert merged["nullCount"]["s"] == 1
        assert merged["minValues"]["ts"] == "1970-01-01T00:00:00.000Z"
    # delta-rs reads what we wrote, with the same rows
    assert sorted(pa.table(table.scan().read_all()).column("id").to_pylist()) == [1, 2, 3]


def test_sink_schema_mismatch_names_the_columns(spark, tmp):
    dst = tmp / "dst"
    write(dst, {"id": pa.array([1], pa.int64()), "name": ["x"]})
    df = spark.createDataFrame([(1, 2.5)], "id long, name double")
    with pytest.raises(headwater.HeadwaterError) as err, headwater.translated():
        df.write.format("delta").mode("append").save(str(dst))
    assert err.value.code == "HW_SINK_SCHEMA_MISMATCH"
    assert "name (table string, data double)" in str(err.value)


def test_merge_schema_adds_columns(spark, tmp):
    dst = tmp / "dst"
    spark.createDataFrame([(1,)], "id long").write.format("delta").mode("append").save(str(dst))
    (spark.createDataFrame([(2, "x")], "id long, extra string").write.format("delta")
     .mode("append").option("mergeSchema", "true").save(str(dst)))
    assert rows(spark, str(dst)) == [(1, None), (2, "x")]


def test_partitioned_write_then_batch_read_with_pruning(spark, tmp):
    dst = tmp / "dst"
    df = spark.createDataFrame(
        [(i, f"2026-01-0{i % 3 + 1}", "eu" if i % 2 else "us") for i in range(12)],
        "id long, day string, region string")
    df.write.format("delta").mode("append").option("partitionBy", "day,region").save(str(dst))
    table = DeltaTable(str(dst))
    assert table.metadata().partition_columns == ["day", "region"]
    assert sorted(table.partitions(), key=lambda p: (p["day"], p["region"]))[0] == \
        {"day": "2026-01-01", "region": "eu"}
    read = spark.read.format("delta").load(str(dst))
    assert read.filter("day = '2026-01-02'").count() == 4
    assert [r.id for r in read.filter("region = 'eu' AND day = '2026-01-01'").orderBy("id")
            .collect()] == [3, 9]
    assert rows(spark, str(dst)) == [tuple(r) for r in df.orderBy("id").collect()]


def test_overwrite_and_replace_where(spark, tmp):
    dst = tmp / "dst"
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "id long, p string") \
        .write.format("delta").mode("append").option("partitionBy", "p").save(str(dst))
    (spark.createDataFrame([(10, "a")], "id long, p string").write.format("delta")
     .mode("overwrite").option("replaceWhere", "p = 'a'").save(str(dst)))
    assert rows(spark, str(dst)) == [(2, "b"), (10, "a")]
    with pytest.raises(headwater.HeadwaterError) as err, headwater.translated():
        (spark.createDataFrame([(11, "b")], "id long, p string").write.format("delta")
         .mode("overwrite").option("replaceWhere", "p = 'a'").save(str(dst)))
    assert err.value.code == "HW_REPLACE_WHERE_MISMATCH"
    spark.createDataFrame([(7, "z")], "id long, p string").write.format("delta") \
        .mode("overwrite").save(str(dst))
    assert rows(spark, str(dst)) == [(7, "z")]


def test_idempotent_batch_writes_with_txn(spark, tmp):
    dst = tmp / "dst"
    df = spark.createDataFrame([(1,)], "id long")
    for _ in range(2):
        (df.write.format("delta").mode("append").option("txnAppId", "job-1")
         .option("txnVersion", 5).save(str(dst)))
    assert rows(spark, str(dst)) == [(1,)]
    (df.write.format("delta").mode("append").option("txnAppId", "job-1")
     .option("txnVersion", 6).save(str(dst)))
    assert rows(spark, str(dst)) == [(1,), (1,)]
    assert DeltaTable(str(dst)).transaction_version("job-1") == 6
    # a repeated attempt leaves no stray files behind
    assert len(list(dst.glob("*.parquet"))) == 2


def test_foreach_batch_writes_two_tables_exactly_once(spark, tmp):
    src, a, b, cp = tmp / "src", tmp / "a", tmp / "b", tmp / "cp"
    write(src, {"id": pa.array(range(10), pa.int64())})

    def to_both(batch_df, batch_id):
        for target in (a, b):
            (batch_df.write.format("delta").mode("append").option("txnAppId", f"fb-{target.name}")
             .option("txnVersion", batch_id).save(str(target)))
        if batch_id == 0 and not (tmp / "replayed").exists():
            (tmp / "replayed").touch()
            to_both(batch_df, batch_id)  # a replayed batch, as after a crash: no duplicates

    (spark.readStream.format("delta").load(str(src)).writeStream.foreachBatch(to_both)
     .option("checkpointLocation", str(cp)).trigger(availableNow=True).start().awaitTermination())
    assert len(rows(spark, str(a))) == 10 and len(rows(spark, str(b))) == 10


def test_write_without_path_is_a_clear_error(spark):
    with pytest.raises(headwater.HeadwaterError) as err, headwater.translated():
        spark.createDataFrame([(1,)], "id long").write.format("delta").mode("append").save()
    assert err.value.code == "HW_SINK_NO_PATH"


def test_read_missing_table_is_a_clear_error(spark, tmp):
    with pytest.raises(headwater.HeadwaterError) as err, headwater.translated():
        spark.read.format("delta").load(str(tmp / "nothing")).count()
    assert err.value.code == "HW_DELTA_TABLE_NOT_FOUND"


def test_time_travel(spark, tmp):
    dst = tmp / "dst"
    write(dst, {"id": pa.array([1], pa.int64())})
    write(dst, {"id": pa.array([2], pa.int64())})
    write(dst, {"id": pa.array([9], pa.int64())}, mode="overwrite")
    load = spark.read.format("delta")
    assert [r.id for r in load.option("versionAsOf", 1).load(str(dst)).orderBy("id").collect()] \
        == [1, 2]
    assert [r.id for r in load.option("versionAsOf", 0).load(str(dst)).collect()] == [1]
    assert [r.id for r in spark.read.format("delta").load(str(dst)).collect()] == [9]


def test_stream_static_join_sees_new_static_versions(spark, tmp):
    facts, dims, dst, cp = tmp / "facts", tmp / "dims", tmp / "dst", tmp / "cp"
    write(dims, {"k": pa.array([1], pa.int64()), "label": ["one"]})
    write(facts, {"k": pa.array([1, 2], pa.int64())})
    static = spark.read.format("delta").load(str(dims))
    joined = spark.readStream.format("delta").load(str(facts)).join(static, "k", "left")
    query = (joined.writeStream.format("delta").option("checkpointLocation", str(cp))
             .trigger(processingTime="200 milliseconds").start(str(dst)))
    try:
        query.processAllAvailable()
        write(dims, {"k": pa.array([2], pa.int64()), "label": ["two"]})
        write(facts, {"k": pa.array([2], pa.int64())})
        query.processAllAvailable()
    finally:
        query.stop()
    got = sorted(rows(spark, str(dst), order="k"), key=lambda r: (r[0], r[1] or ""))
    assert got == [(1, "one"), (2, None), (2, "two")]


def test_target_file_size_rolls_files(spark, tmp):
    dst = tmp / "dst"
    df = spark.range(0, 200000, numPartitions=1).selectExpr("id", "uuid() AS s")
    df.write.format("delta").mode("append").option("targetFileSize", "1m").save(str(dst))
    files = DeltaTable(str(dst)).get_add_actions(flatten=True)
    assert pa.table(files).num_rows >= 3
    assert spark.read.format("delta").load(str(dst)).count() == 200000


def test_a_blind_append_commits_after_a_concurrent_delete(tmp, monkeypatch):
    """The sink's append raced a DELETE: it opened the table before the DELETE committed and
    commits after it. Delta lets a blind append through (it read nothing); delta-rs alone
    refuses it ("deleted data this operation read"), so the sink retries on a fresh snapshot.
    The race is made real and certain: the sink is handed the snapshot it would have opened."""
    from pyspark.sql.types import LongType, StructField, StructType

    import headwater.delta.write.commit as sink
    from headwater.delta.files import FileWriter
    from headwater.delta.write.request import WriteRequest

    path = str(tmp / "t")
    write(path, {"id": list(range(10))})
    stale = DeltaTable(path)                       # the appender's view, before the DELETE
    DeltaTable(path).delete("id < 5")              # the concurrent DELETE commits first
    writer = FileWriter(path, [], 1 << 20)
    writer.write(pa.record_batch({"id": pa.array([100, 101], pa.int64())}))
    adds = writer.close().adds
    opened = iter([stale])
    real_open = sink.open_table
    monkeypatch.setattr(sink, "open_table", lambda p: next(opened, None) or real_open(p))
    schema = StructType([StructField("id", LongType())])
    assert sink.commit_files(WriteRequest(path=path, txn=("q", 0)), adds, schema)
    table = DeltaTable(path)
    ids = sorted(table.to_pyarrow_dataset().to_table().column("id").to_pylist())
    assert ids == [5, 6, 7, 8, 9, 100, 101]
    assert table.transaction_version("q") == 0


def test_a_blind_append_retry_skips_a_batch_another_writer_committed_meanwhile(tmp, monkeypatch):
    """As above, but while the sink waited another writer of the same (app, batch) committed
    it (a zombie run after its lease expired, say): the retry's fresh snapshot holds that txn,
    so the sink must not commit the batch a second time, and its own files are deleted."""
    from pyspark.sql.types import LongType, StructField, StructType

    import headwater.delta.write.commit as sink
    from headwater.delta.files import FileWriter
    from headwater.delta.write.request import WriteRequest

    path = str(tmp / "t")
    write(path, {"id": list(range(10))})
    stale = DeltaTable(path)
    DeltaTable(path).delete("id < 5")
    schema = StructType([StructField("id", LongType())])

    def adds_of(ids: list[int]) -> list:
        writer = FileWriter(path, [], 1 << 20)
        writer.write(pa.record_batch({"id": pa.array(ids, pa.int64())}))
        return writer.close().adds

    assert sink.commit_files(WriteRequest(path=path, txn=("q", 0)), adds_of([100, 101]), schema)
    mine = adds_of([100, 101])
    opened = iter([stale])
    real_open = sink.open_table
    monkeypatch.setattr(sink, "open_table", lambda p: next(opened, None) or real_open(p))
    assert not sink.commit_files(WriteRequest(path=path, txn=("q", 0)), mine, schema)
    table = DeltaTable(path)
    ids = sorted(table.to_pyarrow_dataset().to_table().column("id").to_pylist())
    assert ids == [5, 6, 7, 8, 9, 100, 101]
    assert [h["operation"] for h in table.history()].count("WRITE") == 2  # the table's + one
    assert not any(os.path.exists(os.path.join(path, a["path"])) for a in mine)


CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
FILE_CONTEXT_MANAGER = ("org.apache.spark.sql.execution.streaming.checkpointing."
                        "FileContextBasedCheckpointFileManager")


def _checkpoint_manager(spark, path) -> str:
    """The class Spark's streaming code picks for a checkpoint at ``path`` in this session."""
    jvm = spark._jvm
    companion = getattr(getattr(jvm.org.apache.spark.sql.execution.streaming.checkpointing,
                                "CheckpointFileManager$"), "MODULE$")
    manager = companion.create(
        jvm.org.apache.hadoop.fs.Path(str(path)),
        spark._jsparkSession.sessionState().newHadoopConf())
    return manager.getClass().getSimpleName()


def test_a_checkpoint_continues_exactly_once_across_the_two_file_managers(spark, tmp):
    """headwater's local sessions write checkpoints through Hadoop's FileSystem API (no chmod
    and readlink processes per file); a checkpoint Spark's default FileContext manager wrote
    (an earlier headwater, or an application's own session) goes on where it stopped, and
    back: offsets, commits and a state store (dropDuplicates) included."""
    src, dst, cp = str(tmp / "src"), str(tmp / "dst"), tmp / "cp"
    assert _checkpoint_manager(spark, cp) == "FileSystemBasedCheckpointFileManager"
    ours = spark.conf.get(CHECKPOINT_MANAGER)

    def run(manager: str, start: int) -> None:
        spark.range(start, start + 3).union(spark.range(start, start + 1)) \
            .write.format("delta").mode("append").save(src)
        spark.conf.set(CHECKPOINT_MANAGER, manager)
        try:
            assert _checkpoint_manager(spark, cp) == manager.rsplit(".", 1)[1]
            (spark.readStream.format("delta").load(src).dropDuplicates(["id"])
             .writeStream.format("delta").option("checkpointLocation", str(cp))
             .trigger(availableNow=True).start(dst).awaitTermination())
        finally:
            spark.conf.set(CHECKPOINT_MANAGER, ours)

    run(FILE_CONTEXT_MANAGER, 0)
    run(ours, 2)  # 2 is a duplicate of the first batch's: the state store knows it
    run(FILE_CONTEXT_MANAGER, 4)
    ids = [r.id for r in spark.read.format("delta").load(dst).collect()]
    assert sorted(ids) == list(range(7))
    assert sorted(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit()) == [0, 1, 2]
