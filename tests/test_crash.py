"""Real drivers killed with SIGKILL around the sink's commit: exactly once after restart."""

from __future__ import annotations

import json
import textwrap

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from tests.support import rows, run_script, write

# Starts other JVMs or headwater processes: not in the fast tier.
pytestmark = pytest.mark.procs

DRIVER = textwrap.dedent("""
    import sys
    import headwater
    spark = headwater.spark_session("local[1]", conf={"spark.ui.enabled": "false"})
    src, dst, cp = sys.argv[1:4] if len(sys.argv) > 3 else ({args})
    query = (spark.readStream.format("delta").load(src).writeStream.format("delta")
             .option("checkpointLocation", cp).trigger(availableNow=True).start(dst))
    query.awaitTermination()
    print("SOURCES", {s["description"] for p in query.recentProgress for s in p["sources"]})
    print("DONE")
""")


def driver(tmp, fault: str | None):
    code = DRIVER.replace("{args}", repr((str(tmp / "src"), str(tmp / "dst"), str(tmp / "cp"))))
    env = {"HEADWATER_FAULT": fault} if fault else {"HEADWATER_FAULT": ""}
    return run_script(code, env=env, timeout=240)


@pytest.mark.parametrize("fault", ["sink_before_commit", "sink_after_commit"])
def test_driver_killed_around_commit_then_restart_commits_exactly_once(spark, tmp, fault):
    write(tmp / "src", {"id": pa.array(range(5), pa.int64())})
    done = driver(tmp, None)
    assert "DONE" in done.stdout, done.stderr[-2000:]
    # the native Delta stream source (Spark's parquet reader), not the Python data source
    assert f"DeltaSource[{(tmp / 'src').resolve()}]" in done.stdout
    write(tmp / "src", {"id": pa.array(range(5, 9), pa.int64())})

    crashed = driver(tmp, fault)
    assert crashed.returncode == -9, (crashed.returncode, crashed.stderr[-2000:])
    assert "DONE" not in crashed.stdout
    visible = [r[0] for r in rows(spark, str(tmp / "dst"))]
    if fault == "sink_before_commit":
        assert visible == list(range(5))  # files written, none visible
        orphans = len(list((tmp / "dst").glob("*.parquet")))
        assert orphans > len(DeltaTable(str(tmp / "dst")).file_uris())
    else:
        assert visible == list(range(9))  # committed, but Spark never recorded it

    again = driver(tmp, None)
    assert "DONE" in again.stdout, again.stderr[-2000:]
    assert "DeltaSource[" in again.stdout
    assert [r[0] for r in rows(spark, str(tmp / "dst"))] == list(range(9))
    table = DeltaTable(str(tmp / "dst"))
    app_ids = {a["txn"]["appId"] for line in (tmp / "dst" / "_delta_log").glob("*.json")
               for a in map(json.loads, line.read_text().splitlines()) if "txn" in a}
    assert len(app_ids) == 1  # the appId is stable across restarts of the checkpoint
    assert table.transaction_version(app_ids.pop()) == 1
