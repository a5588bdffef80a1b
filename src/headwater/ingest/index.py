"""Which files a file stream has found, in the order it found them, kept on disk.

Spark's file source keeps every file it has seen in driver memory and lists the whole
directory tree for every batch. Here each discovered file gets a sequence number in a SQLite
file (stream offsets are just sequence numbers), and a listing only reads directories whose
change time (ctime) moved since the last listing: a file created, renamed in or removed
changes its folder's ctime, which no tool can set back (``rsync -a`` or ``tar`` restore
mtimes, not ctimes). Memory and planning time then follow the files that are new, not the
files already seen.

A directory changed within the last ``_RACY_SECONDS`` is listed again next time: file-system
timestamps are coarse, and a file created in the same tick as the listing would otherwise
hide behind an unchanged ctime.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from headwater.ingest import landing
from headwater.ingest.formats.common import FileEntry
from headwater.ingest.landing import hidden

_RACY_SECONDS = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dirs (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    parent INTEGER,
    mtime_ns INTEGER              -- the folder's ctime when listed; NULL: list again next time
);
CREATE INDEX IF NOT EXISTS dirs_parent ON dirs(parent);
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    dir INTEGER NOT NULL,         -- dirs.id: paths are stored once per folder
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'new',      -- new | skipped | archived | deleted | missing
    archived_to TEXT
);
-- a name is live once per folder; an archived name may land again as a new file
CREATE UNIQUE INDEX IF NOT EXISTS files_live ON files(dir, name) WHERE state IN ('new', 'skipped');
CREATE VIEW IF NOT EXISTS file_paths AS
    SELECT f.seq, d.path || '/' || f.name AS path, f.size, f.state, f.archived_to
    FROM files f JOIN dirs d ON d.id = f.dir;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


class FileIndex:
    def __init__(self, db_path: str, root: str,
                 files: landing.FileFilter = landing.ALL_FILES) -> None:
        self.db_path = db_path
        self.root = landing.normalize(root)
        self.files = files
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(db_path, timeout=60, isolation_level=None,
                                  check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.execute("PRAGMA cache_size=-4000")  # 4 MB: memory stays flat as files grow
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # --- meta ----------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # --- discovery -----------------------------------------------------------------------

    def clean_due(self, seq: int) -> tuple[str, int] | None:
        """(cleanSource mode, files cleaned through) when files up to ``seq`` are still to be
        cleaned; None when cleaning is off or done. Call inside :meth:`transaction`."""
        mode = self.get("clean_source") or "off"
        done = int(self.get("cleaned_through") or 0)
        return None if mode == "off" or seq <= done else (mode, done)

    def record_cleaned(self, db: sqlite3.Connection, seq: int) -> None:
        """Files up to ``seq`` are cleaned (never moves the mark back)."""
        done = int(self.get("cleaned_through") or 0)
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('cleaned_through', ?)",
                   (str(max(seq, done)),))

    def discover(self, state: str = "new") -> int:
        """List what changed and record new files (as ``state``); returns the highest seq."""
        if landing.is_remote(self.root):
            return self._discover_remote(state)
        if not os.path.isdir(self.root):
            return self.max_seq()
        found: list[tuple[int, str, str, int]] = []  # (mtime, name, folder, size)
        listed: list[tuple[str, str | None, int | None]] = []  # (folder, parent, mtime)
        known_dirs = self._known_dirs()
        now_ns = time.time_ns()
        stack: list[tuple[str, str | None]] = [(self.root, None)]
        visited: set[tuple[int, int]] = set()  # (device, inode): symlinked folders once
        while stack:
            directory, parent = stack.pop()
            try:
                st = os.stat(directory)
            except (FileNotFoundError, PermissionError):
                continue
            if (st.st_dev, st.st_ino) in visited:
                continue
            visited.add((st.st_dev, st.st_ino))
            mtime = st.st_ctime_ns
            dir_id, known = known_dirs.get(directory, (None, "absent"))
            if known == mtime:  # unchanged: its files are known, but its subfolders may change
                stack.extend((d, directory) for d in self._subdirs(dir_id))
                continue
            settled = mtime if now_ns - mtime > _RACY_SECONDS * 1e9 else None
            listed.append((directory, parent, settled))
            seen = self._live_names(dir_id) if dir_id is not None else set()
            try:
                entries = list(os.scandir(directory))
            except (FileNotFoundError, PermissionError):
                continue
            for entry in entries:
                if hidden(entry.name):
                    continue
                if entry.is_dir(follow_symlinks=True):
                    stack.append((entry.path, directory))
                    continue
                if entry.name in seen or (self.files and not self.files.matches(
                        os.path.relpath(entry.path, self.root).replace(os.sep, "/"))):
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                found.append((st.st_mtime_ns, entry.name, directory, st.st_size))
        found.sort()
        with self.transaction() as db:
            for directory, parent, settled in listed:  # parents come before their children
                parent_id = known_dirs[parent][0] if parent else None
                db.execute("INSERT INTO dirs(path, parent, mtime_ns) VALUES (?, ?, ?) "
                           "ON CONFLICT(path) DO UPDATE SET mtime_ns=excluded.mtime_ns",
                           (directory, parent_id, settled))
                row = db.execute("SELECT id FROM dirs WHERE path=?", (directory,)).fetchone()
                known_dirs[directory] = (row[0], settled)
            db.executemany(
                "INSERT OR IGNORE INTO files(dir, name, size, mtime_ns, state) "
                "VALUES (?, ?, ?, ?, ?)",
                [(known_dirs[d][0], name, size, m, state) for m, name, d, size in found])
        return self.max_seq()

    def _discover_remote(self, state: str) -> int:
        """An object store has no folder change times: list the whole prefix, record the
        names not live in the index yet (a file archived by copy-then-delete stays live, state
        'new', until its delete is recorded, so a crash in between never re-ingests it)."""
        live = set(self.db.execute("SELECT d.path, f.name FROM files f JOIN dirs d "
                                   "ON d.id = f.dir WHERE f.state IN ('new', 'skipped')"))
        found = [f for f in landing.list_files(self.root, self.files)
                 if (f.folder, f.name) not in live]
        if not found:
            return self.max_seq()
        known_dirs = self._known_dirs()
        with self.transaction() as db:
            for folder in sorted({f.folder for f in found} - set(known_dirs)):
                db.execute("INSERT INTO dirs(path, parent, mtime_ns) VALUES (?, NULL, NULL) "
                           "ON CONFLICT(path) DO NOTHING", (folder,))
            known_dirs = self._known_dirs()
            db.executemany(
                "INSERT OR IGNORE INTO files(dir, name, size, mtime_ns, state) "
                "VALUES (?, ?, ?, ?, ?)",
                [(known_dirs[f.folder][0], f.name, f.size, f.mtime_ns, state) for f in found])
        return self.max_seq()

    def folder_times(self, folders: Iterable[str] | None = None) -> dict[str, int | None]:
        """Each folder's change time (``st_ctime_ns``; None when it is gone): the root and
        the known folders, or ``folders``. A stat each, no listing: a file created, renamed
        in or removed moves its folder's change time."""
        if folders is None:
            folders = [self.root, *(r[0] for r in self.db.execute("SELECT path FROM dirs"))]
        times: dict[str, int | None] = {}
        for folder in folders:
            try:
                times[folder] = os.stat(folder).st_ctime_ns
            except OSError:
                times[folder] = None
        return times

    def _known_dirs(self) -> dict[str, tuple[int, int | None]]:
        return {path: (i, m) for i, path, m in self.db.execute("SELECT id, path, mtime_ns FROM dirs")}

    def _subdirs(self, dir_id: int) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT path FROM dirs WHERE parent=?", (dir_id,))]

    def _live_names(self, dir_id: int) -> set[str]:
        return {r[0] for r in self.db.execute(
            "SELECT name FROM files WHERE dir=? AND state IN ('new', 'skipped')", (dir_id,))}

    # --- offsets -------------------------------------------------------------------------

    def max_seq(self) -> int:
        return self.db.execute("SELECT coalesce(max(seq), 0) FROM files").fetchone()[0]

    def end_for(self, start: int, cap: int | None, max_files: int | None,
                max_bytes: int | None) -> int:
        """The last seq of the next batch after ``start`` under the read limits."""
        cap = self.max_seq() if cap is None else cap
        if max_files is None and max_bytes is None:
            return max(start, cap)
        query = ("SELECT seq, size FROM files WHERE seq > ? AND seq <= ? AND state != 'skipped' "
                 "ORDER BY seq LIMIT ?")
        rows = self.db.execute(query, (start, cap, max_files or 1 << 62))
        end, total = start, 0
        for seq, size in rows:
            if max_bytes is not None and total and total + size > max_bytes:
                break
            end, total = seq, total + size
        return end if end > start else start

    def files_between(self, start: int, end: int) -> list[FileEntry]:
        # (the file_paths view of indexes made before mtime_ns was read has no such column)
        rows = self.db.execute(
            "SELECT f.seq, d.path || '/' || f.name, f.size, f.archived_to, f.mtime_ns "
            "FROM files f JOIN dirs d ON d.id = f.dir "
            "WHERE f.seq > ? AND f.seq <= ? AND f.state != 'skipped' ORDER BY f.seq",
            (start, end))
        return [FileEntry(*r) for r in rows]

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM files").fetchone()[0]
