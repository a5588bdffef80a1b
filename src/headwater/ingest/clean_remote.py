"""cleanSource for landing folders on object stores (``s3://...``), or archives there.

An object store has no rename: an archive is a **copy, then a delete**, so it is not atomic.
To survive a crash anywhere in between, each file's archive target is chosen and committed to
the file index (``archived_to``, state still ``new``) *before* anything is copied:

- crash before or during the copy: the file is still in the landing folder; the next clean
  copies it again to the same recorded target (overwriting a partial or complete copy);
- crash between copy and delete: the file is in **both** places. Its index row is still live
  (state ``new``), so listing the landing folder again never records it as a new file (no
  re-ingestion); the next clean copies it again to the same target and deletes it;
- crash after the delete, before the state is recorded: the next clean finds the source gone
  and the target present, and records it archived.

A replayed batch reads ``archived_to`` first, then the landing path: either copy has the same
bytes. A file rewritten in place after it was read (other size or modification second) is
left where it is (state ``changed``), as on a local folder. Delete needs no such care: a
deleted file that is not yet recorded is found gone next time and recorded deleted.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import TYPE_CHECKING

from headwater.conf import storage
from headwater.ingest import landing

if TYPE_CHECKING:
    from headwater.ingest.index import FileIndex

log = logging.getLogger("headwater.ingest")


def clean_remote(index: FileIndex, seq: int) -> int:
    """Archive or delete the files up to ``seq``; returns how many were cleaned."""
    root = index.get("root") or ""
    if index.get("storage_options") == "given" and not storage.options_for(root):
        # The stream got its credentials as reader options, which this process (the driver,
        # when format("cloudFiles") was used directly) never saw: the ambient ones would
        # reach another account or hang on instance metadata. The stream reader cleans.
        return 0
    with index.transaction() as db:
        due = index.clean_due(seq)
        if due is None:
            return 0
        mode, done = due
        archive = index.get("archive_dir") or ""
        rows = _pending(db, done, seq)
        if mode == "archive":
            _plan_targets(db, rows, root, archive)
            rows = _pending(db, done, seq)
    # The targets are committed: from here a crash leaves every file recoverable (docstring).
    updates = [_clean_one(mode, path, size, mtime, target, file_seq)
               for file_seq, path, size, mtime, target in rows]
    with index.transaction() as db:
        db.executemany("UPDATE files SET state=?, archived_to=? WHERE seq=? AND state='new'",
                       updates)
        index.record_cleaned(db, seq)
    return len(updates)


def _pending(db: sqlite3.Connection, done: int, seq: int) -> list[tuple]:
    return db.execute(
        "SELECT f.seq, p.path, f.size, f.mtime_ns, f.archived_to FROM files f "
        "JOIN file_paths p ON p.seq = f.seq WHERE f.seq > ? AND f.seq <= ? "
        "AND f.state = 'new' ORDER BY f.seq", (done, seq)).fetchall()


def _plan_targets(db: sqlite3.Connection, rows: list[tuple], root: str, archive: str) -> None:
    """Record where each file goes: its relative path under ``archive``, with ``.<seq>``
    appended when that name is archived already (or planned in this pass)."""
    planned = {r[0] for r in db.execute(
        "SELECT archived_to FROM files WHERE archived_to IS NOT NULL")}
    updates = []
    for file_seq, path, _size, _mtime, target in rows:
        if target:
            continue  # planned by an earlier, interrupted clean: keep it
        target = landing.join(archive, landing.relative(path, root))
        if target in planned or landing.exists(target):
            target = f"{target}.{file_seq}"
        planned.add(target)
        updates.append((target, file_seq))
    db.executemany("UPDATE files SET archived_to=? WHERE seq=?", updates)


def _clean_one(mode: str, path: str, size: int, mtime: int, target: str | None,
               seq: int) -> tuple[str, str | None, int]:
    now = _stat(path)
    if now is not None and not landing.same_content_stamp((size, mtime), now):
        log.warning("%s changed after it was ingested; cleanSource leaves it in place", path)
        return "changed", None, seq
    if mode == "delete":
        if now is not None:
            landing.delete(path)
        return "deleted", None, seq
    assert target is not None
    if now is None:  # copied and deleted by an earlier, interrupted clean (or gone)
        if landing.exists(target):
            return "archived", target, seq
        return "missing", None, seq
    landing.copy(path, target)
    landing.delete(path)
    return "archived", target, seq


def _stat(path: str) -> tuple[int, int] | None:
    if landing.is_remote(path):
        return landing.stat(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns
