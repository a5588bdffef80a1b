"""One writing query per checkpoint, across threads and processes.

Two queries on the same checkpoint corrupt each other's offset and commit logs. Spark only
refuses a duplicate inside one session; the lock here also holds across processes. It is an
``flock`` on ``<checkpoint>/.headwater.lock``: the kernel drops it when the owning process dies,
SIGKILL included, so a crashed owner never blocks the next run. ``flock`` locks belong to the
open file, so a second lock attempt from the same process is refused too.

``flock`` is not reliable on NFS and other network mounts, and impossible on object stores
(an ``s3a://`` checkpoint on a cluster with hadoop-aws): there the lock is a lease
(:mod:`headwater.spark.lease`), renewed while the query runs, expiring when its owner dies.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQuery

from headwater.conf.layout import LEASE_ALWAYS_ENV, LEASE_TTL_ENV
from headwater.errors import HeadwaterError
from headwater.spark.lease import DEFAULT_TTL, LeaseLock, needs_lease

LOCK_NAME = ".headwater.lock"


class CheckpointLock:
    def __init__(self, checkpoint: str | os.PathLike, owner: str,
                 on_lost: Callable[[], object] | None = None) -> None:
        """on_lost: with a lease, called when another writer took it over (stop the query)."""
        self.checkpoint = str(checkpoint)
        self.on_lost = on_lost
        self.path = _local_lock_path(self.checkpoint)
        self.owner = owner
        self._fd: int | None = None
        self._lease: LeaseLock | None = None
        self.lost_error: HeadwaterError | None = None

    def acquire(self) -> CheckpointLock:
        if needs_lease(self.checkpoint) or os.environ.get(LEASE_ALWAYS_ENV) == "1":
            return self._acquire_lease()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise HeadwaterError(
                "HW_CHECKPOINT_IN_USE",
                f"The checkpoint {self.checkpoint} is in use by another query ({holder}).",
                "Two queries writing with one checkpoint would corrupt its offset and commit "
                "logs; a checkpoint belongs to exactly one query.",
                "Stop the other query first, or give this query its own checkpoint location.",
            ) from None
        info = {"owner": self.owner, "pid": os.getpid(), "host": socket.gethostname(),
                "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        return self

    def _acquire_lease(self) -> CheckpointLock:
        try:
            ttl = float(os.environ.get(LEASE_TTL_ENV) or DEFAULT_TTL)
            self._lease = LeaseLock(self.checkpoint, self.owner, ttl=ttl,
                                    on_lost=self._lost).acquire()
        except HeadwaterError as exc:
            if exc.code != "HW_LEASE_HELD":
                raise
            raise HeadwaterError(
                "HW_CHECKPOINT_IN_USE",
                f"The checkpoint {self.checkpoint} is in use by another query: {exc.what}",
                "Two queries writing with one checkpoint would corrupt its offset and commit "
                "logs; on a network mount or object store the lock is a renewed lease.",
                "Stop the other query first (its lease then expires), or give this query its "
                "own checkpoint location.") from None
        return self

    def watch(self, query: Any) -> None:
        """Stop ``query`` (a StreamingQuery started after this lock was taken) if another
        writer takes the lease over; :attr:`lost_error` then says so (HW_LEASE_LOST). A flock
        cannot be taken over: nothing to watch."""
        self.on_lost = query.stop
        if self.lost_error is not None:  # lost between the lock and the start
            query.stop()

    def _lost(self) -> None:
        """On the lease's renewal thread: record why, then stop the guarded query."""
        self.lost_error = HeadwaterError(
            "HW_LEASE_LOST",
            f"The query writing with checkpoint {self.checkpoint} ({self.owner}) lost its "
            "lease: another writer took the checkpoint over, and the query was stopped.",
            "The lease was not renewed in time (a long pause: GC, a suspended host, a "
            "network partition) and another query took it once it expired; two writers on "
            "one checkpoint would corrupt its offset and commit logs.",
            "Find the other writer (its owner is in the newest <checkpoint>/_lease/*.json); "
            "restart this query once it has stopped. Raise the lease ttl if pauses are long.")
        if self.on_lost is not None:
            self.on_lost()

    def release(self) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)  # closing the file drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None or (self._lease is not None and self._lease.held)


def _local_lock_path(checkpoint: str) -> Path:
    """The flock file: in the checkpoint folder, or for a URI without a lease store
    (hdfs://, ...) a local file named by the URI's hash (one host only)."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        digest = hashlib.sha256(checkpoint.encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / "headwater-locks" / digest / LOCK_NAME
    return Path(checkpoint.removeprefix("file://")) / LOCK_NAME


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return "owner unknown"
    if not info:
        return "owner unknown"
    return f"{info.get('owner')}, pid {info.get('pid')} on {info.get('host')} since {info.get('since')}"


def guarded(query: Any, lock: CheckpointLock) -> Any:
    """``query`` stopped if ``lock``'s lease is taken over, its ``awaitTermination`` then
    raising HW_LEASE_LOST (a plain stop would look like a clean end)."""
    class LeaseGuardedQuery(StreamingQuery):
        def awaitTermination(self, timeout: int | None = None) -> bool | None:
            ended = super().awaitTermination(timeout)
            if lock.lost_error is not None and not self.isActive:
                raise lock.lost_error
            return ended

    watched = LeaseGuardedQuery(query._jsq)
    lock.watch(watched)
    return watched
