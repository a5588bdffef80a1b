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

from headwater.conf.layout import SCHEMAS
from headwater.ingest.infer import add_new_fields


class SchemaStore:
    def __init__(self, location: str) -> None:
        self.dir = Path(location) / SCHEMAS

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

    def add_columns(self, observed: StructType, fallback: StructType, reason: str) -> int | None:
        """Save the latest version plus the fields only ``observed`` has; returns the version
        holding them. Concurrent writers each merge into the newest version, so none of their
        columns is lost."""
        while True:
            latest = self.latest()
            base = latest[1] if latest else fallback
            evolved, added = add_new_fields(base, observed)
            if not added:
                return latest[0] if latest else None
            version = self._write(evolved, reason, added, (latest[0] + 1) if latest else 0)
            if version is not None:
                return version  # else someone else wrote that number first: merge again

    def save(self, schema: StructType, reason: str, added: list[str] | None = None) -> int:
        """Write the next version; returns its number."""
        self.dir.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"schema": schema.jsonValue(), "reason": reason,
                           "added": added or [], "created_ms": int(time.time() * 1000)},
                          indent=1)
        while True:
            versions = self.versions()
            version = self._write_body(body, versions[-1] + 1 if versions else 0)
            if version is not None:
                return version  # else someone else took that number: take the next

    def _write(self, schema: StructType, reason: str, added: list[str], version: int) -> int | None:
        self.dir.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"schema": schema.jsonValue(), "reason": reason, "added": added,
                           "created_ms": int(time.time() * 1000)}, indent=1)
        return self._write_body(body, version)

    def _write_body(self, body: str, version: int) -> int | None:
        """Create ``<version>.json`` whole, or None if it exists (an exclusive hard link)."""
        tmp = self.dir / f".tmp-{uuid.uuid4().hex}"
        tmp.write_text(body)
        try:
            os.link(tmp, self.dir / f"{version}.json")
            return version
        except FileExistsError:
            return None
        finally:
            tmp.unlink(missing_ok=True)
