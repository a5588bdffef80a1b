"""Completing the event log from what Spark itself keeps.

Spark's listener bus is asynchronous and may drop events under load, and a process killed
with SIGKILL loses the rows still buffered (up to ``flush_seconds`` of them, plus the batch
that was running). Two sources fill those gaps:

- ``query.recentProgress`` (the last 100 batches of a query, with every metric) when a flow
  ends in this process;
- the checkpoint (``commits/<id>`` for the batches that committed, ``offsets/<id>`` for their
  source offsets) when a flow starts again after a crash: such batches are logged with
  ``recovered = true``, their offsets and the commit file's time, without metrics.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

from headwater.monitor.events import EventLog, now, read_events
from headwater.spark.offset_log import logged_offsets


def progress_dict(progress: Any) -> dict:
    """A PySpark ``StreamingQueryProgress`` (or its dict) as plain JSON data."""
    if isinstance(progress, dict) and not hasattr(progress, "json"):
        return progress
    text = getattr(progress, "json", None)
    return json.loads(text) if isinstance(text, str) else dict(progress)


def query_id(checkpoint: str | Path) -> str | None:
    meta = Path(checkpoint) / "metadata"
    try:
        return json.loads(meta.read_text().splitlines()[0])["id"]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def committed_batches(checkpoint: str | Path) -> list[int]:
    folder = Path(checkpoint) / "commits"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def logged_batches(root: str | Path, qid: str) -> set[int]:
    table = read_events(root, ["batch_id"],
                        (ds.field("query_id") == qid) & (ds.field("event") == "progress"))
    return {int(b) for b in pc.unique(table["batch_id"]).to_pylist() if b is not None}


def fill_from_checkpoint(log: EventLog, root: str | Path, flow: str,
                         checkpoint: str | Path) -> int:
    """Log every committed batch of the checkpoint that the event log lacks (recovered)."""
    checkpoint = Path(checkpoint)
    qid = query_id(checkpoint)
    if qid is None:
        return 0
    log.remember(qid, logged_batches(root, qid))
    added = 0
    for batch_id in committed_batches(checkpoint):
        if log.knows(qid, batch_id):
            continue
        end = logged_offsets(checkpoint, batch_id)
        start = logged_offsets(checkpoint, batch_id - 1) if batch_id > 0 else None
        sources = [{"startOffset": start[i] if start and i < len(start) else None,
                    "endOffset": offset} for i, offset in enumerate(end or [])]
        committed_at = dt.datetime.fromtimestamp(
            (checkpoint / "commits" / str(batch_id)).stat().st_mtime, dt.UTC)
        added += log.batch_row({
            "ts": now(), "event": "progress", "flow": flow, "table_name": flow.split("/")[0],
            "query_id": qid, "batch_id": batch_id, "trigger_time": committed_at,
            "sources": json.dumps(sources), "recovered": True,
            "message": "recovered from the checkpoint: the process ended before this batch's "
                       "progress was logged"})
    return added
