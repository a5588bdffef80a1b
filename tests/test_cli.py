"""End to end through the ``headwater`` command: every call is a real process (and a JVM).

JVM starts are the cost here (~20-40 s each), so they are shared: the module fixture runs
``init`` -> ``validate`` -> ``run`` once on the scaffolded ``demo`` project, and the tests after
it build on that project in file order (each one derives what it expects from the files that
landed and the tables as it finds them, so any of them also passes on its own). The
continuous-mode test scaffolds a project of its own. JVM starts in this file: 6 (validate,
run, re-run, --full-refresh, failing run, continuous run); ``init`` starts none.

Tables are read with ``deltalake`` (``to_pyarrow_dataset()``, never ``to_pyarrow_table()``),
independently of headwater's own reader, and scanned with ``use_threads=False``: a threaded
scan can make the interpreter abort at exit ("terminate called without an active exception",
exit 134), seen with deltalake 1.6.6 / pyarrow 26 even through ``to_pyarrow_dataset()``.
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.support import HEADWATER, cli, show
from tests.support import cli_env as _env

from headwater.errors import HeadwaterError
from headwater.spark.checkpoint_lock import CheckpointLock

# Starts other JVMs or headwater processes: not in the fast tier.
pytestmark = pytest.mark.procs

MINUTE = dt.timedelta(minutes=1)
DELAY = MINUTE  # withWatermark("ts", "1 minute") in the scaffold


# --- helpers ---------------------------------------------------------------------------------


def table_path(project: Path, name: str) -> Path:
    return project / "lakehouse" / name


def exists(project: Path, name: str) -> bool:
    return (table_path(project, name) / "_delta_log").is_dir()


def rows(project: Path, name: str) -> list[dict]:
    from deltalake import DeltaTable

    dataset = DeltaTable(str(table_path(project, name))).to_pyarrow_dataset()
    return dataset.to_table(use_threads=False).to_pylist()


def count(project: Path, name: str) -> int:
    """Rows of a table; 0 while it does not exist (yet) or cannot be read."""
    from deltalake import DeltaTable

    try:
        dataset = DeltaTable(str(table_path(project, name))).to_pyarrow_dataset()
        return dataset.count_rows(use_threads=False)
    except Exception:  # noqa: BLE001 - not created yet, or mid-commit
        return 0


def version(project: Path, name: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(project, name))).version()


def landed(project: Path) -> list[dict]:
    """Every row of every file in data/landing, typed as the bronze schema reads it."""
    found = []
    for file in sorted((project / "data" / "landing").glob("*.json")):
        for line in file.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                found.append({"device_id": r["device_id"], "reading": float(r["reading"]),
                              "ts": dt.datetime.fromisoformat(r["ts"])})
    return found


def land(project: Path, file_name: str, new_rows: list[dict]) -> None:
    """Write a landing file atomically (the file source must never list a half-written one)."""
    tmp = project / f".{file_name}.tmp"  # outside data/landing
    tmp.write_text("".join(json.dumps(r) + "\n" for r in new_rows))
    os.replace(tmp, project / "data" / "landing" / file_name)


def key(r: dict) -> tuple:
    return (r["device_id"], r["reading"], r["ts"])


def bag(records) -> collections.Counter:
    return collections.Counter(key(r) for r in records)


def valid(r: dict) -> bool:
    return -50 <= r["reading"] <= 150  # expect_or_drop("valid_reading", ...)


def window_start(ts: dt.datetime) -> dt.datetime:
    return ts.replace(second=0, microsecond=0)


def expected_per_minute(silver: list[dict], late: collections.Counter) -> dict:
    """readings_per_minute as Spark must have emitted it: 1-minute windows of silver's rows
    minus the late ones, for every window the final watermark (max ts - 1 minute) closed."""
    watermark = max(r["ts"] for r in silver) - DELAY
    remaining = collections.Counter(late)
    groups: dict[tuple, list[float]] = collections.defaultdict(list)
    for r in silver:
        if remaining[key(r)]:
            remaining[key(r)] -= 1
            continue
        start = window_start(r["ts"])
        if start + MINUTE <= watermark:
            groups[(start, r["device_id"])].append(r["reading"])
    assert not +remaining, f"late rows that are not silver rows: {+remaining}"
    return {k: (len(v), sum(v) / len(v)) for k, v in groups.items()}


def actual_per_minute(project: Path) -> dict:
    found = {}
    for r in rows(project, "readings_per_minute"):
        assert r["window"]["end"] - r["window"]["start"] == MINUTE, r
        k = (r["window"]["start"], r["device_id"])
        assert k not in found, f"window emitted twice: {k}"
        found[k] = (r["readings"], r["avg_reading"])
    return found


def assert_per_minute(project: Path, silver: list[dict], late: collections.Counter) -> None:
    expected, actual = expected_per_minute(silver, late), actual_per_minute(project)
    assert sorted(actual) == sorted(expected)
    for k, (n, avg) in expected.items():
        assert actual[k][0] == n and math.isclose(actual[k][1], avg, rel_tol=1e-9), \
            (k, actual[k], (n, avg))


def spark_round2(value: float) -> float:
    """Spark's round(double, 2): HALF_UP on the double's shortest decimal form. (The readings
    here are multiples of 0.5, so Python's sum and Spark's avg agree to the last bit.)"""
    return float(decimal.Decimal(repr(value)).quantize(decimal.Decimal("0.01"),
                                                       rounding=decimal.ROUND_HALF_UP))


def assert_device_summary(project: Path, silver: list[dict]) -> None:
    """gold.sql: count(*) and round(avg(reading), 2) per device, recomputed here."""
    by_device: dict[int, list[float]] = collections.defaultdict(list)
    for r in silver:
        by_device[r["device_id"]].append(r["reading"])
    actual = {r["device_id"]: (r["readings"], r["avg_reading"])
              for r in rows(project, "device_summary")}
    assert sorted(actual) == sorted(by_device)
    for device, readings in by_device.items():
        n, avg = actual[device]
        assert n == len(readings), (device, n, len(readings))
        assert math.isclose(avg, spark_round2(sum(readings) / len(readings)), rel_tol=1e-12), \
            (device, avg, readings)


def assert_silver_split(project: Path) -> tuple[list[dict], list[dict]]:
    """bronze == the landed rows; silver + quarantine == bronze, split by valid_reading."""
    everything = landed(project)
    bronze = rows(project, "bronze")
    assert bag(bronze) == bag(everything), "bronze lost or duplicated landed rows"
    silver = rows(project, "silver")
    quarantine = rows(project, "silver__quarantine")
    assert bag(silver) == bag(r for r in everything if valid(r))
    assert bag(quarantine) == bag(r for r in everything if not valid(r))
    assert len(silver) + len(quarantine) == len(bronze)
    for r in silver + quarantine:
        assert r["day"] == r["ts"].date(), r
    for r in quarantine:
        assert r["_failed_rules"] == ["valid_reading"], r
        assert isinstance(r["_batch_id"], int) and r["_batch_id"] >= 0, r
    return silver, quarantine


def assert_checkpoints_free(project: Path) -> int:
    """Every flow checkpoint's lock can be taken: no process holds one. Returns how many."""
    checkpoints = [p for p in (project / "lakehouse" / "_checkpoints").glob("*/*") if p.is_dir()]
    for checkpoint in checkpoints:
        CheckpointLock(checkpoint, "test").acquire().release()
    return len(checkpoints)


