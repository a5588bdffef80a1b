"""The change data feed read (issue 13 part 4): batch and streaming readChangeFeed, by path and
by name, table_changes() in SQL, read_stream(read_change_feed=True), and a stream mirroring a
table that receives inserts, updates and deletes. Change rows are compared with delta-rs's
load_cdf."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import Window
from pyspark.sql import functions as F
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.delta import dml
from headwater.errors import translated

CDF = {"delta.enableChangeDataFeed": "true"}
KEY = ["_commit_version", "_change_type", "id", "v"]


def rs_changes(path, start=0, end=None) -> list[tuple]:
    """(version, type, id, v, commit ms) of the change feed as delta-rs's load_cdf gives it."""
    table = pa.table(RsTable(str(path)).load_cdf(starting_version=start,
                                                 ending_version=end).read_all())
    ms = pc.cast(pc.cast(table["_commit_timestamp"], pa.timestamp("ms")), pa.int64())
    return sorted((int(r["_commit_version"]), r["_change_type"], r["id"], r["v"], t)
                  for r, t in zip(table.to_pylist(), ms.to_pylist()))


def spark_changes(df) -> list[tuple]:
    rows = df.select(*KEY, (F.unix_micros("_commit_timestamp") / 1000).cast("long")).collect()
    return sorted(tuple(r) for r in rows)


def rs_rows(path) -> list[tuple]:
    table = pa.table(RsTable(str(path)).to_pyarrow_dataset().to_table())
    return sorted(tuple(r.values()) for r in table.to_pylist())


def changing_table(path) -> None:
    """v0 create (3 rows), v1 update, v2 delete, v3 append, v4 optimize, v5 merge (through
    delta-rs: fast; the mirror test below changes its table through headwater's DML)."""
    write(path, {"id": [1, 2, 3], "v": ["a", "b", "c"]}, configuration=CDF)
    RsTable(str(path)).update(predicate="id = 2", updates={"v": "upper(v)"})
    RsTable(str(path)).delete("id = 3")
    write(path, {"id": [4, 5], "v": ["d", "e"]})
    RsTable(str(path)).optimize.compact()
    source = pa.table({"id": pa.array([1, 6], pa.int64()), "v": ["A1", "f"]})
    (RsTable(str(path)).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"v": "s.v"}).when_not_matched_insert_all().execute())


def cdf_reader(spark, **options):
    return spark.read.format("delta").option("readChangeFeed", "true").options(**options)


