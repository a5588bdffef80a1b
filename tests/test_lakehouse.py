"""Tables by name: the seeds' spark.table / readStream.table / toTable / SQL on a Lakehouse."""

from __future__ import annotations

import logging
import textwrap

import pytest
from tests.support import REPO, run_script, write

import headwater
from headwater import HeadwaterError, Lakehouse
from headwater.conf.triggers import trigger_kwargs
from headwater.lakehouse import parse_name


@pytest.fixture
def lake(spark, tmp_path):
    write(tmp_path / "lake" / "bronze", {"device_id": [1, 2, 2, 3], "reading": [1.0, 2.0, 3.0, 4.0]})
    return Lakehouse(tmp_path / "lake", spark)


def test_tables_under_the_root_are_registered_by_name(lake, spark, tmp_path):
    write(tmp_path / "lake" / "sales" / "orders", {"id": [7]})
    (tmp_path / "lake" / "_checkpoints" / "x" / "_delta_log").mkdir(parents=True)
    lake.refresh()
    assert lake.tables() == ["bronze", "sales.orders"]
    assert spark.table("bronze").count() == 4
    assert spark.sql("SELECT id FROM sales.orders").collect()[0].id == 7
    assert lake.read("sales.orders").count() == 1


def test_attaching_the_same_root_again_hands_the_catalog_over(lake, spark, tmp_path):
    # spark_session(lakehouse=root) then Lakehouse(root, spark): the second object takes over
    # the first one's catalog entries, so detaching it drops them and the first is inert.
    again = Lakehouse(tmp_path / "lake", spark)
    assert Lakehouse.of(spark) is again
    assert spark.table("bronze").count() == 4
    lake.detach()  # no longer attached: must not drop what `again` now owns
    assert spark.table("bronze").count() == 4
    again.detach()
    assert not spark.catalog.tableExists("bronze")
    again.attach()


def test_seed_001_streaming_temp_views_and_complete_mode_to_table(lake, spark, tmp_path):
    spark.readStream.table("bronze").createOrReplaceTempView("streaming_tmp_vw")
    spark.sql("""CREATE OR REPLACE TEMP VIEW device_counts_tmp_vw AS (
        SELECT device_id, COUNT(device_id) AS total_recordings
        FROM streaming_tmp_vw GROUP BY device_id)""")
    (spark.table("device_counts_tmp_vw").writeStream
        .option("checkpointLocation", str(tmp_path / "cp" / "silver"))
        .outputMode("complete").trigger(availableNow=True)
        .table("device_counts").awaitTermination())
    assert lake.exists("device_counts")  # the first toTable created it in the lakehouse
    got = {r.device_id: r.total_recordings for r in spark.sql("SELECT * FROM device_counts").collect()}
    assert got == {1: 1, 2: 2, 3: 1}
    spark.sql("INSERT INTO bronze VALUES (3, 5.0), (4, 6.0)")
    (spark.table("device_counts_tmp_vw").writeStream
        .option("checkpointLocation", str(tmp_path / "cp" / "silver"))
        .outputMode("complete").trigger(availableNow=True)
        .toTable("device_counts").awaitTermination())
    got = {r.device_id: r.total_recordings for r in spark.table("device_counts").collect()}
    assert got == {1: 1, 2: 2, 3: 2, 4: 1}


def test_insert_overwrite_and_sql_create_table(lake, spark):
    lake.sql("CREATE TABLE events (color STRING, event_date TIMESTAMP) USING DELTA "
             "PARTITIONED BY (color) COMMENT 'seed 004'")
    lake.sql("INSERT INTO events VALUES ('red', TIMESTAMP('2025-06-22 10:04:45'))")
    spark.sql("INSERT INTO events VALUES ('blue', TIMESTAMP('2025-06-22 10:05:00'))")
    assert spark.table("events").count() == 2
    from deltalake import DeltaTable

    meta = DeltaTable(lake.path("events")).metadata()
    assert meta.partition_columns == ["color"] and meta.description == "seed 004"
    spark.sql("INSERT OVERWRITE events VALUES ('green', TIMESTAMP('2025-06-22 11:00:00'))")
    assert [r.color for r in spark.table("events").collect()] == ["green"]
    with pytest.raises(HeadwaterError, match="HW_TABLE_EXISTS"):
        lake.sql("CREATE TABLE events (a INT)")
    lake.sql("CREATE TABLE IF NOT EXISTS events (a INT)")
    lake.sql("CREATE OR REPLACE TABLE copy AS SELECT device_id FROM bronze WHERE device_id > 1")
    assert lake.read("copy").count() == 3
    lake.sql("DROP TABLE copy")
    assert not lake.exists("copy")


def test_delta_path_queries_in_lakehouse_sql(lake, tmp_path):
    write(tmp_path / "elsewhere", {"x": [1, 2, 3]})
    got = lake.sql(f"SELECT sum(x) AS s FROM delta.`{tmp_path / 'elsewhere'}`").collect()
    assert got[0].s == 6


def test_write_stream_triggers_checkpoint_and_query_name(lake, spark):
    query = lake.write_stream(lake.read_stream("bronze"), "silver.copy", trigger="available-now")
    query.awaitTermination()
    assert query.name == "silver.copy"
    assert lake.read("silver.copy").count() == 4
    assert (lake.root / "_checkpoints" / "silver.copy" / "commits").is_dir()
    # resumes from its checkpoint: nothing is written twice
    lake.write_stream(lake.read_stream("bronze"), "silver.copy",
                      trigger={"availableNow": True}).awaitTermination()
    assert lake.read("silver.copy").count() == 4