# --- the scaffolded project, run once --------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> SimpleNamespace:
    parent = tmp_path_factory.mktemp("cli")
    project = parent / "demo"
    init = cli("init", "demo", cwd=parent)
    tables_after_validate = None
    validate = first_run = None
    if init.returncode == 0:
        validate = cli("validate", cwd=project)
        lake = project / "lakehouse"
        tables_after_validate = sorted(p.name for p in lake.glob("*") if (p / "_delta_log").is_dir())
        first_run = cli("run", cwd=project)
    return SimpleNamespace(dir=project, init=init, validate=validate, first_run=first_run,
                           tables_after_validate=tables_after_validate)


def require_first_run(demo: SimpleNamespace) -> None:
    assert demo.init.returncode == 0, show(demo.init)
    assert demo.first_run is not None and demo.first_run.returncode == 0, show(demo.first_run)


def test_newcomer_init_validate_run_then_incremental_rerun_with_late_rows(demo):
    project = demo.dir
    # init: a project that runs as is
    assert demo.init.returncode == 0, show(demo.init)
    assert f"created {project}" in demo.init.stdout
    assert (project / "headwater.toml").is_file()
    assert (project / "transformations" / "pipeline.py").is_file()
    assert (project / "transformations" / "gold.sql").is_file()
    initial = landed(project)
    assert len(initial) == 60 and any(not valid(r) for r in initial)

    # validate: the 4 datasets with their inputs, and nothing written to the lakehouse
    assert demo.validate.returncode == 0, show(demo.validate)
    out = demo.validate.stdout
    for kind, name, inputs in (("table", "bronze", "(sources)"), ("table", "silver", "bronze"),
                               ("table", "readings_per_minute", "silver"),
                               ("materialized_view", "device_summary", "silver")):
        assert re.search(rf"^{kind}\s+{name}\s+<- {re.escape(inputs)}\s", out, re.M), out
    assert "valid: 4 datasets (4 stored), 4 flows, 0 warnings" in out
    assert demo.tables_after_validate == [], "validate wrote tables into the lakehouse"

    # run (available-now by default)
    run = demo.first_run
    assert run.returncode == 0, show(run)
    assert "running pipeline demo (available-now)" in run.stdout
    assert re.search(r"completed bronze: \d+ batches, 60 rows written$", run.stdout, re.M), \
        run.stdout
    assert "refreshed device_summary" in run.stdout
    assert "4 flows ok, 0 failed or skipped" in run.stdout
    silver1, quarantine1 = assert_silver_split(project)
    assert len(quarantine1) == sum(1 for r in initial if not valid(r)) > 0
    assert_device_summary(project, silver1)
    assert_per_minute(project, silver1, late=collections.Counter())
    assert not exists(project, "readings_per_minute__late"), "no row was late in one batch"
    bronze_version = version(project, "bronze")

    # a new file lands: rows far behind the watermark, one bad row, and rows that move the
    # watermark on (closing the windows still open)
    watermark1 = max(r["ts"] for r in silver1) - DELAY
    base = dt.datetime(2026, 1, 1, 9, 0, 10, tzinfo=dt.UTC)
    behind = [{"device_id": i % 4, "reading": 30.0 + i, "ts": base + dt.timedelta(minutes=i % 5,
                                                                                 seconds=i)}
              for i in range(6)]
    bad = [{"device_id": 1, "reading": 999.0, "ts": base + dt.timedelta(minutes=3)}]
    ahead = [{"device_id": i, "reading": 40.0 + i,
              "ts": dt.datetime(2026, 1, 1, 10, 30 + i, i, tzinfo=dt.UTC)}
             for i in range(4)]
    new = behind + bad + ahead
    assert all(window_start(r["ts"]) + MINUTE <= watermark1 for r in behind)
    assert all(window_start(r["ts"]) + MINUTE > watermark1 for r in ahead)
    land(project, "readings-002.json",
         [{**r, "ts": r["ts"].strftime("%Y-%m-%dT%H:%M:%SZ")} for r in new])

    rerun = cli("run", cwd=project)
    assert rerun.returncode == 0, show(rerun)
    assert re.search(r"completed bronze: \d+ batches, 11 rows written$", rerun.stdout, re.M), \
        rerun.stdout
    assert "4 flows ok, 0 failed or skipped" in rerun.stdout

    # incremental: exactly the new rows were added, once
    assert count(project, "bronze") == len(initial) + len(new)
    assert version(project, "bronze") > bronze_version
    silver2, quarantine2 = assert_silver_split(project)
    assert bag(silver2) - bag(silver1) == bag(behind + ahead)
    old_batches = {r["_batch_id"] for r in quarantine1}
    new_quarantined = [r for r in quarantine2 if key(r) == key(bad[0])]
    assert len(new_quarantined) == 1 and new_quarantined[0]["_batch_id"] > max(old_batches)
    assert_device_summary(project, silver2)

    # late rows: kept in readings_per_minute__late, judged against the previous watermark,
    # and not counted in readings_per_minute (Spark dropped them)
    late = rows(project, "readings_per_minute__late")
    assert bag(late) == bag(behind)
    for r in late:
        assert r["_watermark"] == watermark1, r
        assert r["window"]["end"] <= r["_watermark"], r
        assert r["window"]["start"] == window_start(r["ts"]), r
        assert isinstance(r["_batch_id"], int) and r["_batch_id"] > 0, r
    assert_per_minute(project, silver2, late=bag(late))
    assert not any(start.hour == 9 for start, _ in actual_per_minute(project))


