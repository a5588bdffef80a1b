"""cleanSource: archive or delete a file once the batch that read it is committed.

Spark calls a source's ``commit()`` late, and never for the last batch of an availableNow or
once run, so nothing here relies on it. Files are cleaned through an offset that is known to
be committed, from three places (each idempotent, tracked per file in the file index):

- a StreamingQueryListener in the driver: on each progress event, through the batch's *start*
  offset (everything before this batch was committed, commit log included); on a clean
  termination, through the last batch's end offset;
- the stream reader, when Spark asks for the next batch after ``start`` (``start`` is
  committed by then): a backstop for a driver that died before its listener ran;
- ``headwater run``, after each triggered flow ends.

An archived file keeps its path relative to the landing folder; if a file of that name was
archived before, the new one gets ``.<seq>`` appended. A replayed batch (a checkpoint deleted
and rebuilt) reads archived files from the archive.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()


def clean_through(index_path: str, seq: int) -> int:
    """Archive or delete the files up to ``seq`` per the index's cleanSource setting."""
    from headwater.ingest.index import FileIndex

    if not os.path.exists(index_path):
        return 0
    with _lock:
        index = FileIndex(index_path, root=os.path.dirname(index_path))
        try:
            mode = index.get("clean_source") or "off"
            if mode == "off":
                return 0
            done = int(index.get("cleaned_through") or 0)
            if seq <= done:
                return 0
            root = index.get("root") or ""
            archive = index.get("archive_dir") or ""
            rows = index.db.execute(
                "SELECT seq, path FROM file_paths WHERE seq > ? AND seq <= ? AND state = 'new' "
                "ORDER BY seq", (done, seq)).fetchall()
            updates = []
            for file_seq, path in rows:
                if mode == "delete":
                    try:
                        os.remove(path)
                    except FileNotFoundError:
                        pass
                    updates.append(("deleted", None, file_seq))
                else:
                    target = _archive(path, root, archive, file_seq)
                    updates.append(("archived" if target else "missing", target, file_seq))
            with index.transaction() as db:
                db.executemany("UPDATE files SET state=?, archived_to=? WHERE seq=?", updates)
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('cleaned_through', ?)",
                           (str(seq),))
            return len(updates)
        finally:
            index.close()


def _archive(path: str, root: str, archive: str, seq: int) -> str | None:
    relative = os.path.relpath(path, root)
    target = Path(archive, relative)
    if target.exists():
        target = target.with_name(f"{target.name}.{seq}")
        if target.exists():
            return str(target)  # moved by an earlier, interrupted clean
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return str(target) if target.exists() else None
    except OSError:  # another file system
        shutil.move(path, target)
    return str(target)


def committed_offsets(sources: list[Any], which: str) -> list[tuple[str, int]]:
    """(index path, seq) of every file-stream source in a progress's ``sources``."""
    found = []
    for source in sources:
        text = getattr(source, which, None) if not isinstance(source, dict) else source.get(which)
        offset = _parse(text)
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


def install_listener(spark: Any) -> None:
    """Register the cleaning listener on this session (once)."""
    from pyspark.sql.streaming import StreamingQueryListener

    if getattr(spark, "_headwater_clean_listener", None) is not None:
        return

    class CleanSourceListener(StreamingQueryListener):
        def __init__(self) -> None:
            self.last_end: dict[str, list[tuple[str, int]]] = {}

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            progress = event.progress
            try:
                for index_path, seq in committed_offsets(progress.sources, "startOffset"):
                    clean_through(index_path, seq)
                ends = committed_offsets(progress.sources, "endOffset")
                if ends:
                    self.last_end[str(progress.runId)] = ends
            except Exception:  # noqa: BLE001 - the reader's backstop cleans later
                pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            ends = self.last_end.pop(str(event.runId), [])
            if event.exception:
                return  # the last batch may not be committed
            for index_path, seq in ends:
                try:
                    clean_through(index_path, seq)
                except Exception:  # noqa: BLE001
                    pass

    listener = CleanSourceListener()
    spark.streams.addListener(listener)
    spark._headwater_clean_listener = listener
