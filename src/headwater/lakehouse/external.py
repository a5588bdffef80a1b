"""External tables: lakehouse names whose Delta table lives elsewhere.

delta-spark users create them with ``CREATE TABLE t ... LOCATION '/data/t'``,
``saveAsTable("t", path=...)`` or ``DeltaTable.create().tableName("t").location(...)``: the
name is the catalog's, the data stays at the path, and ``DROP TABLE`` forgets the name but
keeps the data. headwater's catalog is the lakehouse, so the name -> location pairs are kept
beside it, one small JSON file per name in ``<state>/_external/`` (the local state folder; the
root itself for a local lakehouse), written whole by a rename so a reader never sees half a
file. Every session of the lakehouse registers them at start like the tables under the root.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from headwater.conf.layout import EXTERNAL
from headwater.lakehouse.names import TableName, parse_name


def _file(state_dir: Path, tname: TableName) -> Path:
    return state_dir / EXTERNAL / f"{tname.qualified}.json"


def location_of(state_dir: Path, tname: TableName) -> str | None:
    """The external location of ``tname``, or None for a table under the root."""
    try:
        return str(json.loads(_file(state_dir, tname).read_text())["location"])
    except FileNotFoundError:
        return None


def record(state_dir: Path, tname: TableName, path: str) -> None:
    target = _file(state_dir, tname)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        json.dump({"name": tname.qualified, "location": path}, out)
    os.replace(staged, target)


def forget(state_dir: Path, tname: TableName) -> None:
    _file(state_dir, tname).unlink(missing_ok=True)


def names(state_dir: Path) -> list[str]:
    folder = state_dir / EXTERNAL
    if not folder.is_dir():
        return []
    return sorted(parse_name(f.stem).qualified for f in folder.glob("*.json"))
