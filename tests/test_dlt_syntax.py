"""DLT pipelines as Databricks users wrote them: notebooks exported as source (cells, MAGIC
%sql / %python cells), LIVE. names, CREATE LIVE TABLE and its kin, TEMPORARY tables,
cloud_files / STREAM read_files, SET and ${key}, dlt.create_target_table and the other old
names, Auto Loader without a schema location, format("kafka"), and configuration keys
outside spark.* (procs: a real `headwater run` prints no "Ignoring non-Spark config property").

The notebooks under tests/fixtures/dlt_notebooks are written for these tests in Databricks'
notebook source format."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from headwater import Lakehouse
from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.model import Kind
from headwater.pipeline.notebook import cells, notebook_language
from headwater.pipeline.registry import Registry, collecting
from headwater.pipeline.run import run_project

FIXTURE = Path(__file__).parent / "fixtures" / "dlt_notebooks"


# --- the notebook format ---------------------------------------------------------------------


def test_cells_keep_the_files_line_numbers_and_drop_magic_prefixes():
    text = (FIXTURE / "transformations" / "customers.py").read_text()
    assert notebook_language(text) == "python"
    assert notebook_language("-- Databricks notebook source\nSELECT 1") == "sql"
    assert notebook_language("import dlt\n") is None
    lines = text.split("\n")
    found = cells(text)
    assert [c.language for c in found] == ["md", "pip", "python", "python", "python", "sql",
                                           "sh", "python"]
    for cell in found:
        code = cell.code.split("\n")
        assert lines[cell.line - 1].strip()  # the cell's first code (or magic) line
        # padding: same line numbers (a DBTITLE line is a comment of the cell's language)
        assert all(not c.strip() or c.startswith("# DBTITLE") for c in code[:cell.line - 1])
        for n in range(cell.line - 1, len(code)):
            if code[n].strip():
                assert code[n].strip() in lines[n], (n, code[n], lines[n])
    sql = next(c for c in found if c.language == "sql")
    assert sql.magic == "%sql" and "MAGIC" not in sql.code
    assert sql.body.startswith("CREATE LIVE VIEW named_customers")
    assert next(c for c in found if c.language == "pip").body == "install pyyaml"


def project_copy(tmp_path: Path, spec_landing: Path | None = None) -> tuple[Path, Path]:
    """The fixture's notebooks in a project whose configuration names the landing folder
    (``spec_landing``: another one, for --conf to override)."""
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root)
    landing = tmp_path / "landing"
    for folder in ("orders", "refunds", "customers", "web", "app"):
        (landing / folder).mkdir(parents=True)
    (root / "spark-pipeline.yml").write_text(textwrap.dedent(f"""\
        name: retail
        storage: storage
        configuration:
          retail.landing: {json.dumps(str(spec_landing or landing))}
        libraries:
          - glob:
              include: transformations/**
        """))
    return root, landing


def land(landing: Path, batch: int) -> None:
    def lines(folder: str, rows: list[dict]) -> None:
        (landing / folder / f"{folder}-{batch}.json").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))

    if batch == 0:
        lines("orders", [{"order_id": 1, "customer_id": "a", "amount": 10.0},
                         {"order_id": 2, "customer_id": "b", "amount": -1.0},  # dropped
                         {"order_id": 3, "customer_id": "a", "amount": 5.0}])
        (landing / "refunds" / "r-0.csv").write_text("order_id,refund\n1,2.5\n")
        lines("customers", [{"id": 1, "name": "Ann", "op": "UPSERT", "seq": 1},
                            {"id": 2, "name": "Bob", "op": "UPSERT", "seq": 1}])
        lines("web", [{"event": "view", "user": "a"}])
        lines("app", [{"event": "tap", "user": "b"}])
    else:
        lines("orders", [{"order_id": 4, "customer_id": "b", "amount": 20.0}])
        (landing / "refunds" / "r-1.csv").write_text("order_id,refund\n4,1.0\n")
        lines("customers", [{"id": 1, "name": "Anne", "op": "UPSERT", "seq": 2},
                            {"id": 2, "name": None, "op": "DELETE", "seq": 2}])
        lines("web", [{"event": "buy", "user": "a"}])
        lines("app", [{"event": "tap", "user": "a"}])


def rows(path: Path, *columns: str) -> list[tuple]:
    table = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(tuple(r[c] for c in columns) for r in table.to_pylist())


def test_dlt_notebooks_run_twice_incrementally(spark, keep_lakehouse, tmp_path, monkeypatch):
    root, landing = project_copy(tmp_path)
    # run from the project folder, as `headwater run` is: the sink's relative path is taken
    # from there (the launch folder, as under spark-pipelines)
    monkeypatch.chdir(root)
    store = root / "storage"
    lines: list[str] = []
    land(landing, 0)
    outcome = run_project(root, echo=lines.append)
    assert outcome.ok, outcome.results
    warnings = [line for line in lines if line.startswith("warning:")]
    source = (root / "transformations" / "customers.py").read_text().split("\n")
    pip, sh = (source.index(f"# MAGIC %{m}") + 1 for m in ("pip install pyyaml", "sh"))
    assert len(warnings) == 2 and f"customers.py:{pip}: %pip cell not run" in warnings[0]
    assert f"customers.py:{sh}: a %sh cell is not run" in warnings[1]

    assert rows(store / "orders_bronze", "order_id", "amount") == [(1, 10.0), (2, -1.0),
                                                                   (3, 5.0)]
    # TEMPORARY: stored in the lakehouse's _temporary folder, not in its catalog
    assert rows(store / "_temporary" / "orders_clean", "order_id") == [(1,), (3,)]
    assert not (store / "orders_clean").exists()
    assert rows(store / "revenue", "customer_id", "revenue", "orders") == [("a", 15.0, 2)]
    assert rows(store / "revenue_copy", "customer_id", "revenue") == [("a", 15.0)]
    assert rows(store / "big_order_count", "n") == [(1,)]
    assert rows(store / "refunds", "order_id", "refund") == [(1, 2.5)]
    assert rows(store / "customers", "id", "name") == [(1, "Ann"), (2, "Bob")]
    assert rows(store / "customer_count", "n") == [(2,)]
    assert rows(store / "all_events", "event", "user") == [("tap", "b"), ("view", "a")]
    assert rows(store / "_temporary" / "app_raw", "event") == [("tap",)]
    assert rows(store / "events_per_user", "user", "count") == [("a", 1), ("b", 1)]
    sink = [json.loads(line) for f in sorted((root / "events_out").glob("*.json"))
            for line in f.read_text().splitlines()]
    assert sorted((e["event"], e["user"]) for e in sink) == [("tap", "b")]
    # Auto Loader reads without a schema location keep theirs in the storage of the dataset
    # they feed, whatever it is: table, temporary table, view, append flow, sink flow
    ingest = sorted(p.parent.parent.name for p in (store / "_checkpoints").glob("*/_ingest/*"))
    assert ingest == ["all_events", "app_raw", "customers_updates", "events_out",
                      "orders_bronze", "refunds"]
    # another session attaching the lakehouse does not see the temporary tables
    tables = Lakehouse(store, spark, attach=False).tables()
    assert "orders_bronze" in tables and "orders_clean" not in tables
    assert "app_raw" not in tables

    land(landing, 1)
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, outcome.results
    assert [r[0] for r in rows(store / "orders_bronze", "order_id")] == [1, 2, 3, 4]
    assert rows(store / "_temporary" / "orders_clean", "order_id") == [(1,), (3,), (4,)]
    assert rows(store / "revenue", "customer_id", "revenue", "orders") == [
        ("a", 15.0, 2), ("b", 20.0, 1)]
    assert rows(store / "revenue_copy", "customer_id", "revenue") == [("a", 15.0), ("b", 20.0)]
    assert rows(store / "big_order_count", "n") == [(2,)]
    assert rows(store / "refunds", "order_id", "refund") == [(1, 2.5), (4, 1.0)]
    assert rows(store / "customers", "id", "name") == [(1, "Anne")]
    assert rows(store / "customer_count", "n") == [(1,)]
    assert rows(store / "all_events", "event", "user") == [
        ("buy", "a"), ("tap", "a"), ("tap", "b"), ("view", "a")]
    assert rows(store / "events_per_user", "user", "count") == [("a", 3), ("b", 1)]
    sink = [json.loads(line) for f in sorted((root / "events_out").glob("*.json"))
            for line in f.read_text().splitlines()]
    assert sorted((e["event"], e["user"]) for e in sink) == [("tap", "a"), ("tap", "b")]


# --- SQL spellings, one statement at a time ----------------------------------------------------


def registered(spark, sql: str, file: str = "p.sql") -> Registry:
    registry = Registry()
    with collecting(registry):
        registry.register_sql(textwrap.dedent(sql), Path(file))
    return registry


@pytest.mark.parametrize("head, kind, temporary", [
    ("CREATE LIVE TABLE", Kind.MATERIALIZED_VIEW, False),
    ("CREATE OR REFRESH LIVE TABLE", Kind.MATERIALIZED_VIEW, False),
    ("CREATE STREAMING LIVE TABLE", Kind.TABLE, False),
    ("CREATE OR REFRESH STREAMING LIVE TABLE", Kind.TABLE, False),
    ("CREATE INCREMENTAL LIVE TABLE", Kind.TABLE, False),
    ("CREATE TEMPORARY LIVE TABLE", Kind.MATERIALIZED_VIEW, True),
    ("CREATE OR REFRESH TEMPORARY STREAMING LIVE TABLE", Kind.TABLE, True),
    ("CREATE OR REFRESH TEMPORARY STREAMING TABLE", Kind.TABLE, True),
    ("CREATE TEMPORARY MATERIALIZED VIEW", Kind.MATERIALIZED_VIEW, True),
    ("CREATE OR REFRESH PRIVATE MATERIALIZED VIEW", Kind.MATERIALIZED_VIEW, True),
    ("CREATE TEMPORARY TABLE", Kind.MATERIALIZED_VIEW, True),
    ("CREATE LIVE VIEW", Kind.VIEW, False),
    ("CREATE TEMPORARY LIVE VIEW", Kind.VIEW, False),
    ("CREATE TEMPORARY VIEW", Kind.VIEW, False),
])
def test_create_spellings(spark, head, kind, temporary):
    source = "STREAM(LIVE.src)" if kind == Kind.TABLE else "live.src"
    registry = registered(spark, f"{head} x\nAS SELECT * FROM {source}")
    dataset = registry.datasets["x"]
    assert dataset.kind == kind and getattr(dataset, "temporary", False) is temporary
    (flow,) = registry.flows  # LIVE. blanked out (the query keeps its line breaks)
    assert "".join(flow.sql.split()) == "SELECT*FROM" + ("STREAM(src)" if kind == Kind.TABLE
                                                         else "src")


def test_set_and_variables(spark):
    spark.conf.set("hw_test.n", "2")  # a session setting the file did not SET
    registry = registered(spark, """
        SET hw_test.folder = /data/in;
        SET hw_test.folder;
        CREATE MATERIALIZED VIEW v AS SELECT '${hw_test.folder}' AS folder, ${hw_test.n} AS n
        """)
    assert spark.conf.get("hw_test.folder") == "/data/in"
    (flow,) = registry.flows
    assert "'/data/in' AS folder, 2 AS n" in flow.sql
    with pytest.raises(HeadwaterError) as info:
        registered(spark, "\n\nCREATE MATERIALIZED VIEW v AS\nSELECT '${hw_test.nowhere}'")
    error = info.value
    assert error.code == "HW_PIPELINE_CONF_MISSING" and "p.sql:4" in str(error)
    assert "hw_test.nowhere" in str(error) and "configuration:" in error.fix


def test_cloud_files_arguments_and_mistakes(spark):
    registry = registered(spark, """
        CREATE STREAMING LIVE TABLE b AS SELECT * FROM cloud_files(
          concat('/data', '/in'), 'csv', map('header', 'true', 'cloudFiles.schemaHints', 'a INT'))
        """)
    (flow,) = registry.flows
    assert "cloud_files" not in flow.sql and "__hw_files_" in flow.sql
    with pytest.raises(HeadwaterError) as info:
        registered(spark, "CREATE MATERIALIZED VIEW m AS SELECT * FROM read_files('/x')")
    assert info.value.code == "HW_PIPELINE_UNSUPPORTED" and "STREAM read_files" in \
        info.value.fix
    with pytest.raises(HeadwaterError) as info:
        registered(spark, "CREATE STREAMING TABLE s AS\nSELECT * FROM cloud_files('/x')")
    assert info.value.code == "HW_PIPELINE_SQL_INVALID" and "p.sql:2" in str(info.value)


# --- loading notebooks: errors point at the file's lines ----------------------------------------


def notebook_project(tmp_path: Path, files: dict[str, str]) -> Project:
    root = tmp_path / "nb"
    (root / "t").mkdir(parents=True)
    (root / "headwater.toml").write_text(
        '[pipeline]\nname = "nb"\nroot = "lake"\ndefinitions = ["t/*"]\n')
    for name, text in files.items():
        (root / "t" / name).write_text(textwrap.dedent(text))
    return Project.load(root)


PY_HEAD = "# Databricks notebook source\n"
SQL_HEAD = "-- Databricks notebook source\n"


@pytest.mark.parametrize("files, line, words", [
    ({"a.py": PY_HEAD + "x = 1\n\n# COMMAND ----------\n\ny = 2\nundefined_name\n"},
     "a.py:7", "NameError"),
    ({"a.py": PY_HEAD + "x = 1\n\n# COMMAND ----------\n\n# MAGIC %sql\n"
      "# MAGIC CREATE MATERIALIZED VIEW m AS\n# MAGIC SELECT * FROM t WHERE (\n"}, "a.py:8",
     "Spark's SQL parser rejected"),
    ({"a.sql": SQL_HEAD + "CREATE MATERIALIZED VIEW m AS SELECT 1\n\n-- COMMAND ----------\n\n"
      "-- MAGIC %python\n-- MAGIC import dlt\n-- MAGIC dlt.nothing_here()\n"}, "a.sql:8",
     "AttributeError"),
    ({"a.py": PY_HEAD + "# MAGIC %run ./setup\n"}, "a.py:2", "%run ./setup"),
    ({"a.py": PY_HEAD + "# MAGIC %pip install not-a-package-hw==1.0 -q\n"}, "a.py:2",
     "not-a-package-hw==1.0"),
])
def test_notebook_mistakes_name_the_files_line(spark, tmp_path, files, line, words):
    with pytest.raises(HeadwaterError) as info:
        load_definitions(notebook_project(tmp_path, files), spark)
    assert f"{line}:" in str(info.value) and words in str(info.value), str(info.value)


def test_cells_are_statement_boundaries_and_run_in_order(spark, tmp_path):
    registry = load_definitions(notebook_project(tmp_path, {"a.sql": SQL_HEAD + textwrap.dedent("""\
        CREATE MATERIALIZED VIEW one AS SELECT 1 AS n

        -- COMMAND ----------

        SET hw_test.order = second;
        CREATE MATERIALIZED VIEW two AS SELECT '${hw_test.order}' AS n

        -- COMMAND ----------

        -- MAGIC %python
        -- MAGIC import dlt
        -- MAGIC ORDER = spark.conf.get("hw_test.order")
        -- MAGIC
        -- MAGIC @dlt.table(name=f"three_{ORDER}")
        -- MAGIC def three():
        -- MAGIC     return dlt.read("LIVE.one")
        """)}), spark)
    assert list(registry.datasets) == ["one", "two", "three_second"]
    assert registry.datasets["two"].location.line == 7


# --- Python: old names, LIVE., pyspark's own create_auto_cdc_flow ------------------------------


def test_old_dlt_names_are_the_current_ones():
    import headwater.dlt as dlt

    assert dlt.create_target_table is dlt.create_streaming_table
    assert dlt.create_streaming_live_table is dlt.create_streaming_table
    assert dlt.create_table is dlt.table and dlt.create_view is dlt.view


def test_pyspark_create_auto_cdc_flow_registers(spark):
    from pyspark import pipelines as dp

    registry = Registry()
    with collecting(registry):
        dp.create_streaming_table("t")
        dp.create_auto_cdc_flow(target="t", source="s", keys=["id"], sequence_by="seq",
                                apply_as_deletes="op = 'D'", stored_as_scd_type=2)
    (flow,) = registry.flows
    assert flow.cdc.keys == ("id",) and flow.cdc.stored_as_scd_type == 2
    assert "test_dlt_syntax.py" in str(flow.location)
    # pyspark made Spark Connect columns of the SQL text; headwater's classic session uses it
    assert (flow.cdc.sequence_by, flow.cdc.apply_as_deletes) == ("seq", "op = 'D'")
    events = spark.createDataFrame([(1, 7, "D")], "id long, seq long, op string")
    assert events.select(flow.cdc.sequence_column()).first()[0] == 7


# --- format("kafka") -----------------------------------------------------------------------------


def test_format_kafka_is_headwaters_source_without_sparks_connector(spark):
    from headwater.kafka.alias import spark_has_connector

    assert not spark_has_connector(spark)
    options = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    stream = spark.readStream.format("kafka").options(**options).load()
    batch = spark.read.format("KAFKA").options(**options).load()
    expected = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert stream.isStreaming and stream.columns == expected and batch.columns == expected
    assert spark.readStream.format("headwater.kafka").options(**options).load().columns == \
        expected


# --- (procs) a real `headwater run`: configuration outside spark.* ------------------------------


@pytest.mark.procs
def test_headwater_run_passes_non_spark_configuration_quietly(tmp_path):
    from tests.support import cli, show

    nowhere = tmp_path / "not-the-landing"
    root, landing = project_copy(tmp_path, spec_landing=nowhere)
    land(landing, 0)
    conf = ["--conf", f"retail.landing={landing}"]  # over the spec's configuration
    done = cli("run", "--project", str(root), "--plain", *conf, cwd=tmp_path)
    assert done.returncode == 0, show(done)
    assert "Ignoring non-Spark config property" not in done.stdout + done.stderr
    store = root / "storage"
    assert rows(store / "orders_bronze", "order_id") == [(1,), (2,), (3,)]
    assert rows(store / "_temporary" / "orders_clean", "order_id") == [(1,), (3,)]
    land(landing, 1)
    done = cli("run", "--project", str(root), "--plain", *conf, cwd=tmp_path)
    assert done.returncode == 0, show(done)
    assert rows(store / "revenue", "customer_id", "revenue") == [("a", 15.0), ("b", 20.0)]
    assert rows(store / "customers", "id", "name") == [(1, "Anne")]


# --- Auto Loader's schema location outside a pipeline ---------------------------------------------


def test_format_cloudfiles_without_a_schema_location_uses_the_lakehouses(spark, tmp_path):
    from headwater.conf.layout import LAKEHOUSE_STATE_CONF
    from headwater.spark.plan import relations

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": 1}\n')
    previous = spark.conf.get(LAKEHOUSE_STATE_CONF, None)
    spark.conf.set(LAKEHOUSE_STATE_CONF, str(tmp_path / "state"))
    try:
        df = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
              .load(str(tmp_path / "in")))
        options = dict(next(r for r in relations(df) if r.source == "cloudFiles").options)
        assert options["cloudfiles.schemalocation"].startswith(str(tmp_path / "state" / "_ingest"))
        given = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                 .option("cloudFiles.schemaLocation", str(tmp_path / "mine"))
                 .load(str(tmp_path / "in")))
        options = dict(next(r for r in relations(given) if r.source == "cloudFiles").options)
        assert options["cloudfiles.schemalocation"] == str(tmp_path / "mine")
    finally:
        if previous is None:
            spark.conf.unset(LAKEHOUSE_STATE_CONF)
        else:
            spark.conf.set(LAKEHOUSE_STATE_CONF, previous)
