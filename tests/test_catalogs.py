"""Unity-Catalog-style three-part names (issue 38 item 1): ``catalog.schema.table`` in SQL and
every Python entry point, ``USE CATALOG`` / ``USE SCHEMA`` and two- and one-part names in the
current catalog, ``current_catalog()``, ``SHOW CATALOGS / SCHEMAS / TABLES``, catalog and
schema DDL, a folder per catalog under the root; answers checked with delta-rs on the files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from tests.support import write

from headwater import Lakehouse
from headwater.errors import HeadwaterError


@pytest.fixture
def lake(spark, tmp_path, keep_lakehouse):
    lake = Lakehouse(tmp_path / "lake", spark)
    yield lake
    spark.sql("USE CATALOG spark_catalog")
    lake.detach()


def files_rows(path: Path, *columns: str) -> list[tuple]:
    """The table's rows as delta-rs reads its files (no Spark involved)."""
    data = RsTable(str(path)).to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in data)


def sql_rows(spark, text: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(text).collect())


def test_three_part_names_in_sql_live_in_a_folder_per_catalog(spark, lake):
    root = lake.root
    spark.sql("CREATE CATALOG IF NOT EXISTS main COMMENT 'the main one'")
    assert json.loads((root / "main" / "_catalog.json").read_text())["comment"] == "the main one"
    spark.sql("CREATE TABLE main.sales.orders (id INT, amount DOUBLE) USING delta")
    spark.sql("INSERT INTO main.sales.orders VALUES (1, 2.0), (2, 3.5), (3, 1.0)")
    # a table of spark_catalog with the same schema and table names is another table
    spark.sql("CREATE TABLE sales.orders (id INT, amount DOUBLE)")
    spark.sql("INSERT INTO sales.orders VALUES (9, 9.0)")
    spark.sql("-- the catalog's\nUPDATE main.sales.orders SET amount = 0 WHERE id = 3")
    spark.sql("DELETE FROM main.sales.orders WHERE id = 2")
    spark.sql("""MERGE INTO main.sales.orders t USING (SELECT 4 AS id, 4.0 AS amount) s
                 ON t.id = s.id WHEN NOT MATCHED THEN INSERT *""")
    expected = [(1, 2.0), (3, 0.0), (4, 4.0)]
    assert files_rows(root / "main" / "sales" / "orders", "id", "amount") == expected
    assert files_rows(root / "sales" / "orders", "id", "amount") == [(9, 9.0)]
    assert sql_rows(spark, "SELECT id, amount FROM main.sales.orders") == expected
    assert sql_rows(spark, "SELECT o.id FROM main.sales.orders o JOIN spark_catalog.sales"
                    ".orders x ON o.id < x.id WHERE o.id IN (SELECT id FROM main.sales"
                    ".orders WHERE amount > 1)") == [(1,), (4,)]
    # a struct field reached through an alias named like no catalog keeps its meaning
    assert sql_rows(spark, "SELECT s.x.y FROM (SELECT named_struct('y', 1) AS x) s") == [(1,)]
    spark.sql("OPTIMIZE main.sales.orders")
    ops = [r.operation for r in spark.sql("DESCRIBE HISTORY main.sales.orders").collect()]
    assert ops[:2] == ["OPTIMIZE", "MERGE"]
    detail = spark.sql("DESCRIBE DETAIL main.sales.orders").first()
    assert detail.location.rstrip("/").endswith("main/sales/orders")
    assert lake.tables()[-1:] == ["main.sales.orders"] and "sales.orders" in lake.tables()
    assert [r.catalog for r in spark.sql("SHOW CATALOGS").collect()] == ["spark_catalog", "main"]
    assert [r.catalog for r in spark.sql("SHOW CATALOGS LIKE 'ma*'").collect()] == ["main"]
    assert [r.namespace for r in spark.sql("SHOW SCHEMAS IN main").collect()] == \
        ["default", "sales"]
    # spark_catalog's schemas do not list the catalogs' Spark databases
    assert "main__sales" not in [r[0] for r in spark.sql("SHOW SCHEMAS").collect()]
    assert [(r.namespace, r.tableName) for r in spark.sql("SHOW TABLES IN main.sales")
            .collect() if not r.isTemporary] == [("sales", "orders")]  # temp views: Spark's


