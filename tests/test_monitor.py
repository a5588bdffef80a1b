"""The event log of pipeline runs on the shared session: one row per micro-batch, contiguous
batch ids per query for runs that stop cleanly, run and flow events, queryable in SQL; the
terminal view's plain log lines. The event log is read back with deltalake, independently."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable
from tests.pipelines import build, project
from tests.support import cli, show, write

from headwater.conf.triggers import trigger_kwargs
from headwater.monitor.commands import history_lines, status_lines
from headwater.monitor.display import Display
from headwater.pipeline.run import Runner

PIPELINE = """
@headwater.table
def bronze():
    return headwater.read_stream("src", maxFilesPerTrigger=1)

@headwater.table
@headwater.expect_or_drop("positive", "amount > 0")
def silver():
    return headwater.read_stream("bronze")

@headwater.materialized_view
def total():
    return headwater.read("silver").groupBy().agg(F.sum("amount").alias("amount"))
"""


def events(root: Path) -> list[dict]:
    table = DeltaTable(str(root / "_event_log")).to_pyarrow_dataset().to_table(use_threads=False)
    return sorted(table.to_pylist(), key=lambda e: e["ts"])


def batches_by_query(rows: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for e in rows:
        if e["event"] == "progress":
            out.setdefault(e["query_id"], []).append(e["batch_id"])
    return {q: sorted(b) for q, b in out.items()}


def land(root: Path, start: int, commits: int) -> None:
    for i in range(commits):  # one file per commit: one micro-batch each (maxFilesPerTrigger=1)
        write(root / "src", {"id": [start + i], "amount": [-1 if (start + i) % 4 == 3 else 10]})


def run(spark, proj: Path, trigger: str = "available-now", lines: list[str] | None = None,
        stop: threading.Event | None = None):
    graph = build(spark, proj)
    display = Display((lines.append if lines is not None else lambda _: None), live=False)
    runner = Runner(graph, trigger_kwargs(trigger), trigger != "available-now",
                    pipeline="t", display=display)
    if stop is not None:
        threading.Thread(target=lambda: (stop.wait(), runner.stop_requested.set()),
                         daemon=True).start()
    return graph.lakehouse, runner.run()


def test_every_batch_is_logged_once_with_contiguous_ids_and_the_run_events(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    root = proj / "lake"
    land(root, 0, 4)
    lines: list[str] = []
    lake, results = run(spark, proj, lines=lines)
    assert all(r.ok for r in results), results
    rows = events(root)
    per_query = batches_by_query(rows)
    assert len(per_query) == 2  # bronze and silver
    for batch_ids in per_query.values():
        assert batch_ids == list(range(len(batch_ids))), batch_ids  # contiguous, no duplicate
    bronze = [e for e in rows if e["event"] == "progress" and e["flow"] == "bronze"]
    assert len(bronze) == 4 and sum(e["input_rows"] for e in bronze) == 4
    assert all(e["trigger_time"] and e["batch_duration_ms"] is not None and e["sources"]
               for e in bronze)
    assert json.loads(bronze[-1]["sources"])[0]["endOffset"]["reservoirVersion"] >= 3
    silver = [e for e in rows if e["event"] == "progress" and e["flow"] == "silver"]
    counts = [json.loads(e["expectations"])["positive"] for e in silver]
    assert sum(c["failed"] for c in counts) == 1 and sum(c["passed"] for c in counts) == 3

    # run and flow events, in order
    kinds = [e["event"] for e in rows]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert rows[-1]["status"] == "completed"
    statuses = [e["status"] for e in rows if e["event"] == "flow_status" and e["flow"] == "silver"]
    assert statuses == ["queued", "running", "completed"]
    assert {e["run_id"] for e in rows} == {rows[0]["run_id"]}

    # the plain (non-TTY) progress: one line per batch
    batch_lines = [x for x in lines if "batch     bronze #" in x]
    assert len(batch_lines) == 4 and "1 rows in" in batch_lines[0], lines
    assert "lag " in batch_lines[-1] and "lag 0 versions" in batch_lines[-1], batch_lines

    # queryable in SQL, like any table
    lake.refresh()
    logged = lake.sql("SELECT count(*) AS n FROM _event_log WHERE event = 'progress' "
                      "AND flow = 'bronze'").collect()[0]["n"]
    assert logged == 4

    # a second run continues the ids
    land(root, 4, 2)
    run(spark, proj)
    for batch_ids in batches_by_query(events(root)).values():
        assert batch_ids == list(range(len(batch_ids)))
    assert len(batches_by_query(events(root))) == 2

    # status and history read it back without Spark
    text = "\n".join(status_lines(root))
    assert "nothing is running" in text and "completed" in text
    bronze_line = next(x for x in text.splitlines() if x.strip().startswith("bronze "))
    assert " 6 " in bronze_line  # 6 batches in all
    history = history_lines(root, "bronze")
    assert history[2].split()[0] == str(DeltaTable(str(root / "bronze")).version())
    assert "headwater-bronze" in "\n".join(history)


def test_a_continuous_run_stopped_cleanly_logs_every_batch(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    root = proj / "lake"
    land(root, 0, 1)
    stop = threading.Event()
    done: list = []
    thread = threading.Thread(target=lambda: done.append(run(spark, proj, "1 second",
                                                             stop=stop)))
    thread.start()
    try:
        for i in range(1, 6):  # data keeps arriving while it runs
            time.sleep(1.5)
            land(root, i, 1)
        deadline = time.monotonic() + 120
        while DeltaTable(str(root / "silver")).version() < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=180)
    assert done and all(r.ok for r in done[0][1]), done
    rows = events(root)
    per_query = batches_by_query(rows)
    assert len(per_query) == 2
    for batch_ids in per_query.values():
        assert len(batch_ids) >= 2 and batch_ids == list(range(len(batch_ids))), batch_ids
    # every batch of the checkpoint is in the log (none lost on the way out)
    for flow in ("bronze", "silver"):
        commits = sorted(int(p.name) for p in
                         (root / "_checkpoints" / flow / flow / "commits").iterdir()
                         if p.name.isdigit())
        logged = sorted(e["batch_id"] for e in rows
                        if e["event"] == "progress" and e["flow"] == flow)
        assert logged == commits, flow
    assert rows[-1]["event"] == "run_ended" and rows[-1]["status"] == "stopped"
    assert not list((root / "_runs").glob("*.json"))  # the run file is gone


def test_event_log_is_read_with_a_filter(spark, tmp_path):
    """read_events pushes filters down (status and the dashboard read it this way)."""
    from headwater.monitor import read_events

    assert read_events(tmp_path).num_rows == 0  # nothing logged yet: empty, with the schema
    proj = project(tmp_path, {"p.py": PIPELINE})
    land(proj / "lake", 0, 2)
    run(spark, proj)
    table = read_events(proj / "lake", ["flow", "batch_id"],
                        (ds.field("event") == "progress") & (ds.field("flow") == "bronze"))
    assert sorted(table.column("batch_id").to_pylist()) == [0, 1]


def test_the_live_terminal_table_shows_each_flow_and_the_backlog(spark, tmp_path):
    import io

    from rich.console import Console

    proj = project(tmp_path, {"p.py": PIPELINE})
    land(proj / "lake", 0, 3)
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160, color_system=None)
    display = Display(live=True, triggered=True, console=console)
    graph = build(spark, proj)
    results = Runner(graph, trigger_kwargs("available-now"), False, pipeline="t",
                     display=display).run()
    assert all(r.ok for r in results)
    text = screen.getvalue()
    for header in ("flow", "status", "batches", "rows/s", "last batch", "watermark", "lag",
                   "backlog"):
        assert header in text
    final = text[text.rindex("pipeline t (triggered)"):]  # the last frame drawn
    bronze = next(line for line in final.splitlines() if line.strip("│ ").startswith("bronze"))
    cells = [c.strip() for c in bronze.split("│") if c.strip()]
    assert cells[:4] == ["bronze", "completed", "3", "3"], bronze
    assert cells[7] == "0 versions", bronze  # nothing left behind the source
    assert "started   bronze" in text  # the runner's messages scroll above the table


def test_overhead_benchmark_smoke_compares_like_with_like(spark, tmp_path, keep_lakehouse):
    """benchmarks/event_log_overhead.py at its smallest: the three variants do the same work
    (same rows written) and differ only in what watches them."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from event_log_overhead import VARIANTS, measure
    finally:
        sys.path.pop(0)
    # the orders branch only (the whole demo pipeline: 61 s of the fast tier for the same check)
    results = measure(spark, rounds=1, landings=1, base=tmp_path,
                      select=["bronze_orders", "silver_orders"])
    runs = {v: results[v][0] for v in VARIANTS}
    assert len({r["rows"] for r in runs.values()}) == 1 and runs["bare"]["rows"] > 0
    assert [runs[v]["logged"] for v in VARIANTS] == [False, False, True]
    assert runs["bare"]["lines"] == 0 and runs["progress"]["lines"] > 0