def test_full_refresh_silver_rebuilds_it_and_its_streaming_downstream(demo):
    require_first_run(demo)
    project = demo.dir
    bronze_version = version(project, "bronze")
    bronze_before = bag(rows(project, "bronze"))
    silver_before = bag(rows(project, "silver"))
    assert silver_before

    run = cli("run", "--full-refresh", "silver", cwd=project)
    assert run.returncode == 0, show(run)
    assert "full refresh: silver (+ downstream streaming tables: readings_per_minute)" \
        in run.stdout, run.stdout
    assert "4 flows ok, 0 failed or skipped" in run.stdout

    # bronze untouched: no new commit, same rows
    assert version(project, "bronze") == bronze_version
    assert bag(rows(project, "bronze")) == bronze_before
    # silver rebuilt from scratch: the same rows once each, quarantine from a first batch again
    silver, quarantine = assert_silver_split(project)
    assert bag(silver) == silver_before
    assert {r["_batch_id"] for r in quarantine} == {0}
    assert_device_summary(project, silver)
    # readings_per_minute rebuilt as a fresh run computes it: all of silver in one batch, so
    # no row is late any more (the old __late table went with it)
    assert not exists(project, "readings_per_minute__late")
    assert_per_minute(project, silver, late=collections.Counter())


def test_failing_expectation_fails_its_flow_only(demo):
    require_first_run(demo)
    project = demo.dir
    strict = project / "transformations" / "strict.py"
    strict.write_text(
        "import headwater\n\n\n"
        "@headwater.table(comment='Every reading in range, or stop.')\n"
        "@headwater.expect_or_fail('reading_in_range', 'reading BETWEEN -50 AND 150')\n"
        "def strict():\n"
        "    return headwater.read_stream('bronze')\n")
    new = [{"device_id": 7, "reading": 25.0 + i, "ts": f"2026-01-01T10:4{i}:00Z"}
           for i in range(3)]
    land(project, "readings-003.json", new)
    try:
        # available_now, spelled with an underscore, is a triggered run too
        run = cli("run", "--trigger", "available_now", cwd=project)
    finally:
        strict.unlink()
    out = run.stdout + run.stderr
    assert run.returncode == 1, show(run)
    assert "running pipeline demo (available_now)" in run.stdout
    failed = [ln for ln in run.stdout.splitlines() if "FAILED" in ln]
    assert len(failed) == 1, out
    assert "FAILED    strict: [HW_EXPECTATION_FAILED]" in failed[0], failed
    assert "'reading_in_range'" in failed[0] and "Table 'strict'" in failed[0], failed
    assert "4 flows ok, 1 failed or skipped" in run.stdout, out
    # the fail rule stops the flow before it writes
    assert count(project, "strict") == 0
    # the flows that do not read strict ran to the end, with the new rows
    for line in ("completed bronze", "completed silver", "completed readings_per_minute",
                 "refreshed device_summary"):
        assert line in run.stdout, out
    silver, _ = assert_silver_split(project)
    assert sum(1 for r in silver if r["device_id"] == 7) == len(new)
    assert_device_summary(project, silver)