def test_use_catalog_and_schema_resolve_shorter_names(spark, lake):
    spark.sql("CREATE CATALOG main")
    spark.sql("CREATE SCHEMA main.sales")
    spark.sql("CREATE TABLE sales.orders (id INT)")  # spark_catalog's
    spark.sql("INSERT INTO sales.orders VALUES (1)")
    assert spark.catalog.currentCatalog() == "spark_catalog"
    spark.sql("USE CATALOG main")
    assert spark.catalog.currentCatalog() == "main"
    assert spark.sql("SELECT current_catalog(), current_schema()").first() == ("main", "default")
    assert spark.sql("SELECT current_catalog()").columns == ["current_catalog()"]
    spark.sql("CREATE TABLE sales.orders (id INT, note STRING)")  # main.sales.orders
    spark.sql("INSERT INTO sales.orders VALUES (2, 'two'), (3, 'three')")
    spark.sql("USE SCHEMA sales")
    assert spark.catalog.currentDatabase() == "sales"
    spark.sql("INSERT INTO orders VALUES (4, 'four')")  # one part: main.sales
    spark.sql("CREATE TABLE events (id INT)")  # main.sales.events
    assert (lake.root / "main" / "sales" / "events" / "_delta_log").is_dir()
    assert files_rows(lake.root / "main" / "sales" / "orders", "id") == [(2,), (3,), (4,)]
    assert files_rows(lake.root / "sales" / "orders", "id") == [(1,)]
    assert sql_rows(spark, "SELECT id FROM orders") == [(2,), (3,), (4,)]
    assert sql_rows(spark, "SELECT id FROM spark_catalog.sales.orders") == [(1,)]
    assert [r.tableName for r in spark.sql("SHOW TABLES").collect() if not r.isTemporary] == \
        ["events", "orders"]
    # Python: the current catalog and schema hold for names given to every API
    assert spark.table("orders").count() == 3 and spark.read.table("sales.orders").count() == 3
    spark.createDataFrame([(5, "five")], "id INT, note STRING").write.mode("append") \
        .saveAsTable("orders")
    spark.createDataFrame([(6, "six")], "id INT, note STRING").write.insertInto("sales.orders")
    assert files_rows(lake.root / "main" / "sales" / "orders", "id") == [(i,) for i in range(2, 7)]
    from delta.tables import DeltaTable

    assert DeltaTable.forName(spark, "orders").toDF().count() == 5
    spark.catalog.setCurrentCatalog("spark_catalog")
    assert spark.catalog.currentCatalog() == "spark_catalog"
    assert spark.table("sales.orders").count() == 1
    spark.catalog.setCurrentCatalog("main")
    spark.catalog.setCurrentDatabase("sales")
    assert spark.sql("SELECT count(*) FROM orders").first()[0] == 5
    assert "main" in [c.name for c in spark.catalog.listCatalogs()]
    assert spark.catalog.tableExists("main.sales.orders") and spark.catalog.tableExists("orders")
    assert spark.catalog.tableExists("sales.orders") and not spark.catalog.tableExists("nope")
    assert spark.catalog.tableExists("orders", "main.sales")
    assert {"events", "orders"} <= {t.name for t in spark.catalog.listTables("main.sales")
                                    if not t.isTemporary}  # unmapped: CATALOG_NOT_FOUND
    assert spark.catalog.getTable("main.sales.orders").name == "orders"
    # IDENTIFIER(...) and spaces around the dots name the same table
    assert spark.sql("SELECT count(*) FROM IDENTIFIER('main.sales.orders')").first()[0] == 5
    assert spark.sql("SELECT count(*) FROM main . sales . orders").first()[0] == 5
    spark.sql("USE spark_catalog.default")
    assert spark.catalog.currentCatalog() == "spark_catalog"
    assert spark.catalog.currentDatabase() == "default"


