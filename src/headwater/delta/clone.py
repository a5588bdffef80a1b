"""CLONE: a new Delta table (or a replaced one) holding a source table's version, as
delta-spark's ``DeltaTable.clone`` / ``cloneAtVersion`` / ``cloneAtTimestamp`` make it.

One commit (operation CLONE, with delta-spark's parameters and metrics) writes the source
version's schema, partitioning, description and properties (``properties`` override them),
its protocol, and an add action per data file:

- shallow: the add actions name the source's files by absolute path (``file:/src/p=1/x``),
  nothing is copied. headwater's own reader opens such paths; delta-rs 1.6.6 does not (it
  joins them to the clone's folder), so the clone is for reading through Spark, and
  OPTIMIZE or delta-rs DML on it fail until a deep clone or an overwrite replaces the files.
- deep: each file is copied under the clone at the same relative path (delta-spark's open
  source release refuses deep clones; Databricks copies, as here).

Stats are read from the files' parquet footers, as headwater's writers compute them. A
replace keeps the target's table id and removes its files in the same commit. Sources with
deletion vectors are refused (their vectors live under the source's folder).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql.types import StructType

from headwater.conf.layout import DELTA_LOG
from headwater.delta import clustering, row_tracking
from headwater.delta.commit import Transaction, commit, log_path
from headwater.delta.files import file_stats
from headwater.delta.log import (
    FILE_COLUMNS,
    DeltaLog,
    add_actions,
    deletion_vector_paths,
    filesystem_for,
    normalize_uri,
    resolve_file,
)
from headwater.delta.maintenance import qualified
from headwater.delta.manifest import qualified_file
from headwater.delta.protocol import Protocol, enabled_features, with_enabled
from headwater.delta.schema import arrow_schema, format_partition_value, spark_schema
from headwater.delta.table_protocol import check_properties
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError


@dataclass
class CloneResult:
    """delta-spark's CLONE metrics and the version the clone committed."""

    version: int
    metrics: dict[str, int] = field(default_factory=dict)


