"""Type widening with automatic schema evolution (issue 37, item 3; docs.delta.io "Type
widening", "Widening types with automatic schema evolution"): on a table with
``delta.enableTypeWidening = true``, a write with schema evolution on (``mergeSchema``, or
the session's ``spark.databricks.delta.schema.autoMerge.enabled``) whose column has a wider
type widens the column in the write's own commit, recorded in ``delta.typeChanges`` as ALTER
COLUMN TYPE records it. Only the changes delta-spark widens automatically (its
TypeWidening.isTypeChangeSupportedForSchemaEvolution): integers to wider integers, float to
double, date to timestamp_ntz, a decimal to a wider decimal; others (int to double or to a
decimal) need ALTER COLUMN TYPE, and a table without the feature is never upgraded."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from deltalake import DeltaTable
from tests.support import commits, logged_fields

from headwater import HeadwaterError

WIDENING = "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"




def rows(spark, name) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(name).collect())


def test_append_with_merge_schema_widens_in_the_same_commit(spark, lake):
    spark.sql(f"CREATE TABLE ev (id INT, v SMALLINT, d DECIMAL(5,2)) USING DELTA {WIDENING}")
    spark.sql("INSERT INTO ev VALUES (1, 300, 1.25)")
    path = lake.path("ev")
    before = len(commits(path))
    df = spark.createDataFrame([(2, 70000)], "id INT, v INT")
    df.write.format("delta").mode("append").option("mergeSchema", "true").saveAsTable("ev")
    assert len(commits(path)) == before + 1  # the widening and the rows: one version
    last = commits(path)[-1]
    assert {k for a in last for k in a} >= {"commitInfo", "metaData", "add"}
    fields = logged_fields(path)
    assert fields["v"]["type"] == "integer"
    assert fields["v"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer"}]
    assert "delta.typeChanges" not in fields["id"].get("metadata", {})
    assert rows(spark, "ev") == [(1, 300, Decimal("1.25")), (2, 70000, None)]
    assert spark.table("ev").schema["v"].dataType.simpleString() == "int"
    # a decimal with more digits on both sides, and a new column, in one write
    df = spark.createDataFrame([(3, 5, Decimal("12345.678"), "x")],
                               "id INT, v INT, d DECIMAL(9,3), s STRING")
    df.write.format("delta").mode("append").option("mergeSchema", "true").saveAsTable("ev")
    fields = logged_fields(path)
    assert fields["d"]["type"] == "decimal(9,3)"
    assert fields["d"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "decimal(5,2)", "toType": "decimal(9,3)"}]
    assert fields["v"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer"}]  # kept, not recorded twice
    assert list(fields) == ["id", "v", "d", "s"]
    got = [(r[0], r[1], None if r[2] is None else str(r[2]), r[3]) for r in rows(spark, "ev")]
    assert got == [(1, 300, "1.250", None), (2, 70000, None, None), (3, 5, "12345.678", "x")]
    assert spark.table("ev").count() == 3  # nothing lost
    # delta-rs (deltalake 1.6.6) refuses a typeWidening table by the feature's name
    with pytest.raises(Exception, match="typeWidening"):
        DeltaTable(str(path)).to_pyarrow_table()


def test_auto_merge_conf_and_insert_into(spark, lake):
    spark.sql(f"CREATE TABLE am (id INT, b TINYINT, f FLOAT) USING DELTA {WIDENING}")
    spark.sql("INSERT INTO am VALUES (1, 7, 1.5)")
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        df = spark.createDataFrame([(2, 9000000000, 1e300)], "id INT, b BIGINT, f DOUBLE")
        df.write.format("delta").mode("append").saveAsTable("am")
        # insertInto (by position): a wider type than the table's widens it too
        spark.sql("ALTER TABLE am ADD COLUMNS (s SMALLINT)")
        df = spark.createDataFrame([(3, 4, 2.5, 70000)], "a INT, b BIGINT, c DOUBLE, d INT")
        df.write.insertInto("am")
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    fields = logged_fields(lake.path("am"))
    assert fields["b"]["type"] == "long"
    assert fields["b"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "byte", "toType": "long"}]
    assert fields["f"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "float", "toType": "double"}]
    assert fields["s"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer"}]
    assert rows(spark, "am") == [(1, 7, 1.5, None), (2, 9000000000, 1e300, None),
                                 (3, 4, 2.5, 70000)]
    # without autoMerge, insertInto casts to the table's types (Spark's store assignment)
    df = spark.createDataFrame([(4, 5, 3.5, 6)], "a INT, b INT, c FLOAT, d TINYINT")
    df.write.insertInto("am")
    assert logged_fields(lake.path("am"))["s"]["type"] == "integer"
    assert spark.table("am").count() == 4


def test_stream_with_merge_schema_widens(spark, lake, tmp_path):
    spark.sql(f"CREATE TABLE st (id INT, v SMALLINT) USING DELTA {WIDENING}")
    spark.sql("INSERT INTO st VALUES (1, 2)")
    src = tmp_path / "src"
    spark.createDataFrame([(2, 70000), (3, 80000)], "id INT, v INT") \
        .write.format("delta").save(str(src))
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .option("mergeSchema", "true").trigger(availableNow=True)
             .toTable("st"))
    query.awaitTermination()
    fields = logged_fields(lake.path("st"))
    assert fields["v"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer"}]
    got = spark.read.format("delta").load(str(lake.path("st")))
    assert got.schema["v"].dataType.simpleString() == "int"
    assert sorted(tuple(r) for r in got.collect()) == [(1, 2), (2, 70000), (3, 80000)]
    # by name: the catalog copy (registered as SMALLINT) is registered again when read
    for df in (spark.table("st"), spark.sql("SELECT * FROM st"), spark.read.table("st")):
        assert df.schema["v"].dataType.simpleString() == "int"
        assert sorted(tuple(r) for r in df.collect()) == [(1, 2), (2, 70000), (3, 80000)]


def test_a_stream_adding_a_column_shows_in_reads_by_name(spark, lake, tmp_path):
    spark.sql("CREATE TABLE sc (id INT) USING DELTA")
    spark.sql("INSERT INTO sc VALUES (1)")
    before = spark.table("sc")
    src = tmp_path / "src"
    spark.createDataFrame([(2, "x")], "id INT, tag STRING").write.format("delta").save(str(src))
    (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
     .option("checkpointLocation", str(tmp_path / "cp")).option("mergeSchema", "true")
     .trigger(availableNow=True).toTable("sc").awaitTermination())
    # a query of the new column: the catalog copy (id only) is brought up to date first
    assert spark.sql("SELECT id, tag FROM sc ORDER BY id").collect() == [(1, None), (2, "x")]
    assert spark.sql("SELECT * FROM sc ORDER BY id").collect() == [(1, None), (2, "x")]
    assert spark.table("sc").columns == ["id", "tag"]
    assert before.count() == 2  # a DataFrame analyzed before keeps its columns


def test_int_to_double_is_not_automatic(spark, lake):
    spark.sql(f"CREATE TABLE nd (id INT, v INT) USING DELTA {WIDENING}")
    spark.sql("INSERT INTO nd VALUES (1, 2)")
    path = lake.path("nd")
    version = len(commits(path))
    df = spark.createDataFrame([(2, 2.5)], "id INT, v DOUBLE")
    with pytest.raises(HeadwaterError) as err:
        df.write.format("delta").mode("append").option("mergeSchema", "true").saveAsTable("nd")
    assert err.value.code == "HW_SINK_SCHEMA_MISMATCH"
    assert "v (table int, data double)" in err.value.what
    assert "ALTER TABLE" in err.value.fix and "ALTER COLUMN v TYPE DOUBLE" in err.value.fix
    assert len(commits(path)) == version  # unchanged
    assert rows(spark, "nd") == [(1, 2)]
    # the manual way out the error names, then the same append
    spark.sql("ALTER TABLE nd ALTER COLUMN v TYPE DOUBLE")
    df.write.format("delta").mode("append").saveAsTable("nd")
    assert rows(spark, "nd") == [(1, 2.0), (2, 2.5)]


def test_table_without_type_widening_is_never_upgraded(spark, lake):
    spark.sql("CREATE TABLE plain (id INT, v SMALLINT) USING DELTA")
    spark.sql("INSERT INTO plain VALUES (1, 300)")
    path = lake.path("plain")
    version = len(commits(path))
    df = spark.createDataFrame([(2, 70000)], "id INT, v INT")
    with pytest.raises(HeadwaterError) as err:
        df.write.format("delta").mode("append").option("mergeSchema", "true") \
            .saveAsTable("plain")
    assert err.value.code == "HW_SINK_SCHEMA_MISMATCH"
    assert "v (table smallint, data int)" in err.value.what
    assert "delta.enableTypeWidening" in err.value.fix
    assert len(commits(path)) == version  # unchanged: no widening, no protocol upgrade
    assert logged_fields(path)["v"]["type"] == "short"
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 1  # delta-rs still reads it
    # without mergeSchema a table with the feature is not widened either
    spark.sql("ALTER TABLE plain SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    with pytest.raises(HeadwaterError) as err:
        df.write.format("delta").mode("append").saveAsTable("plain")
    assert "mergeSchema" in err.value.fix
    assert logged_fields(path)["v"]["type"] == "short"
    assert rows(spark, "plain") == [(1, 300)]


def test_column_mapped_table_widens_keeping_physical_names(spark, lake):
    spark.sql("CREATE TABLE cm (id INT, v SMALLINT) USING DELTA TBLPROPERTIES ("
              "'delta.enableTypeWidening' = 'true', 'delta.columnMapping.mode' = 'name')")
    spark.sql("INSERT INTO cm VALUES (1, 300)")
    path = lake.path("cm")
    physical = logged_fields(path)["v"]["metadata"]["delta.columnMapping.physicalName"]
    df = spark.createDataFrame([(2, 70000)], "id INT, v INT")
    df.write.format("delta").mode("append").option("mergeSchema", "true").saveAsTable("cm")
    field = logged_fields(path)["v"]
    assert field["type"] == "integer"
    assert field["metadata"]["delta.columnMapping.physicalName"] == physical
    assert field["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "integer"}]
    assert rows(spark, "cm") == [(1, 300), (2, 70000)]


def test_sql_insert_widens_with_schema_evolution_only(spark, lake):
    # delta-spark's TypeWideningInsertSchemaEvolutionBasicSuite: "type widening isn't applied
    # when schema evolution is disabled" (the INT literals cast down to SHORT), then widened
    spark.sql(f"CREATE TABLE ins (a SMALLINT) USING DELTA {WIDENING}")
    spark.sql("INSERT INTO ins VALUES (1), (2)")
    assert logged_fields(lake.path("ins"))["a"]["type"] == "short"
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        spark.sql("INSERT INTO ins VALUES (3), (4)")
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    assert logged_fields(lake.path("ins"))["a"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer"}]
    spark.sql("INSERT WITH SCHEMA EVOLUTION INTO ins SELECT CAST(9000000000 AS BIGINT)")
    assert logged_fields(lake.path("ins"))["a"]["type"] == "long"
    assert rows(spark, "ins") == [(1,), (2,), (3,), (4,), (9000000000,)]
    # a table without the feature keeps its type: the values are cast (Spark's INSERT)
    spark.sql("CREATE TABLE ins_plain (a SMALLINT) USING DELTA")
    spark.sql("INSERT WITH SCHEMA EVOLUTION INTO ins_plain VALUES (5)")
    assert logged_fields(lake.path("ins_plain"))["a"]["type"] == "short"
    assert rows(spark, "ins_plain") == [(5,)]


def test_reads_by_name_in_threads_while_the_schema_changes(spark, lake):
    """A catalog copy brought up to date in place: readers in other threads never find the
    name missing or registered twice while another writer adds columns."""
    spark.sql("CREATE TABLE cc (id INT) USING DELTA")
    spark.sql("INSERT INTO cc VALUES (1)")
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                assert spark.table("cc").count() >= 1
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)
                return

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(6):
            spark.createDataFrame([(i + 2, i)], f"id INT, c{i} INT").write.format("delta") \
                .mode("append").option("mergeSchema", "true").save(str(lake.path("cc")))
    finally:
        done.set()
        for t in readers:
            t.join()
    assert not errors, errors[0]
    assert spark.table("cc").columns == ["id", *[f"c{i}" for i in range(6)]]


def test_commands_reading_a_table_run_once_fresh_or_stale(spark, lake, tmp_path):
    """An INSERT into another provider's table from a lakehouse table runs once, whether the
    table's catalog copy is current or stale; a SQL script is never run again."""
    spark.sql("CREATE TABLE rs (id INT) USING DELTA")
    spark.sql("INSERT INTO rs VALUES (1), (2)")
    try:
        spark.sql(f"CREATE TABLE pq_sink (id INT) USING parquet LOCATION '{tmp_path / 'pq'}'")
        spark.sql("INSERT INTO pq_sink SELECT id FROM rs")
        assert sorted(spark.table("pq_sink").collect()) == [(1,), (2,)]
        # the catalog copy made stale by a writer by path (a new column)
        spark.createDataFrame([(3, "x")], "id INT, tag STRING").write.format("delta") \
            .mode("append").option("mergeSchema", "true").save(str(lake.path("rs")))
        spark.sql("INSERT INTO pq_sink SELECT id FROM rs")
        assert sorted(r[0] for r in spark.table("pq_sink").collect()) == [1, 1, 2, 2, 3]
        spark.createDataFrame([(4, "y", 1)], "id INT, tag STRING, z INT").write \
            .format("delta").mode("append").option("mergeSchema", "true") \
            .save(str(lake.path("rs")))
        # a script whose second statement needs the new column: the first runs once
        with pytest.raises(Exception):  # noqa: B017 - Spark's error for the script, as is
            spark.sql("BEGIN INSERT INTO pq_sink VALUES (9); SELECT z FROM rs; END")
        assert sorted(r[0] for r in spark.table("pq_sink").collect()).count(9) <= 1
    finally:
        spark.sql("DROP TABLE IF EXISTS pq_sink")