def test_python_entry_points_take_three_part_names(spark, lake, tmp_path):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id INT, name STRING")
    with pytest.raises(HeadwaterError) as info:  # a misspelt catalog is no new one
        df.write.saveAsTable("mian.raw.people")
    assert info.value.error_class == "CATALOG_NOT_FOUND" and lake.catalogs() == []
    assert not (lake.root / "mian").exists()
    spark.sql("CREATE CATALOG main")
    df.write.saveAsTable("main.raw.people")  # the first table makes its schema
    assert lake.catalogs() == ["main"]
    df.where("id = 2").write.mode("append").saveAsTable("main.raw.people")
    assert spark.table("main.raw.people").count() == 3
    assert spark.read.table("main.raw.people").where("id = 2").count() == 2
    from delta.tables import DeltaTable

    DeltaTable.forName(spark, "main.raw.people").delete("id = 1")
    assert files_rows(lake.root / "main" / "raw" / "people", "id") == [(2,), (2,)]
    assert lake.read("main.raw.people").count() == 2
    # a stream in and out of catalog tables, by name
    checkpoint = tmp_path / "ck"
    query = (spark.readStream.table("main.raw.people").writeStream
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .toTable("main.clean.people"))
    query.awaitTermination()
    assert files_rows(lake.root / "main" / "clean" / "people", "id", "name") == \
        [(2, "b"), (2, "b")]
    built = (DeltaTable.create(spark).tableName("main.clean.built")
             .addColumn("id", "INT").execute())
    assert built.toDF().count() == 0 and (lake.root / "main" / "clean" / "built").is_dir()
    # a new lakehouse object on the same root finds the catalog's tables again
    lake.detach()
    again = Lakehouse(lake.root, spark)
    try:
        assert again.catalogs() == ["main"]
        assert spark.sql("SELECT count(*) FROM main.clean.people").first()[0] == 2
        assert spark.sql("SHOW TABLES IN main.clean").where("NOT isTemporary").count() == 2
    finally:
        again.detach()
        lake.attach()


def test_catalog_and_schema_ddl_and_what_is_refused(spark, lake):
    spark.sql("CREATE TABLE sales.orders (id INT)")
    with pytest.raises(HeadwaterError) as info:
        spark.sql("USE CATALOG nope")
    assert info.value.code == "HW_CATALOG_NOT_FOUND" and "CREATE CATALOG nope" in str(info.value)
    assert info.value.error_class == "CATALOG_NOT_FOUND"
    spark.sql("CREATE CATALOG main")
    with pytest.raises(HeadwaterError) as info:
        spark.sql("CREATE CATALOG main")
    assert info.value.code == "HW_CATALOG_EXISTS"
    spark.sql("CREATE CATALOG IF NOT EXISTS main")
    for bad, code in (("CREATE CATALOG a__b", "HW_CATALOG_NAME_INVALID"),
                      ("CREATE CATALOG delta", "HW_CATALOG_NAME_INVALID"),
                      # a schema of spark_catalog holding tables is no catalog
                      ("CREATE CATALOG sales", "HW_CATALOG_NAME_INVALID"),
                      ("CREATE TABLE sales.x.y (id INT)", "HW_CATALOG_NAME_INVALID"),
                      # ... and a catalog is no schema of spark_catalog
                      ("CREATE TABLE main.t (id INT)", "HW_TABLE_NAME_INVALID"),
                      ("CREATE CATALOG c MANAGED LOCATION 's3://b/c'", "HW_SQL_UNSUPPORTED"),
                      ("USE main.nope", "HW_SCHEMA_NOT_FOUND")):
        with pytest.raises(HeadwaterError) as info:
            spark.sql(bad)
        assert info.value.code == code, (bad, info.value)
    spark.sql("CREATE SCHEMA main.empty")
    assert (lake.root / "main" / "empty").is_dir()
    with pytest.raises(HeadwaterError) as info:
        spark.sql("CREATE SCHEMA main.empty")
    assert info.value.error_class == "SCHEMA_ALREADY_EXISTS"
    spark.sql("CREATE SCHEMA IF NOT EXISTS main.empty")
    spark.sql("USE main.empty")
    assert spark.sql("SELECT current_schema()").first()[0] == "empty"
    spark.sql("CREATE TABLE main.gold.kpis AS SELECT 1 AS id")
    with pytest.raises(HeadwaterError) as info:
        spark.sql("DROP SCHEMA main.gold")
    assert info.value.error_class == "SCHEMA_NOT_EMPTY"
    spark.sql("DROP SCHEMA main.gold CASCADE")
    assert not (lake.root / "main" / "gold").exists()
    spark.sql("DROP SCHEMA main.empty")  # the current one: the session goes back to default
    assert spark.catalog.currentCatalog() == "spark_catalog"
    spark.sql("CREATE TABLE main.sales.t AS SELECT 1 AS id")
    with pytest.raises(HeadwaterError) as info:
        spark.sql("DROP CATALOG main")
    assert info.value.code == "HW_CATALOG_NOT_EMPTY"
    spark.sql("DROP CATALOG main CASCADE")
    assert not (lake.root / "main").exists() and lake.catalogs() == []
    spark.sql("DROP CATALOG IF EXISTS main")
    assert files_rows(lake.root / "sales" / "orders", "id") == []  # untouched


