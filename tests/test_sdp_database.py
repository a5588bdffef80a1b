"""A pipeline's database (spark-pipeline.yml `database:` / headwater.toml `[pipeline]
database`): unqualified names, defined or read in Python and SQL, live in that schema of the
lakehouse; the run is incremental, and the tables are readable by name and by delta-rs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.pipeline.run import run_project

SPEC = """
name: shop
storage: storage
database: {database}
libraries:
  - glob:
      include: transformations/**
"""

TOML = """
[pipeline]
name = "shop"
root = "storage"
database = "{database}"
definitions = ["transformations/*"]
"""

# Every spelling of an unqualified name SDP users write: decorators, spark.table,
# spark.readStream.table, headwater.read*, SQL FROM / STREAM(), an append flow target, a view.
PYTHON = """
import headwater
from pyspark import pipelines as dp

@dp.table
def orders():
    return spark.readStream.table("raw_orders")  # noqa: F821 - injected, as SDP's CLI does

@dp.temporary_view
def big_orders():
    return headwater.read_stream("orders").where("amount >= 10")

@dp.table
def big():
    return spark.readStream.table("big_orders")  # noqa: F821

dp.create_streaming_table("all_amounts")

@dp.append_flow(target="all_amounts")
def from_orders():
    return headwater.read_stream("orders").select("amount")

@dp.materialized_view
def with_top():
    return headwater.read("by_customer").join(spark.table("top"), "customer")  # noqa: F821
"""

SQL = """
CREATE MATERIALIZED VIEW by_customer AS
  SELECT customer, sum(amount) AS amount FROM orders GROUP BY customer;
CREATE MATERIALIZED VIEW top AS SELECT customer FROM by_customer WHERE amount > 20;
CREATE STREAMING TABLE small AS SELECT * FROM STREAM(orders) WHERE amount < 10;
"""

STORED = ["all_amounts", "big", "by_customer", "orders", "small", "top", "with_top"]


def make_project(tmp_path: Path, config: str, database: str = "sales",
                 name: str = "spark-pipeline.yml") -> Path:
    root = tmp_path / "proj"
    (root / "transformations").mkdir(parents=True)
    (root / name).write_text(textwrap.dedent(config).format(database=database))
    (root / "transformations" / "shop.py").write_text(textwrap.dedent(PYTHON))
    (root / "transformations" / "shop.sql").write_text(textwrap.dedent(SQL))
    return root


def write_raw(store: Path, rows: list[tuple[str, int]]) -> None:
    from tests.support import write

    write(store / "sales" / "raw_orders", {"customer": [c for c, _ in rows],
                                          "amount": [a for _, a in rows]})


def rows(store: Path, table: str, *columns: str) -> list[tuple]:
    data = DeltaTable(str(store / "sales" / table)).to_pyarrow_table().to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in data)


def quiet(_: str) -> None:
    pass


def test_unqualified_names_live_in_the_spec_database_and_runs_are_incremental(
        spark, keep_lakehouse, tmp_path):
    from headwater import Lakehouse
    from headwater.pipeline.graph import Graph
    from headwater.pipeline.run import load_project
    from headwater.pipeline.run.scheduler import Runner

    root = make_project(tmp_path, SPEC)
    store = root / "storage"
    write_raw(store, [("a", 5), ("a", 20), ("b", 30)])
    before = spark.catalog.currentDatabase()

    loaded = load_project(root)
    assert loaded.registry.database == "sales"
    assert sorted(n for n, d in loaded.registry.datasets.items() if d.stored) == \
        [f"sales.{t}" for t in STORED]
    assert "big_orders" in loaded.registry.datasets  # a temporary view keeps its name
    graph = Graph(loaded.registry, loaded.lakehouse, dry=True).build()
    try:
        assert spark.catalog.currentDatabase() == "sales"  # while the graph lives
        # raw_orders is the lakehouse's, not the pipeline's: a read, not an upstream dataset
        assert [r.name for r in graph.flows_of("sales.orders")[0].reads] == ["sales.raw_orders"]
        assert graph.upstream("sales.orders") == set()
        assert graph.upstream("sales.big") == {"big_orders", "sales.orders"}
        assert graph.upstream("sales.all_amounts") == {"sales.orders"}
        assert graph.upstream("sales.top") == {"sales.by_customer"}
        assert graph.upstream("sales.with_top") == {"sales.by_customer", "sales.top"}
        assert graph.upstream("sales.small") == {"sales.orders"}
        depths = Runner(graph, {}, False, None, echo=quiet, pipeline="shop",
                        event_log=False)._depths()
    finally:
        graph.close()
    assert spark.catalog.currentDatabase() == before  # given back
    assert depths == {"sales.orders": 0, "sales.all_amounts": 1, "sales.big": 1,
                      "sales.by_customer": 1, "sales.small": 1,
                      "sales.top": 2, "sales.with_top": 3}

    messages: list[str] = []
    outcome = run_project(loaded, echo=messages.append)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert spark.catalog.currentDatabase() == before
    assert sorted(r.key for r in outcome.results) == sorted(  # flows name qualified tables
        [f"sales.{t}" for t in STORED if t != "all_amounts"] + ["sales.all_amounts/from_orders"])
    # the tables are folders of the schema, readable by delta-rs ...
    assert not (store / "orders").exists()
    assert rows(store, "orders", "customer", "amount") == [("a", 5), ("a", 20), ("b", 30)]
    assert rows(store, "small", "amount") == [(5,)]
    assert rows(store, "big", "amount") == [(20,), (30,)]
    assert rows(store, "all_amounts", "amount") == [(5,), (20,), (30,)]
    assert rows(store, "by_customer", "customer", "amount") == [("a", 25), ("b", 30)]
    assert rows(store, "with_top", "customer", "amount") == [("a", 25), ("b", 30)]
    # ... and by name, qualified, through Spark and the Lakehouse
    assert spark.table("sales.by_customer").groupBy().sum("amount").collect()[0][0] == 55
    assert sorted(Lakehouse.of(spark).tables()) == \
        sorted(["_event_log", "sales.raw_orders"] + [f"sales.{t}" for t in STORED])

    write_raw(store, [("b", 1)])  # the second run reads only the new row
    outcome = run_project(root, echo=quiet, select=["small", "orders", "by_customer"])
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert rows(store, "small", "amount") == [(1,), (5,)]
    assert rows(store, "by_customer", "customer", "amount") == [("a", 25), ("b", 31)]
    assert rows(store, "big", "amount") == [(20,), (30,)]  # not selected: left alone
    assert spark.table("sales.orders").count() == 4
    logged = {r[0] for r in DeltaTable(str(store / "_event_log")).to_pyarrow_table(
        columns=["table_name"]).to_pylist() for r in [tuple(r.values())] if r[0]}
    assert logged == {f"sales.{t}" for t in STORED}, logged  # the event log names them so


def test_the_database_of_headwater_toml_and_catalog_names(spark, keep_lakehouse, tmp_path):
    root = make_project(tmp_path, TOML, name="headwater.toml")
    assert Project.load(root).database == "sales"
    store = root / "storage"
    write_raw(store, [("c", 12)])
    outcome = run_project(root, echo=quiet, select=["orders", "big"])
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert rows(store, "big", "customer", "amount") == [("c", 12)]

    # a table at the lakehouse's top level is not found unqualified; default.<t> reads it
    from tests.support import write

    from headwater.pipeline.run import load_project
    from headwater.pipeline.validate import validate_project

    write(store / "top_level", {"customer": ["c"]})
    extra = root / "transformations" / "extra.py"
    extra.write_text("from pyspark import pipelines as dp\n\n@dp.materialized_view\n"
                     "def joined():\n    return spark.table('top_level')  # noqa: F821\n")
    loaded = load_project(root)
    with pytest.raises(HeadwaterError) as info:
        validate_project(loaded.registry, loaded.lakehouse)
    assert info.value.code == "HW_PIPELINE_UNKNOWN_TABLE", info.value
    assert "'sales.top_level'" in str(info.value) and "default.<table>" in str(info.value)
    # a run whose graph fails to build gives the session its current database back
    with pytest.raises(HeadwaterError):
        run_project(root, echo=quiet)
    assert spark.catalog.currentDatabase() != "sales"
    extra.write_text(extra.read_text().replace("'top_level'", "'default.top_level'"))
    loaded = load_project(root)
    report = validate_project(loaded.registry, loaded.lakehouse)
    assert not report.errors, report.errors
    assert any(line.split()[1] == "sales.joined" for line in report.lines), report.lines
    assert spark.catalog.currentDatabase() != "sales"

    # a catalog (Unity Catalog's three-part names: tests/test_catalogs.py): its schema's
    # Spark database; names a catalog cannot have are refused, naming the file
    for catalog, database in (("main", "main__sales"), ("hive_metastore", "hive_metastore__sales")):
        spec = make_project(tmp_path / catalog, SPEC + f"catalog: {catalog}\n")
        assert Project.load(spec).database == database
    for catalog in ("'a__b'", "delta", "'1x'"):
        spec = make_project(tmp_path / f"c{catalog.strip(chr(39))}", SPEC + f"catalog: {catalog}\n")
        with pytest.raises(HeadwaterError) as info:
            Project.load(spec)
        error = info.value
        assert error.code == "HW_CATALOG_NAME_INVALID", error
        assert str(spec / "spark-pipeline.yml") in str(error)
    spec = make_project(tmp_path / "ok", SPEC + "catalog: SPARK_CATALOG\n", database="Sales")
    assert Project.load(spec).database == "sales"
    assert Project.load(make_project(tmp_path / "d", SPEC, "default")).database is None
    for bad in ("'1x'", "_hidden", "'a.b'"):
        with pytest.raises(HeadwaterError) as info:
            Project.load(make_project(tmp_path / f"bad{bad.strip(chr(39))}", SPEC, bad))
        assert info.value.code == "HW_PROJECT_INVALID", info.value

    # a database named like a table of the lakehouse would put tables inside its folder
    collide = make_project(tmp_path / "collide", TOML, database="top_level", name="headwater.toml")
    write(collide / "storage" / "top_level", {"customer": ["c"]})
    with pytest.raises(HeadwaterError) as info:
        run_project(collide, echo=quiet)
    assert info.value.code == "HW_PROJECT_INVALID" and "'top_level'" in str(info.value), info.value
    assert spark.catalog.currentDatabase() != "top_level"
