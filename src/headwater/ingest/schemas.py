"""Schema versions of a file stream, kept in its schema location.

``<location>/_schemas/<n>.json`` holds version n. A version is written once (created with an
exclusive link, so concurrent writers each get their own number) and never changed; the stream
reads the highest. A restart therefore never infers again, and evolution leaves a history.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from pyspark.sql.types import StructType


class SchemaStore:
    def __init__(self, location: str) -> None:
        self.dir = Path(location) / "_schemas"

    def versions(self) -> list[int]:
        if not self.dir.is_dir():
            return []
        return sorted(int(p.stem) for p in self.dir.glob("*.json") if p.stem.isdigit())

    def latest(self) -> tuple[int, StructType] | None:
        versions = self.versions()
        if not versions:
            return None
        return versions[-1], self.read(versions[-1])

    def read(self, version: int) -> StructType:
        data = json.loads((self.dir / f"{version}.json").read_text())
        return StructType.fromJson(data["schema"])

    def save(self, schema: StructType, reason: str, added: list[str] | None = None) -> int:
        """Write the next version; returns its number."""
        self.dir.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"schema": schema.jsonValue(), "reason": reason,
                           "added": added or [], "created_ms": int(time.time() * 1000)},
                          indent=1)
        tmp = self.dir / f".tmp-{uuid.uuid4().hex}"
        tmp.write_text(body)
        try:
            while True:
                versions = self.versions()
                version = versions[-1] + 1 if versions else 0
                try:
                    os.link(tmp, self.dir / f"{version}.json")
                    return version
                except FileExistsError:
                    continue  # someone else took that number: take the next
        finally:
            tmp.unlink(missing_ok=True)