PIPELINE_SPEC = """
name: rides
storage: storage
catalog: {catalog}
schema: {schema}
libraries:
  - glob:
      include: transformations/**
"""

# Written the way Databricks' current docs write a pipeline: dp, three-part names of the
# pipeline's own catalog and schema from its configuration, unqualified names inside it.
PIPELINE_PY = """
from pyspark import pipelines as dp
from pyspark.sql import functions as F

catalog = spark.conf.get("rides.catalog")  # noqa: F821 - injected, as on Databricks
schema = spark.conf.get("rides.schema")  # noqa: F821

@dp.table(comment="raw rides, as landed")
@dp.expect_or_drop("has_distance", "distance IS NOT NULL")
def rides_bronze():
    return spark.readStream.table(f"{catalog}.landing.rides_raw")  # noqa: F821

@dp.materialized_view
def rides_by_city():
    return (spark.read.table(f"{catalog}.{schema}.rides_bronze")  # noqa: F821
            .groupBy("city").agg(F.sum("distance").alias("distance")))
"""

PIPELINE_SQL = """
-- gold, in SQL: LIVE., unqualified and three-part names all reach the pipeline's tables
CREATE OR REFRESH MATERIALIZED VIEW long_city AS
  SELECT city FROM {catalog}.{schema}.rides_by_city WHERE distance > 10;
CREATE OR REFRESH STREAMING TABLE rides_silver AS
  SELECT city, distance * 2 AS km2 FROM STREAM(LIVE.rides_bronze);
"""


def test_a_pipeline_in_a_catalog_and_schema_runs_twice(spark, keep_lakehouse, tmp_path):
    from headwater.pipeline.run import run_project

    project = tmp_path / "rides"
    (project / "transformations").mkdir(parents=True)
    (project / "spark-pipeline.yml").write_text(
        PIPELINE_SPEC.format(catalog="main", schema="mobility")
        + "configuration:\n  rides.catalog: main\n  rides.schema: mobility\n")
    (project / "transformations" / "rides.py").write_text(textwrap.dedent(PIPELINE_PY))
    (project / "transformations" / "gold.sql").write_text(
        PIPELINE_SQL.format(catalog="main", schema="mobility"))
    store = project / "storage"
    landed: list[tuple[str, float | None]] = []

    def land(batch: list[tuple[str, float | None]]) -> None:
        landed.extend(batch)
        (store / "main").mkdir(parents=True, exist_ok=True)
        (store / "main" / "_catalog.json").write_text('{"name": "main"}')
        write(store / "main" / "landing" / "rides_raw", pa.table({
            "city": [c for c, _ in batch], "distance": [d for _, d in batch]}))

    def check() -> None:
        kept = [(c, d) for c, d in landed if d is not None]
        tables = store / "main" / "mobility"
        assert files_rows(tables / "rides_bronze", "city", "distance") == sorted(kept)
        by_city: dict[str, float] = {}
        for c, d in kept:
            by_city[c] = by_city.get(c, 0.0) + d
        assert files_rows(tables / "rides_by_city", "city", "distance") == sorted(by_city.items())
        assert files_rows(tables / "long_city", "city") == \
            sorted((c,) for c, d in by_city.items() if d > 10)
        assert files_rows(tables / "rides_silver", "city", "km2") == \
            sorted((c, d * 2) for c, d in kept)

    land([("oslo", 4.0), ("rome", 12.5), ("oslo", None)])
    outcome = run_project(project, echo=lambda _: None)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    check()
    assert sorted(r.key for r in outcome.results) == [
        "main.mobility.long_city", "main.mobility.rides_bronze", "main.mobility.rides_by_city",
        "main.mobility.rides_silver"]
    land([("oslo", 8.0), ("lima", 1.0)])  # new rows between the runs
    outcome = run_project(project, echo=lambda _: None)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    check()
    # the tables are the lakehouse's, by their three-part names
    assert spark.sql("SELECT count(*) FROM main.mobility.rides_bronze").first()[0] == 4