def test_update_mode_merges_changed_groups(lake, spark):
    counts = lake.read_stream("bronze").groupBy("device_id").count()
    lake.write_stream(counts, "counts", trigger="available-now", output_mode="update").awaitTermination()
    spark.sql("INSERT INTO bronze VALUES (2, 9.0)")
    lake.write_stream(counts, "counts", trigger="available-now", output_mode="update").awaitTermination()
    got = {r.device_id: r["count"] for r in lake.read("counts").collect()}
    assert got == {1: 1, 2: 3, 3: 1}


def test_second_query_on_a_checkpoint_is_refused_even_from_another_process(lake, spark):
    query = lake.write_stream(lake.read_stream("bronze"), "mirror", trigger="10 seconds")
    try:
        with pytest.raises(HeadwaterError, match="HW_CHECKPOINT_IN_USE"):
            lake.write_stream(lake.read_stream("bronze"), "mirror", trigger="10 seconds")
        code = textwrap.dedent(f"""
            from headwater.spark.checkpoint_lock import CheckpointLock
            from headwater import HeadwaterError
            try:
                CheckpointLock({lake.checkpoint('mirror')!r}, "other").acquire()
            except HeadwaterError as e:
                print(e.code)
        """)
        assert "HW_CHECKPOINT_IN_USE" in run_script(code).stdout
    finally:
        query.stop()
    lake.release_locks()
    lake.write_stream(lake.read_stream("bronze"), "mirror", trigger="once",
                      query_name="mirror_again").awaitTermination()
    assert lake.read("mirror").count() == 4


def test_a_lock_left_by_a_killed_process_does_not_block(tmp_path):
    checkpoint = tmp_path / "cp"
    code = textwrap.dedent(f"""
        import os, signal
        from headwater.spark.checkpoint_lock import CheckpointLock
        CheckpointLock({str(checkpoint)!r}, "doomed").acquire()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert run_script(code).returncode == -9
    assert "doomed" in (checkpoint / ".headwater.lock").read_text()
    from headwater.spark.checkpoint_lock import CheckpointLock

    CheckpointLock(checkpoint, "next").acquire().release()


def test_names_are_validated_and_cannot_escape_the_root():
    assert parse_name("Sales.`Orders`").qualified == "sales.orders"
    assert parse_name("default.bronze").qualified == "bronze"
    assert parse_name("Main.Sales.`Orders`").qualified == "main.sales.orders"  # a catalog's
    for bad in ["../etc", "a/b", "a.b.c.d", "delta.a.b", "a__b.c.d", "", "_hidden", "1abc",
                "x y", "db.`dotted.name`", "`my-table`"]:
        with pytest.raises(HeadwaterError, match="HW_TABLE_NAME_INVALID"):
            parse_name(bad)
    for bad in ["db.`dotted.name`", "`my-table`", "x y", "a/b"]:
        with pytest.raises(HeadwaterError) as err:
            parse_name(bad)
        # Spark's session catalog refuses these too (delta-spark's CREATE TABLE included)
        assert err.value.error_class == "INVALID_SCHEMA_OR_RELATION_NAME"


def test_triggers(caplog):
    assert trigger_kwargs(None) == {"processingTime": "500 milliseconds"}
    assert trigger_kwargs("2 minutes") == {"processingTime": "2 minutes"}
    assert trigger_kwargs("500ms") == {"processingTime": "500 milliseconds"}
    assert trigger_kwargs({"processingTime": "4 seconds"}) == {"processingTime": "4 seconds"}
    assert trigger_kwargs("available-now") == {"availableNow": True}
    with caplog.at_level(logging.WARNING, logger="headwater"):
        assert trigger_kwargs({"once": True}) == {"once": True}
    assert "availableNow" in caplog.text
    for bad in ["soon", {"processingTime": "fast"}, {"continuous": "1 second"}, {"a": 1, "b": 2}]:
        with pytest.raises(HeadwaterError, match="HW_TRIGGER_INVALID"):
            trigger_kwargs(bad)


def test_a_delta_write_without_a_path_is_an_error_not_a_default_location(spark, tmp_path):
    df = spark.range(3)
    with pytest.raises(Exception) as info:
        df.write.format("delta").mode("append").save()
    assert headwater.unwrap(info.value).code == "HW_SINK_NO_PATH"


@pytest.mark.procs
def test_spark_session_with_a_lakehouse_registers_tables(tmp_path):
    write(tmp_path / "lake" / "bronze", {"id": [1, 2]})
    code = textwrap.dedent(f"""
        import headwater
        spark = headwater.spark_session("local[1]", lakehouse={str(tmp_path / 'lake')!r},
                                        conf={{"spark.ui.enabled": "false"}})
        print("rows", spark.table("bronze").count())
    """)
    result = run_script(code, timeout=120)
    assert "rows 2" in result.stdout, result.stderr[-2000:]
    assert (tmp_path / "lake" / "_warehouse").is_dir()
    assert not (REPO / "spark-warehouse").exists()