def test_batch_change_feed_by_path_matches_load_cdf(spark, tmp):
    path = tmp / "t"
    changing_table(path)
    df = cdf_reader(spark, startingVersion=0).load(str(path))
    assert df.columns == ["id", "v", "_change_type", "_commit_version", "_commit_timestamp"]
    assert dict(df.dtypes)["_commit_timestamp"] == "timestamp"
    got = spark_changes(df)
    assert got == rs_changes(path)
    assert {r[0] for r in got} == {0, 1, 2, 3, 5}  # OPTIMIZE (v4) emits nothing
    assert (3, "insert", 4, "d") in [r[:4] for r in got]  # a plain append reads as inserts
    ranged = cdf_reader(spark, startingVersion=1, endingVersion=2).load(str(path))
    assert spark_changes(ranged) == rs_changes(path, 1, 2)
    # timestamps: from the commit at or after startingTimestamp (commit file times)
    # (exact microseconds, floored: a float of seconds may round up past the file's time)
    mtime_ns = (path / "_delta_log" / f"{5:020d}.json").stat().st_mtime_ns
    at = (dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
          + dt.timedelta(microseconds=mtime_ns // 1000)).isoformat()
    by_time = cdf_reader(spark, startingTimestamp=at).load(str(path))
    assert {r[0] for r in spark_changes(by_time)} == {5}
    # endingVersion past the latest is clamped, as delta-spark does
    assert spark_changes(cdf_reader(spark, startingVersion=5, endingVersion=99)
                         .load(str(path))) == rs_changes(path, 5)


def test_batch_change_feed_errors(spark, tmp):
    path = tmp / "t"
    write(path, {"id": [1], "v": ["a"]})  # v0 without the change data feed
    write(path, {"id": [2], "v": ["b"]})
    RsTable(str(path)).alter.set_table_properties(CDF)  # v2
    write(path, {"id": [3], "v": ["c"]})
    with pytest.raises(HeadwaterError) as err, translated():
        cdf_reader(spark).load(str(path)).collect()
    assert err.value.code == "HW_CDF_NO_START"
    with pytest.raises(HeadwaterError) as err, translated():
        cdf_reader(spark, startingVersion=0).load(str(path)).collect()
    assert err.value.code == "HW_CDF_NOT_RECORDED" and "version 0" in str(err.value)
    with pytest.raises(HeadwaterError) as err, translated():
        cdf_reader(spark, startingVersion=9).load(str(path)).collect()
    assert err.value.code == "HW_SOURCE_VERSION_AFTER_LATEST"
    rows = cdf_reader(spark, startingVersion=2).load(str(path)).select(*KEY).collect()
    assert [tuple(r) for r in rows] == [(3, "insert", 3, "c")]


def test_stream_mirrors_a_changing_table_exactly_once(spark, tmp, keep_lakehouse):
    """Inserts, updates, deletes (headwater's DML + appends + OPTIMIZE) streamed as changes by
    name, applied to a mirror with a MERGE per micro-batch (delta-rs's, the cheapest here);
    three runs from one checkpoint (restarts)."""
    root = tmp / "lake"
    write(root / "src", {"id": [1, 2, 3], "v": ["a", "b", "c"]}, configuration=CDF)
    write(root / "mirror", pa.table({"id": pa.array([], pa.int64()),
                                     "v": pa.array([], pa.string())}))
    lake = Lakehouse(root, spark)
    src, mirror = lake.path("src"), lake.path("mirror")
    seen: list[tuple] = []
    batches: list[int] = []

    def apply(batch, batch_id):
        batches.append(batch_id)
        seen.extend(spark_changes(batch))
        latest = (batch.where("_change_type != 'update_preimage'")
                  .withColumn("_rk", F.row_number().over(
                      Window.partitionBy("id").orderBy(F.desc("_commit_version"))))
                  .where("_rk = 1"))
        changes = pa.Table.from_pylist([r.asDict() for r in latest.select(
            "id", "v", "_change_type").collect()],
            pa.schema([("id", pa.int64()), ("v", pa.string()), ("_change_type", pa.string())]))
        (RsTable(mirror).merge(changes, "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_delete("s._change_type = 'delete'")
            .when_matched_update({"v": "s.v"})
            .when_not_matched_insert({"id": "s.id", "v": "s.v"}, "s._change_type != 'delete'")
            .execute())

    def run():
        (spark.readStream.option("readChangeFeed", "true").option("startingVersion", 0)
            .option("maxFilesPerTrigger", 3).table("src")
            .writeStream.foreachBatch(apply).trigger(availableNow=True)
            .option("checkpointLocation", str(tmp / "cp")).start().awaitTermination())
        assert rs_rows(mirror) == rs_rows(src)

    run()
    dml.update(spark, src, {"v": "concat(v, '!')"}, "id >= 2")
    dml.delete(spark, src, "id = 1")
    write(src, {"id": [4, 5], "v": ["d", "e"]})
    run()
    RsTable(src).optimize.compact()
    source = spark.createDataFrame([(2, "B"), (6, "f")], "id long, v string").alias("s")
    (dml.MergeBuilder(spark, src, source, "t.id = s.id", target_alias="t")
        .when_matched_update({"v": "s.v"}).when_not_matched_insert().execute())
    dml.delete(spark, src, "id = 4")
    run()
    assert rs_rows(mirror) == [(2, "B"), (3, "c!"), (5, "e"), (6, "f")]
    assert sorted(seen) == rs_changes(src)  # every change once, across three restarts
    assert len(batches) > 3  # maxFilesPerTrigger split the runs into several batches


def test_stream_starts_with_the_snapshot_and_by_path(spark, tmp):
    path = tmp / "t"
    write(path, {"id": [1, 2], "v": ["a", "b"]}, configuration=CDF)
    write(path, {"id": [3], "v": ["c"]})
    out = tmp / "out"
    (spark.readStream.format("delta").option("readChangeFeed", "true").load(str(path))
        .writeStream.format("delta").option("checkpointLocation", str(tmp / "cp"))
        .trigger(availableNow=True).start(str(out)).awaitTermination())
    RsTable(str(path)).delete("id = 2")
    (spark.readStream.format("delta").option("readChangeFeed", "true").load(str(path))
        .writeStream.format("delta").option("checkpointLocation", str(tmp / "cp"))
        .trigger(availableNow=True).start(str(out)).awaitTermination())
    rows = spark.read.format("delta").load(str(out)).select(*KEY).collect()
    # no startingVersion: the latest snapshot (v1) as inserts, then the changes after it
    assert sorted(tuple(r) for r in rows) == [(1, "insert", 1, "a"), (1, "insert", 2, "b"),
                                             (1, "insert", 3, "c"), (2, "delete", 2, "b")]


def test_table_changes_sql_and_reads_by_name(spark, tmp, keep_lakehouse):
    root = tmp / "lake"
    changing_table(root / "orders")
    lake = Lakehouse(root, spark)
    expected = rs_changes(root / "orders", 1, 3)
    got = spark_changes(spark.sql("SELECT * FROM table_changes('orders', 1, 3)"))
    assert got == expected
    assert spark_changes(lake.sql("SELECT * FROM table_changes('orders', 1, 3)")) == expected
    by_name = (spark.read.option("readChangeFeed", "true").option("startingVersion", 1)
               .option("endingVersion", 3).table("orders"))
    assert spark_changes(by_name) == expected
    counts = spark.sql("SELECT _change_type, count(*) AS n FROM table_changes('orders', 5) "
                       "GROUP BY _change_type").collect()
    assert sorted(tuple(r) for r in counts) == [("insert", 1), ("update_postimage", 1),
                                                ("update_preimage", 1)]


def test_table_changes_by_path_reads_a_path_tables_changes(spark, tmp, keep_lakehouse):
    """delta-spark's table_changes_by_path (Delta's change data feed docs): a table by its
    path, here outside the lakehouse, versions or a bad call as table_changes takes them."""
    changing_table(tmp / "outside")
    Lakehouse(tmp / "lake", spark)
    expected = rs_changes(tmp / "outside", 1, 3)
    got = spark.sql(f"SELECT * FROM table_changes_by_path('{tmp / 'outside'}', 1, 3)")
    assert spark_changes(got) == expected
    with pytest.raises(HeadwaterError) as caught:
        spark.sql(f"SELECT * FROM table_changes_by_path('{tmp / 'outside'}')")
    assert caught.value.code == "HW_OPTION_INVALID"
    assert "table_changes_by_path takes a table path" in str(caught.value)


def test_read_stream_read_change_feed_in_a_pipeline(spark, tmp, keep_lakehouse):
    """A pipeline's streaming table over read_stream(name, read_change_feed=True): the option
    is on the flow's edge, and the run reads change rows (not the native file path)."""
    from tests.pipelines import build, project, run

    root = project(tmp, {"changes.py": """
        @headwater.table
        def changes():
            return headwater.read_stream("src", read_change_feed=True, startingVersion=0)
    """})
    write(root / "lake" / "src", {"id": [1, 2], "v": ["a", "b"]}, configuration=CDF)
    RsTable(str(root / "lake" / "src")).delete("id = 1")
    graph = build(spark, root, dry=True)
    reads = [r for flow in graph.flows.values() for r in flow.reads]
    assert [(r.name, dict(r.options).get("readChangeFeed")) for r in reads] == [("src", "true")]
    lake, results = run(spark, root)
    assert results["changes"].status == "completed", results
    rows = lake.read("changes").select(*KEY).collect()
    assert sorted(tuple(r) for r in rows) == [(0, "insert", 1, "a"), (0, "insert", 2, "b"),
                                             (1, "delete", 1, "a")]
