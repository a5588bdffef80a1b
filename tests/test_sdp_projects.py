"""Spark Declarative Pipelines projects (spark-pipeline.yml) and DLT code on headwater: the spec
read as a Project, projects run in the shared session, and (procs) pyspark's own scaffold and
the benchmark's SDP project run unchanged by `headwater run` and compared row for row with
what `spark-pipelines run` writes."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.pipeline.run import run_project


def spec_project(tmp_path: Path, spec: str, files: dict[str, str] | None = None,
                 name: str = "spark-pipeline.yml") -> Path:
    root = tmp_path / "proj"
    (root / "transformations").mkdir(parents=True, exist_ok=True)
    (root / name).write_text(textwrap.dedent(spec))
    for rel, text in (files or {}).items():
        (root / rel).write_text(textwrap.dedent(text))
    return root


def refused(root: Path) -> HeadwaterError:
    with pytest.raises(HeadwaterError) as info:
        Project.load(root)
    return info.value


BASIC = """
name: p
storage: storage
libraries:
  - glob:
      include: transformations/**
"""


# --- the spec ------------------------------------------------------------------------------


def test_the_spec_becomes_a_project(tmp_path):
    root = spec_project(tmp_path, """
        name: orders
        storage: file://{where}/store
        configuration:
          spark.sql.shuffle.partitions: "3"
        catalog: spark_catalog
        database: default
        libraries:
          - glob:
              include: transformations/**
          - glob:
              include: extra.sql
        headwater:
          trigger: once
          event_log: false
        """.replace("{where}", str(tmp_path)),
        {"transformations/a.py": "x = 1\n", "extra.sql": "SELECT 1;\n"})
    (root / "transformations" / "__pycache__").mkdir()
    (root / "transformations" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    project = Project.load(root)
    assert project.name == "orders" and project.root == tmp_path / "store"
    assert project.spec == root / "spark-pipeline.yml" and project.dir == root
    assert project.definitions == ["transformations/**/*", "extra.sql"]
    assert project.spark_conf == {"spark.sql.shuffle.partitions": "3"}
    assert project.trigger == "once" and project.event_log is False
    assert [p.relative_to(root).as_posix() for p in project.files()] == \
        ["transformations/a.py", "extra.sql"]
    # a relative storage is relative to the spec; the spec file itself is accepted too
    root2 = spec_project(tmp_path / "b", BASIC, name="spark-pipeline.yaml")
    assert Project.load(root2 / "spark-pipeline.yaml").root == root2 / "storage"


def test_a_headwater_toml_beside_the_spec_adds_only_headwaters_keys(tmp_path):
    root = spec_project(tmp_path, BASIC)
    (root / "headwater.toml").write_text(
        '[pipeline]\ntrigger = "30 seconds"\n\n[spark]\n"spark.sql.shuffle.partitions" = "5"\n')
    project = Project.load(root)
    assert project.trigger == "30 seconds" and project.spec is not None
    assert project.spark_conf == {"spark.sql.shuffle.partitions": "5"}
    (root / "headwater.toml").write_text('[pipeline]\ndefinitions = ["*.py"]\n')
    error = refused(root)
    assert error.code == "HW_PROJECT_INVALID" and "definitions" in str(error)


@pytest.mark.parametrize("spec, words", [
    (BASIC + "target: x\n", "unknown key(s) ['target']"),
    ("name: p\nlibraries: []\n", "required key 'storage'"),
    ("name: p\nstorage: s\n", "`libraries` is missing"),
    (BASIC.replace("transformations/**", "transformations/**/*.py"), "not a file path or a "
     "folder/**"),
    (BASIC + "configuration:\n  spark.sql.shuffle.partitions: 8\n", "Quote the value"),
    (BASIC + "configuration: [a]\n", "must be a mapping"),
    (BASIC + "headwater:\n  triger: once\n", "unknown headwater key(s) ['triger']"),
    (BASIC.replace("storage: storage", "storage: s3://bucket/p"), "s3:// location"),
    (BASIC + "libraries2: x\n", "libraries2"),
    ("name: [unclosed\n", "not valid YAML"),
    ("- a\n- b\n", "not a mapping"),
])
def test_spec_mistakes_are_named(tmp_path, spec, words):
    error = refused(spec_project(tmp_path, spec))
    assert error.code == "HW_PROJECT_INVALID", error
    assert words in str(error), str(error)


