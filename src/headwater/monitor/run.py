"""One pipeline run watched: the listener, the event log, the live view and the run file.

:class:`RunMonitor` is the :class:`~headwater.monitor.observer.RunObserver` a run reports to:
the runner reports flow status changes; Spark's listener reports every micro-batch. Both go
to the event log, to the per-flow statistics that the terminal view shows, and to
``<lakehouse>/_runs/<run id>.json``, which ``headwater status`` and ``headwater stop`` read from
another terminal (it holds the process id; it is removed when the run ends).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from headwater.conf.layout import RUNS
from headwater.conf.location import AnyPath, location, state_folder
from headwater.monitor.events import EventLog, executed, now, parse_time, progress_row
from headwater.monitor.gaps import fill_from_checkpoint, progress_dict
from headwater.monitor.observer import FlowOutcome, FlowStatus, RunDescription
from headwater.spark.listener import add_json_listener, remove_json_listener


class RunView(Protocol):
    """A live view a run drives (:class:`headwater.monitor.display.Display`)."""

    def watch(self, monitor: RunMonitor) -> object: ...

    def close(self) -> None: ...



@dataclass
class FlowStats:
    key: str
    kind: str = "streaming table"
    status: FlowStatus = FlowStatus.QUEUED
    batches: int = 0
    input_rows: int = 0
    rows_per_second: float | None = None
    last_batch_ms: int | None = None
    watermark: dt.datetime | None = None
    sources: list[dict] = field(default_factory=list)  # last batch's source offsets
    first_sources: list[dict] = field(default_factory=list)  # this run's first batch
    message: str | None = None


class RunMonitor:
    """The observer of one run: ``run_started`` before the first flow, ``run_finished`` after.

    root: the lakehouse folder or object-store URI (the event log).
    event_log: write this run's events to ``<root>/_event_log`` (default True).
    display: the live terminal view to drive, if any (it is closed when the run finishes).
    state_dir: the lakehouse's local state folder (run files ``_runs``); default the root,
        which must then be local (see ``Lakehouse``'s ``state_dir``).
    """

    def __init__(self, root: str | Path | AnyPath, event_log: bool = True,
                 display: RunView | None = None,
                 state_dir: str | Path | None = None) -> None:
        self.root: AnyPath = location(root)
        self.state_dir: Path = state_folder(self.root, state_dir)
        self.run_id = uuid.uuid4().hex[:12]
        self.pipeline = "pipeline"
        self.mode = ""
        self.graph: dict[str, Any] = {}
        self.stats: dict[str, FlowStats] = {}
        self.event_log = event_log
        self.log: EventLog | None = None
        self.display = display
        self.on_batch: Callable[[FlowStats, dict], None] | None = None
        self._listener: Any = None
        self._spark: Any = None
        self._lock = threading.Lock()
        self._file_lock = threading.Lock()  # one writer of the run file at a time
        self._details: dict[tuple[str, int], dict[str, Any]] = {}  # batch_details, not logged yet
        self._run_file = self.state_dir / RUNS / f"{self.run_id}.json"
        self.started = now()
        self.after_abrupt_end = False

    # --- run lifecycle -------------------------------------------------------------------

    def run_started(self, spark: Any, run: RunDescription) -> None:
        self.pipeline, self.mode, self.graph = run.pipeline, run.mode, run.graph
        self.stats = {key: FlowStats(key, kind) for key, kind in run.flows.items()}
        self.started = now()
        if self.event_log:
            self.log = EventLog(self.root, self.pipeline, self.run_id)
        if self.display is not None:
            self.display.watch(self)
        self._spark = spark
        self._close_abrupt_runs()
        if self.log is not None or self.on_batch is not None:  # nobody watches: no listener
            self._listener = _listener_for(self, spark)
        if self.log is not None:
            self.log.emit("run_started", status="running",
                          details=json.dumps({"mode": self.mode, "pid": os.getpid(),
                                              "graph": self.graph}))
            for key in self.stats:
                self.log.emit("flow_status", flow=key, table_name=key.split("/")[0],
                              status=FlowStatus.QUEUED.value)
        self._write_run_file()

    def _close_abrupt_runs(self) -> None:
        """Run files of killed processes: the end they never logged, then gone (their
        batches are recovered from the checkpoints as each flow starts)."""
        for run in live_runs(self.state_dir):
            if run["alive"]:
                continue
            self.after_abrupt_end = True
            if self.log is not None:
                self.log.emit("run_ended", pipeline=run.get("pipeline"), run_id=run.get("run_id"),
                              status="killed",
                              message=f"process {run.get('pid')} ended without a clean stop",
                              details=json.dumps({"started": run.get("started")}))
            Path(run["file"]).unlink(missing_ok=True)

    def run_finished(self, flows: list[FlowOutcome], stopped: bool) -> str | None:
        if self._spark is not None and self._listener is not None:
            try:
                remove_json_listener(self._spark, self._listener)
            except Exception:  # noqa: BLE001 - the session may be gone
                pass
        failed = sorted(f.key for f in flows if f.status.failed_or_skipped)
        status = "failed" if failed else ("stopped" if stopped else "completed")
        if self.log is not None:
            seconds = (now() - self.started).total_seconds()
            self.log.emit("run_ended", status=status,
                          message=f"flows failed or skipped: {', '.join(failed)}" if failed
                          else None,
                          details=json.dumps({"seconds": round(seconds, 3),
                                              "flows": {f.key: f.status for f in flows}}))
            self.log.close()
        self._run_file.unlink(missing_ok=True)
        if self.display is not None:
            self.display.close()
        if self.log is not None and self.log.failures:
            return (f"{self.log.failures[-1]} (the pipeline's tables are unaffected; "
                    f"{self.log.pending} event rows not logged)")
        return None

    # --- flows ---------------------------------------------------------------------------

    def flow_status(self, key: str, status: FlowStatus, message: str | None = None,
                    **details: Any) -> None:
        status = FlowStatus(status)
        with self._lock:
            stats = self.stats.setdefault(key, FlowStats(key))
            stats.status = status
            stats.message = message
        if self.log is not None:
            self.log.emit("flow_status", flow=key, table_name=key.split("/")[0],
                          status=status.value, message=message,
                          details=json.dumps(details, default=str) if details else None)
        self._write_run_file()

    def flow_starting(self, key: str, checkpoint: str) -> int:
        """Batches a killed earlier run committed but never logged: logged now, recovered.

        Only after a run ended abruptly (its run file is left): a clean run logs every batch
        itself, and reading the log for every flow start would slow every run down.
        """
        if self.log is None or not self.after_abrupt_end:
            return 0
        return fill_from_checkpoint(self.log, self.root, key, checkpoint)

    def query_ended(self, key: str, query: Any) -> None:
        """Batches whose listener events were dropped or are still on their way."""
        if self.log is None:
            return
        for progress in query.recentProgress:
            self.batch(key, progress_dict(progress))

    def batch_details(self, key: str, batch_id: int, details: dict[str, Any]) -> None:
        with self._lock:  # a batch may be reported in parts (rows written, AUTO CDC counts)
            self._details.setdefault((key, batch_id), {}).update(details)

    def batch(self, key: str, progress: dict) -> None:
        """A micro-batch's progress (from the listener or the query itself)."""
        if key not in self.stats or not executed(progress):
            return
        triggered = parse_time(progress.get("timestamp"))
        if triggered is not None and triggered < self.started:
            # an earlier run's query (same name) whose event Spark's listener bus delivered
            # late, after this run's listener was added: that run logged the batch
            return
        batch = (key, int(progress["batchId"]))
        if self.log is not None and self.log.knows(progress["id"], batch[1]):
            with self._lock:
                self._details.pop(batch, None)
            return  # reported already: checked before the row is built
        row = progress_row(progress, key)
        with self._lock:  # kept until a report is logged: the listener and the query race
            details = self._details.get(batch)
        if details:
            row["details"] = json.dumps(details)
            _rows_read(row, details)
        if self.log is not None and not self.log.batch_row(row):
            return  # the listener and the query's own report raced: the first one is logged
        with self._lock:
            self._details.pop(batch, None)
            stats = self.stats[key]
            stats.batches += 1
            stats.input_rows += int(row["input_rows"] or 0)
            stats.rows_per_second = row["processed_rows_per_second"]
            stats.last_batch_ms = row["batch_duration_ms"]
            stats.watermark = row["watermark"] or stats.watermark
            stats.sources = json.loads(row["sources"])
            if not stats.first_sources:
                stats.first_sources = stats.sources
        if self.on_batch is not None:
            self.on_batch(stats, row)

    def _write_run_file(self) -> None:
        """The run file, written whole through one temporary file: one writer at a time
        (statuses may be reported from more than one thread), the flows' statuses read under
        the stats' lock."""
        with self._file_lock:
            with self._lock:
                flows = {k: s.status for k, s in self.stats.items()}
            info = {"run_id": self.run_id, "pipeline": self.pipeline, "pid": os.getpid(),
                    "mode": self.mode, "started": self.started.isoformat(timespec="seconds"),
                    "flows": flows}
            try:
                self._run_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = self._run_file.with_suffix(".tmp")
                tmp.write_text(json.dumps(info))
                tmp.replace(self._run_file)
            except OSError:
                pass  # status reporting must never fail a run


def _rows_read(row: dict[str, Any], details: dict[str, Any]) -> None:
    """A flow that reads its input outside the streaming plan (a native read: the stream
    only carries offsets) reports the rows it read in its details; Spark counted none."""
    rows = details.get("input_rows")
    if not isinstance(rows, int) or row["input_rows"]:
        return
    row["input_rows"] = rows
    seconds = (row["batch_duration_ms"] or 0) / 1000
    row["processed_rows_per_second"] = rows / seconds if seconds > 0 else None


def _listener_for(monitor: RunMonitor, spark: Any) -> Any:
    """Every progress event of the run's flows goes to the monitor (a handle to remove)."""
    def on_progress(progress: dict[str, Any]) -> None:
        try:
            monitor.batch(progress.get("name") or "", progress)
        except Exception:  # noqa: BLE001 - e.g. a late event after the run closed its log
            pass

    return add_json_listener(spark, on_progress)


def live_runs(root: str | Path | None) -> list[dict[str, Any]]:
    """Runs whose process is alive; a run file left by a killed process is marked dead.

    root: the lakehouse's local state folder (``_runs`` is in it); None: no runs known."""
    runs: list[dict[str, Any]] = []
    if root is None:
        return runs
    for path in sorted((Path(root) / RUNS).glob("*.json")):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        info["alive"] = _alive(int(info.get("pid", -1)))
        info["file"] = str(path)
        runs.append(info)
    return runs


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return True
