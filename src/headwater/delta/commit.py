"""One Delta commit of arbitrary actions (add, remove, cdc, metaData), written by headwater.

Why not delta-rs: deltalake 1.6.6's Python API commits adds (``create_write_transaction``)
but has no way to remove chosen files, which copy-on-write DML needs. So the commit file is
written here as the Delta protocol says, with put-if-absent semantics: on a local filesystem
a temp file is hard-linked to ``NNN.json`` (``link`` fails when the name exists, atomically).
delta-rs commits locally the same way, so both writers can share a table. Object storage needs
a conditional put; :func:`put_if_absent` is the one place to add it.

Conflicts follow Delta's WriteSerializable rules and delta-spark's conflict checker: when
another writer committed after the version we read, its actions are checked in delta-spark's
order and a conflict raises delta-spark's exception class (``headwater.errors.delta``), so
``except ConcurrentAppendException`` works as with delta-spark; nothing of ours is visible then.
Blind appends never conflict (unless this transaction changes the metadata); a protocol or
metadata change, the same application transaction, data added by a reading operation, or a
remove of a file we read or remove, does. delta-rs's own commit failures are classified the
same way (:func:`delta_rs_conflict`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from headwater.conf.layout import DELTA_LOG
from headwater.delta import row_tracking
from headwater.delta.log import DeltaLog, normalize_uri, open_table
from headwater.errors import HeadwaterError
from headwater.errors.delta import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)

ENGINE_INFO = "headwater-0.1 (Spark copy-on-write)"
# Operations whose adds depend on what they read: their adds are never "blind appends".
_READING_OPERATIONS = {"DELETE", "UPDATE", "MERGE", "OPTIMIZE", "RESTORE", "REPLACE TABLE"}


@dataclass
class Transaction:
    """What a DML read and wants to write, for :func:`commit`.

    read_version: the snapshot the changes were computed from. read_paths: log paths of every
    file the operation read (a concurrent remove of one of them is a conflict). actions: the
    add / remove / cdc / metaData actions (dicts in the log's JSON form). cleanup: deletes the
    files this transaction wrote, called when it cannot commit.
    """

    uri: str
    read_version: int
    operation: str
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    actions: list[dict[str, Any]]
    read_paths: Iterable[str] = ()
    cleanup: Callable[[], None] | None = None
    app_id: str | None = None  # a txn action's appId, when the caller sets one
    extra: dict[str, Any] = field(default_factory=dict)
    reads_data: bool = True
    read_filter: Callable[[dict[str, Any]], bool] | None = None
    conflict_code: str = "HW_DML_CONCURRENT_CONFLICT"


def log_path(path: str) -> str:
    """A file's path as an add action names it: URI-encoded (``%`` -> ``%25``, space ->
    ``%20``), as delta-rs and delta-spark write it; readers decode it (``resolve_file``)."""
    return quote(path, safe="/:@!$&'()*+,;=~")


def put_if_absent(uri: str, version: int, payload: bytes) -> bool:
    """Create ``_delta_log/<version>.json`` with ``payload`` unless it exists. True if created."""
    if "://" in uri:
        raise HeadwaterError(
            "HW_DML_STORAGE_UNSUPPORTED",
            f"headwater's Spark DML cannot commit to {uri} yet (object storage).",
            "A Delta commit needs an atomic put-if-absent; only the local filesystem one is "
            "implemented for the Spark path.",
            "Use the delta-rs path (engine='delta-rs'), which commits with conditional puts.",
        )
    log_dir = os.path.join(uri, DELTA_LOG)
    final = os.path.join(log_dir, f"{version:020d}.json")
    temp = os.path.join(log_dir, f".{version:020d}.json.{uuid.uuid4().hex}.tmp")
    with open(temp, "wb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temp, final)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temp)


ICT_PROPERTY = "delta.enableInCommitTimestamps"


def in_commit_timestamp(txn: Transaction, log: DeltaLog, version: int, now: int) -> int | None:
    """The ``inCommitTimestamp`` commit ``version`` must carry (Delta's in-commit timestamps:
    the table's ``delta.enableInCommitTimestamps``), or None. It is after the previous
    commit's (the protocol's monotonic rule). A commit whose metaData turns the property on
    or off decides; otherwise the previous commit does (every commit of such a table has one).
    Turning it on after version 0 needs enablement properties headwater does not write: the
    property is refused where tables are created or altered (table_protocol.UNMAINTAINED)."""
    meta = next((a["metaData"] for a in txn.actions if "metaData" in a), None)
    previous = log.read_commit(version - 1) if version > 0 else None
    info = next((a["commitInfo"] for a in previous or [] if "commitInfo" in a), {})
    last = info.get("inCommitTimestamp")
    if meta is not None:
        config = meta.get("configuration") or {}
        if str(config.get(ICT_PROPERTY, "false")).lower() != "true":
            return None
    elif last is None:
        return None
    return max(now, int(last) + 1) if last is not None else now


def _commit_info(txn: Transaction, version: int, log: DeltaLog | None = None
                 ) -> dict[str, Any]:
    now = int(time.time() * 1000)
    stamp = None if log is None else in_commit_timestamp(txn, log, version, now)
    info = {
        "timestamp": now if stamp is None else stamp,
        "operation": txn.operation,
        "operationParameters": {k: v if isinstance(v, str) else json.dumps(v)
                                for k, v in txn.parameters.items()},
        "readVersion": txn.read_version,
        "isolationLevel": "WriteSerializable",
        "isBlindAppend": False,
        "operationMetrics": {k: str(v) for k, v in txn.metrics.items()},
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
        **txn.extra,
    }
    if stamp is not None:  # the first field readers look for: the commit's time
        info = {"inCommitTimestamp": stamp, **info}
    if txn.read_version < 0:  # a table's first commit read nothing (readers want no -1)
        del info["readVersion"]
    return {"commitInfo": info}


def _normalized(path: str) -> str:
    return unquote(path)


_CONFLICT_WHY = ("Delta's WriteSerializable isolation (delta-spark's conflict checker): an "
                 "operation may commit after concurrent blind appends, never over changes to "
                 "what it read.")
_CONFLICT_FIX = "Run the operation again; it will read the new version."


def check_conflicts(txn: Transaction, version: int, actions: list[dict[str, Any]]) -> None:
    """Raise delta-spark's exception when the winning commit ``version`` (its ``actions``)
    conflicts with ``txn``, checked in delta-spark's order: protocol
    (ProtocolChangedException), metadata (MetadataChangedException), the same application
    transaction (ConcurrentTransactionException), data added that this transaction should
    have read (ConcurrentAppendException), a file it read removed
    (ConcurrentDeleteReadException), a file it removes removed (ConcurrentDeleteDeleteException).
    """
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    operation = str(info.get("operation", "TRANSACTION"))
    blind = info.get("isBlindAppend")
    if blind is None:
        blind = operation.upper() not in _READING_OPERATIONS
    kinds = {kind for a in actions for kind in a}

    def conflict(cls: type[DeltaConcurrentModificationException], what: str
                 ) -> DeltaConcurrentModificationException:
        return cls(f"{txn.operation} on {txn.uri} (read at version {txn.read_version}) "
                   f"conflicts with version {version} written concurrently by {operation}: it "
                   f"{what}. Nothing of this {txn.operation} was committed.",
                   _CONFLICT_WHY, _CONFLICT_FIX, code=txn.conflict_code)

    if "protocol" in kinds:
        raise conflict(ProtocolChangedException, "changed the table's protocol")
    if "metaData" in kinds:
        raise conflict(MetadataChangedException,
                       "changed the table's metadata (schema or properties)")
    if txn.app_id and any(a["txn"].get("appId") == txn.app_id for a in actions if "txn" in a):
        raise conflict(ConcurrentTransactionException,
                       f"committed the same application transaction {txn.app_id}")
    changes_metadata = any("metaData" in a for a in txn.actions)
    if txn.reads_data and (changes_metadata or not blind):
        added = next((a["add"] for a in actions if "add" in a
                      and a["add"].get("dataChange", True)
                      and (txn.read_filter is None or txn.read_filter(a["add"]))), None)
        if added is not None:
            where = added.get("partitionValues") or {}
            partition = f" in the partition {where}" if where else ""
            raise conflict(ConcurrentAppendException, f"added data ({operation}){partition} "
                           f"that this {txn.operation} should have read")
    read = {_normalized(p) for p in txn.read_paths}
    removed = [_normalized(a["remove"]["path"]) for a in actions if "remove" in a]
    hit = next((p for p in removed if p in read), None)
    if hit is not None:
        raise conflict(ConcurrentDeleteReadException,
                       f"removed the file {hit}, which this {txn.operation} read")
    ours = {_normalized(a["remove"]["path"]) for a in txn.actions if "remove" in a}
    hit = next((p for p in removed if p in ours), None)
    if hit is not None:
        raise conflict(ConcurrentDeleteDeleteException,
                       f"removed the file {hit}, which this {txn.operation} removes too")


# delta-rs's CommitFailedError texts (deltalake 1.6) -> delta-spark's class of the conflict.
_DELTA_RS_CONFLICTS: tuple[tuple[str, type[DeltaConcurrentModificationException]], ...] = (
    ("concurrent transactions added new data", ConcurrentAppendException),
    ("deleted data this operation read", ConcurrentDeleteReadException),
    ("deleted the same data your transaction deletes", ConcurrentDeleteDeleteException),
    ("metadata changed since last commit", MetadataChangedException),
    ("protocol changed since last commit", ProtocolChangedException),
    ("concurrent transaction failed", ConcurrentTransactionException),
)


def delta_rs_conflict(exc: BaseException, operation: str, uri: str,
                      code: str = "HW_DML_CONCURRENT_CONFLICT"
                      ) -> DeltaConcurrentModificationException | HeadwaterError:
    """delta-rs's ``CommitFailedError`` as delta-spark's exception class for the same
    conflict (ConcurrentWriteException when delta-rs's words name none); a refusal of the
    table's features is no conflict (running again fails again): HW_DELTA_UNSUPPORTED_FEATURE."""
    text = str(exc).strip()
    lowered = text.lower()
    if "unsupported table feature" in lowered or "unsupported reader feature" in lowered \
            or "unsupported writer feature" in lowered:
        return HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"{operation} on {uri} was refused by deltalake: {text.splitlines()[0]}.",
            "deltalake cannot commit to a table with these features.",
            "Write this table through headwater's own paths (INSERT, df.write, DeltaTable "
            "merge / update / delete), or drop the feature.")
    cls = next((c for words, c in _DELTA_RS_CONFLICTS if words in lowered),
               ConcurrentWriteException)
    first = text.splitlines()[0] if text else type(exc).__name__
    return cls(f"{operation} on {uri} conflicts with a commit written concurrently (delta-rs: "
               f"{first}). Nothing of this {operation} was committed.",
               _CONFLICT_WHY, _CONFLICT_FIX, code=code)


