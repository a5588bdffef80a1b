"""Running a pipeline graph: triggered (every flow to the end of its input) or continuous.

Triggered runs go in waves by dependency depth: the flows of one wave run together, and a
wave starts when the one before it ended, so every table sees all of its inputs' new rows.
Materialized views are recomputed after their inputs, in one overwrite commit each.
Continuous runs start every streaming flow at once on a processing-time trigger and recompute
materialized views whenever an input table got a new version.

A failed flow stops only itself and the datasets downstream of it. A stop request (SIGINT,
SIGTERM) waits for each query's running micro-batch to end before stopping it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from headwater.spark.checkpoint_lock import CheckpointLock
from headwater.conf.layout import (
    EXPECTATIONS_METRICS, FLOW_STATE, INGEST_METRICS, LATE_SUFFIX, QUARANTINE_SUFFIX,
)
from headwater.errors import HeadwaterError, find_code, unwrap
from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.definitions import MATERIALIZED_VIEW, TABLE
from headwater.pipeline.graph import Graph, ResolvedFlow
from headwater.monitor.run import RunMonitor

if TYPE_CHECKING:
    from headwater.monitor.display import Display
    from pyspark.sql.streaming import StreamingQuery

# A flow stopped by a schema change it can resume from restarts by itself: a file source
# that saved new columns, or a Delta input that gained columns while the flow ran.
SCHEMA_RESTART_CODES = ("HW_INGEST_SCHEMA_EVOLVED", "HW_SOURCE_SCHEMA_CHANGED")
MAX_SCHEMA_RESTARTS = 20  # per flow and run; a feed changing more often is likely broken


@dataclass
class FlowResult:
    key: str
    kind: str
    status: str = "pending"  # completed | failed | skipped | stopped | running
    error: str | None = None
    batches: int = 0
    rows_written: int = 0
    quarantined: int = 0
    late_rows: int = 0
    rescued: int = 0      # ingested rows with rescued data (malformed ones included)
    malformed: int = 0
    schema_changes: int = 0
    expectations: dict[str, int] = field(default_factory=dict)
    counted: set[tuple[str, int]] = field(default_factory=set, repr=False)  # (run id, batch)

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "stopped")


class Runner:
    def __init__(self, graph: Graph, trigger: dict[str, Any], continuous: bool,
                 select: list[str] | None = None,
                 echo: Callable[[str], None] = print, pipeline: str = "pipeline",
                 event_log: bool = True, display: "Display | None" = None) -> None:
        self.graph = graph
        self.lakehouse = graph.lakehouse
        self.trigger = trigger
        self.continuous = continuous
        self._t0 = time.monotonic()
        self.display = display
        self.echo = display.echo if display is not None else \
            (lambda text: echo(f"[{time.monotonic() - self._t0:7.1f}s] {text}"))
        self.pipeline = pipeline
        self.event_log = event_log
        self.monitor: RunMonitor | None = None
        self.stop_requested = threading.Event()
        datasets = graph.stored()
        if select:
            chosen = graph.datasets_named(select, "--select")
            datasets = [d for d in datasets if d in chosen]
        self.datasets = datasets
        self.results: dict[str, FlowResult] = {}
        self._locks: dict[str, CheckpointLock] = {}  # by flow key

    # --- the two modes -------------------------------------------------------------------

    def run(self) -> list[FlowResult]:
        self.monitor = self._monitor()
        if self.display is not None:
            self.display.watch(self.monitor)
        self.monitor.start(self.lakehouse.spark)
        try:
            if self.continuous:
                self._run_continuous()
            else:
                self._run_triggered()
        except BaseException:
            for query in self.lakehouse.spark.streams.active:
                query.stop()
            raise
        finally:
            for lock in self._locks.values():
                lock.release()
            self.monitor.finish(list(self.results.values()), self.stop_requested.is_set())
            if self.display is not None:
                self.display.close()
            if self.monitor.log is not None and self.monitor.log.failures:
                self.echo(f"warning: {self.monitor.log.failures[-1]} (the pipeline's tables "
                          f"are unaffected; {self.monitor.log.pending} event rows not logged)")
            self.lakehouse.refresh()
        return list(self.results.values())

    def _monitor(self) -> RunMonitor:
        registry = self.graph.registry.datasets
        flows = {rf.key: ("streaming table" if registry[name].kind == TABLE
                          else "materialized view")
                 for name in self.datasets for rf in self.graph.flows_of(name)}
        graph = {}
        for name, dataset in registry.items():
            reads = [r for rf in self.graph.flows_of(name) for r in rf.reads]
            graph[name] = {"kind": dataset.kind,
                           "upstream": sorted({r.name for r in reads}),
                           # a streaming table reading no dataset or table reads files
                           "reads_files": dataset.kind == TABLE
                           and not any(r.streaming for r in reads)}
        mode = f"continuous, {self.trigger.get('processingTime')}" if self.continuous \
            else "triggered"
        return RunMonitor(self.lakehouse.root, self.pipeline, mode, flows,
                          event_log=self.event_log, graph=graph)

    def _status(self, key: str, status: str, message: str | None = None, **details: Any) -> None:
        if self.monitor is not None:
            self.monitor.flow_status(key, status, message, **details)

    def _depths(self) -> dict[str, int]:
        depth: dict[str, int] = {}
        for name in self.graph.stored():
            ups = [u for u in self.graph.upstream(name) if u in depth]
            depth[name] = 1 + max((depth[u] for u in ups), default=-1)
        return {n: depth[n] for n in self.datasets}

    def _run_triggered(self) -> None:
        depths = self._depths()
        for level in sorted(set(depths.values())):
            if self.stop_requested.is_set():
                break
            wave = [n for n in self.datasets if depths[n] == level]
            running: dict[str, "StreamingQuery"] = {}
            for name in wave:
                if self._skip_if_upstream_failed(name):
                    continue
                if self.graph.registry.datasets[name].kind == TABLE:
                    for flow in self.graph.flows_of(name):
                        query = self._start(flow)
                        if query is not None:
                            running[flow.key] = query
            self._await(running)
            for name in wave:
                if self.graph.registry.datasets[name].kind == MATERIALIZED_VIEW \
                        and not self.stop_requested.is_set() \
                        and not self._skip_if_upstream_failed(name):
                    for flow in self.graph.flows_of(name):
                        self._refresh(flow)

    def _run_continuous(self) -> None:
        running: dict[str, "StreamingQuery"] = {}
        for name in self.datasets:
            if self.graph.registry.datasets[name].kind == TABLE:
                for flow in self.graph.flows_of(name):
                    query = self._start(flow)
                    if query is not None:
                        running[flow.key] = query
        views = [n for n in self.datasets
                 if self.graph.registry.datasets[n].kind == MATERIALIZED_VIEW]
        seen_versions: dict[str, dict[str, int]] = {}
        interval = _interval_seconds(self.trigger)
        while not self.stop_requested.is_set():
            for name in views:
                if self._skip_if_upstream_failed(name):
                    continue
                versions = {u: self._version(u) for u in self.graph.upstream(name)}
                if versions != seen_versions.get(name):
                    for flow in self.graph.flows_of(name):
                        self._refresh(flow, quiet=name in seen_versions)
                    seen_versions[name] = versions
            self._collect(running)
            if (running or not views) and not any(q.isActive for q in running.values()):
                break  # every flow ended (failed): nothing will change the views either
            self.stop_requested.wait(max(interval, 0.5))
        self._stop_all(running)
        self._collect(running)

    # --- streaming flows -----------------------------------------------------------------

    def _start(self, rf: ResolvedFlow) -> "StreamingQuery | None":
        result = self.results.setdefault(rf.key, FlowResult(rf.key, "streaming table"))
        dataset = rf.dataset
        checkpoint = self.lakehouse.checkpoint(dataset.name, rf.flow.name)
        try:
            self._check_checkpoint(rf, checkpoint)
            lock = CheckpointLock(checkpoint, f"headwater run: {rf.key}").acquire()
            self._locks[rf.key] = lock
            recovered = self.monitor.before_start(rf.key, checkpoint) if self.monitor else 0
            if recovered:
                self.echo(f"event log {rf.key}: {recovered} batches of an earlier run that "
                          "ended abruptly recovered from the checkpoint")
            native = self._native_input(rf)
            if native is not None:
                query = self._start_native(rf, checkpoint, native)
                self._save_state(rf, checkpoint)
                result.status = "running"
                result.kind = "streaming table, native read"
                self._status(rf.key, "running", native_read=native.name)
                self.echo(f"started   {rf.key} ({dataset.output_mode}, native read of "
                          f"{native.name})")
                return query
            df = self.graph.rebuild(rf)
            rules = dataset.expectations
            if rules:
                df = expect_mod.observe(df, rules, dataset.name)
            late = None
            if dataset.keep_late_rows:
                from headwater.pipeline.late import LateRows

                late = LateRows.prepare(df, dataset.name, dataset.output_mode)
                df = late.stream_df
            writer = (df.writeStream.queryName(rf.key).trigger(**self.trigger)
                      .option("checkpointLocation", checkpoint))
            # Every flow writes through foreachBatch: Spark's own parquet writer writes the
            # files and the driver commits them with txn(flow, batch id), exactly once.
            writer = writer.outputMode(dataset.output_mode).foreachBatch(
                self._batch_writer(rf, checkpoint, late))
            query = writer.start()
            self._save_state(rf, checkpoint)
        except Exception as exc:  # noqa: BLE001 - one flow's failure must not stop the others
            self._fail(result, exc)
            return None
        result.status = "running"
        self._status(rf.key, "running")
        self.echo(f"started   {rf.key} ({dataset.output_mode}, checkpoint "
                  f"{Path(checkpoint).relative_to(self.lakehouse.root)})")
        return query

    # --- stateless Delta-to-Delta flows at native speed ---------------------------------

    def _native_input(self, rf: ResolvedFlow) -> Any:
        """The one Delta stream a stateless flow reads, when the flow can run natively.

        Such a flow's output for a micro-batch is its definition applied to that batch's
        rows, so the batch can be read by Spark's parquet reader (not through Python) and
        the definition re-applied to it. Expectations and late rows keep the streaming plan:
        their counts belong in the query's own progress.
        """
        from headwater.delta.log import DeltaLog
        from headwater.delta.native import natively_readable
        from headwater.spark.plan import analyzed, node_name, nodes

        dataset = rf.dataset
        if dataset.expectations or dataset.keep_late_rows or dataset.output_mode != "append":
            return None
        if rf.flow.sql is not None:
            return None  # spark.sql reads its tables itself: no batch can be substituted
        streams = [r for r in rf.reads if r.streaming]
        if len(streams) != 1:
            return None
        source = self.graph.registry.datasets.get(streams[0].name)
        if source is not None and not source.stored:
            return None  # a view: its rows are a query, not files
        leaves = 0
        for node in nodes(analyzed(rf.df)):
            if not node.isStreaming():
                continue
            if node_name(node) in _STATEFUL_NODES:
                return None
            if node.children().size() == 0:
                leaves += 1
        if leaves != 1:
            return None  # another stream (files, rate, ...) feeds this flow too
        store = self.graph.store_for(streams[0].name)
        table = DeltaLog(store.path(streams[0].name)).table()
        return streams[0] if natively_readable(table) else None

    def _start_native(self, rf: ResolvedFlow, checkpoint: str, read: Any) -> "StreamingQuery":
        lake = self.lakehouse
        spark = lake.spark
        source_path = self.graph.store_for(read.name).path(read.name)
        files = (spark.readStream.format("hw_delta_files").option("path", source_path)
                 .options(**dict(read.options)).load())
        schema = lake.read_stream(read.name).schema
        name = rf.dataset.name
        app_id = f"headwater-{rf.key}"
        result = self.results[rf.key]

        def write_batch(batch, batch_id: int) -> None:
            files = batch.collect()
            if any(row.has_dv for row in files):
                raise HeadwaterError(
                    "HW_NATIVE_READ_DV", f"Flow {rf.key}: {read.name} gained deletion vectors "
                    "while the flow read it with Spark's parquet reader.",
                    "Spark's reader cannot apply deletion vectors; the rows would come back.",
                    f"Run the flow again: it then reads {read.name} through headwater's reader.")
            paths = [row.path for row in files]
            rows = spark.read.schema(schema).parquet(*paths) if paths else \
                spark.createDataFrame([], schema)
            df = self.graph.rebuild(rf, {read.name: rows})
            result.rows_written += write_table(df, lake.path(name), "append", (app_id, batch_id))

        return (files.writeStream.queryName(rf.key).trigger(**self.trigger)
                .option("checkpointLocation", checkpoint).foreachBatch(write_batch).start())

    def _batch_writer(self, rf: ResolvedFlow, checkpoint: str, late: Any):
        dataset = rf.dataset
        lake = self.lakehouse
        name = dataset.name
        app_id = f"headwater-{rf.key}"
        rules = dataset.expectations
        drops = any(r.action == "drop" for r in rules)
        keys = dataset.keys
        result = self.results[rf.key]

        # Persisting would make Spark report the expectations' observed counts from the
        # caching job only; cache just for late rows, whose split re-reads the aggregate.
        cache = late is not None and not rules

        def write_batch(batch, batch_id: int) -> None:
            if cache:
                batch.persist()
            try:
                rows = batch
                if late is not None:
                    rows, late_rows = late.split(batch, batch_id, checkpoint)
                    result.late_rows += _append_side(lake, late_rows, name + LATE_SUFFIX,
                                                     app_id, batch_id)
                if rules:
                    rows, bad = expect_mod.split(rows, rules, name, batch_id)
                    if drops:
                        result.quarantined += _append_side(
                            lake, bad, name + QUARANTINE_SUFFIX, app_id, batch_id)
                if dataset.output_mode == "update":
                    from headwater.delta.merge import merge_batch
                    from headwater.spark.plan import group_keys

                    merge_keys = keys or group_keys(rf.df)
                    merge_batch(rows, lake.path(name), merge_keys, app_id, batch_id)
                else:
                    mode = "overwrite" if dataset.output_mode == "complete" else "append"
                    written = write_table(rows, lake.path(name), mode, (app_id, batch_id))
                    # complete mode rewrites the whole result: count the latest, not the sum
                    result.rows_written = written if mode == "overwrite" else \
                        result.rows_written + written
            finally:
                if cache:
                    batch.unpersist()

        return write_batch

    def _await(self, running: dict[str, "StreamingQuery"]) -> None:
        polls = 0
        while True:
            while any(q.isActive for q in running.values()):
                if self.stop_requested.wait(0.1):
                    self._stop_all(running)
                    self._collect(running)
                    return
                polls += 1
                if polls % 20 == 0:  # count batches while they run: recentProgress is short
                    self._collect(running)
            if not self._collect(running):
                return  # nothing restarted: the wave is done

    def _stop_all(self, running: dict[str, "StreamingQuery"]) -> None:
        """Stop each query between micro-batches (bounded wait for a running batch)."""
        for key, query in running.items():
            deadline = time.monotonic() + 120
            while query.isActive and query.status.get("isTriggerActive") \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            if query.isActive:
                query.stop()
                self.results[key].status = "stopped"
                self._status(key, "stopped")

    def _collect(self, running: dict[str, "StreamingQuery"]) -> bool:
        """Count finished batches; settle ended queries. True if a flow was restarted."""
        restarts = []
        for key, query in running.items():
            result = self.results[key]
            if result.status not in ("running", "stopped"):
                continue
            for p in query.recentProgress:
                if (p.runId, p.batchId) in result.counted:
                    continue  # progress is polled repeatedly: count each batch once
                result.counted.add((p.runId, p.batchId))
                result.batches += 1
                for metrics_name, row in (p.observedMetrics or {}).items():
                    if metrics_name.startswith(INGEST_METRICS):
                        result.rescued += int(row["rescued_rows"] or 0)
                        result.malformed += int(row["malformed_rows"] or 0)
                    if metrics_name.startswith(EXPECTATIONS_METRICS):
                        for metric, value in row.asDict().items():
                            result.expectations[metric] = result.expectations.get(metric, 0) + \
                                int(value or 0)
            if query.isActive:
                continue
            if self.monitor is not None:
                self.monitor.query_ended(key, query)
            error = query.exception()
            code = find_code(error) if error is not None else None
            if code is not None and code[0] in SCHEMA_RESTART_CODES \
                    and result.schema_changes < MAX_SCHEMA_RESTARTS:
                result.schema_changes += 1
                self._status(key, "restarting", code[1].split(" Why:")[0])
                self.echo(f"evolved   {key}: {code[1].split(' Why:')[0]} "
                          "Restarting with the new schema.")
                self._release(key)
                restarts.append(key)
                continue
            if error is not None:
                self._fail(result, error)
            else:
                _clean_committed(query)  # the last batch's files (no later batch will)
                if result.status == "running":
                    result.status = "completed"
                    self._status(key, "completed", _summary(result),
                                 rows_written=result.rows_written)
                    self.echo(f"completed {key}: {_summary(result)}")
            self._release(key)
        for key in restarts:
            query = self._start(self.graph.flows[key])
            if query is not None:
                running[key] = query
        return bool(restarts)

    def _release(self, key: str) -> None:
        lock = self._locks.pop(key, None)
        if lock is not None:
            lock.release()

    # --- materialized views --------------------------------------------------------------

    def _refresh(self, rf: ResolvedFlow, quiet: bool = False) -> None:
        result = self.results.setdefault(rf.key, FlowResult(rf.key, "materialized view"))
        dataset = rf.dataset
        name = dataset.name
        try:
            started = time.monotonic()
            df = self.graph.rebuild(rf)
            bad = None
            if dataset.expectations:
                df, bad = expect_mod.split(df, dataset.expectations, name, 0)
            result.rows_written = self._replace_table(rf, df)
            if bad is not None and any(r.action == "drop" for r in dataset.expectations):
                # A recomputed view's quarantine is recomputed with it.
                self.lakehouse.write(bad, name + QUARANTINE_SUFFIX, mode="overwrite")
            result.status = "completed"
            result.batches += 1
            self._status(rf.key, "completed", f"{result.rows_written} rows",
                         rows_written=result.rows_written,
                         seconds=round(time.monotonic() - started, 3))
            if not quiet:
                self.echo(f"refreshed {rf.key}: {result.rows_written} rows in "
                          f"{time.monotonic() - started:.1f}s")
        except Exception as exc:  # noqa: BLE001
            self._fail(result, exc)

    def _replace_table(self, rf: ResolvedFlow, df: Any) -> int:
        """One overwrite commit; a changed schema rebuilds the table (nothing reads it
        incrementally: it is recomputed whole)."""
        from headwater.delta.schema import as_nullable

        name = rf.dataset.name
        current = self.lakehouse.read(name).schema
        if as_nullable(current).simpleString() != as_nullable(df.schema).simpleString():
            self.lakehouse.drop(name)
            self.lakehouse.drop(name + QUARANTINE_SUFFIX)
            self.lakehouse.create_table(name, df.schema, rf.dataset.partition_by,
                                        rf.dataset.comment, rf.dataset.properties)
        return write_table(df, self.lakehouse.path(name), "overwrite")

    # --- bookkeeping ---------------------------------------------------------------------

    def _version(self, name: str) -> int:
        from deltalake import DeltaTable

        try:
            return DeltaTable(self.lakehouse.path(name)).version()
        except Exception:  # noqa: BLE001 - not created yet
            return -1

    def _skip_if_upstream_failed(self, name: str) -> bool:
        failed = sorted(
            r.key for r in self.results.values()
            if r.status in ("failed", "skipped") and r.key.split("/")[0] in
            self.graph.upstream(name))
        if not failed:
            return False
        for rf in self.graph.flows_of(name):
            if rf.key not in self.results:
                self.results[rf.key] = FlowResult(rf.key, rf.dataset.kind, "skipped",
                                                  f"upstream failed: {', '.join(failed)}")
                self._status(rf.key, "skipped", f"upstream failed: {', '.join(failed)}")
                self.echo(f"skipped   {rf.key}: upstream {', '.join(failed)} failed")
        return True

    def _fail(self, result: FlowResult, exc: BaseException) -> None:
        error = unwrap(exc) if not isinstance(exc, HeadwaterError) else exc
        if not isinstance(error, HeadwaterError):
            error = _translate_spark_failure(result.key, exc)
        result.status = "failed"
        result.error = str(error)
        self._status(result.key, "failed", result.error)
        self.echo(f"FAILED    {result.key}: {result.error}")
        self._release(result.key)

    def _check_checkpoint(self, rf: ResolvedFlow, checkpoint: str) -> None:
        """Refuse a restart the checkpoint cannot survive, before Spark fails obscurely."""
        state_file = Path(checkpoint) / FLOW_STATE
        if not state_file.exists():
            return
        saved = json.loads(state_file.read_text())
        now = _flow_state(rf)
        changes = [k for k in ("output_mode", "stateful", "keep_late_rows")
                   if saved.get(k) != now[k]]
        if now["stateful"] and saved.get("schema") != now["schema"]:
            changes.append("the aggregate's output columns")
        if changes:
            raise HeadwaterError(
                "HW_CHECKPOINT_INCOMPATIBLE",
                f"Flow {rf.key} changed in a way its checkpoint cannot survive: "
                f"{', '.join(changes)}.",
                "The checkpoint holds offsets and aggregation state computed by the old "
                "definition; resuming would mix the two.",
                f"Run `headwater run --full-refresh {rf.dataset.name}` to rebuild the table "
                "(and its downstream streaming tables) from the start.")

    def _save_state(self, rf: ResolvedFlow, checkpoint: str) -> None:
        path = Path(checkpoint) / FLOW_STATE
        path.write_text(json.dumps(_flow_state(rf)))


_STATEFUL_NODES = {
    "Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "Join", "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPySpark",
    "EventTimeWatermark", "GlobalLimit", "LocalLimit", "Sort", "Window", "Distinct",
    "CollectMetrics", "Sample",
}


def _flow_state(rf: ResolvedFlow) -> dict[str, Any]:
    from headwater.spark.plan import analyzed, node_name, nodes

    stateful = any(node_name(n) in ("Aggregate", "Deduplicate", "Join", "FlatMapGroupsWithState")
                   and n.isStreaming() for n in nodes(analyzed(rf.df)))
    return {"output_mode": rf.dataset.output_mode, "stateful": stateful,
            "keep_late_rows": rf.dataset.keep_late_rows,
            "schema": rf.df.schema.simpleString()}


def _append_side(lake: Any, df: Any, name: str, app_id: str, batch_id: int) -> int:
    """Quarantined or late rows: a side table, created at the first such row."""
    if df.isEmpty():
        return 0
    lake.create_table(name, df.schema)
    return write_table(df, lake.path(name), "append", (app_id, batch_id))


def write_table(df: Any, path: str, mode: str, txn: tuple[str, int] | None = None,
                merge_schema: bool = True) -> int:
    """Spark's parquet writer plus a Delta commit; the Python writer where a table needs it.

    Pipeline tables follow their query's schema: new columns (a file source's schema
    evolved) are added to the table; a changed type is still an error.

    By path: foreachBatch runs in a clone of the session taken at query start, which does not
    see the per-table data sources registered later.
    """
    from headwater.delta.native import write_native

    written = write_native(df, path, mode, txn, merge_schema=merge_schema)
    if written is None:
        writer = df.write.format("delta").mode(mode).option("mergeSchema", merge_schema)
        if txn is not None:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
        writer.save(path)
        return 0  # the Python writer does not report counts
    return written


def _translate_spark_failure(key: str, exc: BaseException) -> HeadwaterError:
    text = str(exc)
    first = _error_line(text) or type(exc).__name__
    if "STATE_STORE" in text or "state schema" in text.lower() or "STATEFUL_OPERATOR" in text:
        return HeadwaterError(
            "HW_CHECKPOINT_INCOMPATIBLE", f"Flow {key} cannot resume from its checkpoint: "
            f"{first[:400]}", "The query's state no longer matches its definition.",
            f"Run `headwater run --full-refresh {key.split('/')[0]}`.")
    return HeadwaterError("HW_FLOW_FAILED", f"Flow {key} failed: {first[:600]}",
                          "Spark stopped the query with an error.",
                          "Read the error above; fix the definition or the input and run again.")


def _clean_committed(query: "StreamingQuery") -> None:
    """cleanSource for the files of a cleanly ended query's last batch."""
    from headwater.ingest.clean import clean_quietly, committed_offsets

    progress = query.lastProgress
    if not progress:
        return
    for index_path, seq in committed_offsets(progress.get("sources", []), "endOffset"):
        clean_quietly(index_path, seq)


