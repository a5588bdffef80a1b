"""Issue 13, SQL surface: DELETE / UPDATE / MERGE, time travel, OPTIMIZE / VACUUM / RESTORE,
DESCRIBE HISTORY / DETAIL, SHOW TBLPROPERTIES and CONVERT TO DELTA, through spark.sql and
Lakehouse.sql, on tables by name and on delta.`path`, on real Delta tables."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.conf.layout import DML_ENGINE_CONF

VIAS = ["lake", "spark"]  # Lakehouse.sql and spark.sql: the same router, each tested


@pytest.fixture
def lake(spark, tmp_path, keep_lakehouse):
    write(tmp_path / "lake" / "t", {"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"]},
          configuration={"delta.enableChangeDataFeed": "true"})
    lake = Lakehouse(tmp_path / "lake", spark)
    yield lake
    lake.detach()


def run(lake, via: str, statement: str):
    return lake.sql(statement) if via == "lake" else lake.spark.sql(statement)


def table_ref(lake, how: str) -> str:
    return "t" if how == "name" else f"delta.`{lake.path('t')}`"


def contents(lake) -> list[tuple]:
    table = DeltaTable(lake.path("t"))
    return sorted(tuple(r.values()) for r in table.to_pyarrow_table().to_pylist())


def changes(lake, version: int) -> list[tuple]:
    """The change data delta-rs reads for ``version`` (what every DML must leave valid)."""
    cdf = pa.table(DeltaTable(lake.path("t")).load_cdf(starting_version=version,
                                                       ending_version=version).read_all())
    return sorted((r["id"], r["name"], r["_change_type"]) for r in cdf.to_pylist())


# --- DML ------------------------------------------------------------------------------------

@pytest.mark.parametrize("via, how, engine", [("spark", "name", "spark"),
                                              ("lake", "path", "auto")])
def test_delete_and_update_return_delta_spark_counts_and_write_change_data(lake, spark, via, how,
                                                                           engine):
    spark.conf.set(DML_ENGINE_CONF, engine)  # auto: delta-rs for this small table
    ref = table_ref(lake, how)
    got = run(lake, via, f"DELETE FROM {ref} AS x WHERE x.id > 3").collect()
    assert [r.asDict() for r in got] == [{"num_affected_rows": 1}]
    assert changes(lake, 1) == [(4, "d", "delete")]
    got = run(lake, via, f"UPDATE {ref} SET name = upper(name), id = id * 10 WHERE id < 3")
    assert got.first().num_affected_rows == 2
    assert contents(lake) == [(3, "c"), (10, "A"), (20, "B")]
    assert changes(lake, 2) == [(1, "a", "update_preimage"), (2, "b", "update_preimage"),
                                (10, "A", "update_postimage"), (20, "B", "update_postimage")]
    if how == "name":  # without an alias the table's own name qualifies columns
        run(lake, via, "DELETE FROM t WHERE t.name = 'c'")
    else:
        run(lake, via, f"DELETE FROM {ref}")
    assert len(contents(lake)) == (2 if how == "name" else 0)
    spark.conf.unset(DML_ENGINE_CONF)


@pytest.mark.parametrize("via, how", [("lake", "name"), ("spark", "path")])
def test_merge_every_clause_kind_from_a_subquery(lake, spark, via, how):
    spark.createDataFrame([(2, "B"), (3, "C"), (5, "e"), (6, "f")], "id long, name string") \
        .createOrReplaceTempView("changes_v")
    got = run(lake, via, f"""
        MERGE INTO {table_ref(lake, how)} AS tt
        USING (SELECT id, name FROM changes_v WHERE id <> 6) AS ss ON tt.id = ss.id
        WHEN MATCHED AND ss.id = 3 THEN DELETE
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED BY TARGET AND ss.id > 4 THEN INSERT *
        WHEN NOT MATCHED BY SOURCE AND tt.id = 1 THEN UPDATE SET name = concat(tt.name, '!')
        WHEN NOT MATCHED BY SOURCE THEN DELETE""").collect()
    assert got[0].asDict() == {"num_affected_rows": 5, "num_updated_rows": 2,
                               "num_deleted_rows": 2, "num_inserted_rows": 1}
    assert contents(lake) == [(1, "a!"), (2, "B"), (5, "e")]
    assert changes(lake, 1) == [
        (1, "a", "update_preimage"), (1, "a!", "update_postimage"), (2, "B", "update_postimage"),
        (2, "b", "update_preimage"), (3, "c", "delete"), (4, "d", "delete"), (5, "e", "insert")]


@pytest.mark.parametrize("via", ["spark"])
def test_merge_from_a_table_with_explicit_insert_and_the_multiple_match_rule(lake, spark, via):
    write(lake.root / "src", {"id": [4, 9], "name": ["D", "i"]})
    lake.register("src")
    run(lake, via, "MERGE INTO t USING src ON t.id = src.id "
                   "WHEN MATCHED THEN UPDATE SET t.name = src.name "
                   "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (src.id, upper(src.name))")
    assert contents(lake) == [(1, "a"), (2, "b"), (3, "c"), (4, "D"), (9, "I")]
    spark.createDataFrame([(1, "x"), (1, "y")], "id long, name string") \
        .createOrReplaceTempView("dupes")
    with pytest.raises(HeadwaterError) as err:
        run(lake, via, "MERGE INTO t USING dupes s ON t.id = s.id "
                       "WHEN MATCHED THEN UPDATE SET name = s.name")
    assert err.value.code == "HW_MERGE_MULTIPLE_SOURCE_ROWS"
    assert DeltaTable(lake.path("t")).version() == 1  # nothing committed


def test_merge_of_each_micro_batch_in_foreach_batch_uses_the_batch_session(lake, spark, tmp_path):
    write(tmp_path / "in", {"id": [2, 7], "name": ["two", "seven"]})
    seen = []

    def upsert(batch, batch_id):
        batch.createOrReplaceTempView("micro_batch")
        result = batch.sparkSession.sql(
            "MERGE INTO t USING micro_batch m ON t.id = m.id "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").first()
        seen.append(result.asDict())

    (spark.readStream.format("delta").load(str(tmp_path / "in")).writeStream
     .foreachBatch(upsert).trigger(availableNow=True)
     .option("checkpointLocation", str(tmp_path / "cp")).start().awaitTermination(60))
    assert seen == [{"num_affected_rows": 2, "num_updated_rows": 1, "num_deleted_rows": 0,
                     "num_inserted_rows": 1}]
    assert contents(lake) == [(1, "a"), (2, "two"), (3, "c"), (4, "d"), (7, "seven")]


def test_dml_on_a_view_is_a_clear_error_and_other_tables_are_sparks(lake, spark, tmp_path):
    spark.createDataFrame([(1,)], "id long").createOrReplaceTempView("plain_view")
    with pytest.raises(HeadwaterError) as err:  # Spark itself fails with an INTERNAL_ERROR
        lake.sql("DELETE FROM plain_view WHERE id = 1")
    assert err.value.code == "HW_SQL_UNSUPPORTED" and "temporary view" in str(err.value)
    spark.sql(f"CREATE TABLE pq_tbl (id long) USING parquet LOCATION '{tmp_path / 'pq'}'")
    try:
        with pytest.raises(Exception) as err:
            spark.sql("DELETE FROM pq_tbl WHERE id = 1")
        assert not isinstance(err.value, HeadwaterError)  # Spark's own answer
        assert "does not support deletes" in str(err.value).lower() \
            or "UNSUPPORTED" in str(err.value)
    finally:
        spark.sql("DROP TABLE pq_tbl")


# --- time travel ----------------------------------------------------------------------------

@pytest.mark.parametrize("via", VIAS)
def test_time_travel_by_version_timestamp_and_at_syntax(lake, via):
    lake.sql("DELETE FROM t WHERE id = 1")
    time.sleep(1.1)
    lake.sql("DELETE FROM t WHERE id = 2")
    path = lake.path("t")
    # delta (like delta-spark) dates a version by its log file's modification time
    v1_time = (Path(path) / "_delta_log" / f"{1:020d}.json").stat().st_mtime
    stamp = dt.datetime.fromtimestamp(v1_time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

    def ids(query):
        return sorted(r.id for r in run(lake, via, query).collect())

    assert ids("SELECT id FROM t VERSION AS OF 0") == [1, 2, 3, 4]
    assert ids("SELECT id FROM t@v1") == [2, 3, 4]
    assert ids(f"SELECT id FROM t TIMESTAMP AS OF '{stamp}' AS old") == [2, 3, 4]
    assert ids(f"SELECT a.id FROM delta.`{path}` VERSION AS OF 0 a "
               f"JOIN t b ON a.id = b.id") == [3, 4]
    assert ids("SELECT id FROM t") == [3, 4]
    with pytest.raises(HeadwaterError) as err:
        run(lake, via, "SELECT * FROM t VERSION AS OF 9")
    assert err.value.code == "HW_DELTA_VERSION_NOT_FOUND" and "up to 2" in str(err.value)


# --- Delta's own statements -----------------------------------------------------------------

@pytest.mark.parametrize("via", ["lake"])
def test_optimize_history_detail_and_restore(lake, spark, via, tmp_path):
    part = tmp_path / "lake" / "p"
    for i in range(3):
        write(part, {"id": [i, i + 10], "g": ["a", "b"]}, partition_by=["g"])
    lake.register("p")
    out = run(lake, via, "OPTIMIZE p WHERE g = 'a' ZORDER BY (id)").first()
    assert out.path == f"file:{lake.path('p')}"  # as delta-spark prints the table's path
    assert out.metrics.numFilesRemoved == 3 and out.metrics.numFilesAdded == 1
    assert out.metrics.filesRemoved.totalFiles == 3
    compacted = run(lake, via, f"OPTIMIZE delta.`{part}`").first()
    assert compacted.metrics.numFilesRemoved == 3  # partition b now
    history = run(lake, via, "DESCRIBE HISTORY p LIMIT 2").collect()
    assert [h.version for h in history] == [4, 3] and history[0].operation == "OPTIMIZE"
    assert "operationMetrics" in history[0].asDict()
    detail = run(lake, via, "DESC DETAIL p").first()
    assert (detail.format, detail.numFiles, detail.partitionColumns) == ("delta", 2, ["g"])
    restored = run(lake, via, "RESTORE TABLE p TO VERSION AS OF 0").first()
    assert restored.num_of_files_after_restore == 2
    assert sorted(r.id for r in lake.read("p").collect()) == [0, 10]
    v2 = (part / "_delta_log" / f"{2:020d}.json").stat().st_mtime
    when = dt.datetime.fromtimestamp(v2, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    run(lake, via, f"RESTORE p TIMESTAMP AS OF '{when}'")
    assert DeltaTable(lake.path("p")).history(1)[0]["operation"] == "RESTORE"
    assert sorted(r.id for r in lake.read("p").collect()) == [0, 1, 2, 10, 11, 12]


@pytest.mark.parametrize("via", ["spark"])
def test_vacuum_dry_run_and_retention(lake, via):
    lake.sql("DELETE FROM t WHERE id = 1")  # leaves one unreferenced file
    with pytest.raises(HeadwaterError) as err:
        run(lake, via, "VACUUM t RETAIN 0 HOURS DRY RUN")
    assert err.value.code == "HW_VACUUM_RETENTION_TOO_SHORT"
    dry = run(lake, via, "VACUUM t DRY RUN").collect()
    assert dry == []  # every file is younger than 7 days
    done = run(lake, via, f"VACUUM delta.`{lake.path('t')}` RETAIN 168 HOURS").collect()
    assert [r.path for r in done] == [f"file:{lake.path('t')}"]


@pytest.mark.parametrize("via", ["lake"])
def test_show_tblproperties_reads_the_delta_log(lake, via):
    lake.sql("ALTER TABLE t SET TBLPROPERTIES ('team' = 'sales')")
    props = {r.key: r.value for r in run(lake, via, "SHOW TBLPROPERTIES t").collect()}
    assert props["delta.enableChangeDataFeed"] == "true" and props["team"] == "sales"
    assert props["delta.minReaderVersion"] == "1"
    one = run(lake, via, "SHOW TBLPROPERTIES t ('team')").collect()
    assert [(r.key, r.value) for r in one] == [("team", "sales")]


def test_convert_to_delta(lake, spark, tmp_path):
    folder = tmp_path / "pq"
    for day in ("2024-01-01", "2024-01-02"):
        (folder / f"day={day}").mkdir(parents=True)
        pq.write_table(pa.table({"id": [1, 2]}), folder / f"day={day}" / "part-0.parquet")
    out = spark.sql(f"CONVERT TO DELTA parquet.`{folder}` PARTITIONED BY (day string)")
    assert out.collect() == []
    table = DeltaTable(str(folder))
    assert table.metadata().partition_columns == ["day"]
    got = spark.sql(f"SELECT day, count(*) AS n FROM delta.`{folder}` GROUP BY day ORDER BY day")
    assert [tuple(r) for r in got.collect()] == [("2024-01-01", 2), ("2024-01-02", 2)]


@pytest.mark.parametrize("statement, words", [
    ("GENERATE symlink_format_manifest t", "GENERATE without FOR TABLE"),
    ("REORG TABLE t APPLY (UPGRADE UNIFORM (ICEBERG_COMPAT_VERSION = 2))", "UNIFORM"),
    ("OPTIMIZE t FULL FULL", "'FULL'"),  # (OPTIMIZE t FULL: tests/test_sql_clustering.py)
    ("VACUUM t RETAIN 10", "RETAIN without HOURS"),
    ("RESTORE t TO SOMETHING", "RESTORE without VERSION AS OF"),
    ("DESCRIBE HISTORY nope", "nope"),
])
def test_unsupported_or_wrong_delta_syntax_is_a_clear_error(lake, statement, words):
    with pytest.raises(HeadwaterError) as err:
        lake.spark.sql(statement)
    assert err.value.code in ("HW_SQL_NOT_SUPPORTED_YET", "HW_SQL_UNSUPPORTED",
                              "HW_TABLE_NOT_FOUND")
    assert words in str(err.value)