def clone(source: str, target: str, version: int | None = None, shallow: bool = True,
          replace: bool = False, properties: Mapping[str, str] | None = None) -> CloneResult:
    """Clone version ``version`` (None: the latest) of the table at ``source`` to the folder
    ``target``. replace: an existing table at ``target`` is replaced (else it is an error)."""
    src_uri, dst_uri = normalize_uri(source), normalize_uri(target)
    for uri in (src_uri, dst_uri):
        if "://" in uri:
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE", f"CLONE with {uri} is not supported yet.",
                "headwater writes the clone's commit with a local put-if-absent; object "
                "stores need a conditional put it does not have for this path yet.",
                "Clone between local (or mounted) folders.")
    source_table = DeltaLog(src_uri).table(version)
    if deletion_vector_paths(source_table):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"CLONE of {src_uri} is not supported: version {source_table.version()} has "
            "deletion vectors.", "Their vectors live in the source's folder, which the "
            "clone's log cannot name.",
            "Purge them first (REORG TABLE ... APPLY (PURGE) in delta-spark), or copy the rows "
            "with df.write.")
    target_log = DeltaLog(dst_uri)
    existing = target_log.table() if target_log.exists() and _has_commits(target_log) \
        else None
    if src_uri == dst_uri:
        return CloneResult(source_table.version())  # delta-spark: cloning onto itself is a no-op
    if existing is not None and not replace:
        raise DeltaAnalysisError(
            "HW_DELTA_PATH_EXISTS", f"Table delta.`{target}` already exists.",
            "CLONE creates a new table unless it is told to replace one.",
            "Pass replace=True, or clone to another path.",
            error_class="DELTA_TABLE_ALREADY_EXISTS")
    if existing is not None and deletion_vector_paths(existing):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"CLONE ... REPLACE onto {dst_uri} is not supported: the table there has deletion "
            "vectors.", "The replace must remove each file with its deletion vector, which "
            "deltalake does not report.",
            "Purge them first (REORG TABLE ... APPLY (PURGE) in delta-spark), or drop the "
            "target table before cloning.")
    rows = add_actions(source_table).to_pylist()
    schema = spark_schema(source_table.schema().to_json())
    partition_columns = list(source_table.metadata().partition_columns)
    data_schema = arrow_schema(StructType(
        [f for f in schema.fields if f.name not in partition_columns]))
    fs, src_root = filesystem_for(src_uri)
    _, dst_root = filesystem_for(dst_uri)
    now = int(time.time() * 1000)
    adds, copied, copied_bytes = [], 0, 0
    for row in rows:
        src_file = resolve_file(src_root, row["path"])
        values = row.get("partition") or {}
        if shallow:
            path = log_path(qualified_file(src_uri, row["path"]))
        else:
            path = row["path"]
            target_file = resolve_file(dst_root, path)
            fs.create_dir(os.path.dirname(target_file), recursive=True)
            fs.copy_file(src_file, target_file)
            copied += 1
            copied_bytes += int(row["size_bytes"])
        with fs.open_input_file(src_file) as handle:
            stats = file_stats(pq.read_metadata(handle), data_schema)
        adds.append({"add": {
            "path": path, "size": int(row["size_bytes"]),
            "partitionValues": {c: format_partition_value(values.get(c))
                                for c in partition_columns},
            "modificationTime": int(row["modification_time"] or now), "dataChange": True,
            "stats": json.dumps(stats, separators=(",", ":"))}})
    meta = source_table.metadata()
    configuration = {**dict(meta.configuration or {}), **dict(properties or {})}
    # row tracking: the clone's files get fresh ids in its own history (its commit), so
    # the source's materialized id columns, which would repeat the source's, are not named
    configuration = {k: v for k, v in configuration.items()
                     if k not in (row_tracking.ROW_ID_COLUMN_PROPERTY,
                                  row_tracking.COMMIT_VERSION_COLUMN_PROPERTY)}
    protocol = Protocol.of_table(source_table)
    removes: list[dict[str, Any]] = []
    removed_bytes = 0
    if existing is not None:
        protocol = Protocol.of_table(existing).merge(protocol)
        # a shallow clone replaced by a clone of the same source keeps the files both name:
        # an add and a remove of one path in one commit would contradict each other
        kept = {unquote(a["add"]["path"]) for a in adds}
        for row in add_actions(existing, columns=FILE_COLUMNS).to_pylist():
            if unquote(row["path"]) in kept:
                continue
            values = row.get("partition") or {}
            removes.append({"remove": {
                "path": row["path"], "dataChange": True, "deletionTimestamp": now,
                "extendedFileMetadata": True, "size": int(row["size_bytes"]),
                "partitionValues": {c: format_partition_value(values.get(c))
                                    for c in existing.metadata().partition_columns}}})
            removed_bytes += int(row["size_bytes"])
    target_meta = existing.metadata() if existing is not None else None
    metadata = {"metaData": {
        "id": target_meta.id if target_meta is not None else str(uuid.uuid4()),
        "name": target_meta.name if target_meta is not None else None,
        "description": meta.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": source_table.schema().to_json(),
        "partitionColumns": partition_columns, "configuration": configuration,
        "createdTime": now}}
    metrics = {"sourceTableSize": sum(int(r["size_bytes"]) for r in rows),
               "sourceNumOfFiles": len(rows), "numRemovedFiles": len(removes),
               "numCopiedFiles": copied, "removedFilesSize": removed_bytes,
               "copiedFilesSize": copied_bytes}
    if existing is None:
        fs.create_dir(f"{dst_root}/{DELTA_LOG}", recursive=True)
    committed = commit(Transaction(
        uri=dst_uri, read_version=existing.version() if existing is not None else -1,
        operation="CLONE",
        parameters={"source": f"delta.`{qualified(src_uri)}`",
                    "sourceVersion": str(source_table.version()),
                    "isShallow": json.dumps(shallow)},
        metrics=metrics, actions=[protocol.action(), metadata, *removes, *adds],
        read_paths=[r["remove"]["path"] for r in removes]))
    return CloneResult(committed, metrics)