def _summary(result: FlowResult) -> str:
    parts = [f"{result.batches} batches", f"{result.rows_written} rows written"]
    if result.rescued:
        parts.append(f"{result.rescued} with rescued data ({result.malformed} malformed)")
    if result.schema_changes:
        parts.append(f"schema evolved {result.schema_changes}x")
    if result.quarantined:
        parts.append(f"{result.quarantined} quarantined")
    if result.late_rows:
        parts.append(f"{result.late_rows} late rows kept")
    return ", ".join(parts) + _expectation_text(result)


def _expectation_text(result: FlowResult) -> str:
    failed = {k[:-len("_failed")]: v for k, v in result.expectations.items()
              if k.endswith("_failed") and v}
    if not failed:
        return ""
    return "; expectations failed: " + ", ".join(f"{k}={v}" for k, v in sorted(failed.items()))


def _interval_seconds(trigger: dict[str, Any]) -> float:
    text = str(trigger.get("processingTime", "500 milliseconds"))
    number, unit = text.split()
    scale = {"milliseconds": 0.001, "seconds": 1, "minutes": 60, "hours": 3600}[unit]
    return float(number) * scale


def _error_line(text: str) -> str:
    """The line of a wrapped Spark/Python error that says what went wrong."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception)\b.*:", line) or re.search(r"\[[A-Z_.]+\]", line):
            return re.sub(r"^[\w.]*(Error|Exception):\s*", "", line)
    return lines[0] if lines else ""
