"""Issue 12, lakehouse room: atomic CREATE OR REPLACE, ALTER TABLE applied to Delta, SQL routed by
Spark's parser, scoped writer hooks that honour the writer, and the lakehouse found per session.

Every test here failed on main a696c0f (see the lake branch report for how each failed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.support import write

import headwater
from headwater import HeadwaterError, Lakehouse


@pytest.fixture
def lake(spark, tmp_path, keep_lakehouse):
    write(tmp_path / "lake" / "t", {"id": [1, 2], "name": ["a", "b"]})
    write(tmp_path / "lake" / "t", {"id": [3, 4], "name": ["c", "d"]})
    lake = Lakehouse(tmp_path / "lake", spark)
    yield lake
    lake.detach()


def run(lake, via: str, statement: str):
    return lake.sql(statement) if via == "lake" else lake.spark.sql(statement)


def files(path: str) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file())


def ids(lake, name: str) -> list[int]:
    return sorted(r.id for r in lake.read(name).collect())


# --- 1. replace is atomic -----------------------------------------------------------------

@pytest.mark.parametrize("via", ["lake", "spark"])
def test_create_or_replace_reading_itself_is_one_commit_and_keeps_history(lake, spark, via):
    before = DeltaTable(lake.path("t")).version()
    run(lake, via, "CREATE OR REPLACE TABLE t PARTITIONED BY (odd) COMMENT 'replaced' "
                   "TBLPROPERTIES ('delta.appendOnly'='false', 'team'='sales') "
                   "AS SELECT id, id % 2 = 1 AS odd FROM t WHERE id > 1")
    table = DeltaTable(lake.path("t"))
    history = [h["operation"] for h in table.history()]
    # one commit replaced data, schema, partitioning and description (the custom property
    # follows in a second one: deltalake's create validates delta.* keys only)
    assert history[:2] == ["SET TBLPROPERTIES", "CREATE OR REPLACE TABLE"]
    assert table.version() == before + 2
    assert ids(lake, "t") == [2, 3, 4]
    assert table.metadata().partition_columns == ["odd"]
    assert table.metadata().description == "replaced"
    assert table.metadata().configuration == {"delta.appendOnly": "false", "team": "sales"}
    assert spark.table("t").columns == ["id", "odd"]  # the catalog copy follows
    # time travel: the version before the replace still reads the old rows and schema
    old = spark.read.format("delta").option("versionAsOf", before).load(lake.path("t"))
    assert sorted(r.id for r in old.collect()) == [1, 2, 3, 4] and "name" in old.columns


@pytest.mark.parametrize("query", [
    "SELECT no_such_column FROM t",  # fails at analysis, before any job
    "SELECT id, assert_true(id < 3) AS ok FROM t",  # fails inside the write job
])
@pytest.mark.parametrize("via", ["lake", "spark"])
def test_a_failing_replace_leaves_the_table_exactly_as_it_was(lake, spark, via, query):
    version, before = DeltaTable(lake.path("t")).version(), files(lake.path("t"))
    with pytest.raises(Exception):  # noqa: B017 (Spark's own error for the failing query)
        run(lake, via, f"CREATE OR REPLACE TABLE t AS {query}")
    assert DeltaTable(lake.path("t")).version() == version
    assert files(lake.path("t")) == before  # no partial files, nothing deleted
    assert ids(lake, "t") == [1, 2, 3, 4]


def test_lakehouse_replace_is_the_one_commit_api(lake, spark):
    df = spark.createDataFrame([(10, "x"), (11, "y")], "k INT, p STRING")
    version = DeltaTable(lake.path("t")).version()
    assert lake.replace("t", df, partition_by=["p"], comment="mv") == 2
    table = DeltaTable(lake.path("t"))
    assert table.version() == version + 1
    assert table.metadata().partition_columns == ["p"] and table.metadata().description == "mv"
    assert sorted(r.k for r in spark.table("t").collect()) == [10, 11]
    # a new name is created by the same commit
    assert lake.replace("fresh", df) == 2 and DeltaTable(lake.path("fresh")).version() == 0


def test_a_table_with_its_change_data_feed_on_is_replaced_again_and_again(lake, spark):
    """The feed raises the table's protocol to writer 4; a replace sets it again from its own
    definition, so every later replace (a materialized view's refresh) goes through too."""
    for low in range(3):
        lake.sql("CREATE OR REPLACE TABLE feed TBLPROPERTIES "
                 f"('delta.enableChangeDataFeed' = 'true') AS SELECT id FROM t WHERE id > {low}")
    table = DeltaTable(lake.path("feed"))
    assert table.version() == 2 and ids(lake, "feed") == [3, 4]
    assert table.metadata().configuration == {"delta.enableChangeDataFeed": "true"}
    assert table.protocol().min_writer_version == 4


# --- 2. catalog and Delta never disagree ----------------------------------------------------

@pytest.mark.parametrize("via", ["lake", "spark"])
def test_alter_table_changes_the_delta_table_and_the_catalog(lake, spark, via):
    run(lake, via, "ALTER TABLE t ADD COLUMNS (w INT, note STRING)")
    delta_columns = [f.name for f in DeltaTable(lake.path("t")).schema().fields]
    assert delta_columns == ["id", "name", "w", "note"]
    assert spark.table("t").columns == delta_columns
    assert {r.w for r in spark.table("t").collect()} == {None}
    spark.sql("INSERT INTO t VALUES (5, 'e', 7, 'new')")
    assert lake.read("t").where("id = 5").collect()[0].w == 7

    run(lake, via, "ALTER TABLE t SET TBLPROPERTIES ('delta.appendOnly'='false', 'k'='v')")
    assert DeltaTable(lake.path("t")).metadata().configuration == {
        "delta.appendOnly": "false", "k": "v"}
    run(lake, via, "ALTER TABLE t UNSET TBLPROPERTIES ('k')")
    assert DeltaTable(lake.path("t")).metadata().configuration == {"delta.appendOnly": "false"}
    with pytest.raises(HeadwaterError, match="HW_TABLE_PROPERTY_NOT_FOUND"):
        run(lake, via, "ALTER TABLE t UNSET TBLPROPERTIES ('k')")
    run(lake, via, "ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('k')")
    assert ids(lake, "t") == [1, 2, 3, 4, 5]  # deltalake still reads the hand-written commit
    assert DeltaTable(lake.path("t")).to_pyarrow_table().num_rows == 5


@pytest.mark.parametrize("statement, code, named", [
    # without column mapping, as delta-spark refuses them (tests/test_column_mapping.py: with)
    ("ALTER TABLE t RENAME COLUMN name TO label", "HW_ALTER_COLUMN_UNSUPPORTED",
     "DELTA_UNSUPPORTED_RENAME_COLUMN"),
    ("ALTER TABLE t DROP COLUMN name", "HW_ALTER_COLUMN_UNSUPPORTED",
     "DELTA_UNSUPPORTED_DROP_COLUMN"),
    ("ALTER TABLE t ALTER COLUMN id TYPE STRING", "HW_ALTER_COLUMN_UNSUPPORTED",
     "changing column id from BIGINT to STRING"),
])
@pytest.mark.parametrize("via", ["lake", "spark"])
def test_other_alter_table_statements_are_refused_not_applied_to_the_catalog(
        lake, spark, via, statement, code, named):
    version = DeltaTable(lake.path("t")).version()
    with pytest.raises(HeadwaterError) as err:
        run(lake, via, statement)
    assert err.value.code == code and named in str(err.value)
    assert DeltaTable(lake.path("t")).version() == version
    assert spark.table("t").columns == ["id", "name"]


@pytest.mark.parametrize("statement, named", [  # (issues 13, 24, 37 run the other statements)
    ("REORG TABLE t APPLY (UPGRADE UNIFORM (ICEBERG_COMPAT_VERSION = 2))", "REORG"),
])
def test_delta_statements_not_run_yet_are_a_clear_error_not_a_parse_wall(lake, spark, statement,
                                                                        named):
    for sql in (lake.sql, spark.sql):
        with pytest.raises(HeadwaterError) as err:
            sql(statement)
        assert err.value.code in ("HW_SQL_NOT_SUPPORTED_YET", "HW_SQL_UNSUPPORTED")
        assert named in str(err.value)


def test_sql_statements_are_classified_by_sparks_parser(lake, spark, tmp_path):
    from pyspark.errors import ParseException

    from headwater.lakehouse.sql import router

    # a real syntax error is still Spark's own, whichever way it is run
    for run_sql in (lake.sql, spark.sql):
        with pytest.raises(ParseException):
            run_sql("SELEC 1")
    # strings that look like DDL are not mistaken for it
    assert spark.sql("SELECT 'DROP TABLE t' AS s").collect()[0].s == "DROP TABLE t"
    assert lake.exists("t")
    # delta.`path` reads inside subqueries, by spark.sql too
    write(tmp_path / "other", {"id": [2, 3, 9]})
    got = spark.sql(f"SELECT id FROM t WHERE id IN (SELECT id FROM delta.`{tmp_path / 'other'}`)")
    assert sorted(r.id for r in got.collect()) == [2, 3]
    # the router is one table: a handler for a new kind is one line in it
    # (REORG has its own handler now: it is put back after, for the tests that follow)
    seen = []
    own = router.HANDLERS["Reorg"]
    router.HANDLERS["Reorg"] = lambda lk, st: seen.append(st.text) or spark.range(1)
    try:
        assert lake.sql("REORG x FOR TABLE t").count() == 1 and seen == ["REORG x FOR TABLE t"]
    finally:
        router.HANDLERS["Reorg"] = own


def test_create_table_clauses_come_from_the_parsed_plan(lake, spark):
    spark.sql("CREATE TABLE events (color STRING COMMENT 'c', day DATE, n BIGINT NOT NULL) "
              "USING DELTA PARTITIONED BY (color, day) COMMENT 'it''s here' "
              "TBLPROPERTIES ('delta.appendOnly'='true')")
    meta = DeltaTable(lake.path("events")).metadata()
    assert meta.partition_columns == ["color", "day"] and meta.description == "it's here"
    assert meta.configuration == {"delta.appendOnly": "true"}
    assert spark.table("events").columns == ["color", "day", "n"]
    with pytest.raises(HeadwaterError, match="HW_SQL_UNSUPPORTED.*OPTIONS"):
        spark.sql("CREATE TABLE elsewhere (a INT) OPTIONS ('k' = 'v')")
    # another provider is Spark's own table, not a Delta table of the lakehouse
    spark.sql("CREATE TABLE plain_parquet (a INT) USING parquet")
    assert not lake.exists("plain_parquet")
    spark.sql("DROP TABLE plain_parquet")


# --- 3. writer hooks honour the writer and are scoped -----------------------------------------

def test_save_as_table_honours_format_mode_partition_by_and_options(lake, spark):
    df = spark.createDataFrame([(1, "x"), (2, "y")], "id INT, p STRING")
    df.write.partitionBy("p").saveAsTable("by_method")
    assert DeltaTable(lake.path("by_method")).metadata().partition_columns == ["p"]
    df.write.saveAsTable("by_keyword", partitionBy=["p"], mode="append")
    assert DeltaTable(lake.path("by_keyword")).metadata().partition_columns == ["p"]
    df.write.mode("overwrite").saveAsTable("by_keyword")
    assert lake.read("by_keyword").count() == 2
    with pytest.raises(HeadwaterError, match="HW_TABLE_EXISTS"):
        df.write.saveAsTable("by_keyword")
    wider = spark.createDataFrame([(3, "z", 1.5)], "id INT, p STRING, extra DOUBLE")
    wider.write.mode("append").option("mergeSchema", "true").saveAsTable("by_keyword")
    assert lake.read("by_keyword").columns == ["id", "p", "extra"]
    # another format: never a silent Delta table
    with pytest.raises(HeadwaterError, match="HW_WRITER_FORMAT_CONFLICT"):
        df.write.format("parquet").mode("append").saveAsTable("by_method")
    df.write.format("parquet").saveAsTable("spark_parquet")  # Spark's own behaviour
    assert not lake.exists("spark_parquet") and spark.table("spark_parquet").count() == 2
    spark.sql("DROP TABLE spark_parquet")


def test_stream_to_table_honours_partition_by_and_format(lake, spark, tmp_path):
    stream = spark.readStream.table("t").selectExpr("id", "id % 2 AS p")
    (stream.writeStream.partitionBy("p").option("checkpointLocation", str(tmp_path / "cp"))
     .trigger(availableNow=True).toTable("parted").awaitTermination())
    assert DeltaTable(lake.path("parted")).metadata().partition_columns == ["p"]
    assert ids(lake, "parted") == [1, 2, 3, 4]
    with pytest.raises(HeadwaterError, match="HW_WRITER_FORMAT_CONFLICT"):
        (stream.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "c2"))
         .trigger(availableNow=True).toTable("parted"))


