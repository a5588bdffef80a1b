"""Running an AUTO CDC FROM SNAPSHOT flow: each new snapshot of its source applied, in version
order, one commit each (see :mod:`headwater.pipeline.snapshot` for sources and saved
progress, :mod:`headwater.delta.cdc.snapshot` for the diff).

A table source gives one snapshot per run, versioned by the run's time; a function gives
snapshots until it returns None (or the run is asked to stop, between two snapshots).
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import TimestampType

from headwater.delta.cdc.snapshot import ERROR_CLASS, apply_snapshot
from headwater.errors import HeadwaterError
from headwater.pipeline.snapshot import Progress, next_snapshot, periodic_snapshot, version_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.pipeline.graph import Graph, ResolvedFlow


@dataclass(frozen=True)
class Applied:
    """One snapshot applied (or found committed already: ``applied`` False)."""

    version: Any
    number: int
    applied: bool
    upserted: int
    deleted: int
    history_rows: int

    def counts(self) -> dict[str, int]:
        return {"upserted": self.upserted, "deleted": self.deleted,
                "history_rows": self.history_rows}


def _newer(rf: ResolvedFlow, version: Any, last: Any) -> None:
    """HW_CDC_SNAPSHOT_VERSION_ORDER unless ``version`` is above the last applied."""
    if last is None:
        return
    try:
        newer = version > last and type(version) is type(last)
    except TypeError:
        newer = False
    if not newer:
        raise HeadwaterError(
            "HW_CDC_SNAPSHOT_VERSION_ORDER", f"{rf.flow.location}: flow {rf.key} got snapshot "
            f"version {version!r} after version {last!r} was applied.",
            "Snapshots are applied in version order: a version not above the last one (or of "
            "another type) cannot be placed.", "Return increasing versions of one type; to "
            "start over, run with --full-refresh of the target.",
            error_class=f"{ERROR_CLASS}.SNAPSHOT_VERSION_NOT_SORTABLE")


def _next(graph: Graph, rf: ResolvedFlow, progress: Progress, taken: bool
          ) -> tuple[DataFrame, Any] | None:
    """The next (snapshot, version): a table's or query's rows now (once per run), or the
    function's."""
    assert rf.flow.snapshot is not None
    source = rf.flow.snapshot.source
    if source.periodic:
        if taken:
            return None
        now = dt.datetime.now(dt.UTC)
        if progress.version is not None and now <= progress.version:  # a clock set back
            now = progress.version + dt.timedelta(microseconds=1)
        with graph.definitions_active():
            return periodic_snapshot(graph, rf.flow), now
    with graph.definitions_active():
        return next_snapshot(graph, rf.flow, progress.version)


def apply_new_snapshots(graph: Graph, rf: ResolvedFlow, checkpoint: str,
                        stop: threading.Event) -> list[Applied]:
    """Apply every snapshot the source has after the saved progress; save it after each."""
    assert rf.flow.snapshot is not None
    spec = rf.flow.snapshot.spec
    target = graph.store_for(rf.dataset.name).path(rf.dataset.name)
    app_id = f"headwater-{rf.key}"
    progress = Progress.load(checkpoint)
    done: list[Applied] = []
    while not stop.is_set():
        got = _next(graph, rf, progress, bool(done))
        if got is None:
            if progress.version is None:
                raise HeadwaterError(
                    "HW_CDC_SNAPSHOT_FIRST_EMPTY", f"{rf.flow.location}: the snapshot function "
                    f"of {rf.key} returned None for the first snapshot.",
                    "Nothing was ever applied, so there is no snapshot to start from.",
                    "Make the function return (DataFrame, version) when called with None.",
                    error_class=f"{ERROR_CLASS}.FIRST_SNAPSHOT_EMPTY")
            break
        snapshot, version = got
        _newer(rf, version, progress.version)
        kind = TimestampType() if rf.flow.snapshot.source.periodic \
            else version_type(version, rf.flow.location)
        result = apply_snapshot(snapshot, version, kind, progress.count, target, spec, app_id)
        done.append(Applied(version, progress.count, result.applied, result.upserted,
                            result.deleted, result.history_rows))
        progress = Progress(version, progress.count + 1)
        progress.save(checkpoint)
    return done
