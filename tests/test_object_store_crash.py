"""A driver streaming s3:// -> s3:// (moto) killed with SIGKILL around the sink's commit:
exactly once after restart. Credentials travel as options only (the driver's environment has
no AWS_* keys)."""

from __future__ import annotations

import json
import os
import textwrap

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.support import run_script

pytestmark = pytest.mark.procs

DRIVER = textwrap.dedent("""
    import json, sys
    import headwater
    spark = headwater.spark_session("local[1]", conf={"spark.ui.enabled": "false"})
    src, dst, cp, opts = sys.argv[1:5] if len(sys.argv) > 4 else ({args})
    opts = json.loads(opts)
    (spark.readStream.format("delta").options(**opts).load(src).writeStream.format("delta")
     .options(**opts).option("checkpointLocation", cp).trigger(availableNow=True).start(dst)
     .awaitTermination())
    print("DONE")
""")


def _env(fault: str | None) -> dict[str, str]:
    env = {k: "" for k in os.environ if k.startswith("AWS_")}
    env["HEADWATER_FAULT"] = fault or ""
    return env


# sink_before_commit (orphan files, none visible) passed too; one fault keeps CI shorter
@pytest.mark.parametrize("fault", ["sink_after_commit"])
def test_s3_driver_killed_around_commit_then_restart_commits_exactly_once(moto, tmp, fault):
    bucket = moto.bucket()
    src, dst, cp = f"{bucket}/src", f"{bucket}/dst", str(tmp / "cp")
    opts = moto.options()
    code = DRIVER.replace("{args}", repr((src, dst, cp, json.dumps(opts))))

    def append(ids: range) -> None:
        write_deltalake(src, pa.table({"id": pa.array(list(ids), pa.int64())}), mode="append",
                        storage_options=opts)

    def ids() -> list[int]:
        table = DeltaTable(dst, storage_options=opts).to_pyarrow_dataset().to_table()
        return sorted(table.column("id").to_pylist())

    append(range(5))
    done = run_script(code, env=_env(None), timeout=300)
    assert "DONE" in done.stdout, done.stderr[-2000:]
    append(range(5, 9))
    crashed = run_script(code, env=_env(fault), timeout=300)
    assert crashed.returncode == -9, (crashed.returncode, crashed.stderr[-2000:])
    assert ids() == (list(range(5)) if fault == "sink_before_commit" else list(range(9)))

    again = run_script(code, env=_env(None), timeout=300)
    assert "DONE" in again.stdout, again.stderr[-2000:]
    assert ids() == list(range(9))
    assert DeltaTable(dst, storage_options=opts).version() == 1
    assert moto.secret not in done.stdout + done.stderr + again.stdout + again.stderr
