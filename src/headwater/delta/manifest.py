"""``GENERATE symlink_format_manifest``: the file lists Presto, Trino, Athena and Hive read a
Delta table through, written as delta-spark writes them (``GenerateSymlinkManifest.scala``).

``<table>/_symlink_format_manifest/manifest`` lists the absolute path of every data file of
the latest snapshot, one a line; a partitioned table gets one ``manifest`` per partition, in
the partition's folder below ``_symlink_format_manifest`` (``p=1/q=a/manifest``, named by
Spark's own escaping). Manifests of partitions that no longer exist are deleted. The folder
starts with ``_``, so VACUUM leaves it alone. delta-rs has no manifest generation; the file
list comes from its snapshot.
"""

from __future__ import annotations

from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from headwater.delta.log import (
    FILE_COLUMNS,
    DeltaLog,
    add_actions,
    deletion_vector_paths,
    filesystem_for,
    normalize_uri,
    resolve_file,
)
from headwater.delta.schema import format_partition_value
from headwater.errors import HeadwaterError
from headwater.spark.jvm import jvm_view

MODE = "symlink_format_manifest"
MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST_FILE = "manifest"


def qualified_file(table_uri: str, log_path: str) -> str:
    """A data file's absolute path as Hadoop prints it (``file:/t/p=1/x.parquet``)."""
    if "://" in log_path or log_path.startswith("file:"):
        parsed = urlparse(log_path)
        if parsed.scheme == "file":
            return f"file:{unquote(parsed.path)}"
        return unquote(log_path)
    if "://" in table_uri:
        return f"{table_uri.rstrip('/')}/{unquote(log_path)}"
    return f"file:{resolve_file(table_uri, log_path)}"


def generate(spark: SparkSession, path: str, mode: str) -> list[str]:
    """Write the manifests of ``mode`` (only ``symlink_format_manifest``, any case) for the
    table at ``path``; returns the manifest files written, relative to the table."""
    if mode.lower() != MODE:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED",
            f"Specified mode '{mode}' is not supported. Supported modes are: {MODE}",
            "Delta generates one kind of manifest.", f"Use GENERATE {MODE}.",
            error_class="DELTA_MODE_NOT_SUPPORTED")
    uri = normalize_uri(path)
    table = DeltaLog(uri).table()
    config = table.metadata().configuration or {}
    if config.get("delta.columnMapping.mode", "none") != "none":
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            "Manifest generation is not supported for tables that leverage column mapping, as "
            "external readers cannot read these Delta tables.",
            "Column-mapped files use physical column names those readers do not know.",
            "Generate manifests only for tables without column mapping.",
            error_class="DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING")
    if deletion_vector_paths(table):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The 'GENERATE {MODE}' command is not supported on table versions with deletion "
            "vectors.", "Readers of a manifest would return rows the deletion vectors delete.",
            "If you need to generate manifests, consider disabling deletion vectors on this "
            "table using 'ALTER TABLE table SET TBLPROPERTIES (delta.enableDeletionVectors = "
            "false)' and purging them (REORG TABLE ... APPLY (PURGE)).",
            error_class="DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS")
    partition_columns = list(table.metadata().partition_columns)
    jvm = jvm_view(spark)
    assert jvm is not None  # a classic session (Spark Connect has no JVM here)
    escape = jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    groups: dict[str, list[str]] = {}
    for row in add_actions(table, columns=FILE_COLUMNS).to_pylist():
        values = row.get("partition") or {}
        folder = "/".join(str(escape.getPartitionPathString(c, format_partition_value(
            values.get(c)))) for c in partition_columns)
        groups.setdefault(folder, []).append(qualified_file(uri, row["path"]))
    if not partition_columns:
        groups.setdefault("", [])
    fs, root = filesystem_for(uri)
    base = f"{root}/{MANIFEST_DIR}"
    written = []
    for folder, files in sorted(groups.items()):
        target = f"{base}/{folder}" if folder else base
        fs.create_dir(target, recursive=True)
        with fs.open_output_stream(f"{target}/{MANIFEST_FILE}") as out:
            out.write("".join(f"{f}\n" for f in sorted(files)).encode("utf-8"))
        written.append(f"{MANIFEST_DIR}/{folder}/{MANIFEST_FILE}" if folder
                       else f"{MANIFEST_DIR}/{MANIFEST_FILE}")
    _delete_stale(fs, base, set(groups))
    return written


def _delete_stale(fs: pafs.FileSystem, base: str, keep: set[str]) -> None:
    """Delete the manifest folders of partitions the snapshot no longer has."""
    try:
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    except FileNotFoundError:
        return
    for info in infos:
        if info.type != pafs.FileType.File or info.base_name != MANIFEST_FILE:
            continue
        folder = info.path[len(base):].strip("/").rpartition("/")[0]
        if folder not in keep:
            if folder:
                fs.delete_dir(f"{base}/{folder}")
            else:
                fs.delete_file(info.path)
