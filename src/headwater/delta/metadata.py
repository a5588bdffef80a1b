"""Table metadata changes deltalake has no API for (it can set properties, not remove them).

``unset_table_properties`` writes the same commit delta-spark writes for ``ALTER TABLE ...
UNSET TBLPROPERTIES``: a commitInfo and a metaData action equal to the current one minus the
keys, committed by :func:`headwater.delta.commit.commit` (put-if-absent, so only local tables).
As in delta-spark, a concurrent commit that changed the metadata or protocol meanwhile fails it
with ``MetadataChangedException`` / ``ProtocolChangedException``; data commits do not (the
change reads no rows), it then lands at the next free version.
"""

from __future__ import annotations

from collections.abc import Iterable

from headwater.delta.commit import Transaction, commit
from headwater.delta.log import normalize_uri, open_table
from headwater.errors import HeadwaterError


def unset_table_properties(path: str, keys: Iterable[str]) -> int:
    """Remove ``keys`` from the table's configuration in one commit; return its version."""

    if "://" in path and not path.startswith("file://"):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"UNSET TBLPROPERTIES on {path} is not supported.",
            "Removing a table property needs an atomic put-if-absent of the commit file, which "
            "headwater does only on local file systems.",
            "Set the property to its default value with SET TBLPROPERTIES instead.")
    keys = list(keys)
    uri = normalize_uri(str(path))
    table = open_table(uri)
    meta = table.metadata()
    configuration = {k: v for k, v in (meta.configuration or {}).items() if k not in keys}
    metadata = {"metaData": {
        "id": meta.id, "name": meta.name, "description": meta.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": table.schema().to_json(),
        "partitionColumns": list(meta.partition_columns),
        "configuration": configuration, "createdTime": meta.created_time}}
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation="UNSET TBLPROPERTIES",
        parameters={"properties": keys}, metrics={}, actions=[metadata],
        extra={"engineInfo": "headwater"}, reads_data=False,
        conflict_code="HW_DELTA_COMMIT_CONFLICT"))
