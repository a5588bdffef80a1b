"""cleanSource: archive or delete a file once the batch that read it is committed.

Spark calls a source's ``commit()`` late, and never for the last batch of an availableNow or
once run, so nothing here relies on it. Files are cleaned through an offset that is known to
be committed (idempotent, tracked per file in the file index), by the query that read them or
the run that started it, never later in the background:

- the stream reader, when Spark asks for the next batch after ``start`` (``start`` is
  committed by then). An availableNow query asks once more after its last batch, so its files
  are cleaned before ``awaitTermination()`` returns; a query stopped otherwise (or a once
  trigger) leaves its last batch's files to its next run, as Spark's own cleanSource does;
- ``headwater run``, after each flow ends (``scheduler._clean_committed``).

There is no streaming listener: Spark delivers listener events asynchronously, after
``awaitTermination()`` has returned, so a listener's cleaning acted after its query ended,
with the settings the file index had by then (a later run's), not its query's.

An archived file keeps its path relative to the landing folder; if a file of that name was
archived before, the new one gets ``.<seq>`` appended. A replayed batch (a checkpoint deleted
and rebuilt) reads archived files from the archive.

Landing folders (or archives) on object stores are cleaned by ``clean_remote.py``: there is no
atomic rename there, an archive is a copy then a delete.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from headwater.ingest import landing
from headwater.ingest.clean_remote import clean_remote
from headwater.ingest.index import FileIndex

log = logging.getLogger("headwater.ingest")
_lock = threading.Lock()


def clean_through(index_path: str, seq: int) -> int:
    """Archive or delete the files up to ``seq`` per the index's cleanSource setting.

    The stream reader (its own Python worker) and ``headwater run`` (the driver) both clean:
    the whole pass holds the index's write lock, so each file is moved once and recorded once.
    """
    if not os.path.exists(index_path):
        return 0
    with _lock:
        index = FileIndex(index_path, root=os.path.dirname(index_path))
        try:
            if landing.is_remote(index.get("root")) or landing.is_remote(index.get("archive_dir")):
                return clean_remote(index, seq)
            with index.transaction() as db:
                due = index.clean_due(seq)
                if due is None:
                    return 0
                mode, done = due
                root = index.get("root") or ""
                archive = index.get("archive_dir") or ""
                rows = db.execute(
                    "SELECT f.seq, p.path, f.size, f.mtime_ns FROM files f JOIN file_paths p "
                    "ON p.seq = f.seq WHERE f.seq > ? AND f.seq <= ? AND f.state = 'new' "
                    "ORDER BY f.seq", (done, seq)).fetchall()
                updates = [_clean_one(mode, path, size, mtime, root, archive, file_seq)
                           for file_seq, path, size, mtime in rows]
                db.executemany("UPDATE files SET state=?, archived_to=? WHERE seq=?", updates)
                index.record_cleaned(db, seq)
            return len(updates)
        finally:
            index.close()


def clean_quietly(index_path: str, seq: int) -> None:
    """clean_through for callers that must not fail (a stream, the end of a run): a file that
    cannot be moved stays where it is, with a warning, and is tried again next time."""
    try:
        clean_through(index_path, seq)
    except Exception as exc:  # noqa: BLE001
        log.warning("cleanSource through file %s of %s failed: %s", seq, index_path, exc)


def _clean_one(mode: str, path: str, size: int, mtime: int, root: str, archive: str,
               seq: int) -> tuple[str, str | None, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and (st.st_size, st.st_mtime_ns) != (size, mtime):
        # Rewritten in place since it was read: that content was never ingested. Leave it.
        log.warning("%s changed after it was ingested; cleanSource leaves it in place", path)
        return "changed", None, seq
    if mode == "delete":
        if st is not None:
            os.remove(path)
        return "deleted", None, seq
    target = _archive(path, root, archive, seq, present=st is not None)
    return ("archived" if target else "missing"), target, seq


def _archive(path: str, root: str, archive: str, seq: int, present: bool) -> str | None:
    target = Path(archive, os.path.relpath(path, root))
    renamed = target.with_name(f"{target.name}.{seq}")
    if not present:  # moved by an earlier, interrupted clean (not yet recorded)
        for candidate in (renamed, target):
            if candidate.exists():
                return str(candidate)
        return None
    if target.exists():
        target = renamed  # an earlier file of the same name is archived already
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(path, target)
    except OSError:  # another file system
        shutil.move(path, target)
    return str(target)


def committed_offsets(sources: list[dict[str, Any]], which: str) -> list[tuple[str, int]]:
    """(index path, seq) of every file-stream source in a progress's ``sources`` (dicts: the
    progress's JSON, or PySpark's ``SourceProgress``, a dict too)."""
    found = []
    for source in sources:
        offset = _parse(source.get(which))
        if offset:
            found.append(offset)
    return found


def _parse(text: Any) -> tuple[str, int] | None:
    if not text:
        return None
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    if isinstance(data, dict) and "hw_file_index" in data and "seq" in data:
        return data["hw_file_index"], int(data["seq"])
    return None