def test_spec_catalogs_and_two_spec_files(tmp_path):
    root = spec_project(tmp_path, BASIC + "catalog: main\n")  # a catalog of the lakehouse
    assert Project.load(root).database == "main__default"  # tests/test_catalogs.py runs it
    error = refused(spec_project(tmp_path / "a", BASIC + "catalog: 'a__b'\n"))
    assert error.code == "HW_CATALOG_NAME_INVALID" and "__" in str(error)
    root = spec_project(tmp_path / "b", BASIC + "database: sales\n")
    assert Project.load(root).database == "sales"  # tests/test_sdp_database.py runs it
    root = spec_project(tmp_path / "c", BASIC)
    (root / "spark-pipeline.yaml").write_text(BASIC)
    error = refused(root)
    assert error.code == "HW_PROJECT_INVALID" and "both" in str(error)
    error = refused(tmp_path / "nothing-here")
    assert error.code == "HW_PROJECT_NOT_FOUND" and "spark-pipeline.yml" in str(error)


# --- running a spec project in the shared session --------------------------------------------


def table_rows(path: Path, order: str) -> list[dict]:
    table = DeltaTable(str(path)).to_pyarrow_dataset().to_table(use_threads=False)
    return sorted(table.to_pylist(), key=lambda r: r[order])


def test_an_sdp_project_runs_twice_with_spark_injected_and_sql(spark, keep_lakehouse, tmp_path):
    root = spec_project(tmp_path, BASIC, {
        "transformations/numbers.py": """
            from pyspark import pipelines as dp

            @dp.materialized_view
            def numbers():
                return spark.range(10)  # noqa: F821 - injected, as SDP's CLI does

            @dp.table
            def seen():
                return spark.readStream.table("numbers_src")  # noqa: F821

            import os
            LOADED_IN = os.getcwd()  # SDP loads definitions in the spec's folder

            @dp.materialized_view
            def cwd():
                return spark.createDataFrame([(LOADED_IN,)], "cwd string")  # noqa: F821
        """,
        "transformations/evens.sql": """
            CREATE MATERIALIZED VIEW evens AS SELECT id FROM numbers WHERE id % 2 = 0;
            CREATE STREAMING TABLE numbers_src AS SELECT * FROM STREAM(src_table);
        """})
    from tests.support import write

    store = root / "storage"
    write(store / "src_table", {"id": [1, 2, 3]})
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, outcome.results
    assert [r["id"] for r in table_rows(store / "evens", "id")] == [0, 2, 4, 6, 8]
    assert [r["id"] for r in table_rows(store / "seen", "id")] == [1, 2, 3]
    assert table_rows(store / "cwd", "cwd") == [{"cwd": str(root)}]  # loaded in the spec's dir
    write(store / "src_table", {"id": [4]})
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, outcome.results
    assert [r["id"] for r in table_rows(store / "seen", "id")] == [1, 2, 3, 4]  # incremental


# --- headwater init --format sdp -----------------------------------------------------------


def test_init_format_sdp_scaffolds_a_project_headwater_runs_twice(spark, keep_lakehouse, tmp_path):
    from tests.support import cli, show

    made = cli("init", "--format", "sdp", "readings", cwd=tmp_path)  # starts no JVM
    assert made.returncode == 0, show(made)
    root = tmp_path / "readings"
    assert (root / "spark-pipeline.yml").is_file() and not (root / "headwater.toml").exists()
    py = (root / "transformations" / "pipeline.py").read_text()
    assert "from pyspark import pipelines as dp" in py and "import headwater" not in py
    assert (root / "transformations" / "device_summary.sql").is_file()
    again = cli("init", "--format", "sdp", "readings", cwd=tmp_path)
    assert again.returncode == 1 and "HW_PROJECT_EXISTS" in again.stderr

    for _ in range(2):  # the second run finds no new file: nothing is appended twice
        outcome = run_project(root, echo=lambda _: None)
        assert outcome.ok, outcome.results
        lake = root / "lakehouse"
        assert len(table_rows(lake / "bronze", "ts")) == 60
        assert len(table_rows(lake / "silver", "ts")) == 54  # 6 readings out of range
        summary = table_rows(lake / "device_summary", "device_id")
        assert [r["device_id"] for r in summary] == [0, 1, 2, 3]
        assert sum(r["readings"] for r in summary) == 54


# --- DLT code with only the import changed ---------------------------------------------------

