"""Batch reads of Delta tables through Spark's parquet reader (a file index over the Delta
log, headwater.delta.file_index), compared with headwater's Python reader on real tables."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import DataFrameReader
from tests.support import golden, native, write

from headwater import DeltaTable, Lakehouse
from headwater.errors import HeadwaterError, unwrap
from headwater.spark import patches
from headwater.spark.jvm import analyzed_plan
from headwater.spark.plan import node_name, nodes, relations

SCHEMA = "id long, name string, day date, region string, amount double"


def python_read(spark, path: str, **options):
    """The same read through headwater's Python data source (Spark's own ``load``)."""
    original = patches.original(DataFrameReader, "load")
    return original(spark.read.format("delta").options(**options), path)


def collected(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.fixture
def sales(spark, tmp):
    """A table partitioned by a date and a string (one partition value null), in 3 commits."""
    path = str(tmp / "sales")
    rows = [(1, "a", dt.date(2026, 1, 1), "eu", 1.5), (2, "b", dt.date(2026, 1, 1), "us", 2.0),
            (3, "c", dt.date(2026, 1, 2), "eu", 3.0), (4, "d", dt.date(2026, 1, 2), None, 4.0)]
    df = spark.createDataFrame(rows, SCHEMA)
    df.write.format("delta").partitionBy("day", "region").save(path)
    spark.createDataFrame([(5, "e", dt.date(2026, 1, 3), "us", 5.0)], SCHEMA) \
        .write.format("delta").mode("append").save(path)
    spark.createDataFrame([(6, "f", dt.date(2026, 1, 3), "a/b c%", 6.0)], SCHEMA) \
        .write.format("delta").mode("append").save(path)
    return path


def test_partitioned_table_reads_natively_with_the_python_readers_rows(spark, sales):
    df = spark.read.format("delta").load(sales)
    assert native(df)
    assert df.columns == ["id", "name", "day", "region", "amount"]  # the table's order
    assert df.schema == python_read(spark, sales).schema
    assert collected(df) == collected(python_read(spark, sales))
    assert len(df.collect()) == 6
    assert {r.region for r in df.collect()} == {"eu", "us", None, "a/b c%"}


def test_partition_filters_prune_and_keep_the_right_rows(spark, sales):
    df = spark.read.format("delta").load(sales)
    cases = ["region = 'eu'", "region IS NULL", "region IN ('us', 'a/b c%')",
             "day >= DATE'2026-01-02' AND amount > 3.5", "region = 'eu' OR amount > 4.5",
             "day = DATE'2026-01-01' AND region <> 'us'"]
    for condition in cases:
        got = collected(df.where(condition))
        assert got == collected(python_read(spark, sales).where(condition)), condition
        assert got, condition
    # partition pruning: only the files of the kept partitions are read
    files = {r.f for r in df.where("region = 'eu'").select("_metadata.file_path")
             .withColumnRenamed("file_path", "f").collect()}
    assert files and all("region=eu" in f for f in files)


def test_metadata_file_path_names_the_logs_files(spark, sales):
    df = spark.read.format("delta").load(sales)
    got = {r.file_path for r in df.select("_metadata.file_path").distinct().collect()}
    adds = pa.table(RsTable(sales).get_add_actions(flatten=True)).column("path").to_pylist()
    assert len(got) == len(adds) == 6
    assert {os.path.basename(p) for p in got} == {os.path.basename(p) for p in adds}
    assert set(df.inputFiles()) == got  # the same URIs, special characters escaped alike
    per_file = df.groupBy("_metadata.file_name").count().collect()
    assert sum(r["count"] for r in per_file) == 6


def test_a_dataframe_read_once_sees_later_commits_as_delta_spark(spark, sales):
    """Each new query plans the files again; a DataFrame already executed keeps its plan
    (Spark caches it per DataFrame), as with delta-spark."""
    df = spark.read.format("delta").load(sales)
    filtered = df.where("region = 'eu'").select("id")
    executed = df.select("id")
    assert df.count() == 6 and len(executed.collect()) == 6
    spark.createDataFrame([(7, "g", dt.date(2026, 1, 4), "eu", 7.0)], SCHEMA) \
        .write.format("delta").mode("append").save(sales)
    assert df.count() == 7 and sorted(r.id for r in filtered.collect()) == [1, 3, 7]
    assert len(executed.collect()) == 6 and len(df.select("id").collect()) == 7
    DeltaTable.forPath(spark, sales).delete("id < 3")
    assert sorted(r.id for r in df.select("id").collect()) == [3, 4, 5, 6, 7]
    spark.createDataFrame([(9, "z", dt.date(2026, 2, 1), "eu", 9.0)], SCHEMA) \
        .write.format("delta").mode("overwrite").save(sales)
    assert collected(df.select("*")) == [(9, "z", dt.date(2026, 2, 1), "eu", 9.0)]
    table = DeltaTable.forPath(spark, sales)
    assert native(table.toDF()) and table.toDF().count() == 1


def test_time_travel_reads_natively_and_stays_at_its_version(spark, sales):
    v0 = spark.read.format("delta").option("versionAsOf", 0).load(sales)
    assert native(v0)
    assert collected(v0) == collected(python_read(spark, sales, versionAsOf="0"))
    assert v0.count() == 4
    # version 0's commit time as DESCRIBE HISTORY shows it (its log file's time, in ms)
    stamp = Path(sales, "_delta_log", f"{0:020d}.json").stat().st_mtime_ns // 1_000_000
    at = dt.datetime.fromtimestamp(stamp / 1000, dt.UTC).isoformat()
    by_time = spark.read.format("delta").option("timestampAsOf", at).load(sales)
    assert native(by_time) and by_time.count() == 4
    spark.createDataFrame([(7, "g", dt.date(2026, 1, 4), "eu", 7.0)], SCHEMA) \
        .write.format("delta").mode("append").save(sales)
    assert v0.count() == 4 and spark.read.format("delta").load(sales).count() == 7


def test_a_vacuumed_version_is_a_clear_error(spark, tmp):
    path = str(tmp / "v")
    spark.range(3).write.format("delta").save(path)
    spark.range(2).write.format("delta").mode("overwrite").save(path)
    RsTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(HeadwaterError) as caught:
        spark.read.format("delta").option("versionAsOf", 0).load(path)
    assert caught.value.code == "HW_DELTA_FILE_NOT_FOUND"
    assert spark.read.format("delta").load(path).count() == 2
    # files removed behind Delta's back after the read was made: the query says so
    df = spark.read.format("delta").load(path)
    for add in pa.table(RsTable(path).get_add_actions(flatten=True)).column("path").to_pylist():
        os.remove(os.path.join(path, add))
    spark.range(1).write.format("delta").mode("append").save(path)  # a new version to list
    with pytest.raises(Exception) as failed:
        df.count()
    assert unwrap(failed.value).code == "HW_DELTA_FILE_NOT_FOUND"


def test_a_deletion_vector_table_falls_back_to_the_python_reader(spark, tmp):
    path = str(tmp / "dv")
    shutil.copytree(golden("dv-partitioned-with-checkpoint"), path)
    df = spark.read.format("delta").load(path)
    assert not native(df)
    expected = pa.table(RsTable(path).scan().read_all()).num_rows  # delta-rs applies the DVs
    assert 0 < df.count() == expected


def test_stream_static_join_static_side_is_native(spark, tmp):
    """The static side test_delta_sink's stream-static join reads is a native read (that
    test shows it sees new versions at every micro-batch)."""
    dims = str(tmp / "dims")
    write(dims, {"k": pa.array([1], pa.int64()), "label": ["one"]})
    static = spark.read.format("delta").load(dims)
    stream = spark.readStream.format("delta").load(dims).select("k")
    joined = stream.join(static, "k", "left")
    leaves = [n for n in nodes(analyzed_plan(joined)) if n.children().size() == 0]
    # the stream itself: the native Delta stream source (headwater.delta.native_source)
    assert {node_name(n) for n in leaves} == {"StreamingExecutionRelation", "LogicalRelation"}


def test_lakehouse_tables_by_name_and_sql_read_natively(spark, tmp, keep_lakehouse):
    lake = Lakehouse(tmp / "lake", spark)
    rows = [(1, "a", dt.date(2026, 1, 1), "eu", 1.0), (2, "b", dt.date(2026, 1, 2), "us", 2.0)]
    spark.createDataFrame(rows, SCHEMA).write.partitionBy("region").saveAsTable("orders")
    spark.createDataFrame([(3, "c", dt.date(2026, 1, 3), "eu", 3.0)], SCHEMA) \
        .write.mode("append").saveAsTable("orders")
    expected = collected(python_read(spark, str(lake.path("orders"))))
    for df in (spark.table("orders"), spark.read.table("orders"), lake.read("orders")):
        assert native(df) and collected(df) == expected
        assert relations(df)[0].identifier == ("orders",)  # pipelines see the read
    query = spark.sql("SELECT region, sum(amount) AS total FROM orders WHERE id > 0 "
                      "AND region IN (SELECT region FROM orders WHERE id = 3) GROUP BY region")
    assert native(query) and [tuple(r) for r in query.collect()] == [("eu", 4.0)]
    spark.sql("CREATE OR REPLACE TEMP VIEW eu_orders AS SELECT * FROM orders "
              "WHERE region = 'eu'")
    view = spark.sql("SELECT count(*) AS n FROM eu_orders")
    assert native(view) and view.collect()[0].n == 2
    old = spark.read.option("versionAsOf", 1).table("orders")
    assert native(old) and old.count() == 2
    by_version = spark.sql("SELECT count(*) AS n FROM orders VERSION AS OF 1")
    assert native(by_version) and by_version.collect()[0].n == 2
    path = lake.path("orders")
    by_path = spark.sql(f"SELECT count(*) AS n FROM delta.`{path}` WHERE region = 'eu'")
    assert native(by_path) and by_path.collect()[0].n == 2
    spark.sql("INSERT INTO orders VALUES (4, 'd', DATE'2026-01-04', 'us', 4.0)")
    assert view.collect()[0].n == 2 and spark.table("orders").count() == 4
    # Spark's name resolution first: a temporary view of the same name wins, as in Spark
    spark.range(1).createOrReplaceTempView("orders")
    assert spark.table("orders").columns == ["id"] and not native(spark.table("orders"))
    spark.catalog.dropTempView("orders")
    spark.sql("CACHE TABLE orders")  # Spark caches its plan: queries keep reading the cache
    try:
        cached = spark.sql("SELECT count(*) FROM orders")
        assert not native(cached) and "InMemoryRelation" in \
            cached._jdf.queryExecution().withCachedData().toString()
    finally:
        spark.sql("UNCACHE TABLE orders")
    lake.detach()


def test_a_schema_change_after_the_read_is_a_clear_error(spark, tmp):
    path = str(tmp / "s")
    spark.createDataFrame([(1, "a")], "id long, v string").write.format("delta").save(path)
    df = spark.read.format("delta").load(path)
    assert df.count() == 1
    spark.createDataFrame([(1, 2)], "id long, v int").write.format("delta") \
        .mode("overwrite").option("overwriteSchema", "true").save(path)
    with pytest.raises(Exception) as failed:
        df.collect()
    assert unwrap(failed.value).code == "HW_NATIVE_READ_CHANGED"
    assert spark.read.format("delta").load(path).collect()[0].v == 2


def test_empty_table_and_change_feed_reads(spark, tmp):
    path = str(tmp / "e")
    spark.createDataFrame([], "id long, p string").write.format("delta") \
        .partitionBy("p").save(path)
    df = spark.read.format("delta").load(path)
    assert native(df) and df.count() == 0 and df.columns == ["id", "p"]
    changes = spark.read.format("delta").option("readChangeFeed", "true") \
        .option("startingVersion", 0).load(path)
    assert not native(changes)  # change rows come from the log: headwater's reader
