"""A lease lock for storage where ``flock`` is not reliable: NFS / shared mounts, and object
stores (a checkpoint on s3a://, or a guard object beside tables on s3://).

The lease is a sequence of small JSON objects ``<location>/_lease/<n:020d>.json``, each one
created put-if-absent: ``O_CREAT | O_EXCL`` on a filesystem (atomic on NFSv3+), an
``If-None-Match: *`` PUT on S3 (through boto3). The newest object names the holder and when
its lease expires. The holder renews by writing ``n + 1`` before the expiry; anyone else may
write ``n + 1`` only once the lease has expired (or was released). Two writers racing for the
same ``n + 1`` are decided by the store: one create succeeds, the other is refused.

Expiry is judged on the reader's clock against the expiry the holder wrote, so hosts' clocks
must agree to well within ``ttl`` (NTP does). A holder whose renewal is refused has lost the
lease and must stop writing: :attr:`LeaseLock.lost` says so.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from headwater.conf import storage
from headwater.conf.layout import LEASE
from headwater.errors import HeadwaterError

DEFAULT_TTL = 60.0
KEEP = 3  # newest lease objects kept; older ones are removed after each write


class _LocalStore:
    """A folder on a (possibly network) filesystem."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def names(self) -> list[str]:
        try:
            return os.listdir(self.folder)
        except FileNotFoundError:
            return []

    def create(self, name: str, data: bytes) -> bool:
        os.makedirs(self.folder, exist_ok=True)
        try:
            fd = os.open(os.path.join(self.folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def read(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.folder, name), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        try:
            os.remove(os.path.join(self.folder, name))
        except FileNotFoundError:
            pass


class _S3Store:
    """A prefix in an S3 bucket; conditional PUTs through boto3."""

    def __init__(self, uri: str) -> None:
        parsed = urlparse(uri)
        self.bucket, self.prefix = parsed.netloc, parsed.path.strip("/") + "/"
        self.client = storage.boto3_client(uri)

    def names(self) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix)
        return [o["Key"][len(self.prefix):] for page in pages for o in page.get("Contents", [])]

    def create(self, name: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError  # noqa: PLC0415 - optional: boto3 is the [s3] extra

        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data,
                                   IfNoneMatch="*")
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (409, 412):  # PreconditionFailed / ConditionalRequestConflict
                return False
            raise
        return True

    def read(self, name: str) -> bytes | None:
        from botocore.exceptions import ClientError  # noqa: PLC0415 - optional: boto3 is the [s3] extra

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)[
                "Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + name)


def _store_for(location: str) -> _LocalStore | _S3Store:
    scheme = urlparse(location).scheme
    if scheme in ("s3", "s3a"):
        return _S3Store(f"s3://{location.split('://', 1)[1].rstrip('/')}/{LEASE}")
    if scheme in ("", "file"):
        path = location.removeprefix("file://")
        return _LocalStore(os.path.join(path, LEASE))
    raise HeadwaterError(
        "HW_STORAGE_CLIENT_MISSING", f"No lease store for {scheme}:// locations.",
        "Leases are written put-if-absent on local or network filesystems and on S3.",
        "Keep the checkpoint on a local path, a shared mount or s3a://.")


class LeaseLock:
    """One writer per ``location`` across hosts, as long as the holder keeps renewing.

    location: a folder path (local or a network mount) or an ``s3://`` / ``s3a://`` URI.
    owner: a description of the holder, shown to whoever is refused.
    ttl: seconds a lease lives without renewal (default 60); renewals run every ``ttl / 3``
        on a daemon thread once :meth:`acquire` succeeds (``renew=False`` to renew by hand).
    clock: seconds since the epoch (tests pass their own).
    on_lost: called once (on the renewal thread) when a renewal is refused because another
        writer took the lease over, or when renewals kept failing (store errors) until the
        lease may have expired: the place to stop the query this lease guarded.
    """

    def __init__(self, location: str, owner: str, ttl: float = DEFAULT_TTL,
                 clock: Callable[[], float] = time.time,
                 on_lost: Callable[[], object] | None = None) -> None:
        self.location, self.owner, self.ttl, self.clock = location, owner, ttl, clock
        self.on_lost = on_lost
        self.store = _store_for(location)
        self.token = uuid.uuid4().hex
        self.seq: int | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # renewals and the release never write at once
        self._renewed_at = 0.0  # time.monotonic() of the last write that extended the lease

    # --- the lease log -----------------------------------------------------------------
    def _seqs(self) -> list[int]:
        return sorted(int(n[:-5]) for n in self.store.names()
                      if n.endswith(".json") and n[:-5].isdigit())

    def _latest(self) -> tuple[int, dict[str, Any]] | None:
        """The newest lease record. Objects listed but gone when read were cleaned up by a
        holder that wrote newer ones: list again rather than conclude there is no lease (a
        new writer would start over at 0, beside a live holder)."""
        for _ in range(10):
            seqs = self._seqs()
            if not seqs:
                return None
            data = self.store.read(f"{seqs[-1]:020d}.json")
            if data is None:
                continue
            try:
                return seqs[-1], json.loads(data)
            except ValueError:  # created but not written yet (NFS shows that): a live holder
                return seqs[-1], {"owner": "a writer still writing its lease",
                                  "expires": float("inf")}
        raise self._held({"owner": "a writer renewing faster than this host can read"})

    def _write(self, seq: int, expires: float) -> bool:
        record = {"owner": self.owner, "token": self.token, "host": socket.gethostname(),
                  "pid": os.getpid(), "expires": expires}
        if not self.store.create(f"{seq:020d}.json", json.dumps(record).encode()):
            # refused: someone else's, unless our own PUT was retried after it landed
            data = self.store.read(f"{seq:020d}.json")
            try:
                if data is None or json.loads(data).get("token") != self.token:
                    return False
            except ValueError:
                return False
        for old in (n for n in self.store.names() if n.endswith(".json")
                    and n[:-5].isdigit() and int(n[:-5]) <= seq - KEEP):
            self.store.delete(old)
        return True

    # --- public ------------------------------------------------------------------------
    def acquire(self, renew: bool = True) -> LeaseLock:
        """Take the lease, or raise HW_LEASE_HELD while another holder's lease is live."""
        latest = self._latest()
        if latest is not None:
            seq, record = latest
            if record.get("token") != self.token and record.get("expires", 0) > self.clock():
                raise self._held(record)
        nxt = 0 if latest is None else latest[0] + 1
        if not self._write(nxt, self.clock() + self.ttl) or max(self._seqs()) > nxt:
            winner = self._latest()  # refused, or someone wrote past us: theirs
            raise self._held(winner[1] if winner else {})
        self.seq, self.lost = nxt, False
        self._renewed_at = time.monotonic()
        if renew:
            self._stop.clear()
            self._thread = threading.Thread(target=self._renew_loop, daemon=True,
                                            name=f"headwater-lease-{self.token[:8]}")
            self._thread.start()
        return self

    def renew(self) -> bool:
        """Extend the lease; False (and :attr:`lost`) when someone else holds it now."""
        with self._lock:
            if self.seq is None or self.lost:
                return False
            if self._write(self.seq + 1, self.clock() + self.ttl):
                self.seq += 1
                self._renewed_at = time.monotonic()
                return True
            self.lost = True
            return False

    def release(self) -> None:
        """Stop renewing and end the lease now (an expired record), so the next writer need
        not wait for the expiry."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        self._thread = None
        with self._lock:
            if self.seq is not None and not self.lost:
                self._write(self.seq + 1, 0.0)
            self.seq = None

    @property
    def held(self) -> bool:
        return self.seq is not None and not self.lost

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if self.renew():
                    continue
                if not self.lost:
                    return  # released
            except Exception:  # noqa: BLE001 - a store hiccup (S3 503, network): retry, unless
                # the lease may have expired meanwhile: others may hold it by now
                if time.monotonic() - self._renewed_at < self.ttl * 5 / 6:
                    continue
                self.lost = True
            if self.on_lost is not None:
                self.on_lost()
            return

    def _held(self, record: dict[str, Any]) -> HeadwaterError:
        until = record.get("expires", 0) - self.clock()
        return HeadwaterError(
            "HW_LEASE_HELD",
            f"{self.location} is leased by {record.get('owner', 'another writer')} "
            f"(pid {record.get('pid')} on {record.get('host')}) for {max(until, 0):.0f} s more.",
            "Only one writer may hold the lease; the holder renews it while it runs, and it "
            "expires when the holder stops renewing.",
            "Stop the other writer first, or wait for its lease to expire.")


#: filesystem types (``/proc/mounts``) whose ``flock`` is not trustworthy across hosts
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "lustre", "glusterfs", "ceph", "beegfs",
    "gpfs", "fuse.sshfs", "fuse.s3fs", "fuse.goofys", "fuse.mountpoint-s3", "fuse.gcsfuse",
    "fuse.blobfuse", "fuse.ceph", "fuse.glusterfs", "fuse.juicefs",
})


def filesystem_type(path: str, mounts: str | None = None) -> str:
    """The type of the filesystem ``path`` lives on (longest mount point in ``/proc/mounts``;
    ``mounts`` is that file's text, for tests)."""
    if mounts is None:
        try:
            with open("/proc/mounts", encoding="utf-8") as handle:
                mounts = handle.read()
        except OSError:
            return "unknown"
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def needs_lease(location: str, mounts: str | None = None) -> bool:
    """True where flock cannot be trusted and a lease store exists: ``s3://`` / ``s3a://``,
    or a path on a network mount. Other URIs (hdfs://, abfs://, ...) have no lease store
    yet: their lock is a local flock, which guards one host only."""
    scheme = urlparse(location).scheme
    if scheme in ("s3", "s3a"):
        return True
    if scheme not in ("", "file"):
        return False
    return filesystem_type(location.removeprefix("file://"), mounts) in NETWORK_FILESYSTEMS
