"""What a pipeline run tells whoever watches it: the observer interface the runner calls.

The runner (in pipeline/, above this room) depends only on :class:`RunObserver` and the plain
data defined here; :class:`headwater.monitor.run.RunMonitor` implements it (event log, run
file, live view). Keeping the interface here lets monitor/ know nothing of the pipeline's
internals: a run is described to it as names, kinds and statuses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol


class FlowStatus(enum.StrEnum):
    """A flow's state during a run. str-valued: the event log, the run file and the
    dashboard store and compare the plain strings ("running", "failed", ...)."""

    PENDING = "pending"        # known to the runner, not started yet
    QUEUED = "queued"          # announced at run start, waiting for its inputs
    RUNNING = "running"
    RESTARTING = "restarting"  # stopped by a schema change it can resume from
    COMPLETED = "completed"
    STOPPED = "stopped"        # stopped on request, after its current micro-batch
    FAILED = "failed"
    SKIPPED = "skipped"        # an upstream flow failed

    @property
    def ok(self) -> bool:
        """The flow ended without an error of its own."""
        return self in (FlowStatus.COMPLETED, FlowStatus.STOPPED)

    @property
    def failed_or_skipped(self) -> bool:
        return self in (FlowStatus.FAILED, FlowStatus.SKIPPED)


@dataclass(frozen=True)
class RunDescription:
    """A run as the observer sees it when it starts.

    pipeline: the pipeline's name.
    mode: "triggered" or "continuous, <interval>".
    flows: flow key -> kind ("streaming table" | "materialized view"), the flows this run
        may start, in the runner's order.
    graph: dataset name -> {"kind", "upstream" (sorted names), "reads_files" (bool)}, every
        dataset of the pipeline (the dashboard draws it from the event log).
    """

    pipeline: str
    mode: str
    flows: dict[str, str] = field(default_factory=dict)
    graph: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class FlowOutcome:
    """How one flow of a finished run ended."""

    key: str
    kind: str
    status: FlowStatus
    error: str | None = None
    batches: int = 0
    rows_written: int = 0


class RunObserver(Protocol):
    """The calls a runner makes, in order: ``run_started``; per flow ``flow_starting``,
    ``flow_status`` changes and ``query_ended``; ``run_finished`` once, on every exit path."""

    def run_started(self, spark: Any, run: RunDescription) -> None:
        """Before the first flow starts; ``spark`` is the session the flows run in."""

    def flow_starting(self, key: str, checkpoint: str) -> int:
        """Before a streaming flow starts on ``checkpoint``: batches an earlier run committed
        but never reported, recovered now; returns how many (0 when none)."""

    def flow_status(self, key: str, status: FlowStatus, message: str | None = None,
                    **details: Any) -> None:
        """A flow changed status; ``details`` are JSON-able extras (rows_written, ...)."""

    def batch_details(self, key: str, batch_id: int, details: dict[str, Any]) -> None:
        """A flow's writer measured what Spark's progress does not carry (``output_rows``:
        rows written to the table; ``cdc``: AUTO CDC's rows upserted, deleted, history rows;
        a native read's ``input_files`` and ``input_rows``, which stand in for the progress's
        row count) for micro-batch ``batch_id``; called from the foreachBatch function (maybe
        once per part), before Spark reports that batch's progress."""

    def query_ended(self, key: str, query: Any) -> None:
        """A flow's StreamingQuery is no longer active (ended, failed or stopped)."""

    def run_finished(self, flows: list[FlowOutcome], stopped: bool) -> str | None:
        """The run is over (``stopped``: a stop was requested). Returns a warning for the
        user when the observer could not record everything, else None."""
