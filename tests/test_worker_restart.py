"""Spark's JVM gives a new Python worker a fixed 10 s to connect back. On a saturated machine a
streaming source's worker can miss it; `headwater run` then starts the flow again from its
checkpoint instead of failing it. The delay here is real: a ``sitecustomize`` on the run's
PYTHONPATH holds the first streaming-source worker for 12 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.procs

SLOW_START = '''
import os, sys, time
marker = os.environ.get("HW_TEST_SLOW_WORKER_MARKER", "")
if ("pyspark.sql.streaming.python_streaming_source_runner" in sys.orig_argv
        and marker and os.path.exists(marker)):
    os.remove(marker)
    time.sleep(12)
'''


def test_a_worker_that_misses_sparks_start_window_is_restarted_not_failed(tmp_path):
    import deltalake

    project = tmp_path / "slow"
    (project / "defs").mkdir(parents=True)
    landing = tmp_path / "landing"
    landing.mkdir()
    for n in range(3):
        (landing / f"part{n}.json").write_text(
            "\n".join(json.dumps({"id": n * 10 + i}) for i in range(10)) + "\n")
    (project / "headwater.toml").write_text(
        '[pipeline]\nname = "slow"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n')
    (project / "defs" / "p.py").write_text(
        "import headwater\n\n"
        "@headwater.table\ndef bronze():\n"
        f"    return headwater.read_files({str(landing)!r}, 'json')\n")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_START)
    marker = tmp_path / "slow-once"
    marker.write_text("")
    env = dict(os.environ, HW_TEST_SLOW_WORKER_MARKER=str(marker),
               PYTHONPATH=os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "headwater.cli", "run", "--project",
                           str(project)], env=env, capture_output=True, text=True, timeout=300,
                          start_new_session=True)
    out = done.stdout + done.stderr[-3000:]
    assert not marker.exists(), "the slow worker never started: the test proves nothing\n" + out
    assert done.returncode == 0, out
    assert "restart   bronze: Spark's Python worker did not start within 10 s" in done.stdout, out
    ids = sorted(deltalake.DeltaTable(str(project / "lake" / "bronze")).to_pyarrow_dataset()
                 .to_table(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(30))
