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


def metadata_action(table: Any, schema_json: str | None = None,
                    configuration: dict[str, str] | None = None) -> dict[str, Any]:
    """The table's metaData action (deltalake snapshot ``table``) again, with a new schema
    (its JSON) and / or configuration: what a commit that changes either writes."""
    meta = table.metadata()
    return {"metaData": {
        "id": meta.id, "name": meta.name, "description": meta.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": table.schema().to_json() if schema_json is None else schema_json,
        "partitionColumns": list(meta.partition_columns),
        "configuration": dict(meta.configuration or {}) if configuration is None
        else configuration,
        "createdTime": meta.created_time}}


def change_metadata(path: str, operation: str, parameters: dict[str, str],
                    change: MetadataChange, table: Any = None, reads_data: bool = False,
                    protocol: dict[str, Any] | None = None) -> int:
    """Commit ``change(current metaData action)`` as the table's new metaData (schema,
    configuration, description: what ALTER TABLE changes without rewriting data); return the
    commit's version. ``table``: the snapshot (deltalake) the change was decided on (default:
    the latest); ``reads_data``: the change depends on the rows of that snapshot (SET NOT
    NULL checked them), so data added concurrently is a ConcurrentAppendException.
    protocol: a protocol action the change needs (a new type's feature), in the same commit."""
    if "://" in path and not path.startswith("file://"):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{operation} on {path} is not supported.",
            "Changing a table's metadata by hand needs an atomic put-if-absent of the commit "
            "file, which headwater does only on local file systems.",
            "Rewrite the table with CREATE OR REPLACE TABLE ... AS SELECT instead.")
    uri = normalize_uri(str(path))
    if table is None:
        table = open_table(uri)
    current = metadata_action(table)["metaData"]
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation=operation, parameters=parameters,
        metrics={}, actions=([protocol] if protocol else []) + [{"metaData": change(current)}],
        extra={"engineInfo": "headwater"},
        reads_data=reads_data, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


# --- ALTER TABLE on tables deltalake does not commit to ---------------------------------
# deltalake refuses every commit to a table with identity columns or clustering ("Unsupported
# table features required"), metadata changes included; headwater commits those itself
# (:func:`headwater.delta.write.checks.deltalake_writes` decides). These write the commit
# delta-spark writes for the statement.

# Properties whose value turns on a table feature: setting one on such a table needs the
# feature in the protocol already (headwater does not upgrade a protocol here).
FEATURE_OF_PROPERTY = {
    "delta.enablechangedatafeed": "changeDataFeed",
    "delta.enabledeletionvectors": "deletionVectors",
    "delta.appendonly": "appendOnly",
    "delta.columnmapping.mode": "columnMapping",
    "delta.enablerowtracking": "rowTracking",
    "delta.enabletypewidening": "typeWidening",
    "delta.checkpointpolicy": "v2Checkpoint",
    "delta.enableincommittimestamps": "inCommitTimestamp",
}


def set_properties(path: str, properties: dict[str, str], supported: Iterable[str]) -> int:
    """Set ``properties`` in the table's configuration: SET TBLPROPERTIES. ``supported``: the
    table features its protocol has (a property that turns on another one is refused)."""
    have = set(supported)
    for key, value in properties.items():
        needed = FEATURE_OF_PROPERTY.get(key.lower())
        if needed and needed not in have and str(value).lower() not in ("false", "none"):
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE",
                f"SET TBLPROPERTIES {key} = {value}: the table's protocol does not support "
                f"the {needed} feature it turns on.",
                "The table has identity columns or clustering, which headwater commits to "
                "itself; it sets properties there but does not upgrade the protocol.",
                f"Add the feature first: DeltaTable.forPath(spark, path).addFeatureSupport("
                f"'{needed}'), then set the property.",
                error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")

    def change(meta: dict[str, Any]) -> dict[str, Any]:
        meta["configuration"] = {**meta["configuration"], **properties}
        return meta

    return change_metadata(path, "SET TBLPROPERTIES",
                           {"properties": json.dumps(properties)}, change)


def set_description(path: str, description: str | None) -> int:
    """The table's comment (Delta's description): COMMENT ON TABLE / SET TBLPROPERTIES
    ('comment' = ...), recorded as delta-spark records it."""
    def change(meta: dict[str, Any]) -> dict[str, Any]:
        meta["description"] = description
        return meta

    return change_metadata(path, "SET TBLPROPERTIES",
                           {"properties": json.dumps({"comment": description})}, change)
