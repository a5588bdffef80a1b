"""Committing written files with headwater's own commit, for tables deltalake cannot write.

deltalake 1.6.6 refuses every commit to a table with identity columns or liquid clustering
("Unsupported table features required"), and its write transaction cannot change the table's
metadata with the data, which an identity column's high-water mark needs (the commit that adds
generated values raises it). So appends and overwrites of such tables, and of tables with
generated columns, are committed here through :mod:`headwater.delta.commit`: the add actions
(removes of every current file for an overwrite), the metaData with the new schema when it
changed, and the ``txn`` action of an exactly-once writer, in one version.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql.types import StructType

from headwater.delta.commit import Transaction, commit, log_path
from headwater.delta.log import FILE_COLUMNS, add_actions, deletion_vector_paths
from headwater.delta.schema import format_partition_value
from headwater.errors import HeadwaterError

# Writer features deltalake 1.6.6 refuses to commit to.
_NOT_DELTALAKE = {"identityColumns", "clustering", "domainMetadata"}
# Writer features whose rules a commit of added / removed whole files follows (or that do
# not concern such a commit): tables with others (row tracking, in-commit timestamps, ...)
# are not committed to here.
OWN_COMMIT_WRITER_FEATURES = {
    "appendOnly", "invariants", "changeDataFeed", "timestampNtz", "domainMetadata",
    "v2Checkpoint", "vacuumProtocolCheck", "checkConstraints", "deletionVectors",
    "generatedColumns", "identityColumns", "clustering", "typeWidening", "variantType",
}


@dataclass(frozen=True)
class StreamUpdate:
    """One micro-batch of a streaming write, recorded as delta-spark's DeltaSink records it
    (``DeltaOperations.StreamingUpdate``): operation STREAMING UPDATE with parameters
    outputMode (``Append`` / ``Complete``), queryId (the stream's id, kept in its
    checkpoint) and epochId (the batch id), and the metrics numAddedFiles, numRemovedFiles,
    numOutputRows, numOutputBytes."""

    output_mode: str
    query_id: str
    epoch_id: int

    OPERATION: ClassVar[str] = "STREAMING UPDATE"

    def parameters(self) -> dict[str, str]:
        return {"outputMode": self.output_mode, "queryId": self.query_id,
                "epochId": str(self.epoch_id)}

    @staticmethod
    def metrics(adds: list[dict[str, Any]], removed: int) -> dict[str, str]:
        rows = sum(json.loads(a["stats"])["numRecords"] for a in adds if a.get("stats"))
        return {"numAddedFiles": str(len(adds)), "numRemovedFiles": str(removed),
                "numOutputRows": str(rows),
                "numOutputBytes": str(sum(int(a["size"]) for a in adds))}


def own_commit_allowed(table: Any) -> bool:
    """True when :func:`commit_write` may commit to ``table``: every writer feature it
    supports is one whose rules such a commit follows (:data:`OWN_COMMIT_WRITER_FEATURES`),
    and it has no column mapping (files name columns by physical name)."""
    protocol = table.protocol()
    if protocol.min_writer_version >= 7 and \
            set(protocol.writer_features or []) - OWN_COMMIT_WRITER_FEATURES:
        return False
    config = table.metadata().configuration or {}
    return str(config.get("delta.columnMapping.mode", "none")) == "none"


def deltalake_writes(table: Any) -> bool:
    """False when deltalake would refuse to commit to ``table`` (identity columns,
    clustering): headwater commits to it itself."""
    protocol = table.protocol()
    if protocol.min_writer_version == 6:  # legacy writer 6: identity columns
        return False
    return not (set(protocol.writer_features or []) & _NOT_DELTALAKE)


def commit_write(uri: str, table: Any, adds: list[dict[str, Any]], mode: str,
                 txn: tuple[str, int] | None = None, schema: StructType | None = None,
                 cleanup: Callable[[], None] | None = None,
                 user_metadata: str | None = None,
                 stream: StreamUpdate | None = None) -> int | None:
    """Commit ``adds`` to the table at ``uri`` on top of ``table`` (the deltalake snapshot
    the write read) in one version: mode "append", or "overwrite" (every current file
    removed); ``schema``: the table's new schema (e.g. raised identity high-water marks);
    ``txn``: (appId, version) of an exactly-once writer. Returns the version, or None when
    ``txn`` was committed before (nothing is written twice; ``cleanup`` deletes the new files
    then). user_metadata: the commitInfo's ``userMetadata``. stream: the micro-batch this
    commit writes (recorded as STREAMING UPDATE instead of WRITE). An overwrite of an
    append-only table is refused (delta-spark's DELTA_CANNOT_MODIFY_APPEND_ONLY)."""
    if txn is not None:
        done = table.transaction_version(txn[0])
        if done is not None and done >= txn[1]:
            if cleanup is not None:
                cleanup()
            return None
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    meta = table.metadata()
    if schema is not None:
        actions.append({"metaData": {
            "id": meta.id, "name": meta.name, "description": meta.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema.jsonValue(), separators=(",", ":")),
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration or {}), "createdTime": meta.created_time}})
    read: list[str] = []
    if mode == "overwrite":
        if str((meta.configuration or {}).get("delta.appendOnly", "false")).lower() == "true":
            if cleanup is not None:
                cleanup()
            raise HeadwaterError(
                "HW_DELTA_APPEND_ONLY",
                f"This table is configured to only allow appends: {uri} cannot be "
                "overwritten (nor written by a complete-mode stream).",
                "delta.appendOnly=true forbids removing files.",
                "Append instead, or set 'delta.appendOnly' = 'false' first "
                "(ALTER TABLE ... SET TBLPROPERTIES).",
                error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY")
        if deletion_vector_paths(table):  # deltalake does not report the vectors to remove
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE",
                f"Overwriting the table at {uri} is not supported: it has deletion vectors.",
                "An overwrite must remove each file with its deletion vector, which deltalake "
                "does not report.", "Purge them first (REORG TABLE ... APPLY (PURGE) in "
                "delta-spark), or delete the rows with DELETE and append.")
        partition_columns = list(meta.partition_columns)
        for row in add_actions(table, columns=FILE_COLUMNS).to_pylist():
            values = row.get("partition") or {}
            actions.append({"remove": {
                "path": row["path"], "dataChange": True, "deletionTimestamp": now,
                "extendedFileMetadata": True, "size": int(row["size_bytes"]),
                "partitionValues": {c: format_partition_value(values.get(c))
                                    for c in partition_columns}}})
            read.append(row["path"])
    actions += [{"add": {**a, "path": log_path(a["path"])}} for a in adds]  # URI-encoded
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    rows = sum(json.loads(a["stats"])["numRecords"] for a in adds if a.get("stats"))
    operation = "WRITE"
    parameters: dict[str, Any] = {"mode": "Overwrite" if mode == "overwrite" else "Append",
                                  "partitionBy": list(meta.partition_columns)}
    metrics: dict[str, Any] = {"numFiles": len(adds), "numOutputRows": rows,
                               "numOutputBytes": sum(int(a["size"]) for a in adds)}
    extra: dict[str, Any] = {"isBlindAppend": mode == "append" and schema is None}
    if stream is not None:  # delta-spark's DeltaSink: blind when it only adds files
        operation, parameters = stream.OPERATION, dict(stream.parameters())
        metrics = dict(stream.metrics(adds, len(read)))
        extra = {"isBlindAppend": not read, "isolationLevel": "Serializable"}
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation=operation,
        parameters=parameters, metrics=metrics,
        actions=actions, read_paths=read, cleanup=cleanup,
        app_id=txn[0] if txn else None,
        # an append reads nothing: concurrent appends never conflict with it (a concurrent
        # metadata change, e.g. another write's identity high-water mark, does)
        reads_data=mode == "overwrite", conflict_code="HW_DELTA_COMMIT_CONFLICT",
        extra={**extra,
               **({"userMetadata": user_metadata} if user_metadata is not None else {})}))
