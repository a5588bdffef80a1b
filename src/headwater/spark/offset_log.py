"""A streaming checkpoint's offset log, read back: what each micro-batch covers.

Spark writes ``<checkpoint>/offsets/<batch id>`` (its write-ahead log) before the batch runs:
a version line, the batch's metadata, then one line per source with the source's end offset
as JSON (``-`` for a source without one). The start offsets of batch N are the end offsets
logged for batch N - 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OFFSETS = "offsets"
COMMITS = "commits"  # <checkpoint>/commits/<batch id>: written once the batch committed


def logged_offsets(checkpoint: str | Path, batch_id: int) -> list[Any] | None:
    """Each source's end offset of ``batch_id`` (None for ``-``), in source order; None when
    the batch is not in the log (or the log cannot be read)."""
    try:
        lines = (Path(checkpoint) / OFFSETS / str(batch_id)).read_text().splitlines()
    except OSError:
        return None
    try:
        return [json.loads(line) if line.strip() not in ("", "-") else None
                for line in lines[2:]]
    except ValueError:
        return None
