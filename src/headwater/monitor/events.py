"""The event log: every micro-batch's progress, run and flow events, as a Delta table.

``<lakehouse>/_event_log`` is written with deltalake (Arrow, no Spark job), in batches: events
are buffered and appended every ``flush_seconds`` by a background thread, so a pipeline's
micro-batches never wait on it. Complex parts (durations, offsets, observed metrics) are JSON
text columns, readable with ``get_json_object`` or ``from_json`` in ``headwater sql``.

One row per executed micro-batch (``event = 'progress'``), keyed by (query_id, batch_id):
Spark's idle heartbeats (a trigger that found no data) are not batches and are left out. A
batch known only from its checkpoint (its process was killed before the row was flushed) is
logged later with ``recovered = true`` and its offsets, without metrics.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from headwater.conf import storage
from headwater.conf.layout import (  # noqa: F401 - EVENT_LOG re-exported
    DELTA_LOG,
    EVENT_FLUSH_SECONDS_ENV,
    EVENT_LOG,
    EXPECTATIONS_METRICS,
)
from headwater.conf.location import AnyPath, location
from headwater.delta.log import arrow_dataset, open_table

# Seconds between appends (3 by default): what a SIGKILL can lose (recovered from
# checkpoints next run). EVENT_FLUSH_SECONDS_ENV is a test hook (tests shorten the interval).
MAX_PENDING = 100_000  # rows kept while the table cannot be written (oldest dropped first)
# A long continuous run appends a small file every few seconds: compacted every this many
# appends, so readers (status, the dashboard) open a few files, not thousands.
COMPACT_EVERY = 200

SCHEMA = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")),
    ("pipeline", pa.string()),
    ("run_id", pa.string()),
    ("event", pa.string()),  # run_started | run_ended | flow_status | progress
    ("flow", pa.string()),
    ("table_name", pa.string()),
    ("status", pa.string()),  # flow_status: queued | running | completed | failed | ...
    ("query_id", pa.string()),
    ("query_run_id", pa.string()),
    ("batch_id", pa.int64()),
    ("trigger_time", pa.timestamp("us", tz="UTC")),
    ("input_rows", pa.int64()),
    ("input_rows_per_second", pa.float64()),
    ("processed_rows_per_second", pa.float64()),
    ("batch_duration_ms", pa.int64()),
    ("durations", pa.string()),  # JSON: addBatch, getBatch, latestOffset, queryPlanning, ...
    ("watermark", pa.timestamp("us", tz="UTC")),
    ("state_rows", pa.int64()),
    ("state_memory_bytes", pa.int64()),
    ("late_rows_dropped", pa.int64()),  # rows dropped by the watermark
    ("expectations", pa.string()),  # JSON: {rule: {"passed": n, "failed": n}}
    ("observed", pa.string()),  # JSON: every observe() metric of the batch
    ("sources", pa.string()),  # JSON: [{description, startOffset, endOffset, numInputRows}]
    ("recovered", pa.bool_()),
    ("message", pa.string()),
    ("details", pa.string()),  # JSON
])


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def parse_time(text: str | None) -> dt.datetime | None:
    """Spark's progress timestamps (``2026-11-23T03:53:41.123Z``) as aware datetimes."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def executed(progress: dict) -> bool:
    """A batch that ran, not an idle heartbeat (those carry no addBatch duration)."""
    return "addBatch" in (progress.get("durationMs") or {})


def progress_row(progress: dict, flow: str | None = None) -> dict[str, Any]:
    """One event-log row from a ``StreamingQueryProgress`` as JSON."""
    durations = progress.get("durationMs") or {}
    states = progress.get("stateOperators") or []
    observed = {name: dict(values) for name, values in
                (progress.get("observedMetrics") or {}).items()}
    watermark = parse_time((progress.get("eventTime") or {}).get("watermark"))
    if watermark is not None and watermark.timestamp() == 0:
        watermark = None  # Spark's "no watermark yet"
    sources = [{k: s.get(k) for k in ("description", "startOffset", "endOffset", "latestOffset",
                                       "numInputRows")}
               for s in progress.get("sources") or []]
    name = flow or progress.get("name") or ""
    return {
        "ts": now(),
        "event": "progress",
        "flow": name,
        "table_name": name.split("/")[0] or None,
        "query_id": progress.get("id"),
        "query_run_id": progress.get("runId"),
        "batch_id": progress.get("batchId"),
        "trigger_time": parse_time(progress.get("timestamp")),
        "input_rows": progress.get("numInputRows"),
        "input_rows_per_second": _number(progress.get("inputRowsPerSecond")),
        "processed_rows_per_second": _number(progress.get("processedRowsPerSecond")),
        "batch_duration_ms": durations.get("triggerExecution") or progress.get("batchDuration"),
        "durations": json.dumps(durations),
        "watermark": watermark,
        "state_rows": sum(s.get("numRowsTotal") or 0 for s in states) if states else None,
        "state_memory_bytes": sum(s.get("memoryUsedBytes") or 0 for s in states)
        if states else None,
        "late_rows_dropped": sum(s.get("numRowsDroppedByWatermark") or 0 for s in states)
        if states else None,
        "expectations": json.dumps(expectation_counts(observed, name.split("/")[0] or None))
        if _has_rules(observed) else None,
        "observed": json.dumps(observed, default=str) if observed else None,
        "sources": json.dumps(sources),
        "recovered": False,
    }


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def _has_rules(observed: dict) -> bool:
    return any(name.startswith(EXPECTATIONS_METRICS) for name in observed)