def commit(txn: Transaction, max_attempts: int = 10_000) -> int:
    """Commit ``txn`` as one new table version and return that version.

    Retries at the next version while the commits in between do not conflict (appends of
    streams, say); on a conflict or any failure, the transaction's files are deleted and the
    error raised. A commit is never lost: a version number is only ever created, not replaced.
    """
    uri = normalize_uri(txn.uri)
    log = DeltaLog(uri)
    version = txn.read_version + 1
    committed = False  # past this point the files are the table's: never cleaned up
    try:
        # row tracking: each attempt's adds get the ids above the mark of the version before
        state = row_tracking.state_at(log, txn.read_version)
        if row_tracking.supported(state.protocol):
            txn.actions = row_tracking.removes_with_ids(txn.actions, log, txn.read_version)
        for _ in range(max_attempts):
            actions = row_tracking.assign(txn.actions, state, version, uri)
            body = [_commit_info(txn, version, log), *actions]
            payload = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in body)
            if put_if_absent(uri, version, payload.encode("utf-8")):
                committed = True
                after = row_tracking.remember(log, version, state, actions)
                _checkpoint_if_due(uri, version, after.configuration)
                return version
            winner = log.read_commit(version)
            if winner is None:  # created and then cleaned up: cannot check it, so refuse
                raise ConcurrentWriteException(
                    f"{txn.operation} on {txn.uri}: version {version} appeared but cannot be "
                    "read. Nothing was committed.",
                    "Conflicts are checked against every commit made after the read version.",
                    "Run the statement again.", code=txn.conflict_code,
                )
            check_conflicts(txn, version, winner)
            state.saw(winner)
            version += 1
        raise ConcurrentWriteException(
            f"{txn.operation} on {txn.uri} found no free version after {max_attempts} attempts.",
            "Other writers kept committing first.", "Run the statement again.",
            code=txn.conflict_code,
        )
    except BaseException:
        if txn.cleanup is not None and not committed:
            txn.cleanup()
        raise


def _checkpoint_if_due(uri: str, version: int, config: dict[str, str]) -> None:
    """delta-rs checkpoints after its own commits (``delta.checkpointInterval``, default 100)
    and then deletes log files older than ``delta.logRetentionDuration`` (default 30 days,
    unless ``delta.enableExpiredLogCleanup=false``); commits written here do the same, at the
    same versions (every ``interval`` commits: versions interval-1, 2*interval-1, ...), so both
    writers of one table keep one checkpoint rhythm."""

    try:
        interval = int(config.get("delta.checkpointInterval", "100"))
        if interval > 0 and (version + 1) % interval == 0:
            table = open_table(uri, version=version)
            table.create_checkpoint()
            if config.get("delta.enableExpiredLogCleanup", "true").lower() != "false":
                table.cleanup_metadata()
    except Exception:  # noqa: BLE001 - a checkpoint is an optimization, the commit stands
        pass
