"""Table metadata changes deltalake has no API for (it can set properties, not remove them,
and cannot reorder columns or drop NOT NULL).

``unset_table_properties`` writes the same commit delta-spark writes for ``ALTER TABLE ...
UNSET TBLPROPERTIES``: a commitInfo and a metaData action equal to the current one minus the
keys. The commit file is written aside and hard-linked into place, which fails if the version
exists (the Delta log's mutual exclusion on a local file system): if another writer took the
version first, the change is re-read and retried on top of it. Object stores need
put-if-absent, so only local tables are supported here.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from headwater.conf.layout import DELTA_LOG
from headwater.delta.log import open_table
from headwater.errors import HeadwaterError

MetadataChange = Callable[[dict[str, Any]], dict[str, Any]]


def unset_table_properties(path: str, keys: Iterable[str], attempts: int = 5) -> int:
    """Remove ``keys`` from the table's configuration in one commit; return its version."""
    keys = list(keys)

    def change(meta: dict[str, Any]) -> dict[str, Any]:
        meta["configuration"] = {k: v for k, v in meta["configuration"].items()
                                 if k not in keys}
        return meta

    return change_metadata(path, "UNSET TBLPROPERTIES", {"properties": json.dumps(keys)},
                           change, attempts)


def change_metadata(path: str, operation: str, parameters: dict[str, str],
                    change: MetadataChange, attempts: int = 5) -> int:
    """Commit ``change(current metaData action)`` as the table's new metaData (schema,
    configuration, description: what ALTER TABLE changes without rewriting data); return the
    commit's version. ``change`` is called again on the newer metadata when another writer
    took the version first."""
    if "://" in path and not path.startswith("file://"):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{operation} on {path} is not supported.",
            "Changing a table's metadata by hand needs an atomic put-if-absent of the commit "
            "file, which headwater does only on local file systems.",
            "Rewrite the table with CREATE OR REPLACE TABLE ... AS SELECT instead.")
    log_dir = Path(path.removeprefix("file://")) / DELTA_LOG
    for _ in range(attempts):
        table = open_table(path)
        meta = table.metadata()
        version = table.version() + 1
        current = {
            "id": meta.id, "name": meta.name, "description": meta.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": table.schema().to_json(),
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration or {}), "createdTime": meta.created_time}
        actions = [
            {"commitInfo": {
                "timestamp": int(time.time() * 1000), "operation": operation,
                "operationParameters": parameters,
                "readVersion": version - 1, "isBlindAppend": False,
                "engineInfo": "headwater"}},
            {"metaData": change(current)},
        ]
        staged = log_dir / f".{version:020d}.json.{uuid.uuid4().hex}.tmp"
        staged.write_text("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n")
        try:
            # A hard link appears complete or not at all, and fails if the version exists.
            os.link(staged, log_dir / f"{version:020d}.json")
            return version
        except FileExistsError:
            continue  # a concurrent commit won this version: re-read and try the next one
        finally:
            staged.unlink(missing_ok=True)
    raise HeadwaterError(
        "HW_DELTA_COMMIT_CONFLICT",
        f"{operation} on {path} lost the race for a commit {attempts} times.",
        "Other writers committed to the table at the same time.",
        "Run the statement again when the table is less busy.")
