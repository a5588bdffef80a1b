"""One Delta commit of arbitrary actions (add, remove, cdc, metaData), written by headwater.

Why not delta-rs: deltalake 1.6.6's Python API commits adds (``create_write_transaction``)
but has no way to remove chosen files, which copy-on-write DML needs. So the commit file is
written here as the Delta protocol says, with put-if-absent semantics: on a local filesystem
a temp file is hard-linked to ``NNN.json`` (``link`` fails when the name exists, atomically).
delta-rs commits locally the same way, so both writers can share a table. Object storage needs
a conditional put; :func:`put_if_absent` is the one place to add it.

Conflicts follow Delta's WriteSerializable rules: when another writer committed after the
version we read, its actions are checked; blind appends never conflict, a commit that removed a
file we read (or changed the metadata or protocol) does, and then nothing of ours is visible.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from headwater.conf.layout import DELTA_LOG
from headwater.delta.log import DeltaLog, normalize_uri, open_table
from headwater.errors import HeadwaterError

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


def _commit_info(txn: Transaction, version: int) -> dict[str, Any]:
    info = {
        "timestamp": int(time.time() * 1000),
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
    if txn.read_version < 0:  # a table's first commit read nothing (readers want no -1)
        del info["readVersion"]
    return {"commitInfo": info}


def _normalized(path: str) -> str:
    return unquote(path)


def check_conflicts(txn: Transaction, version: int, actions: list[dict[str, Any]]) -> None:
    """Raise HW_DML_CONCURRENT_CONFLICT when the winning commit ``version`` conflicts."""
    read = {_normalized(p) for p in txn.read_paths}
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    operation = str(info.get("operation", "unknown"))
    blind = info.get("isBlindAppend")
    if blind is None:
        blind = operation.upper() not in _READING_OPERATIONS
    reason = None
    for action in actions:
        if "metaData" in action:
            reason = "changed the table's metadata (schema or properties)"
        elif "protocol" in action:
            reason = "changed the table's protocol"
        elif "remove" in action and _normalized(action["remove"]["path"]) in read:
            reason = f"removed the file {action['remove']['path']}, which this {txn.operation} read"
        elif "add" in action and action["add"].get("dataChange", True) and not blind:
            reason = (f"added files that depend on what it read ({operation}); they may hold "
                      "rows this operation should have seen")
        elif "txn" in action and txn.app_id and action["txn"].get("appId") == txn.app_id:
            reason = f"committed the same application transaction {txn.app_id}"
        if reason:
            break
    if reason:
        raise HeadwaterError(
            "HW_DML_CONCURRENT_CONFLICT",
            f"{txn.operation} on {txn.uri} (read at version {txn.read_version}) conflicts with "
            f"version {version} written concurrently by {operation}: it {reason}. Nothing of "
            f"this {txn.operation} was committed.",
            "Delta's WriteSerializable isolation: an operation may commit after concurrent "
            "blind appends, never over changes to the files it read.",
            "Run the statement again; it will read the new version.",
        )


def commit(txn: Transaction, max_attempts: int = 10_000) -> int:
    """Commit ``txn`` as one new table version and return that version.

    Retries at the next version while the commits in between do not conflict (appends of
    streams, say); on a conflict or any failure, the transaction's files are deleted and the
    error raised. A commit is never lost: a version number is only ever created, not replaced.
    """
    uri = normalize_uri(txn.uri)
    log = DeltaLog(uri)
    version = txn.read_version + 1
    try:
        for _ in range(max_attempts):
            body = [_commit_info(txn, version), *txn.actions]
            payload = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in body)
            if put_if_absent(uri, version, payload.encode("utf-8")):
                _checkpoint_if_due(uri, version)
                return version
            winner = log.read_commit(version)
            if winner is None:  # created and then cleaned up: cannot check it, so refuse
                raise HeadwaterError(
                    "HW_DML_CONCURRENT_CONFLICT",
                    f"{txn.operation} on {txn.uri}: version {version} appeared but cannot be "
                    "read. Nothing was committed.",
                    "Conflicts are checked against every commit made after the read version.",
                    "Run the statement again.",
                )
            check_conflicts(txn, version, winner)
            version += 1
        raise HeadwaterError(
            "HW_DML_CONCURRENT_CONFLICT",
            f"{txn.operation} on {txn.uri} found no free version after {max_attempts} attempts.",
            "Other writers kept committing first.", "Run the statement again.",
        )
    except BaseException:
        if txn.cleanup is not None:
            txn.cleanup()
        raise


def _checkpoint_if_due(uri: str, version: int) -> None:
    """delta-rs checkpoints after its own commits (``delta.checkpointInterval``, default 100)
    and then deletes log files older than ``delta.logRetentionDuration`` (default 30 days,
    unless ``delta.enableExpiredLogCleanup=false``); commits written here do the same, at the
    same versions (every ``interval`` commits: versions interval-1, 2*interval-1, ...), so both
    writers of one table keep one checkpoint rhythm."""

    try:
        table = open_table(uri, version=version)
        config = table.metadata().configuration or {}
        interval = int(config.get("delta.checkpointInterval", "100"))
        if interval > 0 and (version + 1) % interval == 0:
            table.create_checkpoint()
            if config.get("delta.enableExpiredLogCleanup", "true").lower() != "false":
                table.cleanup_metadata()
    except Exception:  # noqa: BLE001 - a checkpoint is an optimization, the commit stands
        pass