# Written in the shape of Databricks' DLT documentation (a streaming bronze, expectations on
# silver, a gold aggregate, a CDC flow with apply_changes); `spark` is the notebook's global.
# (Auto Loader without cloudFiles.schemaLocation: see tests/test_dlt_syntax.py.)
DLT_MEDALLION = '''
import dlt
from pyspark.sql import functions as F
from pyspark.sql.functions import col

LANDING = spark.conf.get("retail.landing")


@dlt.table(comment="Raw orders, as they landed.")
def orders_bronze():
    return (spark.readStream.format("json")
            .schema("order_id BIGINT, customer_id STRING, amount DOUBLE, status STRING")
            .load(LANDING))


@dlt.table(comment="Orders that passed the quality rules.")
@dlt.expect_or_drop("valid_order_id", "order_id IS NOT NULL")
@dlt.expect_or_drop("positive_amount", "amount > 0")
@dlt.expect("known_status", "status IN ('NEW', 'SHIPPED')")
def orders_silver():
    return (dlt.read_stream("orders_bronze")
            .select("order_id", "customer_id", col("amount").cast("double").alias("amount"),
                    "status"))


@dlt.table(comment="Revenue per customer.")
def customer_revenue_gold():
    return (dlt.read("LIVE.orders_silver").groupBy("customer_id")
            .agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders")))
'''

DLT_CDC = '''
import dlt
from pyspark.sql.functions import col, expr

CHANGES = spark.conf.get("retail.customer_changes")


@dlt.view
def customers_updates():
    return (spark.readStream.format("json")
            .schema("customer_id BIGINT, name STRING, op STRING, seq BIGINT")
            .load(CHANGES))


dlt.create_streaming_table("customers")

dlt.apply_changes(
    target="customers",
    source="customers_updates",
    keys=["customer_id"],
    sequence_by=col("seq"),
    apply_as_deletes=expr("op = 'DELETE'"),
    except_column_list=["op", "seq"],
    stored_as_scd_type=1,
)
'''

ORDERS = [
    [{"order_id": 1, "customer_id": "a", "amount": 10.0, "status": "NEW"},
     {"order_id": 2, "customer_id": "b", "amount": -5.0, "status": "NEW"},      # dropped
     {"order_id": None, "customer_id": "a", "amount": 3.0, "status": "NEW"},    # dropped
     {"order_id": 3, "customer_id": "a", "amount": 7.5, "status": "LOST"}],     # warned, kept
    [{"order_id": 4, "customer_id": "b", "amount": 2.0, "status": "SHIPPED"}],
]


def only_the_import_changed(code: str) -> str:
    changed = code.replace("\nimport dlt\n", "\nimport headwater.dlt as dlt\n", 1)
    diff = [(a, b) for a, b in zip(code.splitlines(), changed.splitlines()) if a != b]
    assert diff == [("import dlt", "import headwater.dlt as dlt")]
    return changed


def dlt_project(tmp_path: Path, files: dict[str, str]) -> Path:
    import json

    landing, changes = tmp_path / "landing", tmp_path / "changes"
    landing.mkdir()
    changes.mkdir()
    (landing / "orders-0.json").write_text("\n".join(json.dumps(r) for r in ORDERS[0]) + "\n")
    spec = BASIC + ("configuration:\n"
                    f"  retail.landing: {json.dumps(str(landing))}\n"
                    f"  retail.customer_changes: {json.dumps(str(changes))}\n")
    return spec_project(tmp_path, spec, {f"transformations/{n}": only_the_import_changed(t)
                                          for n, t in files.items()})


def test_a_dlt_medallion_runs_with_only_the_import_changed(spark, keep_lakehouse, tmp_path):
    import json

    root = dlt_project(tmp_path, {"medallion.py": DLT_MEDALLION})
    store = root / "storage"
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, outcome.results
    assert [r["order_id"] for r in table_rows(store / "orders_silver", "order_id")] == [1, 3]
    quarantined = DeltaTable(str(store / "orders_silver__quarantine")).to_pyarrow_table()
    assert quarantined.num_rows == 2
    gold = table_rows(store / "customer_revenue_gold", "customer_id")
    assert gold == [{"customer_id": "a", "revenue": 17.5, "orders": 2}]
    # gold returned a batch DataFrame: a materialized view, as @dlt.table makes it
    (tmp_path / "landing" / "orders-1.json").write_text(json.dumps(ORDERS[1][0]) + "\n")
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, outcome.results
    assert [r["order_id"] for r in table_rows(store / "orders_silver", "order_id")] == [1, 3, 4]
    assert len(table_rows(store / "orders_bronze", "amount")) == 5  # no row read twice
    gold = table_rows(store / "customer_revenue_gold", "customer_id")
    assert gold == [{"customer_id": "a", "revenue": 17.5, "orders": 2},
                    {"customer_id": "b", "revenue": 2.0, "orders": 1}]


