"""Table metadata changes deltalake has no API for (it can set properties, not remove them,
and cannot reorder columns or drop NOT NULL).

``unset_table_properties`` writes the same commit delta-spark writes for ``ALTER TABLE ...
UNSET TBLPROPERTIES``: a commitInfo and a metaData action equal to the current one minus the
keys; ``change_metadata`` the same for any change of the metaData action. The commit goes
through :func:`headwater.delta.commit.commit` (put-if-absent, so only local tables). As in
delta-spark, a concurrent commit that changed the metadata or protocol meanwhile fails the
change with ``MetadataChangedException`` / ``ProtocolChangedException``; data commits do not
(the change reads no rows): it lands at the next free version on top of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from headwater.delta.commit import Transaction, commit
from headwater.delta.log import normalize_uri, open_table
from headwater.errors import HeadwaterError

MetadataChange = Callable[[dict[str, Any]], dict[str, Any]]


def unset_table_properties(path: str, keys: Iterable[str]) -> int:
    """Remove ``keys`` from the table's configuration in one commit; return its version."""
    keys = list(keys)

    def change(meta: dict[str, Any]) -> dict[str, Any]:
        meta["configuration"] = {k: v for k, v in meta["configuration"].items()
                                 if k not in keys}
        return meta

    return change_metadata(path, "UNSET TBLPROPERTIES", {"properties": json.dumps(keys)},
                           change)


def change_metadata(path: str, operation: str, parameters: dict[str, str],
                    change: MetadataChange) -> int:
    """Commit ``change(current metaData action)`` as the table's new metaData (schema,
    configuration, description: what ALTER TABLE changes without rewriting data); return the
    commit's version."""
    if "://" in path and not path.startswith("file://"):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{operation} on {path} is not supported.",
            "Changing a table's metadata by hand needs an atomic put-if-absent of the commit "
            "file, which headwater does only on local file systems.",
            "Rewrite the table with CREATE OR REPLACE TABLE ... AS SELECT instead.")
    uri = normalize_uri(str(path))
    table = open_table(uri)
    meta = table.metadata()
    current = {
        "id": meta.id, "name": meta.name, "description": meta.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": table.schema().to_json(),
        "partitionColumns": list(meta.partition_columns),
        "configuration": dict(meta.configuration or {}), "createdTime": meta.created_time}
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation=operation, parameters=parameters,
        metrics={}, actions=[{"metaData": change(current)}], extra={"engineInfo": "headwater"},
        reads_data=False, conflict_code="HW_DELTA_COMMIT_CONFLICT"))
