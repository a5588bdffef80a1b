"""A real ``headwater run`` of a pipeline whose lakehouse is on S3 (moto), killed with SIGKILL
mid-batch (a flow's Delta commit on S3 done, its Spark checkpoint commit not yet), then
restarted: every row exactly once. Credentials come from ``[storage]`` only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

pytestmark = [pytest.mark.procs, pytest.mark.usefixtures("no_env_credentials")]

PIPELINE = """
import headwater
from pyspark.sql import functions as F

@headwater.table
def bronze():
    return headwater.read_files({landing!r}, "json", schema="id long")

@headwater.table
def silver():
    return headwater.read_stream("bronze").withColumn("twice", F.col("id") * 2)

@headwater.materialized_view
def gold():
    return headwater.read("silver").agg(F.count("*").alias("n"), F.sum("id").alias("total"))
"""


def headwater_run(project: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "headwater.cli", "run", "--project",
                           str(project)], env=dict(clean, PYTHONUNBUFFERED="1", **env),
                          capture_output=True, text=True, timeout=300, start_new_session=True)


def land(folder: Path, start: int, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"part-{start:04d}.json").write_text(
        "".join(json.dumps({"id": i}) + "\n" for i in range(start, start + count)))


def test_kill_9_of_a_run_on_s3_then_restart_is_exactly_once(moto, tmp):
    root = f"{moto.bucket()}/lake"
    landing, proj = tmp / "landing", tmp / "proj"
    (proj / "defs").mkdir(parents=True)
    settings = "\n".join(f'{k} = "{v}"' for k, v in moto.options().items())
    (proj / "headwater.toml").write_text(
        f'[pipeline]\nname = "s3crash"\nroot = "{root}"\nstate_dir = "state"\n'
        f'definitions = ["defs/*.py"]\nmaster = "local[1]"\n\n'
        '[spark]\n"spark.sql.shuffle.partitions" = "1"\n"spark.ui.enabled" = "false"\n\n'
        f'[storage]\n{settings}\n')
    (proj / "defs" / "p.py").write_text(textwrap.dedent(PIPELINE.format(landing=str(landing))))

    def ids(table: str) -> list[int]:
        data = DeltaTable(f"{root}/{table}", storage_options=moto.options())
        return sorted(data.to_pyarrow_dataset().to_table(columns=["id"]).column("id").to_pylist())

    # two runs, not three: each is a JVM start (a first clean run passed the same way)
    land(landing, 0, 5)
    land(landing, 5, 5)
    crashed = headwater_run(proj, HEADWATER_FAULT="python_writer_after_commit",
                            HEADWATER_FAULT_TABLE="/bronze")
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr[-3000:]
    assert ids("bronze") == list(range(10))  # committed on S3; the checkpoint never knew
    checkpoint = proj / "state" / "_checkpoints" / "bronze" / "bronze"
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    assert not (proj / "state" / "_checkpoints" / "silver").exists()  # never started

    again = headwater_run(proj)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert ids("bronze") == list(range(10))  # the replayed batch was not committed twice
    assert ids("silver") == list(range(10))
    gold = DeltaTable(f"{root}/gold", storage_options=moto.options()).to_pyarrow_table()
    assert gold.to_pylist() == [{"n": 10, "total": 45}]
    output = "".join(p.stdout + p.stderr for p in (crashed, again))
    assert moto.secret not in output
