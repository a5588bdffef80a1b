"""``dbutils`` in pipeline definition files (headwater.dlt.dbutils): dbutils.fs over real local
folders and an S3 server (moto), widgets from the pipeline's configuration, secrets refused;
and a DLT notebook that finds its snapshot folders with dbutils.fs.ls, run twice."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from headwater.dlt.dbutils import DBUtils, FileInfo
from headwater.errors import HeadwaterError
from headwater.pipeline.run import run_project


def test_fs_ls_gives_databricks_file_infos_and_its_missing_path_error(tmp_path):
    fs = DBUtils().fs
    (tmp_path / "2024-03-01 10").mkdir()
    (tmp_path / "a.txt").write_text("hello")
    os.utime(tmp_path / "a.txt", (1_700_000_000, 1_700_000_000))
    found = fs.ls(str(tmp_path))
    assert [(f.name, f.size) for f in found] == [("2024-03-01 10/", 0), ("a.txt", 5)]
    assert found[0].path == f"{tmp_path}/2024-03-01 10/" and found[0].isDir()
    assert found[1] == FileInfo(f"{tmp_path}/a.txt", "a.txt", 5, 1_700_000_000_000)
    assert [f.path for f in fs.ls(f"file:{tmp_path}/")] == \
        [f"file:{tmp_path}/2024-03-01 10/", f"file:{tmp_path}/a.txt"]
    assert fs.ls(str(tmp_path / "a.txt")) == [found[1]]  # a file: itself

    missing = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError) as info:
        fs.ls(missing)
    assert str(info.value) == f"java.io.FileNotFoundException: File {missing} does not exist."
    try:  # the notebooks' existence check
        fs.ls(missing)
        exists = True
    except:  # noqa: E722 - as DLT notebooks write it
        exists = False
    assert not exists


def test_fs_writes_copies_moves_and_removes(tmp_path):
    fs = DBUtils().fs
    target = str(tmp_path / "out" / "f.txt")
    assert fs.put(target, "line 1\nline 2\n")
    assert fs.head(target) == "line 1\nline 2\n" and fs.head(target, 4) == "line"
    with pytest.raises(HeadwaterError) as info:
        fs.put(target, "again")
    assert info.value.code == "HW_DBUTILS_INVALID" and "overwrite=True" in str(info.value)
    fs.put(target, "again", overwrite=True)
    assert (tmp_path / "out" / "f.txt").read_text() == "again"

    assert fs.mkdirs(str(tmp_path / "deep" / "er"))
    assert (tmp_path / "deep" / "er").is_dir()
    fs.cp(target, str(tmp_path / "deep"))  # into a folder: keeps its name
    assert (tmp_path / "deep" / "f.txt").read_text() == "again"
    with pytest.raises(HeadwaterError) as info:
        fs.cp(str(tmp_path / "deep"), str(tmp_path / "copy"))
    assert info.value.code == "HW_DBUTILS_INVALID" and "recurse=True" in str(info.value)
    fs.cp(str(tmp_path / "deep"), str(tmp_path / "copy"), recurse=True)
    assert (tmp_path / "copy" / "f.txt").read_text() == "again" and (tmp_path / "copy" / "er").is_dir()
    fs.mv(str(tmp_path / "copy" / "f.txt"), str(tmp_path / "moved.txt"))
    assert (tmp_path / "moved.txt").exists() and not (tmp_path / "copy" / "f.txt").exists()

    with pytest.raises(HeadwaterError) as info:
        fs.rm(str(tmp_path / "deep"))
    assert info.value.code == "HW_DBUTILS_INVALID"
    assert fs.rm(str(tmp_path / "deep"), recurse=True) and not (tmp_path / "deep").exists()
    assert fs.rm(str(tmp_path / "moved.txt")) and not fs.rm(str(tmp_path / "moved.txt"))
    with pytest.raises(HeadwaterError) as info:
        fs.ls("dbfs:/tmp/x")
    assert info.value.code == "HW_DBUTILS_UNSUPPORTED" and "Databricks File System" in str(
        info.value)


@pytest.mark.usefixtures("no_env_credentials")
def test_fs_reaches_an_object_store_with_the_projects_credentials(moto):
    from tests.object_store import use_credentials

    use_credentials(moto)
    fs = DBUtils().fs
    bucket = moto.bucket()
    assert fs.put(f"{bucket}/snapshots/2024-03-01 10/part-0.txt", "x")
    assert fs.put(f"{bucket}/snapshots/readme.txt", "hi")
    found = fs.ls(f"{bucket}/snapshots")
    assert [(f.path, f.name, f.size) for f in found] == [
        (f"{bucket}/snapshots/2024-03-01 10/", "2024-03-01 10/", 0),
        (f"{bucket}/snapshots/readme.txt", "readme.txt", 2)]
    assert fs.head(f"{bucket}/snapshots/readme.txt") == "hi"
    with pytest.raises(FileNotFoundError):
        fs.ls(f"{bucket}/missing")
    assert fs.rm(f"{bucket}/snapshots", recurse=True)
    with pytest.raises(FileNotFoundError):
        fs.ls(f"{bucket}/snapshots")


def test_widgets_read_the_configuration_and_secrets_say_where_values_come_from(spark):
    dbutils = DBUtils(spark)
    spark.conf.set("dbutils_test.source", "/landing")
    try:
        assert dbutils.widgets.get("dbutils_test.source") == "/landing"
    finally:
        spark.conf.unset("dbutils_test.source")
    with pytest.raises(HeadwaterError) as info:
        dbutils.widgets.get("dbutils_test.source")
    assert info.value.code == "HW_PIPELINE_CONF_MISSING" and "--conf" in str(info.value)
    dbutils.widgets.text("dbutils_test.source", "/default")
    assert dbutils.widgets.get("dbutils_test.source") == "/default"
    assert dbutils.widgets.getArgument("dbutils_test.other", "fallback") == "fallback"

    with pytest.raises(HeadwaterError) as info:
        dbutils.secrets.get(scope="kafka", key="password")
    assert info.value.code == "HW_DBUTILS_UNSUPPORTED"
    assert "scope='kafka'" in str(info.value) and "configuration" in info.value.fix \
        and "environment variable" in info.value.fix
    with pytest.raises(HeadwaterError) as info:
        dbutils.notebook.run("other", 60)
    assert info.value.code == "HW_DBUTILS_UNSUPPORTED" and "dbutils.notebook" in str(info.value)


# --- a DLT notebook finding its snapshots with dbutils.fs.ls ---------------------------------

NOTEBOOK = """
# Databricks notebook source
import dlt
from datetime import datetime, timedelta

