"""Materialized views recomputed off the run's loop (pipeline/run/refresh.py, Runner._refresh).

Real runs in the shared session. The views' queries call a Python UDF that sleeps and returns
when it started and ended: the rows each view stores say when its query ran, so overlap is read
from the data, never from a stopwatch. Each run has a guard that requests a stop after a
generous bound; a test asserts the guard never fired (the run ended by itself)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.pipelines import build, project

from headwater.conf.triggers import trigger_kwargs
from headwater.monitor.observer import FlowStatus
from headwater.monitor.run import RunMonitor
from headwater.pipeline.run import Runner
from headwater.pipeline.run.refresh import THREAD_PREFIX

GUARD_SECONDS = 300  # a run that does not end by itself is stopped (and the test fails)
TZ = "spark.sql.session.timeZone"

SOURCE = """
import threading
import time as _time
from pyspark.sql.types import ArrayType, DoubleType

@F.udf(ArrayType(DoubleType()))
def span(_):
    # when this view's query ran: [start, end] of a sleep of {sleep} s
    start = _time.time()
    _time.sleep({sleep})
    return [start, _time.time()]

@headwater.table
def src():
    return headwater.read_files({landing!r}, format="json", schema="id INT")

"""


def slow_view(name: str, reads: str = "src", conf: dict[str, str] | None = None) -> str:
    """A view of one row: its query's span, the zone its definition saw and the one its query
    ran in, and the thread that ran its definition."""
    options = f"(spark_conf={conf!r})" if conf else ""
    return f"""
@headwater.materialized_view{options}
def {name}():
    return (headwater.read({reads!r}).limit(1).repartition(1)
            .select(span(F.lit(0)).alias("span"))
            .withColumn("defined", F.lit(spark.conf.get({TZ!r})))
            .withColumn("ran", F.expr("current_timezone()"))
            .withColumn("thread", F.lit(threading.current_thread().name)))
"""


def land(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ids.json").write_text(json.dumps({"id": 1}) + "\n")


def rows(graph, table: str) -> list[dict]:
    return DeltaTable(graph.lakehouse.path(table)).to_pyarrow_table().to_pylist()


class Watching(RunMonitor):
    """The default observer, also calling ``on_status(key, status, details, stop)`` after
    each status."""

    def __init__(self, graph, on_status) -> None:
        super().__init__(graph.lakehouse.root, event_log=False,
                         state_dir=graph.lakehouse.state_dir)
        self.on_status = on_status

    def flow_status(self, key, status, message=None, **details) -> None:
        super().flow_status(key, status, message, **details)
        self.on_status(key, FlowStatus(status), details)


def run_guarded(graph, continuous: bool = False, trigger: str = "available-now",
                on_status=lambda key, status, details, stop: None) -> tuple[dict, threading.Event]:
    """Run ``graph``; returns the results by key and the guard's event (set: it fired)."""
    stop = threading.Event()
    fired = threading.Event()

    def guard() -> None:
        fired.set()
        stop.set()

    timer = threading.Timer(GUARD_SECONDS, guard)
    timer.start()
    try:
        runner = Runner(graph, trigger_kwargs(trigger), continuous, echo=lambda _: None,
                        observer=Watching(graph, lambda k, s, d: on_status(k, s, d, stop)),
                        stop_event=stop)
        results = {r.key: r for r in runner.run()}
    finally:
        timer.cancel()
        graph.close()
    # the run's refresh threads went with it (a library leaves no threads behind)
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]
    return results, fired


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_independent_views_compute_and_write_at_the_same_time(spark, tmp_path):
    """Two views' queries run at once (their refresh threads, and Lakehouse.replace holding
    its creation lock only around the commit: held through the query, it serialized them)."""
    land(tmp_path / "landing")
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=3) + slow_view("a") + \
        slow_view("b")
    graph = build(spark, project(tmp_path, {"p.py": defs}))
    results, fired = run_guarded(graph, on_status=lambda *_: None)
    assert not fired.is_set()
    assert {k: results[k].status for k in ("a", "b")} == {"a": "completed", "b": "completed"}
    a, b = rows(graph, "a")[0], rows(graph, "b")[0]
    assert overlap(a["span"], b["span"]), (a["span"], b["span"])
    assert a["thread"].startswith("headwater-refresh") and b["thread"].startswith(
        "headwater-refresh")


def test_a_stop_starts_no_queued_recompute(spark, tmp_path):
    """Six views, four refresh threads: a stop requested when the first view ends leaves the
    two queued views unrecomputed (STOPPED, no table written); the running ones finish."""
    land(tmp_path / "landing")
    names = [f"v{i}" for i in range(6)]
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=2) + \
        "".join(slow_view(n) for n in names)
    graph = build(spark, project(tmp_path, {"p.py": defs}))

    def stop_at_first_view(key, status, details, stop) -> None:
        if key.split("/")[0] in names and status == FlowStatus.COMPLETED:
            stop.set()

    results, fired = run_guarded(graph, on_status=stop_at_first_view)
    assert not fired.is_set()
    statuses = {n: results[n].status for n in names}
    assert sorted(statuses.values()) == ["completed"] * 4 + ["stopped"] * 2, statuses
    for name in names:
        written = graph.lakehouse.exists(name) and rows(graph, name)
        assert bool(written) == (statuses[name] == "completed"), name


