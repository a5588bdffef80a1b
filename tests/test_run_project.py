"""run_project, the one path from a project folder to a finished run (what ``headwater run``
and the demo call), and the observer interface a run reports to. Shared session; real
projects on disk, real Delta tables read back with deltalake."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from tests.support import write

from headwater.conf.triggers import trigger_kwargs
from headwater.errors import HeadwaterError
from headwater.monitor.observer import FlowOutcome, FlowStatus, RunDescription
from headwater.pipeline.graph import Graph
from headwater.pipeline.run import Runner, load_project, run_project
from headwater.pipeline.run.project_run import _choose_trigger

SRC = Path(__file__).resolve().parents[1] / "src" / "headwater"

PIPELINE = """
import headwater
from pyspark.sql import functions as F

@headwater.table
def bronze():
    return headwater.read_stream("src")

@headwater.table
@headwater.expect_or_drop("positive", "amount > 0")
def silver():
    return headwater.read_stream("bronze")

@headwater.materialized_view
def total():
    return headwater.read("silver").groupBy().agg(F.sum("amount").alias("amount"))
"""


def make_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "defs").mkdir(parents=True)
    (root / "headwater.toml").write_text(
        '[pipeline]\nname = "t"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n\n'
        '[spark]\n"spark.sql.shuffle.partitions" = "2"\n')
    (root / "defs" / "p.py").write_text(textwrap.dedent(PIPELINE))
    write(root / "lake" / "src", {"id": [1, 2, 3], "amount": [10, -1, 5]})
    return root


def rows(path: Path) -> list[dict]:
    table = DeltaTable(str(path)).to_pyarrow_dataset().to_table(use_threads=False)
    return sorted(table.to_pylist(), key=lambda r: r.get("id") or 0)


def test_run_project_runs_then_full_refresh_rebuilds_with_its_cascade(spark, tmp_path):
    proj = make_project(tmp_path)
    lines: list[str] = []
    outcome = run_project(proj, echo=lines.append)
    assert outcome.ok and not outcome.stopped, outcome.results
    assert outcome.summary() == "3 flows ok, 0 failed or skipped"
    assert outcome.mode == "available-now" and outcome.root == proj / "lake"
    assert any(f"running pipeline t (available-now) in {proj / 'lake'}" == x for x in lines)
    lake = proj / "lake"
    assert [r["id"] for r in rows(lake / "silver")] == [1, 3]
    assert rows(lake / "total") == [{"amount": 15}]
    assert (lake / "_event_log" / "_delta_log").is_dir()  # the project's event_log default

    # a full refresh of bronze cascades to silver (a streaming table reading it), not to the
    # materialized view; both are rebuilt from scratch: same rows, once each
    loaded = load_project(proj)
    # rows that only a rebuild from scratch removes (a plain re-run keeps them)
    write(lake / "bronze", {"id": [99], "amount": [1]})
    write(lake / "silver", {"id": [98], "amount": [1]})
    lines.clear()
    outcome = run_project(loaded, full_refresh=["bronze"], echo=lines.append, event_log=False)
    assert outcome.ok, outcome.results
    assert "full refresh: bronze (+ downstream streaming tables: silver)" in lines
    assert [r["id"] for r in rows(lake / "bronze")] == [1, 2, 3]
    assert [r["id"] for r in rows(lake / "silver")] == [1, 3]
    assert [r["id"] for r in rows(lake / "silver__quarantine")] == [2]
    assert rows(lake / "total") == [{"amount": 15}]

    # "all": every stored dataset
    lines.clear()
    run_project(loaded, full_refresh="all", echo=lines.append, event_log=False)
    assert "full refresh: bronze, silver, total" in lines


def test_a_trigger_of_the_other_mode_is_refused_before_anything_runs(spark, tmp_path):
    proj = make_project(tmp_path)
    loaded = load_project(proj)
    with pytest.raises(HeadwaterError) as refused:
        run_project(loaded, trigger="available-now", continuous=True)
    assert refused.value.code == "HW_TRIGGER_INVALID"
    with pytest.raises(HeadwaterError) as refused:
        run_project(loaded, trigger="2 seconds", continuous=False)
    assert refused.value.code == "HW_TRIGGER_INVALID"
    assert not (proj / "lake" / "bronze").exists()  # nothing ran, nothing was created


def test_the_trigger_follows_the_asked_mode_when_only_the_project_names_one():
    assert _choose_trigger(None, None, None) == ("available-now", {"availableNow": True}, False)
    assert _choose_trigger(None, "30 seconds", None) == \
        ("30 seconds", {"processingTime": "30 seconds"}, True)
    # the project's trigger is for the other mode: the asked mode's default instead
    assert _choose_trigger(None, "available-now", True) == \
        ("continuous", {"processingTime": "500 milliseconds"}, True)
    assert _choose_trigger(None, "1 minute", False) == \
        ("available-now", {"availableNow": True}, False)
    assert _choose_trigger("Available_Now", None, None)[0] == "available_now"


class Recorder:
    """A RunObserver of its own (not the monitor): records every call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def run_started(self, spark: Any, run: RunDescription) -> None:
        self.calls.append(("run_started", run))

    def flow_starting(self, key: str, checkpoint: str) -> int:
        self.calls.append(("flow_starting", key))
        return 0

    def flow_status(self, key: str, status: FlowStatus, message: str | None = None,
                    **details: Any) -> None:
        self.calls.append(("flow_status", (key, status)))

    def batch_details(self, key: str, batch_id: int, details: dict[str, Any]) -> None:
        self.calls.append(("batch_details", (key, batch_id)))

    def query_ended(self, key: str, query: Any) -> None:
        self.calls.append(("query_ended", key))

    def run_finished(self, flows: list[FlowOutcome], stopped: bool) -> str | None:
        self.calls.append(("run_finished", (flows, stopped)))
        return "2 event rows could not be kept"