def test_an_unwritable_event_log_warns_and_never_fails_the_run(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    root = proj / "lake"
    land(root, 0, 2)
    write(root / "_event_log", {"something_else": [1]})  # not an event log: appends fail
    lines: list[str] = []
    lake, results = run(spark, proj, lines=lines)
    assert all(r.ok for r in results), results
    assert lake.read("silver").count() == 2
    warning = [x for x in lines if "warning: the event log" in x]
    assert len(warning) == 1 and "could not be written" in warning[0], lines
    assert "event rows not logged" in warning[0]


def test_event_log_appends_are_compacted(tmp_path):
    from headwater.monitor.events import EventLog, read_events

    log = EventLog(tmp_path, "p", "r", flush_seconds=3600, compact_every=3)
    for i in range(6):
        log.emit("flow_status", flow=f"f{i}", status="running")
        assert log.flush() == 1
    log.close()
    table = DeltaTable(str(tmp_path / "_event_log"))
    assert len(table.file_uris()) <= 2 and table.version() >= 7  # 6 appends + 2 compactions
    assert sorted(read_events(tmp_path, ["flow"]).column("flow").to_pylist()) == \
        [f"f{i}" for i in range(6)]
    assert not log.failures


@pytest.mark.procs  # ten `headwater status` processes
def test_status_exits_zero_every_time_after_reading_the_event_log(tmp_path):
    """Scanning through delta-rs' default filesystem (a PyFileSystem called from Arrow's IO
    threads) made the process abort at exit: `headwater status` exited 134 in 28 of 60 runs,
    with the CLI's whole output already printed."""
    from headwater.monitor.events import EventLog

    log = EventLog(tmp_path, "p", "r", flush_seconds=3600)
    for i in range(4):
        log.emit("flow_status", flow=f"f{i}", status="completed")
        log.flush()
    log.close()
    for _run in range(10):
        proc = cli("status", "--root", str(tmp_path), cwd=tmp_path)
        assert proc.returncode == 0 and "f3" in proc.stdout, show(proc)
        assert "terminate called" not in proc.stderr, show(proc)


def test_cdc_details_survive_the_listener_and_the_query_racing_to_report_a_batch(tmp_path):
    """The listener and the runner's own check both report a batch; whichever is logged
    carries the AUTO CDC counts the flow's writer handed over before (no Spark needed)."""
    from headwater.monitor.run import FlowStats, RunMonitor

    class Log:  # the event log's dedup as the race leaves it: the first report loses
        def __init__(self) -> None:
            self.rows: list[dict] = []
            self.calls = 0

        def knows(self, query_id, batch_id) -> bool:
            return False

        def batch_row(self, row) -> bool:
            self.calls += 1
            if self.calls == 1:
                return False  # another report was logged first ... (see below)
            self.rows.append(row)
            return True

    monitor = RunMonitor(tmp_path, event_log=False)
    monitor.stats = {"customers": FlowStats("customers")}
    monitor.log = Log()  # type: ignore[assignment]
    monitor.batch_details("customers", 3, {"cdc": {"upserted": 2, "deleted": 1,
                                                   "history_rows": 0}})
    progress = {"id": "q", "runId": "r", "batchId": 3, "durationMs": {"addBatch": 5},
                "sources": []}
    monitor.batch("customers", dict(progress))
    monitor.batch("customers", dict(progress))  # ... and this is the report that is logged
    [row] = monitor.log.rows
    assert json.loads(row["details"])["cdc"] == {"upserted": 2, "deleted": 1, "history_rows": 0}
    assert not monitor._details  # logged: nothing kept


def test_a_failing_observer_never_fails_a_cdc_batch():
    from headwater.pipeline.run.progress import FlowResult

    def broken(batch_id, details):
        raise RuntimeError("observer bug")

    result = FlowResult("customers", "streaming table", on_batch_details=broken)
    result.add_cdc(0, {"upserted": 1, "deleted": 0, "history_rows": 0})
    result.add_cdc(1, {"upserted": 2, "deleted": 1, "history_rows": 0})
    assert result.cdc == {"upserted": 3, "deleted": 1, "history_rows": 0}


def test_a_late_event_of_an_earlier_runs_query_is_not_logged_again(tmp_path):
    """Spark's listener bus can deliver an earlier run's last progress events after the next
    run (same process, same query names) added its listener: that run logged them."""
    import datetime as dt

    from headwater.monitor.run import FlowStats, RunMonitor

    class Log:
        def __init__(self) -> None:
            self.rows: list[dict] = []

        def knows(self, query_id, batch_id) -> bool:
            return False

        def batch_row(self, row) -> bool:
            self.rows.append(row)
            return True

    monitor = RunMonitor(tmp_path, event_log=False)
    monitor.stats = {"color_counts": FlowStats("color_counts")}
    monitor.log = Log()  # type: ignore[assignment]
    before = (monitor.started - dt.timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    after = (monitor.started + dt.timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    for batch_id, when in ((4, before), (5, after)):
        monitor.batch("color_counts", {"id": "q", "runId": "r", "batchId": batch_id,
                                       "timestamp": when, "durationMs": {"addBatch": 5},
                                       "sources": []})
    assert [r["batch_id"] for r in monitor.log.rows] == [5]
