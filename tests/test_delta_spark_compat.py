"""Issue 24: code written for delta-spark runs as written — save modes on paths, external
tables, DDL on ``delta.`path```, ALTER TABLE forms, DESCRIBE, time travel by name, new sessions
and ``configure_spark_with_delta_pip``. Real Spark, real Delta tables; each test failed on
main before the change (c71bbb2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.errors import AnalysisException
from tests.support import collected

from headwater import DeltaTable as HwDeltaTable
from headwater import HeadwaterError, Lakehouse
from headwater.lakehouse.delta_spark.pip_utils import session_settings

# --- df.write.format("delta").save(path): every save mode --------------------------------------

def test_save_without_mode_creates_then_refuses_an_existing_table_as_delta_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)  # Spark's default mode: errorifexists
    assert collected(spark.read.format("delta").load(path)) == [(0,), (1,), (2,)]
    with pytest.raises(AnalysisException) as err:  # what delta-spark users catch
        spark.range(5).write.format("delta").save(path)
    assert isinstance(err.value, HeadwaterError) and err.value.code == "HW_DELTA_PATH_EXISTS"
    assert "DELTA_PATH_EXISTS" in str(err.value) and err.value.getCondition() == \
        "DELTA_PATH_EXISTS"
    assert DeltaTable(path).version() == 0  # the refused write changed nothing
    spark.range(5).write.format("delta").mode("ignore").save(path)  # exists: nothing written
    assert DeltaTable(path).version() == 0
    spark.range(2).write.format("delta").save(str(tmp_path / "new"), mode="ignore")
    assert collected(spark.read.format("delta").load(str(tmp_path / "new"))) == [(0,), (1,)]


def test_partition_by_and_overwrite_schema_on_a_path(spark, tmp_path):
    path = str(tmp_path / "p")
    df = spark.createDataFrame([("a", 1), ("b", 2)], ["key", "value"])
    df.write.partitionBy("key").format("delta").save(path)
    assert DeltaTable(path).metadata().partition_columns == ["key"]
    other = spark.createDataFrame([(3, "x")], ["n", "s"])
    with pytest.raises(Exception, match="HW_SINK_SCHEMA_MISMATCH"):
        other.write.format("delta").mode("overwrite").save(path)
    other.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    table = DeltaTable(path)
    assert [f.name for f in table.schema().fields] == ["n", "s"]
    assert table.metadata().partition_columns == []
    assert collected(spark.read.format("delta").load(path)) == [(3, "x")]
    # the old version stays readable (one replace commit)
    old = spark.read.format("delta").option("versionAsOf", 0).load(path)
    assert collected(old) == [("a", 1), ("b", 2)]


# --- external tables and tables by path -----------------------------------------------------

def test_create_table_location_is_an_external_table_whose_data_outlives_drop(lake, spark,
                                                                             tmp_path):
    where = tmp_path / "outside" / "student"
    spark.sql(f"CREATE TABLE student (id INT, name STRING, age INT) USING DELTA "
              f"PARTITIONED BY (age) TBLPROPERTIES (delta.enableChangeDataFeed = true) "
              f"LOCATION '{where}'")
    assert (where / "_delta_log").is_dir() and not (lake.root / "student").exists()
    assert DeltaTable(str(where)).metadata().partition_columns == ["age"]
    spark.sql("INSERT INTO student VALUES (1, 'a', 18), (2, 'b', 19)")
    assert collected(spark.table("student")) == [(1, "a", 18), (2, "b", 19)]
    assert collected(spark.read.format("delta").load(str(where))) == [(1, "a", 18), (2, "b", 19)]
    # a second lakehouse object on the same root (a new session) knows the name too
    assert "student" in Lakehouse(lake.root, spark).tables()
    # a name for an existing table at a location takes that table
    spark.sql(f"CREATE TABLE student2 USING DELTA LOCATION '{where}'")
    assert collected(spark.table("student2")) == [(1, "a", 18), (2, "b", 19)]
    with pytest.raises(AnalysisException, match="DELTA_CREATE_TABLE_SCHEMA_MISMATCH"):
        spark.sql(f"CREATE TABLE student3 (x INT) USING DELTA LOCATION '{where}'")
    spark.sql("DROP TABLE student")
    spark.sql("DROP TABLE student2")
    assert not lake.exists("student")
    assert (where / "_delta_log").is_dir()  # external: the data stays
    # an external table whose data was deleted can still be dropped (the name is forgotten)
    spark.sql(f"CREATE TABLE gone (id INT) USING DELTA LOCATION '{tmp_path / 'gone'}'")
    shutil.rmtree(tmp_path / "gone")
    spark.sql("DROP TABLE IF EXISTS gone")
    assert not lake.is_external("gone")
    spark.sql("CREATE TABLE x1 (a INT)")
    with pytest.raises(AnalysisException, match="already exists"):
        spark.sql("CREATE TABLE x1 (a INT)")


def test_sql_on_paths_creates_inserts_alters_and_reads(lake, spark, tmp_path):
    path = tmp_path / "by_path"
    spark.sql(f"CREATE TABLE delta.`{path}`(id LONG, s STRING) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (0, 'a'), (1, 'b')")
    spark.sql(f"INSERT INTO delta.`{path}` (s) VALUES ('c')")
    got = {tuple(r) for r in spark.sql(f"SELECT * FROM delta.`{path}`").collect()}
    assert got == {(0, "a"), (1, "b"), (None, "c")}  # unlisted columns are NULL
    spark.sql(f"INSERT OVERWRITE delta.`{path}` SELECT * FROM (VALUES (5, 'x')) v (id, s)")
    assert collected(spark.read.format("delta").load(str(path))) == [(5, "x")]
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = "
              "true)")
    assert DeltaTable(str(path)).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    with pytest.raises(AnalysisException, match="already exists"):
        spark.sql(f"CREATE TABLE delta.`{path}`(id LONG) USING delta")
    with pytest.raises(AnalysisException, match="DELTA_MISSING_DELTA_TABLE"):
        spark.sql(f"INSERT INTO delta.`{tmp_path / 'nothing'}` VALUES (1)")


# --- ALTER TABLE, DESCRIBE, SHOW TBLPROPERTIES ------------------------------------------------

def test_alter_column_order_and_nullability_rename_and_set_location(lake, spark, tmp_path):
    spark.sql("CREATE TABLE t (a LONG, b STRING NOT NULL) USING delta")
    spark.sql("INSERT INTO t VALUES (1, 'x')")
    spark.sql("ALTER TABLE t CHANGE COLUMN a a LONG AFTER b")
    assert spark.table("t").columns == ["b", "a"]
    assert collected(spark.table("t")) == [("x", 1)]  # files are read by name: no rewrite
    spark.sql("ALTER TABLE t ALTER COLUMN b DROP NOT NULL")
    assert [f.nullable for f in spark.table("t").schema.fields] == [True, True]
    spark.sql("ALTER TABLE t ALTER COLUMN a COMMENT 'the a'")
    described = {r.col_name: r.comment for r in spark.sql("DESCRIBE t").collect()}
    assert described == {"b": None, "a": "the a"}
    with pytest.raises(HeadwaterError, match="type"):
        spark.sql("ALTER TABLE t ALTER COLUMN a TYPE STRING")
    spark.sql("ALTER TABLE t RENAME TO t2")
    assert not lake.exists("t") and collected(spark.sql("SELECT * FROM t2")) == [("x", 1)]
    elsewhere = str(tmp_path / "elsewhere")
    spark.createDataFrame([("y", 2), ("z", 3)], ["b", "a"]).write.format("delta").save(elsewhere)
    spark.sql(f"ALTER TABLE t2 SET LOCATION '{elsewhere}'")
    assert collected(spark.sql("SELECT * FROM t2")) == [("y", 2), ("z", 3)]
    assert lake.is_external("t2")
    spark.sql("DROP TABLE t2")  # the managed folder it had must not come back under the name
    assert not lake.exists("t2") and "t2" not in lake.tables()
    assert collected(spark.read.format("delta").load(elsewhere)) == [("y", 2), ("z", 3)]


def test_describe_shows_partitions_and_show_tblproperties_the_protocol(lake, spark):
    spark.sql("CREATE TABLE part (a LONG, b STRING) USING delta PARTITIONED BY (a)")
    got = [(r.col_name, r.data_type) for r in spark.sql("DESCRIBE TABLE part").collect()]
    assert got == [("a", "bigint"), ("b", "string"), ("# Partition Information", ""),
                   ("# col_name", "data_type"), ("a", "bigint")]
    extended = {r.col_name: r.data_type for r in spark.sql("DESC EXTENDED part").collect()}
    assert extended["Provider"] == "delta" and extended["Location"] == lake.path("part")
    spark.sql("ALTER TABLE part SET TBLPROPERTIES ('k' = 'v')")
    props = dict(collected(spark.sql("SHOW TBLPROPERTIES part")))
    assert props["k"] == "v" and "delta.minReaderVersion" in props


# --- reading: time travel by name, new sessions -------------------------------------------------

def test_time_travel_through_table_by_name(lake, spark):
    spark.sql("CREATE TABLE tt (id LONG) USING delta")
    spark.sql("INSERT INTO tt VALUES 0, 1")
    spark.sql("INSERT OVERWRITE tt SELECT 7")
    old = spark.read.format("delta").option("versionAsOf", 1).table("tt")
    assert collected(old) == [(0,), (1,)]
    assert collected(spark.read.table("tt")) == [(7,)]


def test_a_new_session_reads_delta_paths_and_lakehouse_tables(lake, spark, tmp_path):
    path = str(tmp_path / "ns")
    spark.range(2).write.format("delta").save(path)
    spark.sql("CREATE TABLE shared (id LONG) USING delta")
    spark.sql("INSERT INTO shared VALUES 4")
    other = spark.newSession()
    assert collected(other.read.format("delta").load(path)) == [(0,), (1,)]
    assert collected(other.table("shared")) == [(4,)]
    assert Lakehouse.of(other) is lake


# --- configure_spark_with_delta_pip -----------------------------------------------------------

def test_delta_spark_session_settings_are_dropped_not_given_to_spark():
    kept, dropped = session_settings({
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension,my.Ext",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0",
        "spark.jars.repositories": "https://example.invalid/maven2/",
        "spark.sql.shuffle.partitions": "3",
    })
    assert kept == {"spark.sql.extensions": "my.Ext", "spark.sql.shuffle.partitions": "3"}
    assert sorted(dropped) == ["spark.jars.packages", "spark.jars.repositories",
                               "spark.sql.catalog.spark_catalog", "spark.sql.extensions"]


def test_external_location_file_is_in_the_state_folder(lake, spark, tmp_path):
    spark.sql(f"CREATE TABLE ext (id INT) USING delta LOCATION '{tmp_path / 'ext'}'")
    pointer = Path(lake.state_dir) / "_external" / "ext.json"
    assert pointer.is_file() and str(tmp_path / "ext") in pointer.read_text()


def test_a_table_deleted_and_written_again_at_the_same_path_reads_its_new_rows(spark, tmp_path):
    """Delta's examples start with shutil.rmtree(path) and write again: the reused Python
    workers' cached snapshot (version 0 both times) must not list the old table's files."""
    path = str(tmp_path / "again")
    spark.range(3).write.format("delta").save(path)
    assert spark.read.format("delta").load(path).count() == 3
    shutil.rmtree(path)
    spark.range(10, 15).write.format("delta").save(path)
    assert collected(spark.read.format("delta").load(path)) == [(i,) for i in range(10, 15)]
    shutil.rmtree(path)  # more commits than before: replaying them onto the old one is wrong
    spark.range(20, 22).write.format("delta").save(path)
    spark.range(22, 23).write.format("delta").mode("append").save(path)
    assert collected(spark.read.format("delta").load(path)) == [(20,), (21,), (22,)]


def test_session_auto_merge_lets_an_append_add_columns(spark, tmp_path):
    path = str(tmp_path / "evolve")
    spark.range(2).write.format("delta").save(path)
    wider = spark.range(2, 3).selectExpr("id", "'x' AS extra")
    with pytest.raises(Exception, match="HW_SINK_SCHEMA_MISMATCH"):
        wider.write.format("delta").mode("append").save(path)
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        wider.write.format("delta").mode("append").save(path)
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    got = {tuple(r) for r in spark.read.format("delta").load(path).collect()}
    assert got == {(0, None), (1, None), (2, "x")}


@pytest.mark.parametrize("engine", ["spark", "delta-rs"])
def test_dml_rewrites_in_partitions_with_special_characters_stay_readable(spark, tmp_path,
                                                                           engine):
    """Spark escapes ':' and '%' in partition folder names; the log must name those files
    URI-encoded, or every reader (headwater's, delta-rs) looks for a file that is not there."""
    from headwater.delta import dml

    path = str(tmp_path / "special")
    df = spark.createDataFrame([("10:00 50%", 1), ("10:00 50%", 2), ("plain", 3)], ["p", "v"])
    df.write.partitionBy("p").format("delta").save(path)
    dml.update(spark, path, {"v": "v * 10"}, "v = 2", engine=engine)
    assert collected(spark.read.format("delta").load(path)) == [
        ("10:00 50%", 1), ("10:00 50%", 20), ("plain", 3)]
    assert sorted(DeltaTable(path).to_pyarrow_table().column("v").to_pylist()) == [1, 3, 20]


def test_a_first_write_with_timestamp_ntz_columns_creates_a_readable_table(spark, tmp_path):
    import datetime as dt

    path = str(tmp_path / "ntz")
    when = dt.datetime(2024, 1, 2, 3, 4, 5)
    spark.createDataFrame([(1, when)], "id INT, ts TIMESTAMP_NTZ").write.format("delta") \
        .save(path)
    protocol = DeltaTable(path).protocol()  # deltalake refused to open it before
    assert "timestampNtz" in (protocol.writer_features or [])
    assert collected(spark.read.format("delta").load(path)) == [(1, when)]


def test_save_as_table_into_a_generated_column_table_keeps_txn_and_refuses_replace_where(
        lake, spark):
    from headwater import DeltaTable as HwDeltaTable

    HwDeltaTable.create(spark).tableName("gen").addColumn("a", "INT") \
        .addColumn("b", "INT", generatedAlwaysAs="a + 1").execute()
    df = spark.createDataFrame([(1,)], "a INT")
    for _ in range(2):  # a retried batch: written once
        df.write.format("delta").mode("append").option("txnAppId", "job") \
            .option("txnVersion", 7).saveAsTable("gen")
    assert collected(spark.table("gen")) == [(1, 2)]
    with pytest.raises(HeadwaterError, match="HW_REPLACE_WHERE_UNSUPPORTED"):
        df.write.format("delta").mode("overwrite").option("replaceWhere", "a = 1") \
            .saveAsTable("gen")
    assert collected(spark.table("gen")) == [(1, 2)]


def test_dynamic_partition_overwrite_replaces_only_the_partitions_written(lake, spark,
                                                                          tmp_path):
    """Delta's documentation (selective overwrite): with partitionOverwriteMode=dynamic, by
    session setting or write option, INSERT OVERWRITE and df.write overwrite replace only
    the partitions the data has; the others stay."""
    spark.sql("CREATE TABLE dyn (d STRING, v INT) USING delta PARTITIONED BY (d)")
    spark.sql("INSERT INTO dyn VALUES ('a', 1), ('b', 2)")
    path = str(tmp_path / "dyn_path")
    spark.table("dyn").write.partitionBy("d").format("delta").save(path)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        spark.sql("INSERT OVERWRITE dyn VALUES ('a', 10)")
        spark.sql(f"INSERT OVERWRITE delta.`{path}` VALUES ('a', 10)")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert collected(spark.table("dyn")) == [("a", 10), ("b", 2)]
    assert collected(spark.read.format("delta").load(path)) == [("a", 10), ("b", 2)]
    spark.createDataFrame([("b", 20)], "d STRING, v INT").write.format("delta") \
        .mode("overwrite").option("partitionOverwriteMode", "dynamic").save(path)
    assert collected(spark.read.format("delta").load(path)) == [("a", 10), ("b", 20)]
    spark.sql("INSERT OVERWRITE dyn VALUES ('a', 11)")  # static (the default): the table
    assert collected(spark.table("dyn")) == [("a", 11)]


def test_session_property_defaults_apply_to_new_tables_only(spark, lake):
    """spark.databricks.delta.properties.defaults.<key> gives each new table delta.<key>; a
    property the statement sets wins; existing tables keep theirs."""
    spark.sql("CREATE TABLE old (id INT)")
    keys = ["enableChangeDataFeed", "appendOnly"]
    for key in keys:
        spark.conf.set(f"spark.databricks.delta.properties.defaults.{key}", "true")
    try:
        spark.sql("CREATE TABLE a (id INT) TBLPROPERTIES ('delta.appendOnly' = 'false')")
        HwDeltaTable.create(spark).tableName("b").addColumn("id", "INT").execute()
        spark.sql("CREATE TABLE c AS SELECT 1 AS id")
        spark.range(3).write.format("delta").saveAsTable("d")
    finally:
        for key in keys:
            spark.conf.unset(f"spark.databricks.delta.properties.defaults.{key}")
    props = {t: spark.sql(f"DESCRIBE DETAIL {t}").first().properties
             for t in ["old", "a", "b", "c", "d"]}
    both = {"delta.enableChangeDataFeed": "true", "delta.appendOnly": "true"}
    assert props == {"old": {}, "a": {**both, "delta.appendOnly": "false"}, "b": both,
                     "c": both, "d": both}
    with pytest.raises(Exception, match="DELTA_UNSUPPORTED_APPEND_ONLY|appendOnly|append-only"):
        spark.sql("DELETE FROM d WHERE id = 1")