def exist(path):
    try:
        return dbutils.fs.ls(path) is not None
    except:
        return False

root = dbutils.widgets.get("snapshot_path")
hours = sorted(datetime.strptime(p.name.strip('/'), '%Y-%m-%d %H') for p in dbutils.fs.ls(root))
first = hours[0].strftime('%Y-%m-%d %H')

def next_snapshot_and_version(latest):
    version = first if latest is None else \\
        (datetime.strptime(latest, '%Y-%m-%d %H') + timedelta(hours=1)).strftime('%Y-%m-%d %H')
    path = f"{root}/{version}"
    if not exist(path):
        return None
    return spark.read.format("parquet").load(path), version

# COMMAND ----------

dlt.create_streaming_table("orders")
dlt.apply_changes_from_snapshot(target="orders", snapshot_and_version=next_snapshot_and_version,
                                keys=["order_id"], stored_as_scd_type=1)
"""


def snapshot(root: Path, hour: str, orders: dict[int, str]) -> None:
    folder = root / hour
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"order_id": list(orders), "status": list(orders.values())}),
                   folder / "part-0.parquet")


def test_a_notebook_finds_its_snapshots_with_dbutils_and_runs_twice(spark, keep_lakehouse,
                                                                     tmp_path):
    snapshots = tmp_path / "snapshots"
    snapshot(snapshots, "2024-03-01 10", {1: "pending", 2: "pending"})
    snapshot(snapshots, "2024-03-01 11", {1: "shipped", 2: "pending", 3: "pending"})
    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / "orders.py").write_text(textwrap.dedent(NOTEBOOK).lstrip())
    (root / "spark-pipeline.yml").write_text(
        "name: snapshots\nstorage: storage\nlibraries:\n  - glob:\n      include: notebooks/**\n"
        f"configuration:\n  snapshot_path: {json.dumps(str(snapshots))}\n")

    def orders() -> list[tuple]:
        rows = DeltaTable(str(root / "storage" / "orders")).to_pyarrow_table().to_pylist()
        return sorted((r["order_id"], r["status"]) for r in rows)

    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert orders() == [(1, "shipped"), (2, "pending"), (3, "pending")]
    snapshot(snapshots, "2024-03-01 12", {2: "shipped", 3: "pending"})  # 1 deleted
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert orders() == [(2, "shipped"), (3, "pending")]
