"""One SparkSession for the whole run (every JVM costs ~7 s): local[2], 2 shuffle partitions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tempfile

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO.parent / "shared" / "delta-golden"


@pytest.fixture(scope="session")
def spark():
    import headwater

    session = headwater.spark_session(
        "local[2]", app_name="headwater-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
              "spark.driver.memory": "2g",
              # Managed-table folders Spark creates for lakehouse tables: keep them out of the repo.
              "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="hw-warehouse-")},
    )
    yield session
    headwater.stop_spark()


@pytest.fixture
def keep_lakehouse(spark):
    """The lakehouse attached to the shared session before the test is attached again after."""
    from headwater import Lakehouse

    before = Lakehouse.of(spark)
    yield before
    # (a test may have deleted its root: helpers.cleanup does)
    if before is not None and Lakehouse.of(spark) is not before and before.root.is_dir():
        before.attach()


@pytest.fixture
def no_lakehouse(spark, keep_lakehouse):
    """The shared session without a lakehouse during the test (Spark's own behaviour)."""
    if keep_lakehouse is not None:
        keep_lakehouse.detach()


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


def run_script(code: str, env: dict | None = None, timeout: int = 180,
               new_session: bool = True) -> subprocess.CompletedProcess:
    """Run Python code in a fresh interpreter (a real driver process)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=full_env, start_new_session=new_session)


def rows(spark, path: str, order: str = "id") -> list[tuple]:
    df = spark.read.format("delta").load(path)
    return [tuple(r) for r in df.orderBy(order).collect()]


def write(path, data: dict | pa.Table, mode: str = "append", **kwargs) -> None:
    from deltalake import write_deltalake

    table = data if isinstance(data, pa.Table) else pa.table(data)
    write_deltalake(str(path), table, mode=mode, **kwargs)
