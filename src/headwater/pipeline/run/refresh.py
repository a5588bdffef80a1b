"""Materialized views: recomputed whole from batch reads of their inputs, in one overwrite.

A view's quarantine (rows its drop expectations reject) is recomputed with it. Each is replaced
by ``Lakehouse.replace``: the query runs first, then one Delta commit swaps data and schema.

Expectation counts: a refresh has no micro-batch progress to carry observed metrics, so the
counts of the view's own rules, and of the rules of the temporary views it reads (checked in
its query, as in every flow reading them), are computed by one aggregate each over the rows
before the check: one more pass over the inputs when there are rules, none otherwise.

Where a recompute runs (:class:`RefreshThreads`): a run recomputes its views on threads of
its own, so its loop goes on starting flows, settling ended ones and answering a stop while a
view computes. The threads only compute: a recompute's outcome (rows, counts, or the exception
it raised) is handed back to the run's loop, which records the view's status, reports it and
starts what waits for it, as it does for every other flow. A stop starts no queued recompute
and waits for the running ones to end: a recompute is never cancelled half-way (a view with a
quarantine, or with a definition of its own, commits more than once; a cancel between those
commits would leave a view changed, or empty, while reported unchanged).
A view whose flow has its own Spark settings (``spark_conf``) is recomputed on the run's loop
instead (see ``Runner._refresh``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark import inheritable_thread_target

from headwater.conf.layout import QUARANTINE_SUFFIX, expectations_metrics
from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.model import VIEW
from headwater.spark.session import activated

if TYPE_CHECKING:
    from headwater.pipeline.graph import Graph, ResolvedFlow


def recompute(graph: Graph, rf: ResolvedFlow) -> tuple[int, dict[str, dict[str, int]]]:
    """Recompute the view ``rf`` writes (and its quarantine); returns the rows written and
    the expectation counts by metrics name (``expectations:<dataset>``, as progress has
    them)."""
    dataset = rf.dataset
    name = dataset.name
    df = graph.rebuild(rf)
    counts: dict[str, dict[str, int]] = {}
    for view in sorted(graph.upstream(name)):
        checked = graph.registry.datasets[view]
        if checked.kind == VIEW and checked.expectations and view in graph.view_inputs:
            counts[expectations_metrics(view)] = expect_mod.count_rules(
                graph.view_inputs[view], checked.expectations)
    bad = None
    if dataset.expectations:
        counts[expectations_metrics(name)] = expect_mod.count_rules(df, dataset.expectations)
        df, bad = expect_mod.split(df, dataset.expectations, name, 0)
    # Computed first, then one commit each: a failing query leaves the view as it was, and
    # the view keeps its history (time travel) across schema changes.
    lake = graph.lakehouse
    rows = lake.replace(name, df, dataset.partition_by, dataset.comment, dict(dataset.properties),
                        declared=dataset.schema or False,  # declared NOT NULL: kept, checked
                        cluster_by=dataset.cluster_by)
    if bad is not None and any(r.action == "drop" for r in dataset.expectations):
        lake.replace(name + QUARANTINE_SUFFIX, bad)
    return rows, counts


THREAD_PREFIX = "headwater-refresh"  # the refresh threads' names


@dataclass
class Refreshed:
    """A recompute that ended, for the run's loop to settle: its rows and expectation counts,
    or the exception it raised."""

    rf: ResolvedFlow
    quiet: bool
    seconds: float
    rows: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    error: BaseException | None = None


_Outcome = tuple[int, dict[str, dict[str, int]], float]  # rows, counts, seconds


@dataclass
class _Running:
    future: Future[_Outcome]
    rf: ResolvedFlow
    quiet: bool
    started: float


class RefreshThreads:
    """Recomputes of materialized views on ``threads`` threads, in the order they were asked
    for. Everything but :meth:`_compute` runs on the run's loop: it queues recomputes
    (:meth:`submit`), starts them while a thread is free (:meth:`start_queued`), collects the
    ended ones (:meth:`ended`), and on a stop drops the queued ones (:meth:`drop_queued`);
    running ones always end. ``wake`` is called (on the refresh thread) when a recompute
    ends: a loop waiting between passes looks at once.

    A thread runs with the pipeline's session active (definitions and checks asking for the
    active session find it) and with the local properties of the thread that started it
    (a caller's job group, description or scheduler pool, and the session's tags:
    ``inheritable_thread_target``).

    A recompute runs in its flow's :meth:`~headwater.pipeline.graph.Graph.flow_conf` block: a
    no-op in a pipeline where no flow has Spark settings; where some flow has them, the block
    holds the graph's lock for the whole recompute, so no other flow's settings are on the
    session while it computes (the run keeps views with settings of their own on its loop).
    """

    def __init__(self, graph: Graph, threads: int, wake: Callable[[], None]) -> None:
        self.graph = graph
        self.threads = threads
        self.wake = wake
        self._pool: ThreadPoolExecutor | None = None
        self._queue: list[tuple[ResolvedFlow, bool]] = []
        self._running: dict[str, _Running] = {}  # flow key -> its recompute

    def submit(self, rf: ResolvedFlow, quiet: bool = False) -> None:
        """Queue a recompute of the view ``rf`` writes (started by :meth:`start_queued`)."""
        self._queue.append((rf, quiet))

    def busy(self, name: str) -> bool:
        """True while a recompute of dataset ``name`` is queued or running."""
        return any(rf.dataset.name == name for rf, _ in self._queue) or \
            any(r.rf.dataset.name == name for r in self._running.values())

    @property
    def active(self) -> bool:
        """A recompute is queued or running."""
        return bool(self._queue or self._running)

    def start_queued(self) -> list[ResolvedFlow]:
        """Start queued recomputes while a thread is free; returns the ones started."""
        started = []
        while self._queue and len(self._running) < self.threads:
            rf, quiet = self._queue.pop(0)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=THREAD_PREFIX)
            future = self._pool.submit(
                inheritable_thread_target(self.graph.lakehouse.spark)(self._compute), rf)
            self._running[rf.key] = _Running(future, rf, quiet, time.monotonic())
            future.add_done_callback(lambda _: self.wake())
            started.append(rf)
        return started

    def _compute(self, rf: ResolvedFlow) -> _Outcome:
        """On a refresh thread: the recompute; the rows, the counts and the seconds."""
        started = time.monotonic()
        with activated(self.graph.lakehouse.spark), self.graph.flow_conf(rf.dataset, rf.flow):
            rows, counts = recompute(self.graph, rf)
        return rows, counts, time.monotonic() - started

    def ended(self) -> list[Refreshed]:
        """The recomputes that ended since the last call, in the order they were started."""
        out = []
        for key, running in list(self._running.items()):
            if not running.future.done():
                continue
            del self._running[key]
            error = running.future.exception()
            if error is not None:
                out.append(Refreshed(running.rf, running.quiet,
                                     time.monotonic() - running.started, error=error))
            else:
                rows, counts, seconds = running.future.result()
                out.append(Refreshed(running.rf, running.quiet, seconds, rows, counts))
        return out

    def drop_queued(self) -> list[ResolvedFlow]:
        """Forget the recomputes not started yet (a stop); returns their flows."""
        dropped = [rf for rf, _ in self._queue]
        self._queue.clear()
        return dropped

    def wait(self, seconds: float) -> None:
        """Until a running recompute ends, or ``seconds`` passed."""
        futures = [r.future for r in self._running.values()]
        if futures:
            wait(futures, timeout=seconds, return_when=FIRST_COMPLETED)
        else:
            time.sleep(seconds)

    def close(self) -> None:
        """Let the threads go (they end now: every recompute ended, see :meth:`active`)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