def test_names_never_reach_the_wrong_table(spark, lake):
    """Each case once changed or deleted another table than the one named."""
    spark.sql("CREATE TABLE sales.orders (id INT)")
    spark.sql("INSERT INTO sales.orders VALUES (1)")
    # a schema of spark_catalog is no catalog: Spark's own DROP SCHEMA (refused: not empty)
    with pytest.raises(Exception):  # noqa: B017 - Spark's SCHEMA_NOT_EMPTY or headwater's
        spark.sql("DROP SCHEMA IF EXISTS sales.orders")
    assert files_rows(lake.root / "sales" / "orders", "id") == [(1,)]
    # a table and a catalog never share a folder
    spark.sql("CREATE TABLE main (id INT)")
    with pytest.raises(HeadwaterError) as info:
        spark.sql("CREATE CATALOG main")
    assert info.value.code == "HW_CATALOG_NAME_INVALID"
    spark.sql("CREATE CATALOG prod")
    with pytest.raises(HeadwaterError) as info:
        spark.sql("CREATE TABLE prod (id INT)")
    assert info.value.code == "HW_TABLE_NAME_INVALID"
    # one-part names are the root's tables in Spark's default database, whatever is current
    spark.sql("USE CATALOG prod")
    spark.sql("CREATE TABLE spark_catalog.default.t (id INT)")
    spark.sql("INSERT INTO spark_catalog.default.t VALUES (7)")
    spark.sql("CREATE TABLE default.t (id INT)")  # prod.default.t
    assert sql_rows(spark, "SELECT id FROM prod.default.t") == []
    assert sql_rows(spark, "SELECT id FROM spark_catalog.default.t") == [(7,)]
    # names inside WITH are the current catalog's too, reads and INSERT targets
    spark.sql("CREATE TABLE sales.orders (id INT)")  # prod.sales.orders
    spark.sql("WITH x AS (SELECT 5 AS id) INSERT INTO sales.orders SELECT * FROM x")
    assert sql_rows(spark, "WITH x AS (SELECT * FROM sales.orders) SELECT * FROM x") == [(5,)]
    assert files_rows(lake.root / "sales" / "orders", "id") == [(1,)]
    # a struct reached through an alias named like the catalog is no table name
    assert sql_rows(spark, "SELECT prod.a.b FROM (SELECT named_struct('b', 2) AS a) prod") \
        == [(2,)]
    # a statement's names resolve in its own session
    other = spark.newSession()
    other.sql("USE spark_catalog.sales")
    other.sql("DELETE FROM orders WHERE id = 1")  # spark_catalog.sales.orders
    assert files_rows(lake.root / "sales" / "orders", "id") == []
    assert files_rows(lake.root / "prod" / "sales" / "orders", "id") == [(5,)]
    # DROP SCHEMA ... CASCADE deletes the tables, never other files in the folder
    landing = lake.root / "prod" / "sales" / "landing"
    landing.mkdir()
    (landing / "file.json").write_text("{}")
    spark.sql("DROP SCHEMA prod.sales CASCADE")
    assert (landing / "file.json").is_file()
    assert not (lake.root / "prod" / "sales" / "orders").exists()
