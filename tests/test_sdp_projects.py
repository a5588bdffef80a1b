"""Spark Declarative Pipelines projects (spark-pipeline.yml) and DLT code on headwater: the spec
read as a Project, projects run in the shared session, and (procs) pyspark's own scaffold and
the benchmark's SDP project run unchanged by `headwater run` and compared row for row with
what `spark-pipelines run` writes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from headwater.conf.project import Project
from headwater.errors import HeadwaterError
from headwater.pipeline.run import run_project

SDP_PY = """
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.materialized_view
def numbers() -> DataFrame:
    return spark.range(10)

@dp.table
def events() -> DataFrame:
    return spark.readStream.format("rate").option("rowsPerSecond", 1).load().limit(0)
"""


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


def test_unsupported_spec_settings_and_two_spec_files_are_refused(tmp_path):
    root = spec_project(tmp_path, BASIC + "catalog: main\n")
    error = refused(root)
    assert error.code == "HW_PIPELINE_UNSUPPORTED" and "Unity Catalog" in str(error)
    root = spec_project(tmp_path / "b", BASIC + "database: sales\n")
    assert refused(root).code == "HW_PIPELINE_UNSUPPORTED"
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