def test_a_failing_view_on_a_thread_fails_as_on_the_loop_and_skips_its_readers(spark,
                                                                              tmp_path):
    """The query of ``bad`` raises on its refresh thread: FAILED with the error the loop's own
    recompute gives (``bad_conf`` has spark_conf, so it is recomputed on the loop), its reader
    SKIPPED, and the triggered run ends."""
    land(tmp_path / "landing")
    failing = "headwater.read('src').select(F.expr(\"raise_error('boom ' || id)\").alias('x'))"
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=0) + f"""
@headwater.materialized_view
def bad():
    return {failing}

@headwater.materialized_view(spark_conf={{"spark.sql.shuffle.partitions": "3"}})
def bad_conf():
    return {failing}

@headwater.materialized_view
def reads_bad():
    return headwater.read("bad")
"""
    graph = build(spark, project(tmp_path, {"p.py": defs}))
    results, fired = run_guarded(graph)
    assert not fired.is_set()
    bad, on_loop = results["bad"], results["bad_conf"]
    assert (bad.status, on_loop.status) == ("failed", "failed")
    assert "boom 1" in (bad.error or "") and "HW_FLOW_FAILED" in (bad.error or "")
    assert bad.error == (on_loop.error or "").replace("bad_conf", "bad")
    assert results["reads_bad"].status == "skipped"
    assert results["reads_bad"].error == "upstream failed: bad"
    assert results["src"].status == "completed"


def test_a_continuous_run_looks_again_when_a_recompute_ends(spark, tmp_path):
    """A continuous run on a ten-minute interval: ``second`` reads ``first``, so it waits
    while ``first`` recomputes on its thread. Only the end of that recompute can wake the
    loop before the interval; ``second`` is recomputed well within the guard."""
    land(tmp_path / "landing")
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=1) + \
        slow_view("first") + slow_view("second", reads="first")
    graph = build(spark, project(tmp_path, {"p.py": defs}))

    def stop_at_second(key, status, details, stop) -> None:
        if key.startswith("second") and details.get("rows_written") == 1:
            stop.set()

    results, fired = run_guarded(graph, continuous=True, trigger="10 minutes",
                                 on_status=stop_at_second)
    assert not fired.is_set()
    assert results["second"].status == "completed"
    first, second = rows(graph, "first")[0], rows(graph, "second")[0]
    assert first["span"][1] <= second["span"][0]  # after its input view's recompute


def test_a_views_spark_conf_is_not_seen_by_a_flow_computing_beside_it(spark, tmp_path):
    """``tokyo`` has its own time zone: it is recomputed on the run's loop, and no other view
    computes while its setting is on the session (``plain`` holds the graph's lock on its
    thread); each view's definition and query see their own zone only."""
    land(tmp_path / "landing")
    zone = spark.conf.get(TZ)
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=2) + \
        slow_view("plain") + slow_view("tokyo", conf={TZ: "Asia/Tokyo"}) + \
        slow_view("plain_too")
    graph = build(spark, project(tmp_path, {"p.py": defs}))
    results, fired = run_guarded(graph)
    assert not fired.is_set()
    assert all(results[n].status == "completed" for n in ("plain", "tokyo", "plain_too"))
    tokyo = rows(graph, "tokyo")[0]
    assert (tokyo["defined"], tokyo["ran"]) == ("Asia/Tokyo", "Asia/Tokyo")
    assert tokyo["thread"] == threading.current_thread().name  # the run's loop
    for name in ("plain", "plain_too"):
        row = rows(graph, name)[0]
        assert (row["defined"], row["ran"]) == (zone, zone), name
        assert row["thread"].startswith("headwater-refresh"), name
        assert not overlap(row["span"], tokyo["span"]), name
    assert spark.conf.get(TZ) == zone  # nothing left on the session


def test_a_run_that_fails_lets_its_running_recompute_end(spark, tmp_path):
    """The run fails (its observer raises) as ``slow`` starts computing on its thread: the
    error is raised once ``slow`` has ended, whole (a recompute is never cut off between its
    commits), and no other view starts; no refresh thread outlives the run."""
    land(tmp_path / "landing")
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=3) + slow_view("slow") + \
        slow_view("later", reads="slow")
    graph = build(spark, project(tmp_path, {"p.py": defs}))
    seen: list[tuple[str, FlowStatus]] = []

    def fail_when_running(key, status, details, stop) -> None:
        seen.append((key, status))
        if key == "slow" and status == FlowStatus.RUNNING:
            raise RuntimeError("the observer failed")

    with pytest.raises(RuntimeError, match="the observer failed"):
        run_guarded(graph, on_status=fail_when_running)
    assert [s for k, s in seen if k == "slow"] == [FlowStatus.RUNNING, FlowStatus.COMPLETED]
    assert len(rows(graph, "slow")) == 1
    assert not [k for k, _ in seen if k == "later"] and not graph.lakehouse.exists("later")


def test_a_view_read_by_the_python_reader_recomputes_on_its_thread(spark, tmp_path):
    """Time travel reads through headwater's Python Delta source, which Spark looks up in the
    JVM's active session of the calling thread: a refresh thread has it while it computes."""
    land(tmp_path / "landing")
    outside = str(tmp_path / "outside")
    write_deltalake(outside, pa.table({"id": [1]}))
    write_deltalake(outside, pa.table({"id": [2]}), mode="append")
    defs = SOURCE.format(landing=str(tmp_path / "landing"), sleep=0) + f"""
@headwater.materialized_view
def first_version():
    return spark.read.format("delta").option("versionAsOf", 0).load({outside!r})
"""
    graph = build(spark, project(tmp_path, {"p.py": defs}))
    results, fired = run_guarded(graph)
    assert not fired.is_set()
    assert results["first_version"].status == "completed", results["first_version"].error
    assert rows(graph, "first_version") == [{"id": 1}]