def test_hooks_are_scoped_to_the_session_and_restored_on_detach(lake, spark, tmp_path):
    from pyspark.sql import SparkSession
    from pyspark.sql.readwriter import DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from headwater.conf.layout import LAKEHOUSE_ROOT_CONF
    from headwater.spark import patches

    # a new session shares the lakehouse (as delta-spark's shares the metastore) ...
    other = spark.newSession()
    assert Lakehouse.of(other) is lake
    # ... and a session without one (same JVM) keeps Spark's own behaviour
    other.conf.unset(LAKEHOUSE_ROOT_CONF)
    assert Lakehouse.of(other) is None
    other.range(2).write.saveAsTable("other_session_table")
    assert not lake.exists("other_session_table")
    other.sql("DROP TABLE other_session_table")

    lake.detach()
    assert Lakehouse.of(spark) is None
    assert spark.conf.get("headwater.lakehouse.root", None) is None
    assert not patches.installed(patches.LAKEHOUSE)
    for cls, attr in ((SparkSession, "sql"), (DataFrameWriter, "saveAsTable"),
                      (DataStreamWriter, "toTable"), (SparkSession, "table")):
        assert not patches.is_patch(vars(cls)[attr])  # Spark's own method again
    assert "hooks" not in SparkSession.sql.__module__ + DataFrameWriter.saveAsTable.__module__
    assert not hasattr(DataStreamWriter, "table")
    assert not spark.catalog.tableExists("t")  # no catalog copy left to drift
    lake.attach()
    assert Lakehouse.of(spark) is lake and spark.table("t").count() == 4


