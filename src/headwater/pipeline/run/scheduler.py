"""Running a pipeline graph: triggered (every flow to the end of its input) or continuous.

Triggered runs start each dataset once its inputs in the run are done, so every table sees
all of its inputs' new rows; independent datasets run together. Materialized views are
recomputed after their inputs, in one overwrite commit each. A native flow (stateless,
appending) whose input is a streaming table of the run starts alongside that input and reads
each of its commits as it lands; it is stopped once the input is done and read through.
Continuous runs start every streaming flow at once and recompute materialized views whenever an
input table got a new version; the hops are commit-driven (run/hops.py): a flow streaming
lakehouse tables starts its micro-batch when its input commits (a local folder's file stream:
when a file lands), views are looked at when a batch ends, and the processing-time trigger
is the floor (and the trigger of an object store's files, Kafka and other streams).

What runs where: the run's loop (the thread calling :meth:`Runner.run`) starts and settles
every flow and reports everything; streaming queries run on Spark's stream threads;
materialized views are computed on refresh threads (run/refresh.py), whose outcomes the loop
settles, so the loop goes on starting flows while a view computes. A view whose flow has
``spark_conf`` is recomputed on the loop itself (see :meth:`Runner._refresh`).

A failed flow stops only itself and the datasets downstream of it. A stop request (the
``stop_requested`` event: SIGINT, SIGTERM, a timer) waits for each query's running
micro-batch to end before stopping it; it starts no queued view recompute and waits for the
running ones to end (a recompute is never cut off between its commits). Whoever watches the
run is told through the
:class:`~headwater.monitor.observer.RunObserver` interface (by the loop only).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.conf.layout import EXPECTATIONS_METRICS, LATE_SUFFIX, QUARANTINE_SUFFIX
from headwater.conf.triggers import parse_interval
from headwater.delta.log import DeltaLog, open_table
from headwater.errors import HeadwaterError, find_code, unwrap
from headwater.errors.spark import is_worker_start_timeout, translate_flow_failure
from headwater.ingest.clean import clean_quietly, committed_offsets
from headwater.monitor.observer import FlowStatus, RunDescription, RunObserver
from headwater.monitor.run import RunMonitor
from headwater.pipeline.graph import Graph, Read, ResolvedFlow
from headwater.pipeline.model import MATERIALIZED_VIEW, SINK, TABLE, Sink, describe, flow_settings
from headwater.pipeline.run import compat
from headwater.pipeline.run.flow_writer import start_stream
from headwater.pipeline.run.hops import CommitSignal, between_batches
from headwater.pipeline.run.native import native_input, read_through, start_native
from headwater.pipeline.run.progress import (
    FlowResult,
    add_expectation_counts,
    count_batches,
    expectation_text,
    summary,
)
from headwater.pipeline.run.refresh import Refreshed, RefreshThreads, recompute
from headwater.pipeline.run.sink_writer import start_sink
from headwater.pipeline.run.snapshots import apply_new_snapshots
from headwater.spark.checkpoint_lock import CheckpointLock

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from headwater.monitor.display import Display

# A flow stopped by a schema change it can resume from restarts by itself: a file source
# that saved new columns, or a Delta input that gained columns while the flow ran.
SCHEMA_RESTART_CODES = ("HW_INGEST_SCHEMA_EVOLVED", "HW_SOURCE_SCHEMA_CHANGED")
MAX_SCHEMA_RESTARTS = 20  # per flow and run; a feed changing more often is likely broken
MAX_WORKER_RESTARTS = 3   # per flow and run: Spark's Python worker missed its 10 s start window
STOP_WAIT_SECONDS = 120   # longest wait for a running micro-batch when stopping
# A native flow started alongside its input (triggered runs) looks for new input commits
# this often; it is stopped once its input is done and read through.
OVERLAP_TRIGGER: dict[str, Any] = {"processingTime": "250 milliseconds"}
IDLE_AFTER_INPUT_SECONDS = 10  # ... or once it found no new data this long after the input
# Statuses of a flow that has no outcome yet.
UNSETTLED = (FlowStatus.PENDING, FlowStatus.QUEUED, FlowStatus.RUNNING, FlowStatus.RESTARTING)
# DLT's per-flow interval of a continuous run (a flow's spark_conf, or the configuration)
TRIGGER_INTERVAL = "pipelines.trigger.interval"
# Read options that make a stream's first batch depend on when it starts.
STARTING_OPTIONS = ("startingversion", "startingtimestamp")
# Materialized views are recomputed on threads of the run's (run/refresh.py): a triggered
# run recomputes this many at once (independent views refresh together, Spark runs their jobs
# side by side: the run's wall time); a continuous run one at a time, in the graph's order
# (a view's freshness: the first view whose input committed is not slowed down by the others
# sharing the cores).
REFRESH_THREADS = 4


class Runner:
    """One run of ``graph``'s stored datasets.

    trigger: ``DataStreamWriter.trigger`` keywords, e.g. {"availableNow": True}.
    continuous: run until stopped (True) or in waves until every flow ended (False).
    select: dataset names to run (default: all; the rest of the graph is left alone).
    echo: where the runner's messages go (timestamped); the display's echo when a display
        is given.
    pipeline: the pipeline's name, for the event log and the run file.
    event_log: write the run's events to ``_event_log`` (default True).
    auto_compact: compact the small files of the tables the flows write after their commits
        (default True; a table's ``delta.autoOptimize.autoCompact`` property wins).
    display: the live terminal view (driven by the default observer).
    observer: who is told about the run; default a RunMonitor on the lakehouse root
        (with ``event_log`` and ``display``).
    stop_event: the event that requests a stop (default: a new one, ``stop_requested``).
    """

    def __init__(self, graph: Graph, trigger: dict[str, Any], continuous: bool,
                 select: list[str] | None = None,
                 echo: Callable[[str], None] = print, pipeline: str = "pipeline",
                 event_log: bool = True, auto_compact: bool = True,
                 display: Display | None = None,
                 observer: RunObserver | None = None,
                 stop_event: threading.Event | None = None) -> None:
        self.graph = graph
        self.lakehouse = graph.lakehouse
        self.trigger = trigger
        self.continuous = continuous
        self._t0 = time.monotonic()
        self.echo = display.echo if display is not None else \
            (lambda text: echo(f"[{time.monotonic() - self._t0:7.1f}s] {text}"))
        self.pipeline = pipeline
        self.auto_compact = auto_compact
        if observer is None:
            observer = RunMonitor(self.lakehouse.root, event_log=event_log, display=display,
                                  state_dir=self.lakehouse.state_dir)
        self.observer: RunObserver = observer
        self.stop_requested = stop_event if stop_event is not None else threading.Event()
        datasets = graph.written()
        if select:
            chosen = graph.datasets_named(select, "--select")
            datasets = [d for d in datasets if d in chosen]
        self.datasets = datasets
        self.results: dict[str, FlowResult] = {}
        self._locks: dict[str, CheckpointLock] = {}  # by flow key
        self._triggers: dict[str, dict[str, Any]] = {}  # flows not on the run's trigger
        self._natives: dict[str, Read | None] = {}
        self._waiting: set[str] = set()  # datasets to start after their inputs after all
        self._alone: set[str] = set()  # datasets never to start alongside their inputs
        # flow key -> (when its input was done, the input's version then)
        self._input_done: dict[str, tuple[float, int]] = {}
        self._schemas_seen: dict[str, str | None] = {}  # table -> Delta schema at flow start
        # the views' recomputes off the loop; a continuous run's wait between passes ends
        # when one ends (see _run_continuous)
        self._wake: Callable[[], None] = lambda: None
        self._refreshes = RefreshThreads(graph, 1 if continuous else REFRESH_THREADS,
                                         lambda: self._wake())

    # --- the two modes -------------------------------------------------------------------

    def run(self) -> list[FlowResult]:
        self.observer.run_started(self.lakehouse.spark, self.description())
        try:
            if self.continuous:
                self._run_continuous()
            else:
                self._run_triggered()
        except BaseException:
            with contextlib.suppress(Exception):  # the run's own error is the one raised
                self._end_refreshes(failed=True)  # queued ones dropped, running ones end
            for query in self.lakehouse.spark.streams.active:
                query.stop()
            raise
        finally:
            self._refreshes.close()  # the refresh threads go with the run (all ended)
            for lock in self._locks.values():
                lock.release()
            warning = self.observer.run_finished(
                [r.outcome() for r in self.results.values()], self.stop_requested.is_set())
            if warning:
                self.echo(f"warning: {warning}")
            self._register_changed()
        return list(self.results.values())

    def description(self) -> RunDescription:
        """The run as its observer sees it: flows by kind and the graph's edges."""
        registry = self.graph.registry.datasets
        flows = {rf.key: describe(registry[name])
                 for name in self.datasets for rf in self.graph.flows_of(name)}
        graph = {}
        for name, dataset in registry.items():
            reads = [r for rf in self.graph.flows_of(name) for r in rf.reads]
            graph[name] = {"kind": str(dataset.kind),
                           "upstream": sorted({r.name for r in reads}),
                           # a streaming table reading no dataset or table reads files
                           "reads_files": dataset.kind in (TABLE, SINK)
                           and not any(r.streaming for r in reads)
                           and not any(rf.flow.snapshot for rf in self.graph.flows_of(name))}
        mode = f"continuous, {self.trigger.get('processingTime')}" if self.continuous \
            else "triggered"
        return RunDescription(self.pipeline, mode, flows, graph)

    def _status(self, key: str, status: FlowStatus, message: str | None = None,
                **details: Any) -> None:
        self.observer.flow_status(key, status, message, **details)

    def _depths(self) -> dict[str, int]:
        """Each dataset's depth in the graph: 0 reads no dataset of the pipeline, else one
        more than its deepest input."""
        depth: dict[str, int] = {}
        for name in self.graph.written():
            ups = [u for u in self.graph.upstream(name) if u in depth]
            depth[name] = 1 + max((depth[u] for u in ups), default=-1)
        return {n: depth[n] for n in self.datasets}

    def _run_triggered(self) -> None:
        """Each dataset starts once its inputs in this run are done: streaming tables and
        sinks run their flows to the end of their input, materialized views are recomputed.
        A native flow (stateless, appending; see run/native.py) whose input is a streaming
        table still running starts alongside it (see :meth:`_overlaps`)."""
        order = list(self.datasets)
        ups = {n: self.graph.upstream(n) & set(order) for n in order}
        started: set[str] = set()
        done: set[str] = set()
        running: dict[str, StreamingQuery] = {}
        polls = 0
        while not self.stop_requested.is_set():
            snapshots: list[ResolvedFlow] = []
            for name in order:
                if name in started:
                    continue
                if self.stop_requested.is_set():
                    break  # a stop asked mid-pass starts nothing more
                if ups[name] <= done:
                    started.add(name)
                    self._begin(name, running, snapshots)
                elif self._overlaps(name, ups[name], started, done):
                    started.add(name)
                    for flow in self.graph.flows_of(name):
                        self._triggers[flow.key] = OVERLAP_TRIGGER
                        query = self._start(flow)
                        if query is not None:
                            running[flow.key] = query
            for flow in snapshots:  # after the streams that could start now did
                if not self.stop_requested.is_set():
                    self._apply_snapshots(flow)
            self._finish_overlapping(running, done)
            polls += 1
            # count batches while they run (recentProgress is short); settle ended queries
            if polls % 20 == 0 or not all(q.isActive for q in running.values()):
                self._collect(running)
                for key in [k for k, q in running.items() if not q.isActive
                            and FlowStatus(self.results[k].status) not in UNSETTLED]:
                    del running[key]  # settled (a restarted flow has a new, active query)
            started -= self._waiting  # back to waiting for their inputs (see _collect)
            self._waiting.clear()
            self._settle_refreshes()
            done |= {n for n in started - done if self._ended(n)}
            if len(done) == len(order) or self.stop_requested.wait(0.1):
                break
        if self.stop_requested.is_set():
            self._drop_queued_refreshes()  # none starts now; running ones end below
            self._stop_all(running)
            self._collect(running)
            self._end_refreshes()

    def _begin(self, name: str, running: dict[str, StreamingQuery],
               snapshots: list[ResolvedFlow]) -> None:
        """Start ``name`` now that its inputs are done: its flows started (a snapshot flow
        added to ``snapshots``, applied by the caller), or the view recomputed, or everything
        skipped when an input failed."""
        if self._skip_if_upstream_failed(name):
            return
        kind = self.graph.registry.datasets[name].kind
        for flow in self.graph.flows_of(name):
            result = self.results.get(flow.key)
            if result is not None and result.status != FlowStatus.QUEUED:
                continue  # started alongside its input, and running (or ended) still
            if kind in (TABLE, SINK) and flow.flow.snapshot is not None:
                snapshots.append(flow)
            elif kind in (TABLE, SINK):
                query = self._start(flow)
                if query is not None:
                    running[flow.key] = query
            elif kind == MATERIALIZED_VIEW:
                self._refresh(flow)

    def _ended(self, name: str) -> bool:
        """Every flow of ``name`` has an outcome (its view refreshed, its query settled)."""
        return all(rf.key in self.results
                   and FlowStatus(self.results[rf.key].status) not in UNSETTLED
                   for rf in self.graph.flows_of(name))

    def _overlaps(self, name: str, ups: set[str], started: set[str], done: set[str]) -> bool:
        """True when ``name`` may start before its inputs are done: an available-now run,
        and every flow of ``name`` is native and streams a streaming table of this run that
        has started (none reads anything else, none sets a starting version). Such a flow's
        output is its definition applied to each batch of input rows, so how the input's
        commits are cut into batches changes nothing; running alongside its input, its
        start (query, checkpoint, Python source process) overlaps the input's work and each
        input commit is processed as it lands. :meth:`_finish_overlapping` stops it once its
        inputs are done and it has read their last version."""
        if not self.trigger.get("availableNow") or name in self._alone or \
                self.graph.registry.datasets[name].kind != TABLE:
            return False
        flows = self.graph.flows_of(name)
        streamed: set[str] = set()
        for rf in flows:
            native = self._native_input(rf)
            if native is None or native.name not in started or native.name in done \
                    or self.graph.registry.datasets[native.name].kind != TABLE \
                    or any(k.lower() in STARTING_OPTIONS for k, _ in native.options):
                return False
            streamed.add(native.name)
        return bool(flows) and ups == streamed

    def _finish_overlapping(self, running: dict[str, StreamingQuery], done: set[str]) -> None:
        """Flows started alongside their input: skipped when an input failed, stopped (as
        completed) once every input is done and the flow committed a batch that reads the
        input's last version."""
        for key, query in list(running.items()):
            if self._triggers.get(key) is not OVERLAP_TRIGGER or not query.isActive \
                    or self.results[key].status != FlowStatus.RUNNING:
                continue
            rf = self.graph.flows[key]
            native = self._native_input(rf)
            if native is None or native.name not in done:
                continue
            upstream = self._results_of(native.name)
            if any(FlowStatus(r.status).failed_or_skipped for r in upstream):
                self._stop_between_batches(query)
                self.observer.query_ended(key, query)
                failed = ", ".join(r.key for r in upstream
                                   if FlowStatus(r.status).failed_or_skipped)
                self.results[key].status = FlowStatus.SKIPPED
                self.results[key].error = f"upstream failed: {failed}"
                self._status(key, FlowStatus.SKIPPED, f"upstream failed: {failed}")
                self.echo(f"skipped   {key}: upstream {failed} failed")
                self._release(key)
                continue
            status = query.status
            if status.get("isTriggerActive"):
                continue  # a batch (or a look for one) runs: asked again after it
            if key not in self._input_done:  # the input's last version, once
                self._input_done[key] = (time.monotonic(), self._version(native.name))
            since, version = self._input_done[key]
            checkpoint = self.lakehouse.checkpoint(rf.dataset.name, rf.flow.name)
            if read_through(checkpoint, version) or (
                    time.monotonic() - since > IDLE_AFTER_INPUT_SECONDS
                    and not status.get("isDataAvailable")):
                # (the second: its triggers have found nothing new for a while, whatever
                # its offsets say)
                self._stop_between_batches(query)  # _collect then settles it as completed

    def _native_input(self, rf: ResolvedFlow) -> Read | None:
        """:func:`native_input`, asked once per flow and run (it walks the flow's plan)."""
        if rf.key not in self._natives:
            self._natives[rf.key] = native_input(self.graph, rf)
        return self._natives[rf.key]

    def _results_of(self, name: str) -> list[FlowResult]:
        return [self.results[rf.key] for rf in self.graph.flows_of(name)
                if rf.key in self.results]

    def _run_continuous(self) -> None:
        running: dict[str, StreamingQuery] = {}
        snapshots: list[ResolvedFlow] = []
        for name in self.datasets:
            if self.graph.registry.datasets[name].kind in (TABLE, SINK):
                for flow in self.graph.flows_of(name):
                    if flow.flow.snapshot is not None:
                        snapshots.append(flow)
                        continue
                    query = self._start(flow)
                    if query is not None:
                        running[flow.key] = query
        views = [n for n in self.datasets
                 if self.graph.registry.datasets[n].kind == MATERIALIZED_VIEW]
        seen_versions: dict[str, dict[str, int]] = {}
        source_versions: dict[str, tuple[int, ...]] = {}
        interval = _interval_seconds(self.trigger)
        # views and snapshot flows are looked at again when a flow's batch read rows (it
        # committed), or after an interval
        signal = CommitSignal(self.lakehouse.spark) if views or snapshots else None
        if signal is not None:
            self._wake = signal.wake  # a recompute that ends wakes the loop
        try:
            self._continue(running, snapshots, views, seen_versions, source_versions,
                           interval, signal)
            if self.stop_requested.is_set():
                self._drop_queued_refreshes()  # none starts now; running ones end below
            self._stop_all(running)
            self._collect(running)
            self._end_refreshes()
        finally:
            self._wake = lambda: None
            if signal is not None:
                signal.close()
        for flow in snapshots:
            result = self.results.get(flow.key)
            if result is not None and result.status == FlowStatus.RUNNING:
                result.status = FlowStatus.STOPPED
                self._status(flow.key, FlowStatus.STOPPED, summary(result))

    def _continue(self, running: dict[str, StreamingQuery], snapshots: list[ResolvedFlow],
                  views: list[str], seen_versions: dict[str, dict[str, int]],
                  source_versions: dict[str, tuple[int, ...]], interval: float,
                  signal: CommitSignal | None) -> None:
        """The continuous run's loop until a stop: snapshots applied and views recomputed
        when their inputs changed, flows' batches counted and ended flows settled."""
        while not self.stop_requested.is_set():
            looked: dict[str, int] = {}  # the views' inputs' versions this pass saw
            self._settle_refreshes()
            for flow in snapshots:  # a function: asked each interval; a table: when it changed
                if any(self._refreshes.busy(u) for u in self.graph.upstream(flow.dataset.name)):
                    continue  # its source view is recomputing: looked at once that ends
                if self._skip_if_upstream_failed(flow.dataset.name) or \
                        self.results.get(flow.key) and self.results[flow.key].status == \
                        FlowStatus.FAILED:
                    continue
                version = self._source_version(flow)
                if version is None or source_versions.get(flow.key) != version:
                    self._apply_snapshots(flow, quiet=flow.key in source_versions)
                    source_versions[flow.key] = () if version is None else version
            self._settle_refreshes()
            for name in views:
                if self._refreshes.busy(name) or any(
                        self._refreshes.busy(u) for u in self.graph.upstream(name)):
                    # recomputing, or an input view is: looked at again once that ends (its
                    # end wakes the loop), and recomputed then if an input changed meanwhile
                    continue
                if self._skip_if_upstream_failed(name):
                    continue
                versions = {u: self._version(u) for u in self.graph.upstream(name)}
                looked.update(versions)
                if versions != seen_versions.get(name):
                    for flow in self.graph.flows_of(name):
                        self._refresh(flow, quiet=name in seen_versions)
                    seen_versions[name] = versions
            self._collect(running)
            if (running or not (views or snapshots)) and \
                    not any(q.isActive for q in running.values()):
                break  # every flow ended (failed): nothing will change the views either
            if signal is not None:
                signal.wait(max(interval, 0.5), self.stop_requested, self._commit_watch(looked))
            else:
                self.stop_requested.wait(max(interval, 0.5))

    def _commit_watch(self, looked: dict[str, int]) -> Callable[[], bool] | None:
        """A check for the wait between passes: has a view's input (a local table) committed
        since this pass looked at it? Its views are then recomputed at that commit, not when
        the batch that made it ends and its progress reaches the listener."""
        logs: dict[str, tuple[DeltaLog, int]] = {}
        for name, version in looked.items():
            if version < 0:
                continue
            log = DeltaLog(self.lakehouse.path(name))
            if log.local:
                logs[name] = (log, version)
        if not logs:
            return None
        return lambda: any(log.committed_after(v) for log, v in logs.values())

    # --- streaming flows -----------------------------------------------------------------

    def _start(self, rf: ResolvedFlow) -> StreamingQuery | None:
        """Check and lock the flow's checkpoint, then start it natively or through the
        flow writer. None when it failed to start (its result says why)."""
        result = self.results.setdefault(rf.key, FlowResult(
            rf.key, describe(rf.dataset), whole=rf.output_mode == "complete"))
        key = rf.key
        # an observer written before batch_details existed still watches the other events
        report = getattr(self.observer, "batch_details", None)
        if report is not None:
            result.on_batch_details = lambda batch_id, details: report(key, batch_id, details)
        dataset = rf.dataset
        native = None
        checkpoint = self.lakehouse.checkpoint(dataset.name, rf.flow.name)
        try:
            compat.check_checkpoint(rf, checkpoint)
            self._locks[rf.key] = CheckpointLock(checkpoint, f"headwater run: {rf.key}").acquire()
            recovered = self.observer.flow_starting(rf.key, checkpoint)
            if recovered:
                self.echo(f"event log {rf.key}: {recovered} batches of an earlier run that "
                          "ended abruptly recovered from the checkpoint")
            if dataset.stored:
                self._remember_schemas(dataset.name)
            trigger = self._trigger_of(rf)
            # a continuous run's flows reading Delta tables start each batch when their
            # input commits, the interval as the floor (run/hops.py)
            wait = _interval_seconds(trigger) if self.continuous \
                and "processingTime" in trigger else None
            result.commit_driven = False
            # the flow's spark_conf while its query is defined and starts: Spark copies the
            # session's settings into the query's own session at start
            with self.graph.flow_conf(dataset, rf.flow):
                if dataset.kind == SINK:
                    query = start_sink(self.graph, rf, checkpoint, trigger)
                elif (native := native_input(self.graph, rf)) is not None:
                    query = start_native(self.graph, rf, checkpoint, native, trigger, result,
                                         self.auto_compact, commit_wait=wait)
                else:
                    query = start_stream(self.graph, rf, checkpoint, trigger, result,
                                         self.auto_compact, commit_wait=wait)
            self._locks[rf.key].watch(query)  # a lease taken over stops it (HW_LEASE_LOST)
            compat.save_state(rf, checkpoint)
        except Exception as exc:  # noqa: BLE001 - one flow's failure must not stop the others
            self._fail(result, exc)
            return None
        result.status = FlowStatus.RUNNING
        if native is not None:
            result.kind = "streaming table, native read"
            alongside = self._triggers.get(rf.key) is OVERLAP_TRIGGER
            self._status(rf.key, FlowStatus.RUNNING, native_read=native.name,
                         **({"alongside": native.name} if alongside else {}))
            self.echo(f"started   {rf.key} ({_mode(rf)}, native read of "
                      f"{native.name}{', alongside it' if alongside else ''}{_hop(result)})")
        else:
            self._status(rf.key, FlowStatus.RUNNING)
            into = f"{dataset.format} sink, " if isinstance(dataset, Sink) else ""
            self.echo(f"started   {rf.key} ({into}{_mode(rf)}, checkpoint "
                      f"{Path(checkpoint).relative_to(self.lakehouse.state_dir)}"
                      f"{_hop(result)})")
        return query

    def _trigger_of(self, rf: ResolvedFlow) -> dict[str, Any]:
        """The flow's trigger: the run's, or in a continuous run the flow's
        ``pipelines.trigger.interval`` (its spark_conf, else the pipeline's configuration),
        as in Databricks' continuous pipelines
        (https://docs.databricks.com/en/delta-live-tables/pipeline-mode.html); a triggered
        run processes each flow to the end of its input, so the interval has no meaning there."""
        trigger = self._triggers.get(rf.key, self.trigger)
        if not self.continuous or rf.key in self._triggers:
            return trigger
        interval = flow_settings(rf.dataset, rf.flow).get(TRIGGER_INTERVAL) or \
            self.lakehouse.spark.conf.get(TRIGGER_INTERVAL, None)
        if not interval:
            return trigger
        try:
            return {"processingTime": parse_interval(str(interval))}
        except HeadwaterError as exc:
            raise HeadwaterError(
                exc.code, f"{rf.flow.location}: {TRIGGER_INTERVAL}={interval!r} of flow "
                f"{rf.key}: {exc.what}", exc.why, exc.fix) from exc

    def _stop_all(self, running: dict[str, StreamingQuery]) -> None:
        """Stop each query between micro-batches (bounded wait for a running batch)."""
        for key, query in running.items():
            rf = self.graph.flows[key]
            # a commit-driven flow's trigger is active while its source waits for a commit:
            # its checkpoint says whether a batch runs
            checkpoint = self.lakehouse.checkpoint(rf.dataset.name, rf.flow.name) \
                if self.results[key].commit_driven else None
            if self._stop_between_batches(query, checkpoint):
                self.results[key].status = FlowStatus.STOPPED
                self._status(key, FlowStatus.STOPPED)

    @staticmethod
    def _stop_between_batches(query: StreamingQuery, checkpoint: str | None = None) -> bool:
        """Stop ``query`` once its running trigger ends (bounded wait); False when it had
        ended already. checkpoint: a commit-driven query's, whose batch (planned in its
        offset log, not yet in its commit log) is waited for instead of its trigger."""
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while query.isActive and time.monotonic() < deadline and (
                query.status.get("isTriggerActive") if checkpoint is None
                else not between_batches(checkpoint)):
            time.sleep(0.05)
        if not query.isActive:
            return False
        query.stop()
        return True

    def _collect(self, running: dict[str, StreamingQuery]) -> bool:
        """Count finished batches; settle ended queries. True if a flow was restarted."""
        restarts = []
        for key, query in running.items():
            result = self.results[key]
            if result.status not in (FlowStatus.RUNNING, FlowStatus.STOPPED):
                continue
            active = query.isActive  # asked first: a batch that ends meanwhile is counted
            count_batches(result, query)
            if active:
                continue
            self.observer.query_ended(key, query)
            error: BaseException | None = query.exception()
            lock = self._locks.get(key)
            if error is None and lock is not None and lock.lost_error is not None:
                error = lock.lost_error
            code = find_code(error) if error is not None else None
            if code is not None and code[0] in SCHEMA_RESTART_CODES \
                    and result.schema_changes < MAX_SCHEMA_RESTARTS:
                result.schema_changes += 1
                self._status(key, FlowStatus.RESTARTING, code[1].split(" Why:")[0])
                self.echo(f"evolved   {key}: {code[1].split(' Why:')[0]} "
                          "Restarting with the new schema.")
                self._release(key)
                restarts.append(key)
                continue
            if is_worker_start_timeout(error) and self._triggers.get(key) is OVERLAP_TRIGGER:
                # started alongside its input, whose work kept the machine too busy: it
                # starts again once its input is done, as any other flow
                del self._triggers[key]
                self._waiting.add(self.graph.flows[key].dataset.name)
                self._alone.add(self.graph.flows[key].dataset.name)
                result.status = FlowStatus.QUEUED
                self._status(key, FlowStatus.QUEUED, "Spark's Python worker did not start "
                             "within 10 s (machine busy): waiting for the input to finish")
                self.echo(f"waiting   {key}: Spark's Python worker did not start within 10 s "
                          "(machine busy); it starts again once its input is done.")
                self._release(key)
                continue
            if is_worker_start_timeout(error) and result.worker_restarts < MAX_WORKER_RESTARTS:
                result.worker_restarts += 1
                self._status(key, FlowStatus.RESTARTING, "Spark's Python worker did not start "
                             "within 10 s (machine busy)")
                self.echo(f"restart   {key}: Spark's Python worker did not start within 10 s "
                          "(machine busy); starting again from the checkpoint.")
                self._release(key)
                restarts.append(key)
                continue
            if error is not None:
                self._fail(result, error)
            else:
                _clean_committed(query)  # the last batch's files (no later batch will)
                if result.status == FlowStatus.RUNNING:
                    result.status = FlowStatus.COMPLETED
                    self._status(key, FlowStatus.COMPLETED, summary(result),
                                 rows_written=result.rows_written)
                    self.echo(f"completed {key}: {summary(result)}")
            self._release(key)
        for key in restarts:
            restarted = self._start(self.graph.flows[key])
            if restarted is not None:
                running[key] = restarted
        return bool(restarts)

    def _release(self, key: str) -> None:
        lock = self._locks.pop(key, None)
        if lock is not None:
            lock.release()

    # --- AUTO CDC FROM SNAPSHOT -----------------------------------------------------------

    def _source_version(self, rf: ResolvedFlow) -> tuple[int, ...] | None:
        """The Delta versions a table or query source reads (new ones mean a new snapshot);
        None for a function source, which is asked every time."""
        assert rf.flow.snapshot is not None
        if not rf.flow.snapshot.source.periodic:
            return None
        reads = {r.name for r in rf.reads} | self.graph.upstream(rf.dataset.name)
        return tuple(self._version(name) for name in sorted(reads))  # views: -1, as missing

    def _apply_snapshots(self, rf: ResolvedFlow, quiet: bool = False) -> None:
        """Apply the source's new snapshots (its checkpoint folder locked meanwhile); their
        counts go to the flow's result and to one status event for this call."""
        result = self.results.setdefault(rf.key, FlowResult(rf.key, "streaming table, "
                                                                    "from snapshots"))
        checkpoint = self.lakehouse.checkpoint(rf.dataset.name, rf.flow.name)
        try:
            started = time.monotonic()
            self._locks[rf.key] = CheckpointLock(checkpoint, f"headwater run: {rf.key}"
                                                 ).acquire()
            if result.status != FlowStatus.RUNNING:
                result.status = FlowStatus.RUNNING
                self._status(rf.key, FlowStatus.RUNNING)
            with self.graph.flow_conf(rf.dataset, rf.flow):
                applied = apply_new_snapshots(self.graph, rf, checkpoint, self.stop_requested)
            rows, cdc = 0, {"upserted": 0, "deleted": 0, "history_rows": 0}
            for snapshot in applied:
                result.batches += 1
                rows += snapshot.deleted + max(snapshot.upserted, snapshot.history_rows)
                for name, n in snapshot.counts().items():
                    cdc[name] += n
                    result.cdc[name] = result.cdc.get(name, 0) + n
            result.rows_written += rows
            result.status = FlowStatus.COMPLETED if not self.continuous else FlowStatus.RUNNING
            versions = [str(s.version) for s in applied]
            if applied or not self.continuous:  # a continuous run's idle polls log nothing
                # this call's snapshots (a triggered run: the run's), as a batch's event has
                self._status(rf.key, FlowStatus(result.status), summary(result),
                             rows_written=rows, cdc=cdc, snapshots=versions,
                             seconds=round(time.monotonic() - started, 3))
            if not quiet or applied:
                self.echo(f"snapshots {rf.key}: {len(applied)} applied"
                          + (f" (versions {', '.join(versions)})" if versions else "")
                          + f", {summary(result)}")
        except Exception as exc:  # noqa: BLE001 - one flow's failure must not stop the others
            self._fail(result, exc)
        finally:
            self._release(rf.key)

    # --- materialized views --------------------------------------------------------------

    def _refresh(self, rf: ResolvedFlow, quiet: bool = False) -> None:
        """Recompute the view ``rf`` writes: on a refresh thread (run/refresh.py), its result
        unsettled until the loop collects its outcome; or here, on the run's loop, when the
        flow has Spark settings of its own (``spark_conf``). Those are set on the session the
        whole run shares, and they act both where the definition runs (user code given the
        pipeline's one session; settings fixed into the plan when it is analyzed) and where
        its jobs are planned, so they cannot be confined to one thread: on the loop, with the
        graph's lock held (flow_conf), nothing else of the run uses the session meanwhile
        but flows whose queries copied its settings when they started."""
        result = self.results.setdefault(rf.key, FlowResult(rf.key, "materialized view"))
        if flow_settings(rf.dataset, rf.flow):
            try:
                started = time.monotonic()
                with self.graph.flow_conf(rf.dataset, rf.flow):
                    rows, counts = recompute(self.graph, rf)
                self._refreshed(Refreshed(rf, quiet, time.monotonic() - started, rows, counts))
            except Exception as exc:  # noqa: BLE001 - one flow's failure must not stop the others
                self._fail(result, exc)
            return
        result.status = FlowStatus.QUEUED  # unsettled until it ends: what reads it waits
        self._refreshes.submit(rf, quiet)
        self._start_refreshes()

    def _start_refreshes(self) -> None:
        """Start queued recomputes while a refresh thread is free (none after a stop)."""
        if self.stop_requested.is_set():
            return
        for rf in self._refreshes.start_queued():
            self.results[rf.key].status = FlowStatus.RUNNING
            self._status(rf.key, FlowStatus.RUNNING)

    def _settle_refreshes(self) -> None:
        """The loop's part of the views' recomputes: each ended one settled (its status,
        counts and messages, or its failure), then queued ones started."""
        first: BaseException | None = None
        for ended in self._refreshes.ended():
            result = self.results[ended.rf.key]
            try:
                if ended.error is None:
                    self._refreshed(ended)
                elif isinstance(ended.error, Exception):
                    self._fail(result, ended.error)
                else:
                    raise ended.error  # as on the loop: SystemExit and kin end the run
            except BaseException as exc:  # noqa: BLE001 - every outcome settled, then raised
                if result.status in UNSETTLED:
                    result.status = FlowStatus.FAILED
                first = first or exc
        if first is not None:
            raise first
        self._start_refreshes()

    def _drop_queued_refreshes(self, failed: bool = False) -> None:
        """A stop (or the run failed): the views whose recompute has not started never start
        it."""
        why = "the run failed" if failed else "the run stopped"
        for rf in self._refreshes.drop_queued():
            result = self.results[rf.key]
            result.status = FlowStatus.STOPPED
            self._status(rf.key, FlowStatus.STOPPED, f"{why} before its recompute started")
            self.echo(f"stopped   {rf.key}: {why} before its recompute started")

    def _end_refreshes(self, failed: bool = False) -> None:
        """Wait for the views' recomputes as the run ends, each settled with its outcome.
        Without a stop every queued one runs. On a stop (or when the run ``failed``) none
        starts any more and the running ones end: a recompute is not cut off (a view with a
        quarantine or a definition of its own commits more than once), as a stop waited for
        a view computing on the run's loop before."""
        if failed:
            self._drop_queued_refreshes(failed=True)  # first: nothing below may start one
        while self._refreshes.active:
            if self.stop_requested.is_set():
                self._drop_queued_refreshes()
            self._refreshes.wait(0.1)
            self._settle_refreshes()
        self._refreshes.close()

    def _refreshed(self, ended: Refreshed) -> None:
        """A view's recompute ended well: its result, status event and message."""
        rf = ended.rf
        result = self.results[rf.key]
        result.rows_written, counts = ended.rows, ended.counts
        for metrics_name, values in counts.items():
            add_expectation_counts(result, metrics_name[len(EXPECTATIONS_METRICS):], values)
        result.status = FlowStatus.COMPLETED
        result.batches += 1
        extra = {"expectations": counts} if counts else {}
        self._status(rf.key, FlowStatus.COMPLETED,
                     f"{result.rows_written} rows{expectation_text(result)}",
                     rows_written=result.rows_written, seconds=round(ended.seconds, 3),
                     **extra)
        if not ended.quiet:
            self.echo(f"refreshed {rf.key}: {result.rows_written} rows in "
                      f"{ended.seconds:.1f}s{expectation_text(result)}")

    # --- bookkeeping ---------------------------------------------------------------------

    def _remember_schemas(self, name: str) -> None:
        """Before a streaming table's flow starts: the Delta schemas of the table and its side
        tables as the catalog knows them (the table is created now if missing, registered
        with this schema)."""
        self.graph.ensure_table(name)
        for table in (name, name + QUARANTINE_SUFFIX, name + LATE_SUFFIX):
            if table not in self._schemas_seen:
                self._schemas_seen[table] = self._schema_of(table)

    def _register_changed(self) -> None:
        """After the run: Spark's catalog learns the new schema of every table whose flows
        changed it (new columns merged by a write) or created it (a side table). Views are
        registered by their replace; other tables were not written."""
        for table, before in self._schemas_seen.items():
            if self.lakehouse.exists(table) and (before is None
                                                 or self._schema_of(table) != before):
                self.lakehouse.register(table)

    def _schema_of(self, name: str) -> str | None:
        if not self.lakehouse.exists(name):
            return None
        try:
            return str(open_table(self.lakehouse.path(name)).schema().to_json())
        except Exception:  # noqa: BLE001 - unreadable now: registered again at the end
            return None

    def _version(self, name: str) -> int:
        """The table's newest version (its log folder listed: no snapshot loaded); -1 when
        it does not exist yet."""
        try:
            return DeltaLog(self.lakehouse.path(name)).latest_version()
        except Exception:  # noqa: BLE001 - not created yet
            return -1

    def _skip_if_upstream_failed(self, name: str) -> bool:
        failed = sorted(
            r.key for r in self.results.values()
            if FlowStatus(r.status).failed_or_skipped
            and r.key.split("/")[0] in self.graph.upstream(name))
        if not failed:
            return False
        for rf in self.graph.flows_of(name):
            earlier = self.results.get(rf.key)
            # no result yet, or queued again (a flow started alongside its input whose worker
            # missed its start window waits for the input): settle it, or the run never ends
            if earlier is None or earlier.status in (FlowStatus.QUEUED, FlowStatus.PENDING):
                self.results[rf.key] = FlowResult(rf.key, rf.dataset.kind, FlowStatus.SKIPPED,
                                                  f"upstream failed: {', '.join(failed)}")
                self._status(rf.key, FlowStatus.SKIPPED, f"upstream failed: {', '.join(failed)}")
                self.echo(f"skipped   {rf.key}: upstream {', '.join(failed)} failed")
        return True

    def _fail(self, result: FlowResult, exc: BaseException) -> None:
        error = unwrap(exc) if not isinstance(exc, HeadwaterError) else exc
        if not isinstance(error, HeadwaterError):
            error = translate_flow_failure(result.key, exc)
        result.status = FlowStatus.FAILED
        result.error = str(error)
        self._status(result.key, FlowStatus.FAILED, result.error)
        self.echo(f"FAILED    {result.key}: {result.error}")
        self._release(result.key)


def _clean_committed(query: StreamingQuery) -> None:
    """cleanSource for the files of a cleanly ended query's last batch."""
    progress = query.lastProgress
    if not progress:
        return
    for index_path, seq in committed_offsets(progress.get("sources", []), "endOffset"):
        clean_quietly(index_path, seq)


def _hop(result: FlowResult) -> str:
    """What the start message says of a commit-driven flow (run/hops.py)."""
    return ", batches on its input's commits" if result.commit_driven else ""


def _mode(rf: ResolvedFlow) -> str:
    """The flow's output mode for the run's messages; says why when the query chose it."""
    if rf.dataset.output_mode is None and rf.output_mode == "complete":
        return "complete: an aggregation without watermark, rewritten whole each batch"
    return rf.output_mode


def _interval_seconds(trigger: dict[str, Any]) -> float:
    text = str(trigger.get("processingTime", "500 milliseconds"))
    number, unit = text.split()
    scale = {"milliseconds": 0.001, "seconds": 1, "minutes": 60, "hours": 3600}[unit]
    return float(number) * scale
