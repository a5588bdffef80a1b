"""RESTORE written by headwater: for tables deltalake refuses to commit to (identity columns,
liquid clustering), which delta-rs' own restore therefore cannot restore.

One commit, as delta-spark's ``RestoreTableCommand`` writes it:

- a file is the pair (path, deletion vector): every file of the current version that the
  target version does not have is removed, every file of the target version the current one
  does not have is added again with its own add action (stats, partition values, deletion
  vector, tags: :mod:`headwater.delta.snapshot_adds`), ``dataChange`` true;
- the target version's metaData (schema, partitioning, properties, description), with each
  identity column's high-water mark kept at the current one when that is further along
  (``IdentityColumn.copySchemaWithMergedHighWaterMarks``): values generated after the restore
  never repeat values generated before it;
- the protocol is never lowered: the target's merged with the current one;
- the clustering domain: the target's clustering columns when the current version has the
  domain (none when the target was not clustered), a removed domain when only the target had
  it (``DomainMetadataUtils.handleDomainMetadataForRestoreTable``);
- history: operation RESTORE, operationParameters ``version`` / ``timestamp`` (the one the
  user gave, the other null), delta-spark's operationMetrics.

Files of the target version that are gone from storage (VACUUM) are refused before anything
is written, unless ``spark.sql.files.ignoreMissingFiles`` is on (delta-spark's rule). A commit
made meanwhile that touches the table's data or metadata fails the restore (nothing written).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from headwater.conf.layout import IGNORE_MISSING_FILES_CONF
from headwater.delta import clustering
from headwater.delta.commit import Transaction, commit
from headwater.delta.generated import merged_high_water_marks
from headwater.delta.log import DeltaLog, resolve_file
from headwater.delta.protocol import Protocol
from headwater.delta.schema import spark_schema
from headwater.delta.snapshot_adds import file_key, snapshot_adds
from headwater.errors import HeadwaterError

# Fields of an add action a remove of the same file repeats (delta-spark's removeWithTimestamp).
_REMOVE_KEEPS = ("partitionValues", "size", "tags", "deletionVector", "baseRowId",
                 "defaultRowCommitVersion", "stats")


def restore_table(uri: str, current: Any, version: int, given_version: int | None,
                  given_timestamp: dt.datetime | None) -> dict[str, Any]:
    """Restore the table at ``uri`` (``current``: its latest deltalake snapshot) to
    ``version`` in one commit; given_version / given_timestamp: what the user asked for (the
    history's operationParameters). Returns delta-spark's result columns and ``version``."""
    log = DeltaLog(uri)
    target = log.table(version)
    current_adds = {file_key(a): a for a in snapshot_adds(log, current)}
    target_adds = {file_key(a): a for a in snapshot_adds(log, target)}
    now = int(time.time() * 1000)
    to_add = [{**a, "dataChange": True} for k, a in target_adds.items()
              if k not in current_adds]
    to_remove = [a for k, a in current_adds.items() if k not in target_adds]
    if not _ignore_missing_files():
        _check_files_exist(log, to_add, version)
    schema = merged_high_water_marks(spark_schema(target.schema().to_json()),
                                     spark_schema(current.schema().to_json()))
    meta = target.metadata()
    actions: list[dict[str, Any]] = [{"metaData": {
        "id": meta.id, "name": meta.name, "description": meta.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema.jsonValue(), separators=(",", ":")),
        "partitionColumns": list(meta.partition_columns),
        "configuration": dict(meta.configuration or {}), "createdTime": meta.created_time}}]
    actions += [{"add": a} for a in to_add]
    actions += [{"remove": {"path": a["path"], "deletionTimestamp": now, "dataChange": True,
                            "extendedFileMetadata": True,
                            **{k: a[k] for k in _REMOVE_KEEPS if k in a}}}
                for a in to_remove]
    actions += _clustering_domain(uri, target, current)
    actions.append(Protocol.of_table(target).merge(Protocol.of_table(current)).action())
    target_files = list(target_adds.values())
    metrics = {
        "numRestoredFiles": len(to_add),
        "restoredFilesSize": sum(int(a.get("size") or 0) for a in to_add),
        "numRemovedFiles": len(to_remove),
        "removedFilesSize": sum(int(a.get("size") or 0) for a in to_remove),
        "numOfFilesAfterRestore": len(target_files),
        "tableSizeAfterRestore": sum(int(a.get("size") or 0) for a in target_files),
    }
    parameters = {"version": given_version,
                  "timestamp": None if given_timestamp is None else _java_timestamp(
                      given_timestamp)}
    committed = commit(Transaction(
        uri=uri, read_version=current.version(), operation="RESTORE", parameters={},
        metrics=metrics, actions=actions, read_paths=[a["path"] for a in current_adds.values()],
        conflict_code="HW_DELTA_COMMIT_CONFLICT",
        # delta-spark writes the parameters as JSON values (a number, null), not strings
        extra={"operationParameters": parameters, "isolationLevel": "Serializable"}))
    return {"table_size_after_restore": metrics["tableSizeAfterRestore"],
            "num_of_files_after_restore": metrics["numOfFilesAfterRestore"],
            "num_removed_files": metrics["numRemovedFiles"],
            "num_restored_files": metrics["numRestoredFiles"],
            "removed_files_size": metrics["removedFilesSize"],
            "restored_files_size": metrics["restoredFilesSize"], "version": committed}


def _clustering_domain(uri: str, target: Any, current: Any) -> list[dict[str, Any]]:
    restored = clustering.clustering_domain(uri, target)
    if clustering.clustering_domain(uri, current) is not None:
        return [clustering.domain_action(restored or [])]
    if restored is not None:  # only the target had it: delta-spark marks it removed
        action = clustering.domain_action(restored)
        action["domainMetadata"]["removed"] = True
        return [action]
    return []


def _ignore_missing_files() -> bool:
    session = SparkSession.getActiveSession()
    if session is None:
        return False
    return str(session.conf.get(IGNORE_MISSING_FILES_CONF, "false")).lower() == "true"


def _check_files_exist(log: DeltaLog, adds: list[dict[str, Any]], version: int) -> None:
    paths = [resolve_file(log.root, a["path"]) for a in adds]
    missing = [p for p, info in zip(paths, log.fs.get_file_info(paths))
               if info.type == pafs.FileType.NotFound]
    if missing:
        shown = ",".join(missing[:100])
        raise HeadwaterError(
            "HW_DELTA_FILE_NOT_FOUND",
            f"Not all files from version {version} are available in file system. Missed "
            f"files (top 100 files): {shown}.",
            "RESTORE adds the version's files back; VACUUM deleted some of them.",
            f"Please use more recent version or timestamp for restoring. To disable check "
            f"update option {IGNORE_MISSING_FILES_CONF}.")


def _java_timestamp(when: dt.datetime) -> str:
    """``when`` as delta-spark records a RESTORE's timestamp (java.sql.Timestamp's text:
    ``2024-01-01 10:00:00.0``), in UTC (headwater's session time zone)."""
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    fraction = f"{when.microsecond:06d}".rstrip("0") or "0"
    return f"{when:%Y-%m-%d %H:%M:%S}.{fraction}"
