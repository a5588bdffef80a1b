"""What each flow of a run did: its :class:`FlowResult`, counted from the queries' progress,
and the one-line summary the runner prints when the flow completes."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.listener import StreamingQueryProgress

from headwater.conf.layout import EXPECTATIONS_METRICS as EXPECTATION_METRICS
from headwater.conf.layout import INGEST_METRICS, SINK_METRICS
from headwater.monitor.observer import FlowOutcome, FlowStatus
from headwater.spark.jvm import progress_json_newest_first

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery



@dataclass
class FlowResult:
    key: str
    kind: str
    status: FlowStatus = FlowStatus.PENDING
    error: str | None = None
    batches: int = 0
    rows_written: int = 0
    quarantined: int = 0
    late_rows: int = 0
    rescued: int = 0      # ingested rows with rescued data (malformed ones included)
    malformed: int = 0
    schema_changes: int = 0
    worker_restarts: int = 0  # restarts after Spark's Python worker missed its start window
    commit_driven: bool = False  # started on a commit-driven trigger (see run/hops.py)
    expectations: dict[str, int] = field(default_factory=dict)
    cdc: dict[str, int] = field(default_factory=dict)  # AUTO CDC: upserted, deleted, history_rows
    # complete mode: each batch is the whole table, so its own expectations' counts (like its
    # rows written and quarantined) are the latest batch's, not a sum over batches
    whole: bool = False
    # the writer's per-batch details for the observer (set by the scheduler)
    on_batch_details: Callable[[int, dict[str, Any]], None] | None = field(default=None,
                                                                          repr=False)
    counted: set[tuple[Any, int]] = field(default_factory=set, repr=False)  # (run id, batch)
    # the newest progress count_batches read: (run id, batch, timestamp)
    newest: tuple[Any, int, str] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return FlowStatus(self.status).ok

    def add_cdc(self, batch_id: int, counts: dict[str, int]) -> None:
        """One AUTO CDC batch applied: its counts added up and handed to the observer."""
        for name, n in counts.items():
            self.cdc[name] = self.cdc.get(name, 0) + n
        self.report(batch_id, {"cdc": counts})

    def report(self, batch_id: int, details: dict[str, Any]) -> None:
        """What the writer measured of micro-batch ``batch_id`` and Spark's progress does not
        carry (rows written, AUTO CDC counts, a native read's files and rows), handed to the
        observer for that batch's event."""
        if self.on_batch_details is not None:
            try:
                self.on_batch_details(batch_id, details)
            except Exception:  # noqa: BLE001 - watching a run must never fail its batches
                _log.warning("the run's observer failed on batch %s of %s", batch_id, self.key,
                             exc_info=True)

    def outcome(self) -> FlowOutcome:
        """The plain data an observer gets when the run finishes."""
        return FlowOutcome(self.key, self.kind, FlowStatus(self.status), self.error,
                           self.batches, self.rows_written)


def count_batches(result: FlowResult, query: StreamingQuery) -> None:
    """Add the query's finished micro-batches not counted yet: batches, rescued and
    malformed rows, and each expectation's counts.

    Spark keeps a query's last 100 progress updates and adds new ones at the end: they are
    read newest first, up to the one read last time, so a poll after one new batch reads one
    update, not the 100 (``recentProgress`` asks the JVM for each one's JSON over py4j). A
    continuous run polls every flow each time a batch commits: its loop spent 43 of 60
    seconds in ``recentProgress`` (py-spy, the demo)."""
    progress = _newer_progress(query, result.newest)
    if not progress:
        return
    result.newest = _identity(progress[-1])
    for p in progress:
        if "addBatch" not in (p.durationMs or {}):
            # an idle heartbeat (every spark.sql.streaming.noDataProgressEventInterval): it
            # carries the id of the batch that has not run yet, which then ran uncounted
            continue
        if (p.runId, p.batchId) in result.counted:
            continue  # progress is polled repeatedly: count each batch once
        result.counted.add((p.runId, p.batchId))
        result.batches += 1
        for metrics_name, row in (p.observedMetrics or {}).items():
            if metrics_name.startswith(INGEST_METRICS):
                result.rescued += int(row["rescued_rows"] or 0)
                result.malformed += int(row["malformed_rows"] or 0)
            if metrics_name.startswith(SINK_METRICS):
                result.rows_written += int(row["rows"] or 0)
            if metrics_name.startswith(EXPECTATION_METRICS):
                add_expectation_counts(result, metrics_name[len(EXPECTATION_METRICS):],
                                       row.asDict())


def _identity(progress: Any) -> tuple[Any, int, str]:
    return (progress.runId, progress.batchId, progress.timestamp)


def _newer_progress(query: StreamingQuery,
                    newest: tuple[Any, int, str] | None) -> list[StreamingQueryProgress]:
    """The query's kept progress updates after the one ``newest`` names (all of them when
    it is None or no longer kept), oldest first."""
    updates = progress_json_newest_first(query)
    if updates is None:  # Spark Connect: the whole list, in one call
        every = list(query.recentProgress)
        ids = [_identity(p) for p in every]
        return every[ids.index(newest) + 1:] if newest in ids else every
    newer: list[StreamingQueryProgress] = []
    for text in updates:
        update = StreamingQueryProgress.fromJson(json.loads(text))
        if _identity(update) == newest:
            break
        newer.append(update)
    newer.reverse()
    return newer


def add_expectation_counts(result: FlowResult, dataset: str, counts: dict[str, Any]) -> None:
    """One batch's counts of ``dataset``'s rules: keyed by metric for the flow's own table
    (``positive_failed``), by ``<dataset>.<metric>`` for a view the flow reads. A table
    rewritten whole (``result.whole``) keeps the latest batch's counts of its own rules."""
    own = dataset == result.key.split("/")[0]
    prefix = "" if own else f"{dataset}."
    for metric, value in counts.items():
        key = prefix + metric
        before = 0 if own and result.whole else result.expectations.get(key, 0)
        result.expectations[key] = before + int(value or 0)


def summary(result: FlowResult) -> str:
    """'3 batches, 120 rows written, 2 quarantined; expectations failed: positive=2'."""
    parts = [f"{result.batches} batches", f"{result.rows_written} rows written"]
    if result.rescued:
        parts.append(f"{result.rescued} with rescued data ({result.malformed} malformed)")
    if result.cdc:
        parts.append(f"AUTO CDC {result.cdc.get('upserted', 0)} upserted, "
                     f"{result.cdc.get('deleted', 0)} deleted"
                     + (f", {result.cdc['history_rows']} history rows"
                        if result.cdc.get("history_rows") else ""))
    if result.schema_changes:
        parts.append(f"schema evolved {result.schema_changes}x")
    if result.quarantined:
        parts.append(f"{result.quarantined} quarantined")
    if result.late_rows:
        parts.append(f"{result.late_rows} late rows kept")
    return ", ".join(parts) + expectation_text(result)


def expectation_text(result: FlowResult) -> str:
    failed = {k[:-len("_failed")]: v for k, v in result.expectations.items()
              if k.endswith("_failed") and v}
    if not failed:
        return ""
    return "; expectations failed: " + ", ".join(f"{k}={v}" for k, v in sorted(failed.items()))