def expectation_counts(observed: dict, table: str | None = None
                       ) -> dict[str, dict[str, Any]]:
    """``{rule: {"passed", "failed"}}`` from the ``expectations:<dataset>`` metrics. The rules
    of ``table`` (the flow's own) are keyed by name; those of another dataset (a view the flow
    reads) by ``<dataset>.<rule>``, with ``"dataset"`` and ``"rule"`` in the entry."""
    counts: dict[str, dict[str, Any]] = {}
    for name, values in observed.items():
        if not name.startswith(EXPECTATIONS_METRICS):
            continue
        dataset = name[len(EXPECTATIONS_METRICS):]
        rows = int(values.get("rows") or 0)
        for metric, value in values.items():
            if metric.endswith("_failed"):
                failed = int(value or 0)
                rule = metric[:-len("_failed")]
                entry: dict[str, Any] = {"passed": rows - failed, "failed": failed}
                if dataset == table:
                    counts[rule] = entry
                else:
                    counts[f"{dataset}.{rule}"] = {**entry, "dataset": dataset, "rule": rule}
    return counts


class EventLog:
    """Buffered appends of event rows to ``<root>/_event_log``.

    Rows of progress are deduplicated by (query_id, batch_id): the listener, the runner's
    reconciliation and the checkpoint may each report a batch; the first report wins.
    """

    def __init__(self, root: str | Path | AnyPath, pipeline: str, run_id: str,
                 flush_seconds: float | None = None, compact_every: int = COMPACT_EVERY) -> None:
        self.path = str(location(root) / EVENT_LOG)
        self.pipeline = pipeline
        self.run_id = run_id
        self.flush_seconds = flush_seconds or float(os.environ.get(EVENT_FLUSH_SECONDS_ENV, "3"))
        self._rows: list[dict[str, Any]] = []
        self._batches: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = threading.Event()
        self.failures: list[str] = []
        self.written = 0
        self.appends = 0
        self.compact_every = compact_every
        self._thread = threading.Thread(target=self._flush_loop, name="headwater-event-log",
                                        daemon=True)
        self._thread.start()

    def emit(self, event: str, **fields: Any) -> None:
        row = {"ts": now(), "event": event, **fields}
        self._append(row)

    def batch_row(self, row: dict[str, Any]) -> bool:
        """Log one micro-batch's row once; False if its (query, batch) was logged already."""
        key = (row["query_id"], int(row["batch_id"]))
        with self._lock:
            if key in self._batches:
                return False
            self._batches.add(key)
        self._append(row)
        return True

    def knows(self, query_id: str, batch_id: int) -> bool:
        with self._lock:
            return (query_id, batch_id) in self._batches

    def remember(self, query_id: str, batch_ids: set[int]) -> None:
        """Batches already in the table (from earlier runs): never logged twice."""
        with self._lock:
            self._batches.update((query_id, b) for b in batch_ids)

    def _append(self, row: dict[str, Any]) -> None:
        row.setdefault("pipeline", self.pipeline)
        row.setdefault("run_id", self.run_id)
        with self._lock:
            self._rows.append(row)

    def _flush_loop(self) -> None:
        while not self._closed.wait(self.flush_seconds):
            self.flush()

    def flush(self) -> int:
        """Append the buffered rows in one commit; a failure is kept and retried next time."""
        with self._write_lock:
            with self._lock:
                rows, self._rows = self._rows, []
            if not rows:
                return 0
            table = pa.Table.from_pylist([{f: r.get(f) for f in SCHEMA.names} for r in rows],
                                         schema=SCHEMA)
            try:
                write_deltalake(self.path, table, mode="append",
                                storage_options=storage.options_for(self.path))
            except Exception as exc:  # noqa: BLE001 - monitoring must not stop a pipeline
                self.failures.append(f"the event log {self.path} could not be written: "
                                     f"{type(exc).__name__}: {str(exc)[:300]}")
                with self._lock:  # kept for the next attempt, within a bound
                    self._rows[:0] = rows
                    del self._rows[:max(0, len(self._rows) - MAX_PENDING)]
                return 0
            self.written += len(rows)
            self.appends += 1
            if self.appends % self.compact_every == 0:
                self._compact()
            return len(rows)

    def _compact(self) -> None:
        try:
            open_table(self.path).optimize.compact()
        except Exception as exc:  # noqa: BLE001 - a concurrent writer won: next time
            self.failures.append(f"compacting {self.path} failed: {type(exc).__name__}: "
                                 f"{str(exc)[:200]}")

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._rows)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=30)
        self.flush()


def read_events(root: str | AnyPath, columns: list[str] | None = None,
                where: Any = None) -> pa.Table:
    """The event log as Arrow (empty, with the schema, when nothing was logged yet)."""
    path = location(root) / EVENT_LOG
    if not (path / DELTA_LOG).is_dir():
        empty = SCHEMA.empty_table()
        return empty.select(columns) if columns else empty
    dataset = arrow_dataset(open_table(str(path)))
    return dataset.to_table(columns=columns, filter=where)