def test_the_runner_reports_to_any_observer_through_the_interface(spark, tmp_path):
    proj = make_project(tmp_path)
    loaded = load_project(proj)
    graph = Graph(loaded.registry, loaded.lakehouse).build()
    recorder = Recorder()
    lines: list[str] = []
    results = Runner(graph, trigger_kwargs("available-now"), False, pipeline="t",
                     echo=lines.append, observer=recorder).run()
    assert all(r.ok for r in results)
    calls = recorder.calls
    assert calls[0][0] == "run_started" and calls[-1][0] == "run_finished"
    run: RunDescription = calls[0][1]
    assert run.pipeline == "t" and run.mode == "triggered"
    assert run.flows == {"bronze": "streaming table", "silver": "streaming table",
                         "total": "materialized view"}
    assert run.graph["silver"] == {"kind": "table", "upstream": ["bronze"],
                                   "reads_files": False}
    assert run.graph["total"]["upstream"] == ["silver"]
    assert [c[1] for c in calls if c[0] == "flow_starting"] == ["bronze", "silver"]
    assert sorted(c[1] for c in calls if c[0] == "query_ended") == ["bronze", "silver"]
    statuses = [c[1] for c in calls if c[0] == "flow_status"]
    assert [s for k, s in statuses if k == "silver"] == [FlowStatus.RUNNING,
                                                         FlowStatus.COMPLETED]
    assert all(isinstance(s, FlowStatus) for _, s in statuses)
    flows, stopped = calls[-1][1]
    assert not stopped
    assert {(f.key, f.status) for f in flows} == {("bronze", "completed"),
                                                  ("silver", "completed"),
                                                  ("total", "completed")}
    assert next(f for f in flows if f.key == "silver").rows_written == 2
    # the observer's warning reaches the user; the monitor (not used here) wrote nothing
    assert any("warning: 2 event rows could not be kept" in x for x in lines), lines
    assert not (proj / "lake" / "_event_log").exists()
    assert not list((proj / "lake").glob("_runs/*.json"))


def test_flow_statuses_are_their_plain_strings():
    assert FlowStatus.RUNNING == "running" and f"{FlowStatus.SKIPPED}" == "skipped"
    assert FlowStatus("restarting") is FlowStatus.RESTARTING
    assert FlowStatus.STOPPED.ok and not FlowStatus.FAILED.ok
    assert FlowStatus.SKIPPED.failed_or_skipped


def test_monitor_imports_nothing_of_the_pipeline():
    """monitor/ sits below pipeline/: it knows a run only through monitor/observer.py."""
    offenders = []
    for path in sorted((SRC / "monitor").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names
                          if n.startswith(("headwater.pipeline", "headwater.cli",
                                           "headwater.demo", "headwater.factory"))]
    assert offenders == []