def test_a_dlt_apply_changes_flow_runs_with_only_the_import_changed(spark, keep_lakehouse,
                                                                   tmp_path):
    import json

    root = dlt_project(tmp_path, {"customers_cdc.py": DLT_CDC})
    events = [{"customer_id": 1, "name": "Ann", "op": "UPSERT", "seq": 1},
              {"customer_id": 2, "name": "Bob", "op": "UPSERT", "seq": 1},
              {"customer_id": 1, "name": "Anne", "op": "UPSERT", "seq": 3},
              {"customer_id": 1, "name": "Old", "op": "UPSERT", "seq": 2},    # out of order
              {"customer_id": 2, "name": None, "op": "DELETE", "seq": 2}]
    (tmp_path / "changes" / "c-0.json").write_text("\n".join(json.dumps(e) for e in events))
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, outcome.results
    rows = table_rows(root / "storage" / "customers", "customer_id")
    assert [(r["customer_id"], r["name"]) for r in rows] == [(1, "Anne")]
    assert set(rows[0]) == {"customer_id", "name"}


def test_dlt_options_headwater_cannot_honour_are_refused():
    import headwater.dlt as dlt

    for kwargs in ({"path": "/mnt/x"}, {"row_filter": "f"}):
        with pytest.raises(HeadwaterError) as info:
            dlt.table(**kwargs)
        assert info.value.code == "HW_PIPELINE_UNSUPPORTED"
        assert next(iter(kwargs)) in str(info.value) and "test_sdp_projects.py" in str(info.value)
    with pytest.raises(HeadwaterError) as info:
        dlt.create_streaming_table("t", expect_all_or_drop={"a": "x > 0"})
    assert info.value.code == "HW_PIPELINE_UNSUPPORTED"
    with pytest.raises(HeadwaterError) as info:  # outside a pipeline load
        dlt.table(lambda: None)
    assert info.value.code == "HW_PIPELINE_NOT_LOADING"


# --- (procs) code no one here wrote: run unchanged, compared with spark-pipelines ------------

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "pipeline_vs_sdp"


