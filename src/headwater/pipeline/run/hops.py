"""Commit-driven hops: in a continuous run a downstream flow starts its next micro-batch as
soon as its input table commits (or a file lands), not at its next poll.

Spark's processing-time trigger cannot be woken: a flow on a 500 ms trigger that just
found nothing new looks again 500 ms later, so each hop of a pipeline adds up to a trigger
interval (250 ms on average) to the time a landed file takes to reach gold. A flow whose
every stream is a lakehouse table read by name (``headwater.read_stream``,
``spark.readStream.table``, ``dlt.read_stream``) runs instead on a zero-interval trigger,
and its reads carry :data:`~headwater.conf.layout.COMMIT_WAIT_OPTION`: when the Delta source
finds nothing new it waits, up to the flow's interval (2 s at most), for the table's next
commit file to appear (a stat every 10 ms) and answers as soon as one brings data. The
interval caps that wait: a flow with nothing to do asks its source again once per interval
(or every 2 s). Everything else about the query is Spark's own: its offsets and commit
logs, its checkpoint, exactly-once replay after ``kill -9`` (a batch is planned from the
offsets the source answers, whenever it answers them), its progress events (a batch's
``latestOffset`` time includes the wait for its input's commit).

A file stream of a local folder (``headwater.read_files``, ``format("cloudFiles")``) gets the
option too: its source waits for a new file (a look every 50 ms, ``ingest/source.py``), so a
flow landing files into bronze is commit-driven as well. Flows reading anything else as a
stream (an object store's files, Kafka, a view, a Delta path, a SQL ``STREAM``) keep their
processing-time trigger: :func:`commit_driven` checks the flow's plan.
Materialized views are recomputed by the runner when an input changes: it wakes when a
view's local input commits (a stat of its next commit file every 50 ms) or a listener on the
run's queries sees a batch that read rows (:class:`CommitSignal`), and at least once per
interval. A stop waits for a commit-driven flow's running batch by its checkpoint
(:func:`between_batches`): its trigger is active while its source waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.conf.layout import COMMIT_WAIT_OPTION
from headwater.spark.listener import add_json_listener, remove_json_listener
from headwater.spark.offset_log import COMMITS, OFFSETS
from headwater.spark.plan import stream_leaf_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A commit-driven flow's trigger: the next micro-batch is planned as soon as the last ended;
# its source's commit wait paces it (Spark sleeps spark.sql.streaming.pollingDelay, 10 ms,
# after a trigger that found nothing).
COMMIT_DRIVEN_TRIGGER: dict[str, Any] = {"processingTime": "0 seconds"}


# The longest a source waits for a commit in one call, whatever the interval: a stop request
# interrupts the query in its source's wait, and Spark's Python source call may only end with
# the wait. A longer interval is then a series of waits, each one a listing of the table's log.
MAX_COMMIT_WAIT_SECONDS = 2.0


def wait_options(interval_seconds: float) -> dict[str, str]:
    """The read options that make a Delta stream wait up to one interval (at most
    :data:`MAX_COMMIT_WAIT_SECONDS`) for a commit, and a local folder's file stream for a
    new file."""
    seconds = min(interval_seconds, MAX_COMMIT_WAIT_SECONDS)
    return {COMMIT_WAIT_OPTION: str(max(1, round(seconds * 1000)))}


def commit_driven(df: DataFrame) -> bool:
    """True when every stream ``df`` reads waits for its table's commits or its folder's
    files (each carries the commit wait option): the flow can run on
    :data:`COMMIT_DRIVEN_TRIGGER`."""
    leaves = stream_leaf_options(df)
    return bool(leaves) and all(options is not None and COMMIT_WAIT_OPTION in options
                                for options in leaves)


def waits_for_some_commit(df: DataFrame) -> bool:
    """True when a stream of ``df`` carries the commit wait option (a flow not commit-driven
    must be built again without it: its other sources share its trigger, which a Delta
    source waiting for a commit would hold up)."""
    return any(options is not None and COMMIT_WAIT_OPTION in options
               for options in stream_leaf_options(df))


def between_batches(checkpoint: str) -> bool:
    """True when the query on ``checkpoint`` has no micro-batch planned and not committed
    (its offset log ends where its commit log does): stopping it now interrupts at most its
    source's wait for a commit, not a batch."""
    return _last_batch(Path(checkpoint) / OFFSETS) == _last_batch(Path(checkpoint) / COMMITS)


def _last_batch(folder: Path) -> int:
    try:
        return max((int(p.name) for p in folder.iterdir() if p.name.isdigit()), default=-1)
    except OSError:
        return -1


class CommitSignal:
    """Set whenever a query of the session ends a micro-batch that read rows, or ends, or a
    view's recompute ends on its refresh thread (:meth:`wake`): the continuous runner waits
    on it (up to its interval) before it looks for new versions of
    the materialized views' inputs and settles ended flows."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.event = threading.Event()
        self._handle: Any = add_json_listener(spark, self._on_progress, self._on_ended)

    def _on_progress(self, progress: dict[str, Any]) -> None:
        if progress.get("numInputRows"):
            self.event.set()

    def _on_ended(self, _event: dict[str, Any]) -> None:
        self.event.set()  # a flow ended (failed, or to restart): settled without delay

    def wake(self) -> None:
        """Any thread: end the runner's wait now (a view's recompute ended on its thread)."""
        self.event.set()

    def wait(self, seconds: float, stop: threading.Event,
             committed: Callable[[], bool] | None = None) -> None:
        """Until a batch read rows, ``stop`` is set, ``committed()`` is true (checked every
        step: a view's input committed, known before the batch that committed ends and its
        progress reaches the listener), or ``seconds`` passed."""
        step = 0.05  # how soon a stop request or a commit is seen
        waited = 0.0
        while waited < seconds and not stop.is_set():
            if self.event.wait(min(step, seconds - waited)):
                break
            if committed is not None and committed():
                break
            waited += step
        self.event.clear()

    def close(self) -> None:
        if self._handle is not None:
            remove_json_listener(self.spark, self._handle)
            self._handle = None
