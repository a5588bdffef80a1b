"""Delta writes outside pipelines through Spark's parquet writer and one driver commit (issue 26
item 2): ``df.write.format("delta")``, saveAsTable / insertInto / INSERT by name, and the
streaming sink (foreachBatch, exactly once with the checkpoint's query id). Each test reads
back real tables; the path taken is named on the ``headwater.delta.write`` debug log."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from tests.support import golden, rows, write

import headwater
from headwater import HeadwaterError, Lakehouse
from headwater.delta.write.staging import staged_adds
from headwater.errors.delta import DeltaConcurrentModificationException
from headwater.spark.micro_batch_sink import MicroBatch, _logged_files, start_with_sink

WRITE_LOG = "headwater.delta.write"


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.DEBUG, logger=WRITE_LOG)
    return caplog


def routes(caplog) -> list[str]:
    """'native' / 'python' for each write the log names, in order."""
    found = []
    for record in caplog.records:
        if record.name != WRITE_LOG or " already committed" in record.getMessage():
            continue
        text = record.getMessage()
        found.append("python" if "Python" in text else "native")
    return found


def history(path) -> list[tuple[str, str]]:
    return [(h["operation"], h["operationParameters"].get("mode"))
            for h in reversed(DeltaTable(str(path)).history())]


def table_files(path: Path) -> set[str]:
    """Data files on disk (relative), hidden and log files aside."""
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)}


def referenced(path: Path) -> set[str]:
    return {str(Path(u).relative_to(path)) for u in DeltaTable(str(path)).file_uris()}


def test_batch_modes_write_natively_with_delta_spark_history(spark, tmp, log):
    path = tmp / "t"
    df = spark.range(0, 40, 1, 2).selectExpr("id", "id * 2 AS doubled", "cast(id AS string) s")
    df.write.format("delta").save(str(path))  # no mode: Spark's errorifexists, a new table
    df.write.format("delta").mode("append").save(str(path))
    df.write.format("delta").mode("ignore").save(str(path))  # exists: nothing written
    with pytest.raises(HeadwaterError) as err:
        df.write.format("delta").mode("errorifexists").save(str(path))
    assert err.value.error_class == "DELTA_PATH_EXISTS"
    assert sorted(r[0] for r in rows(spark, str(path))) == sorted(list(range(40)) * 2)
    df.where("id < 5").write.format("delta").mode("overwrite").save(str(path))
    assert rows(spark, str(path)) == [(i, i * 2, str(i)) for i in range(5)]
    assert routes(log) == ["native"] * 3
    assert history(path) == [("WRITE", "ErrorIfExists"), ("WRITE", "Append"),
                             ("WRITE", "Overwrite")]
    # delta-spark's layout: data files beside the log, no staging folder left
    assert all("/" not in f for f in table_files(path))
    assert not [p for p in path.iterdir() if p.name.startswith("hw-")]
    stats = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    assert sum(s["num_records"] for s in stats) == 5
    assert min(s["min.id"] for s in stats) == 0 and max(s["max.id"] for s in stats) == 4


def test_partitioned_write_commits_partition_values_of_hive_folders(spark, tmp, log):
    path = tmp / "p"
    df = spark.createDataFrame(
        [(1, "eu", "a:b c"), (2, "us", "x"), (3, None, "x"), (4, "eu", "y")],
        "id long, region string, tag string")
    df.write.format("delta").partitionBy("region").save(str(path))
    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["region"]
    counts: dict[str | None, int] = {}
    for add in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        counts[add["partition.region"]] = counts.get(add["partition.region"], 0) \
            + add["num_records"]
    assert counts == {None: 1, "eu": 2, "us": 1}
    assert {f.split("/")[0] for f in referenced(path)} == \
        {"region=__HIVE_DEFAULT_PARTITION__", "region=eu", "region=us"}
    # escaped values in data columns and the null partition come back as written
    assert rows(spark, str(path)) == [(1, "eu", "a:b c"), (2, "us", "x"), (3, None, "x"),
                                      (4, "eu", "y")]
    # replaceWhere: only the named partition replaced, natively
    (spark.createDataFrame([(9, "eu", "z")], "id long, region string, tag string")
     .write.format("delta").mode("overwrite").option("replaceWhere", "region = 'eu'")
     .save(str(path)))
    assert [r[0] for r in rows(spark, str(path))] == [2, 3, 9]
    before = (DeltaTable(str(path)).version(), table_files(path))
    with pytest.raises(HeadwaterError) as err, headwater.translated():
        (spark.createDataFrame([(10, "us", "z")], "id long, region string, tag string")
         .write.format("delta").mode("overwrite").option("replaceWhere", "region = 'eu'")
         .save(str(path)))
    assert err.value.code == "HW_REPLACE_WHERE_MISMATCH"
    assert (DeltaTable(str(path)).version(), table_files(path)) == before  # its files deleted
    assert routes(log) == ["native"] * 2  # (the refused write logs no commit)
    assert history(path)[-1] == ("WRITE", "Overwrite")


def test_replayed_txn_version_writes_nothing_and_user_metadata_is_kept(spark, tmp, log):
    path = tmp / "t"
    df = spark.range(3)
    for _ in range(2):
        (df.write.format("delta").mode("append").option("txnAppId", "job")
         .option("txnVersion", 4).option("userMetadata", "nightly").save(str(path)))
    assert len(rows(spark, str(path))) == 3
    table = DeltaTable(str(path))
    assert table.version() == 0 and table.transaction_version("job") == 4
    assert table.history(1)[0]["userMetadata"] == "nightly"
    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", "from-conf")
    try:
        (df.write.format("delta").mode("append").option("txnAppId", "job")
         .option("txnVersion", 5).save(str(path)))
    finally:
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
    assert DeltaTable(str(path)).history(1)[0]["userMetadata"] == "from-conf"
    assert len(rows(spark, str(path))) == 6 and len(table_files(path)) == len(referenced(path))
    assert routes(log) == ["native"] * 2  # the replay was skipped before any Spark job


def test_a_failing_dataframe_or_a_conflicting_commit_leaves_no_files(spark, tmp, monkeypatch):
    import headwater.delta.write.commit as sink

    path = tmp / "t"
    write(path, {"id": pa.array(range(10), pa.int64())})
    boom = spark.range(20).select(
        F.when(F.col("id") == 15, F.raise_error(F.lit("boom"))).otherwise(F.col("id"))
        .alias("id"))
    with pytest.raises(Exception, match="boom"):
        boom.write.format("delta").mode("append").save(str(path))
    assert DeltaTable(str(path)).version() == 0
    assert table_files(path) == referenced(path)
    assert not [p for p in path.iterdir() if p.name.startswith("hw-")]

    # A real race, made certain: the overwrite's commit is handed the snapshot it would have
    # read before a concurrent DELETE committed; delta-spark raises a concurrent-modification
    # class, and the overwrite's own files must not stay behind.
    stale = DeltaTable(str(path))
    DeltaTable(str(path)).delete("id < 5")
    opened = iter([stale])
    real_open = sink.open_table
    monkeypatch.setattr(sink, "open_table", lambda p: next(opened, None) or real_open(p))
    with pytest.raises(DeltaConcurrentModificationException):
        spark.range(3).write.format("delta").mode("overwrite").save(str(path))
    assert DeltaTable(str(path)).version() == 1
    assert sorted(r[0] for r in rows(spark, str(path))) == [5, 6, 7, 8, 9]
    assert table_files(path) == referenced(path) | _removed_by_delete(path)


def _removed_by_delete(path: Path) -> set[str]:
    """Files the DELETE removed (still on disk until VACUUM)."""
    removed = set()
    for line in (path / "_delta_log" / f"{1:020d}.json").read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            removed.add(action["remove"]["path"])
    return removed


def test_column_mapped_table_is_written_natively_not_by_the_python_writer(spark, tmp, log):
    path = tmp / "cm"
    shutil.copytree(golden("table-with-columnmapping-mode-name"), path)
    version = DeltaTable(str(path)).version()
    df = spark.read.format("delta").load(str(path)).limit(1)
    df.write.format("delta").mode("append").save(str(path))  # physical names: Spark's writer
    assert DeltaTable(str(path)).version() == version + 1
    messages = [r.getMessage() for r in log.records if r.name == WRITE_LOG]
    assert messages and "native" in messages[-1]
    # the Python writer (targetFileSize) would write logical names: refused, nothing left
    files = {p.name for p in path.rglob("*.parquet")}
    with pytest.raises(HeadwaterError) as err, headwater.translated():
        df.write.format("delta").mode("append").option("targetFileSize", "1mb").save(str(path))
    assert err.value.code == "HW_DELTA_UNSUPPORTED_FEATURE"
    assert "column-mapped" in str(err.value)
    assert DeltaTable(str(path)).version() == version + 1
    assert {p.name for p in path.rglob("*.parquet")} == files


def stream_once(spark, src: Path, dst: Path, cp: Path, **options) -> None:
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(cp)).options(**options)
             .trigger(availableNow=True).start(str(dst)))
    query.awaitTermination()


def test_native_sink_restarted_from_its_checkpoint_writes_no_duplicates(spark, tmp, log):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, {"id": pa.array(range(5), pa.int64()), "day": ["a", "b"] * 2 + ["a"]})
    stream_once(spark, src, dst, cp, partitionBy="day")
    write(src, {"id": pa.array(range(5, 9), pa.int64()), "day": ["b"] * 4})
    stream_once(spark, src, dst, cp)
    assert [r[0] for r in rows(spark, str(dst))] == list(range(9))
    assert DeltaTable(str(dst)).metadata().partition_columns == ["day"]
    assert any("the native sink" in r.getMessage() for r in log.records)
    version = DeltaTable(str(dst)).version()
    # Spark lost the record of batch 1 (a driver killed after the Delta commit): the restart
    # runs batch 1 again, and the sink's txn check (the checkpoint's query id) skips it.
    for name in ("1", ".1.crc"):  # the commit file and Hadoop's checksum beside it
        (cp / "commits" / name).unlink(missing_ok=True)
    stream_once(spark, src, dst, cp)
    assert [r[0] for r in rows(spark, str(dst))] == list(range(9))
    table = DeltaTable(str(dst))
    assert table.version() == version
    query_id = json.loads((cp / "metadata").read_text().splitlines()[0])["id"]
    assert table.transaction_version(f"headwater-stream-{query_id}") == 1
    assert table_files(dst) == referenced(dst)  # the replay's files were deleted
    assert [h[0] for h in history(dst)] == ["STREAMING UPDATE", "STREAMING UPDATE"]


def test_complete_mode_stream_overwrites_natively(spark, tmp, log):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, {"id": pa.array(range(6), pa.int64()), "k": ["a", "b", "a", "c", "a", "b"]})
    counts = spark.readStream.format("delta").load(str(src)).groupBy("k").count()
    (counts.writeStream.format("delta").outputMode("complete")
     .option("checkpointLocation", str(cp)).trigger(availableNow=True).start(str(dst))
     .awaitTermination())
    assert sorted(rows(spark, str(dst), order="k")) == [("a", 3), ("b", 2), ("c", 1)]
    assert any("the native sink" in r.getMessage() for r in log.records)
    assert history(dst) == [("STREAMING UPDATE", None)]  # delta-spark's sink: no mode


@pytest.fixture
def lake(spark, tmp, keep_lakehouse):
    lake = Lakehouse(tmp / "lake", spark)
    yield lake
    lake.detach()


def test_save_as_table_insert_into_and_sql_insert_write_natively(spark, lake, log):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    df.write.saveAsTable("people")
    spark.createDataFrame([(3, "c")], "id long, name string").write.mode("append") \
        .saveAsTable("people")
    spark.createDataFrame([(4, "d")], "a int, b string").write.insertInto("people")
    spark.sql("INSERT INTO people VALUES (5, 'e')")
    spark.sql("INSERT INTO people (name, id) SELECT 'f', 6")
    assert sorted(tuple(r) for r in spark.table("people").collect()) == \
        [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, "f")]
    assert routes(log) == ["native"] * 5
    with pytest.raises(HeadwaterError) as err:
        spark.createDataFrame([(7,)], "id long").write.insertInto("people")
    assert err.value.error_class == "INSERT_COLUMN_ARITY_MISMATCH"
    spark.createDataFrame([(8, "h")], "x long, y string").write.insertInto("people",
                                                                            overwrite=True)
    spark.sql("INSERT OVERWRITE people SELECT id + 1, name FROM people")
    assert [tuple(r) for r in spark.table("people").collect()] == [(9, "h")]
    path = lake.path("people")
    assert [op for op, _ in history(path)][1:] == ["WRITE"] * 7
    assert history(path)[-1] == ("WRITE", "Overwrite")
    assert not [p for p in Path(path).iterdir() if p.name.startswith("hw-")]


def test_to_table_stream_uses_the_native_sink(spark, lake, tmp, log):
    src = tmp / "src"
    write(src, {"id": pa.array(range(4), pa.int64())})
    query = (spark.readStream.format("delta").load(str(src)).writeStream
             .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True)
             .toTable("copy"))
    query.awaitTermination()
    assert sorted(r.id for r in spark.table("copy").collect()) == [0, 1, 2, 3]
    assert any("the native sink" in r.getMessage() for r in log.records)
    assert DeltaTable(lake.path("copy")).history(1)[0]["operation"] == "STREAMING UPDATE"


def test_native_sink_writes_each_micro_batch_with_sparks_parquet_sink(spark, tmp):
    """The micro-batch reaches the sink with its own plan (no foreachBatch copy): Spark's
    parquet sink writes it, timestamps as INT64 microseconds with statistics, and only the
    data files end up in the table (the staging folder and its sink log are gone)."""
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    spark.range(0, 1000, 1, 2).select(F.col("id"), F.timestamp_seconds("id").alias("ts")) \
        .write.format("delta").save(str(src))
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(cp)).trigger(availableNow=True).start(str(dst)))
    query.awaitTermination()
    assert query.lastProgress["sink"]["description"] == f"DeltaSink[{dst}]"
    assert sorted(r.id for r in spark.read.format("delta").load(str(dst)).collect()) == \
        list(range(1000))
    assert sorted(p.name for p in dst.iterdir() if not p.name.endswith(".parquet")) == \
        ["_delta_log"]
    stats = [json.loads(a["stats"]) for a in _adds_of(dst)]
    assert sum(s["numRecords"] for s in stats) == 1000
    assert all("ts" in s["minValues"] for s in stats)


def test_the_staging_sinks_log_is_read_as_spark_reads_it(spark, tmp):
    """The files a micro-batch's staging folder holds, read from its sink log's file, are the
    ones Spark's own FileStreamSinkLog lists, partition values that need escaping included;
    a log of another version is left to Spark."""
    src, cp, staged = tmp / "src", tmp / "cp", tmp / "staged"
    spark.createDataFrame([(1, "a b"), (2, "c%d"), (3, "é/f")], "id long, p string") \
        .write.format("delta").save(str(src))
    listed: list[str] = []
    writer = (spark.readStream.format("delta").load(str(src)).writeStream
              .option("checkpointLocation", str(cp)).trigger(availableNow=True))
    query = start_with_sink(writer, "test", lambda batch: listed.extend(
        batch.write_parquet(str(staged), ["p"], {"compression": "snappy"})))
    query.awaitTermination()
    jvm = spark._jvm
    entries = jvm.org.apache.spark.sql.execution.streaming.sinks.FileStreamSinkLog(
        1, spark._jsparkSession, str(staged / "_spark_metadata"),
        jvm.scala.Option.empty()).allFiles()
    by_spark = {str(jvm.java.net.URI(e.path()).getPath()) for e in entries}  # decoded
    on_disk = {str(f) for f in staged.rglob("*.parquet")}
    assert len(listed) == 3 and set(listed) == by_spark == on_disk
    log = staged / "_spark_metadata" / "0"
    log.write_text(log.read_text().replace("v1", "v2", 1))
    assert _logged_files(str(staged)) is None


def test_a_staging_sink_log_python_does_not_read_is_read_by_spark(spark, tmp, monkeypatch):
    """With a compact interval of 1, the staging sink's first log file is ``0.compact``:
    headwater leaves it to Spark's FileStreamSinkLog, and the batch's files are still all
    listed and committed."""
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    spark.range(0, 100, 1, 2).write.format("delta").save(str(src))
    seen: list[list[str]] = []
    original = MicroBatch.write_parquet

    def write_parquet(batch, folder, partition_columns, options):
        files = original(batch, folder, partition_columns, options)
        seen.append(sorted(p.name for p in Path(folder, "_spark_metadata").iterdir()
                           if not p.name.startswith(".")))
        return files

    monkeypatch.setattr(MicroBatch, "write_parquet", write_parquet)
    key = "spark.sql.streaming.fileSink.log.compactInterval"
    spark.conf.set(key, "1")
    try:
        query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
                 .option("checkpointLocation", str(cp)).trigger(availableNow=True)
                 .start(str(dst)))
        query.awaitTermination()
    finally:
        spark.conf.unset(key)
    assert seen == [["0.compact"]]
    assert sorted(r.id for r in spark.read.format("delta").load(str(dst)).collect()) == \
        list(range(100))


def _adds_of(table: Path) -> list[dict]:
    adds = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
    return adds


def test_a_native_sink_without_checkpoint_is_sparks_own_error(spark, tmp):
    """Spark's own check (a checkpoint is needed) surfaces as Spark raises it for any sink,
    not wrapped by the reflection that starts the query."""
    src = tmp / "src"
    write(src, {"id": pa.array([1], pa.int64())})
    with pytest.raises(AnalysisException) as err:
        (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
         .trigger(availableNow=True).start(str(tmp / "dst")))
    assert "checkpointLocation" in str(err.value)
    assert "InvocationTargetException" not in str(err.value)


def test_native_sink_schema_mismatch_is_a_clear_error(spark, tmp):
    src, dst = tmp / "src", tmp / "dst"
    write(src, {"id": pa.array([1], pa.int64()), "name": pa.array([2.5])})
    write(dst, {"id": pa.array([1], pa.int64()), "name": ["x"]})
    with pytest.raises(HeadwaterError) as err, headwater.translated():
        stream_once(spark, src, dst, tmp / "cp")
    assert err.value.code == "HW_SINK_SCHEMA_MISMATCH"
    assert "name (table string, data double)" in str(err.value)
    assert DeltaTable(str(dst)).version() == 0 and table_files(dst) == referenced(dst)


def test_staged_files_are_only_those_the_sink_listed_and_all_of_them(spark, tmp):
    """A file Spark's sink did not list (a discarded attempt's) is not committed; a listed
    file that is not there is an error, never a commit without its rows."""
    staging = tmp / "table" / "hw-stage"
    staging.mkdir(parents=True)
    for name in ("part-a.parquet", "part-stray.parquet"):
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), staging / name)
    df = spark.createDataFrame([(1,)], "id long")
    kept = staged_adds(str(tmp / "table"), "hw-stage", df, [], {str(staging / "part-a.parquet")})
    assert [a["path"] for a in kept] == ["hw-stage/part-a.parquet"]
    with pytest.raises(HeadwaterError) as err:
        staged_adds(str(tmp / "table"), "hw-stage", df, [],
              {str(staging / "part-a.parquet"), str(staging / "part-gone.parquet")})
    assert err.value.code == "HW_DELTA_FILE_NOT_FOUND"