def sdp_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What `spark-pipelines` needs: the venv's bin on PATH, SPARK_HOME, the venv's Python."""
    import os
    import sys

    import pyspark
    from tests.support import cli_env

    env = cli_env()
    env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "SPARK_HOME": str(Path(pyspark.__file__).parent),
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE"):
        env.pop(var, None)
    env.update(extra or {})
    return env


def start_spark_pipelines(copy: Path, env: dict[str, str]):
    """`spark-pipelines run` on ``copy`` (its own storage and warehouse), started now."""
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("spark-pipelines")
    log = open(copy / "sdp.log", "wb")  # noqa: SIM115 - closed by the caller's wait
    return subprocess.Popen(
        [str(exe), "--conf", f"spark.sql.warehouse.dir={copy / 'warehouse'}", "run"],
        cwd=copy, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_sdp(proc, copy: Path) -> None:
    rc = proc.wait(timeout=600)
    text = (copy / "sdp.log").read_text(errors="replace")
    assert rc == 0 and "Run is COMPLETED" in text, text[-4000:]


def comparable(rows: list[dict]) -> list[tuple]:
    """Rows in a stable order, timestamps as UTC wall time (Spark's parquet and delta-rs spell
    the same UTC instant with different tzinfo objects)."""
    import datetime as dt

    def value(v):
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            return v.astimezone(dt.UTC).replace(tzinfo=None)
        return v

    return sorted((tuple(value(v) for v in r.values()) for r in rows), key=repr)


def sdp_rows(copy: Path, table: str) -> list[tuple]:
    """A table SDP wrote: parquet under its warehouse (files starting with _ or . skipped)."""
    import pyarrow.parquet as pq

    return comparable(pq.read_table(copy / "warehouse" / table).to_pylist())


def hw_rows(root: Path, table: str) -> list[tuple]:
    return comparable(DeltaTable(str(root / table)).to_pyarrow_table().to_pylist())


def snapshot(project: Path) -> dict[str, str]:
    return {p.relative_to(project).as_posix(): p.read_text() for p in project.rglob("*")
            if p.is_file() and p.suffix in (".yml", ".yaml", ".py", ".sql")
            and "__pycache__" not in p.parts}


def sdp_copy_of(project: Path, copy: Path) -> None:
    """The same project for spark-pipelines, with its storage (an absolute URI, as SDP
    requires) in the copy."""
    import shutil

    shutil.copytree(project, copy)
    spec = copy / "spark-pipeline.yml"
    lines = [f"storage: {(copy / 'pipeline-storage').as_uri()}" if ln.startswith("storage:")
             else ln for ln in spec.read_text().splitlines()]
    spec.write_text("\n".join(lines) + "\n")
    (copy / "pipeline-storage").mkdir(exist_ok=True)


@pytest.mark.procs
def test_pysparks_own_scaffold_runs_unchanged_twice_like_spark_pipelines(tmp_path):
    import subprocess
    import sys

    from tests.support import cli, show

    made = subprocess.run([str(Path(sys.executable).with_name("spark-pipelines")), "init",
                           "--name", "x"], cwd=tmp_path, env=sdp_env(), capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    project = tmp_path / "x"
    before = snapshot(project)
    assert "transformations/example_python_materialized_view.py" in before
    sdp_copy_of(project, tmp_path / "sdp")
    sdp = start_spark_pipelines(tmp_path / "sdp", sdp_env())  # concurrently: ~60 s saved
    try:
        for _ in range(2):  # `cd x && headwater run`, twice
            ran = cli("run", "--plain", cwd=project)
            assert ran.returncode == 0, show(ran)
            assert "2 flows ok, 0 failed or skipped" in ran.stdout, show(ran)
    finally:
        wait_sdp(sdp, tmp_path / "sdp")
    assert snapshot(project) == before  # nothing of the project was changed
    storage = project / "pipeline-storage"
    for table in ("example_python_materialized_view", "example_sql_materialized_view"):
        assert hw_rows(storage, table) == sdp_rows(tmp_path / "sdp", table), table
    assert hw_rows(storage, "example_sql_materialized_view") == [(0,), (2,), (4,), (6,), (8,)]


@pytest.mark.procs
def test_the_benchmarks_sdp_project_runs_unchanged_twice_like_spark_pipelines(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    from tests.support import CALL_TIMEOUT, HEADWATER, show

    sys.path.insert(0, str(BENCH))
    try:
        import orders_data
    finally:
        sys.path.remove(str(BENCH))
    data = tmp_path / "input"
    expected = orders_data.generate(data, 400, 4, seed=4)
    env = {"PIPELINE_BENCH_INPUT": str(data),
           "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])}
    project = tmp_path / "sdp_project"
    shutil.copytree(BENCH / "sdp_project", project,
                    ignore=shutil.ignore_patterns("__pycache__", "storage", "warehouse"))
    storage = project / "storage"
    # The spec the benchmark writes for it (SDP wants an absolute storage URI).
    (project / "spark-pipeline.yml").write_text(
        f"name: orders_bench\nstorage: {storage.as_uri()}\nconfiguration:\n"
        '  spark.sql.shuffle.partitions: "2"\n  spark.sql.session.timeZone: "UTC"\n'
        "libraries:\n  - glob:\n      include: transformations/**\n")
    before = snapshot(project)
    sdp_copy_of(project, tmp_path / "sdp")
    sdp = start_spark_pipelines(tmp_path / "sdp", sdp_env(env))
    runs = []
    try:
        for _ in range(2):
            ran = subprocess.run([*HEADWATER, "run", "--plain"], cwd=project,
                                 capture_output=True, text=True, timeout=CALL_TIMEOUT,
                                 env=sdp_env(env), start_new_session=True)
            assert ran.returncode == 0, show(ran)
            runs.append({t: hw_rows(storage, t) for t in ("bronze", "silver", "gold")})
    finally:
        wait_sdp(sdp, tmp_path / "sdp")
    assert snapshot(project) == before
    first, second = runs
    assert len(first["silver"]) == expected["silver_rows"]
    assert second == first  # the second run is incremental: nothing appended twice
    for table in ("silver", "gold"):
        assert first[table] == sdp_rows(tmp_path / "sdp", table), table


@pytest.mark.procs
def test_the_20_dataset_benchmark_does_the_native_scripts_work(tmp_path):
    """benchmarks/pipeline_20.py --smoke, headwater and the hand-written script: the harness
    fails a run whose 20 row counts differ from the script's, and writes a valid results file
    (SDP is left out here: it starts its own Connect server and adds minutes)."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        import pipeline_20
        import results
    finally:
        sys.path.remove(str(BENCH.parent))
    out = tmp_path / "pipeline_20.json"
    rc = pipeline_20.main(["--smoke", "--no-warmup", "--tools", "native,headwater",
                           "--workdir", str(tmp_path / "work"), "--json", str(out)])
    assert rc == 0
    data = results.load(out)
    assert data["parameters"]["smoke"] is True
    tools = {v["labels"]["tool"]: v["median"] for v in data["tables"][0]["variants"]}
    assert tools["headwater"]["datasets"] == tools["native PySpark"]["datasets"] == 20
    assert data["ratios"][0]["label"] == "headwater ÷ native PySpark wall time"