# --- continuous ------------------------------------------------------------------------------


def event_log(lakehouse: Path) -> list[dict]:
    import deltalake

    table = deltalake.DeltaTable(str(lakehouse / "_event_log")).to_pyarrow_dataset().to_table(
        use_threads=False)
    return sorted(table.to_pylist(), key=lambda e: e["ts"])


def batch_ids(events: list[dict], flow: str) -> list[int]:
    return sorted(e["batch_id"] for e in events if e["event"] == "progress" and e["flow"] == flow)


def wait_for(condition, timeout: float, proc: subprocess.Popen, what: str,
             output: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"headwater exited ({proc.returncode}) while waiting for {what}:\n"
                        f"{output.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}:\n{output.read_text()}")
        time.sleep(1)


def _live_run(tmp_path: Path) -> tuple[Path, list, subprocess.Popen, Path, Path]:
    """A scaffolded project running continuously (1 s trigger) in its own session: the
    project, its landed records, the process and its stdout / stderr files."""
    init = cli("init", "live", cwd=tmp_path)
    assert init.returncode == 0, show(init)
    project = tmp_path / "live"
    initial = landed(project)
    out_file, err_file = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out_file, "w") as out, open(err_file, "w") as err:
        proc = subprocess.Popen(HEADWATER + ["run", "--trigger", "1 second"], cwd=project,
                                stdout=out, stderr=err, env=_env(), start_new_session=True)
    return project, initial, proc, out_file, err_file


