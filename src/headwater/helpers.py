"""The seed notebooks' helpers (``DA.block_until_stream_is_ready``, listing and stopping
streams, ``DA.cleanup``) for scripts and tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from headwater.conf.location import location, remove_tree
from headwater.errors import HeadwaterError, unwrap
from headwater.lakehouse import Lakehouse, active_lakehouse

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


def block_until_stream_is_ready(query: StreamingQuery, min_batches: int = 2,
                                timeout: float = 120.0) -> None:
    """Wait until ``query`` has completed ``min_batches`` micro-batches (default 2, as the
    seeds' helper), or has ended. A query that failed raises its error; a query still short
    after ``timeout`` seconds raises HW_STREAM_NOT_READY."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(query.recentProgress) >= min_batches:
            return
        if not query.isActive:
            error = query.exception()
            if error is not None:
                raise unwrap(error)
            return
        time.sleep(0.1)
    raise HeadwaterError(
        "HW_STREAM_NOT_READY",
        f"Query {query.name or query.id} completed {len(query.recentProgress)} of "
        f"{min_batches} micro-batches in {timeout:.0f} s.",
        "The stream is slower than expected, or its trigger interval is long.",
        "Raise timeout=, or check query.status and query.lastProgress.")


def active_streams(spark: SparkSession | None = None) -> list[StreamingQuery]:
    """The session's running streaming queries."""
    return list(_spark(spark).streams.active)


def stop_all_streams(spark: SparkSession | None = None, timeout: float = 60.0) -> int:
    """Stop every running stream, each after its current micro-batch; returns how many."""
    stopped = 0
    for query in active_streams(spark):
        deadline = time.monotonic() + timeout
        while query.isActive and query.status.get("isTriggerActive") \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()
        stopped += 1
    return stopped


def cleanup(root: str | Path, spark: SparkSession | None = None) -> None:
    """Stop all streams, forget the lakehouse's tables, and delete ``root`` (a folder or an
    object-store URI; a lakehouse's separate state folder is left alone)."""
    stop_all_streams(spark)
    lake = Lakehouse.of(spark) if spark is not None else active_lakehouse()
    if lake is not None and lake.root == location(root) and lake.root.is_dir():
        for name in lake.tables():
            lake.drop(name)  # the catalog forgets it too
    remove_tree(location(root))


def _spark(spark: SparkSession | None) -> SparkSession:
    return spark or SparkSession.active()
