"""How far a flow is behind its sources, from the end offsets of its last batch.

- A Delta source (``reservoirId``/``reservoirVersion``): table versions not read yet.
- A file source (``hw_file_index``/``seq``): files listed but not read yet (files that landed
  since the last listing are not known until the next one).
Other sources (rate, Kafka, ...) have no lag here.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.conf.layout import DELTA_LOG
from headwater.conf.location import AnyPath, is_remote, location
from headwater.delta.log import open_table
from headwater.lakehouse import list_tables, parse_name


@dataclass
class Lag:
    pending: int
    unit: str  # "versions" | "files"

    def __str__(self) -> str:
        return f"{self.pending} {self.unit}"


class LagProbe:
    """Resolves Delta table ids to lakehouse tables once, then reads latest versions."""

    def __init__(self, root: str | Path) -> None:
        self.root = location(root)
        self._paths: dict[str, str] = {}

    def _table_path(self, table_id: str) -> str | None:
        if table_id not in self._paths:
            self._paths.update(_table_ids(self.root))
        return self._paths.get(table_id)

    def of(self, sources: list[dict[str, Any]]) -> Lag | None:
        total: Lag | None = None
        for source in sources:
            lag = self._one(source.get("endOffset"))
            if lag is None:
                continue
            if total is None:
                total = lag
            elif total.unit == lag.unit:
                total = Lag(total.pending + lag.pending, lag.unit)
        return total

    def _one(self, offset: Any) -> Lag | None:
        if not isinstance(offset, dict):
            return None
        if "reservoirId" in offset:
            path = self._table_path(str(offset["reservoirId"]))
            latest = -1 if path is None else local_version(path)
            if latest < 0:
                return None
            return Lag(max(0, latest - int(offset["reservoirVersion"])), "versions")
        if "hw_file_index" in offset:
            return Lag(_files_after(offset["hw_file_index"], int(offset["seq"])), "files")
        return None


def local_version(table_path: str | AnyPath) -> int:
    """The newest commit of a Delta table (local or on an object store) from its log's file
    names (-1: no table).

    Listing ``_delta_log`` is far cheaper than loading the snapshot, and it is all a lag or
    a "did it change" check needs.
    """
    log = location(table_path) / DELTA_LOG
    try:
        names = [p.name for p in log.iterdir()] if is_remote(log) else os.listdir(log)
    except OSError:
        return -1
    versions = [int(n[:20]) for n in names
                if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions, default=-1)


def _files_after(db_path: str, seq: int) -> int:
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("SELECT count(*) FROM files WHERE seq > ? AND state = 'new'",
                             (seq,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return 0
    return int(row[0])


def _table_ids(root: AnyPath) -> dict[str, str]:
    ids = {}
    for name in list_tables(root):
        path = str(root / parse_name(name).relative_path)
        try:
            ids[open_table(path).metadata().id] = path
        except Exception:  # noqa: BLE001 - half-created tables
            continue
    return ids