# --- 4. the lakehouse of a session -----------------------------------------------------------

def test_the_lakehouse_is_found_from_its_session_and_its_clones(lake, spark, tmp_path):
    assert Lakehouse.of(spark) is lake and headwater.active_lakehouse() is lake
    assert spark.conf.get("headwater.lakehouse.root") == str(lake.root)
    found = []

    def batch(df, batch_id):
        found.append(Lakehouse.of(df.sparkSession) is lake)

    (spark.readStream.table("t").writeStream.foreachBatch(batch)
     .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True)
     .start().awaitTermination())
    assert found == [True]
    second = Lakehouse(tmp_path / "second", spark)  # a new one replaces it on this session
    assert Lakehouse.of(spark) is second and not spark.catalog.tableExists("t")
    second.detach()


def test_formatted_and_parameterised_spark_sql_reach_the_router(lake, spark):
    # kwargs: Spark's formatter runs first, then the router (a DELETE runs on the Delta table)
    spark.sql("DELETE FROM t WHERE id = {victim}", victim=2)
    assert ids(lake, "t") == [1, 3, 4]
    # args: Spark binds them in statements it runs itself...
    got = spark.sql("SELECT count(*) AS n FROM t WHERE id > :low", args={"low": 1}).first().n
    assert got == 2
    # ...and headwater's own statements refuse markers instead of leaving them unbound
    with pytest.raises(HeadwaterError) as info:
        spark.sql("DELETE FROM t WHERE id = ?", args=[1])
    assert info.value.code == "HW_SQL_UNSUPPORTED" and "args=" in str(info.value)
    assert ids(lake, "t") == [1, 3, 4]
