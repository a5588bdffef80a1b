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
from headwater.delta import row_tracking
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
from headwater.delta.protocol import Protocol
from headwater.delta.schema import arrow_schema, format_partition_value, spark_schema
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


def _has_commits(log: DeltaLog) -> bool:
    try:
        infos = log.fs.get_file_info(pafs.FileSelector(f"{log.root}/{DELTA_LOG}"))
    except FileNotFoundError:
        return False
    return any(i.base_name.endswith((".json", ".parquet")) and i.base_name[:1].isdigit()
               for i in infos)