RELATIVE_PATHS = """
import os

from pyspark import pipelines as dp
from pyspark.sql import functions as F

LOADED_IN = os.getcwd()  # Python runs the file in the spec's folder


@dp.materialized_view
def batch_read():
    return spark.read.json("data").withColumn("loaded_in", F.lit(LOADED_IN))  # noqa: F821


@dp.table
def stream_read():
    return spark.readStream.schema("where string").json("data")  # noqa: F821


dp.create_sink("out", format="json", options={"path": "sink_out"})


@dp.append_flow(target="out")
def to_out():
    return spark.readStream.table("stream_read")  # noqa: F821
"""


def relative_paths_project(launch: Path) -> Path:
    """``launch/proj``: a spec whose definitions read ``data`` and sink into ``sink_out``
    (both relative), with a ``data`` folder in the spec's folder and one in ``launch``."""
    project = launch / "proj"
    (project / "transformations").mkdir(parents=True)
    (project / "transformations" / "t.py").write_text(RELATIVE_PATHS)
    (project / "spark-pipeline.yml").write_text(
        f"name: relpaths\nstorage: {(launch / 'storage').as_uri()}\n"
        "libraries:\n  - glob:\n      include: transformations/**\n")
    for folder, where in ((project / "data", "spec folder"), (launch / "data", "launch dir")):
        folder.mkdir()
        (folder / "a.json").write_text(f'{{"where": "{where}"}}\n')
    return project


@pytest.mark.procs
def test_relative_paths_in_definitions_resolve_as_under_spark_pipelines(tmp_path):
    """`spark-pipelines run --spec proj/spark-pipeline.yml` from another folder: the definition
    files run in the spec's folder (pyspark/pipelines/cli.py's change_dir), but the paths
    Spark resolves, a reader's and a sink's, are taken from the folder the run was launched
    in (Spark's working directory). headwater resolves them the same way."""
    import subprocess

    from tests.support import CALL_TIMEOUT, HEADWATER, show

    sdp_launch, hw_launch = tmp_path / "sdp", tmp_path / "hw"
    relative_paths_project(sdp_launch)
    project = relative_paths_project(hw_launch)
    log = open(sdp_launch / "sdp.log", "wb")  # noqa: SIM115 - closed after the wait
    sdp = subprocess.Popen(
        [str(Path(sys.executable).with_name("spark-pipelines")), "--conf",
         f"spark.sql.warehouse.dir={sdp_launch / 'warehouse'}", "run", "--spec",
         "proj/spark-pipeline.yml"], cwd=sdp_launch, env=sdp_env(), stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ran = subprocess.run([*HEADWATER, "run", "--plain", "--project", "proj"],
                             cwd=hw_launch, capture_output=True, text=True,
                             timeout=CALL_TIMEOUT, env=sdp_env(), start_new_session=True)
        assert ran.returncode == 0, show(ran)
    finally:
        log.close()
        wait_sdp(sdp, sdp_launch)
    want_batch = [("launch dir", str(sdp_launch / "proj"))]
    assert sdp_rows(sdp_launch, "batch_read") == want_batch
    assert hw_rows(hw_launch / "storage", "batch_read") == [("launch dir", str(project))]
    assert sdp_rows(sdp_launch, "stream_read") == hw_rows(hw_launch / "storage",
                                                          "stream_read") == [("launch dir",)]
    for launch in (sdp_launch, hw_launch):  # the sink's relative path: the launch folder
        assert not (launch / "proj" / "sink_out").exists(), launch
        written = [json.loads(line) for f in (launch / "sink_out").glob("part-*.json")
                   for line in f.read_text().splitlines()]
        assert written == [{"where": "launch dir"}], launch