def create_like(source: str, target: str, properties: Mapping[str, str] | None = None,
                name: str | None = None) -> int:
    """``CREATE TABLE target LIKE source`` of a Delta source, as delta-spark runs it: one
    commit (operation CREATE TABLE, no files) of the source's latest protocol, schema (column
    mapping ids and physical names, generated and identity columns, comments, NOT NULL),
    partitioning, description, properties (CHECK constraints included; ``properties`` over
    them) and clustering columns. Row tracking's materialized column names are the new
    table's own, as delta-spark names them. Returns the version (0)."""
    src_uri, dst_uri = normalize_uri(source), normalize_uri(target)
    label = name or f"delta.`{dst_uri}`"
    if "://" in dst_uri and not dst_uri.startswith("file://"):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"CREATE TABLE {label} LIKE ... on {dst_uri} is "
            "not supported yet.", "headwater writes the new table's commit with a local "
            "put-if-absent; object stores need a conditional put it does not have for this "
            "path yet.", "Create the table on local (or mounted) storage, or use CREATE TABLE "
            "name (columns) ... there.")
    properties = dict(properties or {})
    mapping_keys = [k for k in properties if k.lower().startswith("delta.columnmapping.")]
    if mapping_keys:
        raise DeltaAnalysisError(
            "HW_SQL_UNSUPPORTED", f"CREATE TABLE {label} LIKE ... TBLPROPERTIES "
            f"({mapping_keys[0]}): the copy takes the source's column mapping.",
            "Column ids and physical names are part of the copied schema; delta-spark does "
            "not set them externally either.", "Leave the property out, and change the mode "
            "with ALTER TABLE ... SET TBLPROPERTIES afterwards.",
            error_class="DELTA_UNSUPPORTED_COLUMN_MAPPING_OPERATIONS")
    protocol_keys = [k for k in properties if k.lower().startswith("delta.feature.")
                     or k.lower() in ("delta.minreaderversion", "delta.minwriterversion")]
    if protocol_keys:
        raise DeltaAnalysisError(
            "HW_SQL_UNSUPPORTED", f"CREATE TABLE {label} LIKE ... TBLPROPERTIES "
            f"({protocol_keys[0]}): protocol properties are not supported here.",
            "The copy takes the source's protocol; headwater does not change it in the "
            "same statement.", "Leave the property out, and run ALTER TABLE ... SET "
            "TBLPROPERTIES (or DeltaTable.addFeatureSupport) on the new table afterwards.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    check_properties(properties, label)
    if DeltaLog(dst_uri).exists() and _has_commits(DeltaLog(dst_uri)):
        raise DeltaAnalysisError(
            "HW_TABLE_EXISTS", f"Table {label} already exists.",
            "CREATE TABLE ... LIKE creates a new table.",
            "Use CREATE TABLE IF NOT EXISTS, or another name or location.",
            error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
    source_table = DeltaLog(src_uri).table()
    meta = source_table.metadata()
    # as delta-spark: row tracking's column names are the new table's own, and a commit
    # coordinator is not copied (CREATE LIKE is a clone's kin)
    configuration = {k: v for k, v in dict(meta.configuration or {}).items()
                     if k not in (row_tracking.ROW_ID_COLUMN_PROPERTY,
                                  row_tracking.COMMIT_VERSION_COLUMN_PROPERTY)
                     and not k.lower().startswith("delta.coordinatedcommits.")}
    configuration.update(properties)
    protocol = with_enabled(source_table, Protocol.of_table(source_table),
                            enabled_features(properties))
    if protocol.supports(row_tracking.FEATURE):
        configuration = row_tracking.with_column_names(configuration)
    partition_columns = list(meta.partition_columns)
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [protocol.action(), {"metaData": {
        "id": str(uuid.uuid4()), "name": name.split(".")[-1] if name else None,
        "description": meta.description, "format": {"provider": "parquet", "options": {}},
        "schemaString": source_table.schema().to_json(),
        "partitionColumns": partition_columns, "configuration": configuration,
        "createdTime": now}}]
    cluster_by = clustering.clustering_domain(src_uri, source_table)
    if cluster_by is not None:
        actions.append(clustering.domain_action(cluster_by))
    fs, dst_root = filesystem_for(dst_uri)
    fs.create_dir(f"{dst_root}/{DELTA_LOG}", recursive=True)
    return commit(Transaction(
        uri=dst_uri, read_version=-1, operation="CREATE TABLE",
        parameters={"partitionBy": json.dumps(partition_columns),
                    "clusterBy": json.dumps(cluster_by or []),
                    "description": meta.description or "",
                    "properties": json.dumps(configuration)},
        metrics={}, actions=actions, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


def _has_commits(log: DeltaLog) -> bool:
    try:
        infos = log.fs.get_file_info(pafs.FileSelector(f"{log.root}/{DELTA_LOG}"))
    except FileNotFoundError:
        return False
    return any(i.base_name.endswith((".json", ".parquet")) and i.base_name[:1].isdigit()
               for i in infos)