def _exited_0(proc: subprocess.Popen, out_file: Path, err_file: Path,
              signal_name: str) -> tuple[str, str]:
    """(stdout, stderr) of ``proc`` once it exited 0 within 60 s of ``signal_name``."""
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no exit within 60 s of {signal_name}:\n{out_file.read_text()}")
    stdout, stderr = out_file.read_text(), err_file.read_text()
    assert code == 0, f"exit {code}\n{stdout}\n{stderr[-4000:]}"
    return stdout, stderr


def test_ctrl_c_stops_a_continuous_run_cleanly(tmp_path):
    """Ctrl-C (SIGINT) stops each flow after its micro-batch and exits 0: pyspark's
    SparkContext replaces the SIGINT handler with one that cancels every job and raises
    KeyboardInterrupt ("Aborted!", exit 1); the run's own handler must survive it."""
    project, initial, proc, out_file, err_file = _live_run(tmp_path)
    try:
        wait_for(lambda: count(project, "bronze") == len(initial), 180, proc,
                 "bronze to hold the landed rows", out_file)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = _exited_0(proc, out_file, err_file, "SIGINT")
        assert "SIGINT: stopping every flow after its current micro-batch" in stdout
        assert "(stopped on request)" in stdout and "Aborted" not in stdout + stderr
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_continuous_run_stops_cleanly_on_sigterm(tmp_path):
    project, initial, proc, out_file, err_file = _live_run(tmp_path)
    group_gone = False
    try:
        wait_for(lambda: count(project, "bronze") == len(initial), 180, proc,
                 "bronze to hold the landed rows", out_file)
        # while it runs, the checkpoints are taken
        with pytest.raises(HeadwaterError) as held:
            CheckpointLock(project / "lakehouse" / "_checkpoints" / "bronze" / "bronze",
                           "test").acquire().release()
        assert held.value.code == "HW_CHECKPOINT_IN_USE"

        new = [{"device_id": 9, "reading": 50.0 + i, "ts": f"2026-01-01T11:00:{i:02d}Z"}
               for i in range(3)]
        land(project, "readings-late-arrival.json", new)
        wait_for(lambda: count(project, "silver") == sum(1 for r in initial if valid(r))
                 + len(new), 120, proc, "the new file to reach silver", out_file)
        # the materialized view follows its input's new version
        wait_for(lambda: any(r["device_id"] == 9 and r["readings"] == len(new)
                             for r in rows(project, "device_summary")),
                 120, proc, "device_summary to be recomputed", out_file)

        # another terminal: what runs, then a clean stop (SIGTERM to the driver only: it
        # stops the JVM itself)
        status = cli("status", cwd=project)
        assert status.returncode == 0, show(status)
        assert re.search(rf"RUNNING pipeline live \(continuous, [^)]+\), pid {proc.pid}",
                         status.stdout), status.stdout
        assert re.search(r"^\s+bronze\s+running\s+\d+", status.stdout, re.M), status.stdout
        stopped = cli("stop", cwd=project)
        assert stopped.returncode == 0, show(stopped)
        assert f"stopping pipeline live (pid {proc.pid}" in stopped.stdout
        assert "stopped 1 pipeline process(es)" in stopped.stdout
        stdout, stderr = _exited_0(proc, out_file, err_file, "SIGTERM")
        assert "SIGTERM: stopping every flow after its current micro-batch" in stdout
        assert "4 flows ok, 0 failed or skipped (stopped on request)" in stdout
        assert "Traceback" not in stderr, stderr[-4000:]

        # nothing left running: no process of its session, no checkpoint lock held
        deadline = time.monotonic() + 30
        while True:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                group_gone = True
                break
            assert time.monotonic() < deadline, "a process (the JVM?) outlived the driver"
            time.sleep(0.5)
        assert assert_checkpoints_free(project) == 3  # bronze, silver, readings_per_minute

        silver, _ = assert_silver_split(project)
        assert_device_summary(project, silver)
        # the event log: every committed batch once, ids contiguous, the run stopped
        events = event_log(project / "lakehouse")
        for flow in ("bronze", "silver", "readings_per_minute"):
            commits = sorted(int(p.name) for p in (project / "lakehouse" / "_checkpoints" / flow
                                                   / flow / "commits").iterdir()
                             if p.name.isdigit())
            assert batch_ids(events, flow) == commits == list(range(len(commits))), flow
        assert events[-1]["event"] == "run_ended" and events[-1]["status"] == "stopped"
        after = cli("status", cwd=project)
        assert "nothing is running" in after.stdout and "stopped after" in after.stdout
    finally:
        if proc.poll() is None or not group_gone:  # ours: the session Popen started
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def test_a_killed_run_resumes_exactly_once(tmp_path):
    """SIGKILL of the whole driver right after a Delta commit, and right before one: the next
    run neither loses nor duplicates rows."""
    import deltalake

    project = tmp_path / "crash"
    (project / "defs").mkdir(parents=True)
    (project / "headwater.toml").write_text(
        '[pipeline]\nname = "crash"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n')
    (project / "defs" / "p.py").write_text(
        "import headwater\n\n"
        "@headwater.table\ndef copy():\n    return headwater.read_stream('src')\n\n"
        "@headwater.table\ndef copy2():\n    return headwater.read_stream('copy')\n")
    from tests.support import write

    write(project / "lake" / "src", {"id": list(range(100))})
    cli = [sys.executable, "-m", "headwater.cli", "run", "--project", str(project)]
    env = dict(os.environ, HEADWATER_FAULT="native_after_commit", HEADWATER_FAULT_TABLE="copy2",
               # the killed runs flush nothing: their batches reach the log from checkpoints
               HEADWATER_EVENT_FLUSH_SECONDS="3600")
    crashed = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=300,
                             start_new_session=True)
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr[-2000:]
    copy2 = str(project / "lake" / "copy2")
    assert deltalake.DeltaTable(copy2).version() >= 1  # committed, Spark never knew
    env["HEADWATER_FAULT"] = "native_before_commit"
    write(project / "lake" / "src", {"id": list(range(100, 150))})
    env["HEADWATER_FAULT_TABLE"] = "copy"
    crashed = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=300,
                             start_new_session=True)
    assert crashed.returncode == -9
    status = subprocess.run([sys.executable, "-m", "headwater.cli", "status", "--project",
                             str(project)], capture_output=True, text=True, timeout=60)
    # the second run closed the first one's record; its own is left
    assert status.stdout.count("ENDED ABRUPTLY pipeline crash") == 1, status.stdout
    done = subprocess.run(cli, capture_output=True, text=True, timeout=300,
                          start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "recovered from the checkpoint" in done.stdout
    # every committed batch is in the event log once, the killed runs' ones recovered
    events = event_log(project / "lake")
    assert any(e["event"] == "run_ended" and e["status"] == "killed" for e in events)
    recovered = [e for e in events if e["recovered"]]
    assert recovered and all(e["input_rows"] is None and e["sources"] for e in recovered)
    for flow in ("copy", "copy2"):
        commits = sorted(int(p.name) for p in (project / "lake" / "_checkpoints" / flow / flow
                                               / "commits").iterdir() if p.name.isdigit())
        assert batch_ids(events, flow) == commits == list(range(len(commits))), flow
    for name in ("copy", "copy2"):
        ids = sorted(deltalake.DeltaTable(str(project / "lake" / name)).to_pyarrow_dataset()
                     .to_table(use_threads=False).column("id").to_pylist())
        assert ids == list(range(150)), name
