"""OPTIMIZE (compaction and Z-ordering) on Spark, as delta-spark's OptimizeTableCommand runs it.

delta-rs compacts and Z-orders well, but its commit records its own parameters (the partition
filter as ``key = 'a'``, a ``targetSize``) where delta-spark records the predicate as Spark
prints it (``["('key = a)"]``), ``zOrderBy``, ``clusterBy`` and ``auto``, and tools read
DESCRIBE HISTORY. So for local tables the files are rewritten here with Spark's parquet writer
and committed through :mod:`headwater.delta.commit`, with delta-spark's rules:

- ``where`` predicates may name partition columns only (DELTA_NON_PARTITION_COLUMN_REFERENCE);
  Spark evaluates them on each file's partition values.
- compaction takes the files smaller than ``spark.databricks.delta.optimize.minFileSize``
  (default 1 GiB), per partition, sorted by size, into bins of at most
  ``spark.databricks.delta.optimize.maxFileSize`` (1 GiB); a bin of one file stays as it is.
- Z-ordering takes every file of a partition into one bin (one z-cube per partition), maps
  each Z-order column to a range id (``ntile`` over the bin, 1024 ranges), interleaves their
  bits, and writes the bin's rows in that order, in ``size / maxFileSize`` files at least one.
- removes and adds carry dataChange=false, so streams reading the table see nothing new.

REORG (:func:`reorg`) rewrites the files a predicate picks, packed per partition, in the same
way: APPLY (PURGE) picks the files with deletion vectors; DROP FEATURE typeWidening the files
whose parquet types are older than the table's (delta-spark's REWRITE_TYPE_WIDENING).

Files with deletion vectors are rewritten without the rows their vectors delete (the scan of
:mod:`headwater.delta.dml.target` applies them); column-mapped tables are read and written by
physical names (the scan renames, :func:`headwater.delta.dml.rewrite.write_files` names them
back). Tables this writer cannot rewrite exactly (features the DML writer refuses, object
stores) are optimized by delta-rs instead, with the same checks and metrics; their history
then has delta-rs' parameters (a column-mapped one is refused: delta-rs writes logical names).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from headwater.delta import clustering, maintenance, physical_names, row_tracking
from headwater.delta.commit import Transaction, commit, log_path
from headwater.delta.dml.rewrite import Written, data_only, remove_action, write_files
from headwater.delta.dml.target import FILE_COL, Snapshot, TargetFile, load_snapshot, scan
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.snapshot_adds import snapshot_adds
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.spark.active import data_frame

MIN_FILE_SIZE_CONF = "spark.databricks.delta.optimize.minFileSize"
MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"
DEFAULT_FILE_SIZE = 1024 * 1024 * 1024
RANGE_BITS = 10  # 1024 range ids per column (delta-spark: 1000)
BIN, Z, PART = "_hw_bin", "_hw_z", "_hw_part"
PURGE = "REORG TABLE ... APPLY (PURGE)"


@dataclass
class Bin:
    partition: tuple[object, ...]
    files: list[TargetFile] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def optimize(spark: SparkSession, path: str, where: Sequence[str] = (),
             zorder_by: Sequence[str] = (), full: bool = False) -> dict[str, Any]:
    """Compact the table at ``path`` (or Z-order it by ``zorder_by``), limited to the
    partitions every ``where`` predicate selects; a clustered table is clustered instead
    (``full``: OPTIMIZE FULL, every file). Returns delta-spark's OptimizeMetrics."""
    started = int(time.time() * 1000)
    uri = normalize_uri(path)
    table = DeltaLog(uri).table()
    row_tracking.refuse_rewrite(table.protocol(), uri, "OPTIMIZE")
    columns = _clustering_checks(table, uri, where, zorder_by, full)
    if columns:
        return _cluster(spark, uri, columns, full, started)
    partition_columns = list(table.metadata().partition_columns)
    trees = [maintenance.partition_predicate(w, partition_columns, spark) for w in where]
    maintenance.check_zorder_columns(spark, table, list(zorder_by))
    snapshot = _spark_snapshot(uri)
    if snapshot is None:
        if physical_names.is_mapped(table):  # delta-rs' optimize writes logical names
            raise physical_names.unsupported_write(
                uri, "OPTIMIZE of a table Spark's rewrite cannot reach (object storage, or a "
                "feature it does not follow; delta-rs' optimize refuses column mapping)")
        return _with_delta_rs(uri, where, zorder_by, started)
    candidates = _select(spark, snapshot, list(where))
    min_size = _size_conf(spark, MIN_FILE_SIZE_CONF)
    max_size = _size_conf(spark, MAX_FILE_SIZE_CONF)
    bins = _bins(candidates, min_size, max_size, bool(zorder_by))
    added: list[dict[str, Any]] = []
    if bins:
        added = _rewrite(spark, snapshot, bins, list(zorder_by), max_size,
                         [str(t) for t in maintenance.predicate_strings(trees)])
    return _metrics(snapshot, candidates, bins, added, bool(zorder_by), started, spark)


def purge(spark: SparkSession, path: str, where: Sequence[str] = ()) -> dict[str, Any]:
    """REORG TABLE ... APPLY (PURGE), as delta-spark's DeletionVectorsPurge: every file with a
    deletion vector (in the partitions ``where`` selects) rewritten without the rows it
    deletes (:func:`reorg`). Returns delta-spark's OptimizeMetrics."""
    return reorg(spark, path, lambda f: f.has_dv, where, PURGE)


def reorg(spark: SparkSession, path: str, pick: Callable[[TargetFile], bool],
          where: Sequence[str] = (), label: str = PURGE) -> dict[str, Any]:
    """delta-spark's REORG TABLE (a purge, or DROP FEATURE typeWidening's REWRITE_TYPE_WIDENING):
    the files ``pick`` chooses (in the partitions ``where`` selects) read by Spark (deletion
    vectors applied, older types widened) and written again in the table's current schema,
    packed per partition up to maxFileSize, removes and adds with dataChange=false,
    committed as REORG. ``label``: the statement, for refusals. Returns delta-spark's
    OptimizeMetrics."""
    started = int(time.time() * 1000)
    uri = normalize_uri(path)
    table = DeltaLog(uri).table()
    row_tracking.refuse_rewrite(table.protocol(), uri, label)
    partition_columns = list(table.metadata().partition_columns)
    trees = [maintenance.partition_predicate(w, partition_columns, spark) for w in where]
    snapshot = reorg_snapshot(uri, label)
    candidates = _select(spark, snapshot, list(where))
    max_size = _size_conf(spark, MAX_FILE_SIZE_CONF)
    by_partition: dict[tuple[object, ...], list[TargetFile]] = {}
    for f in candidates:
        if pick(f):
            by_partition.setdefault(f.typed_values, []).append(f)
    bins: list[Bin] = []
    for partition, members in by_partition.items():
        current = Bin(partition)
        for f in sorted(members, key=lambda f: f.size):
            if current.files and current.size + f.size > max_size:
                bins.append(current)
                current = Bin(partition)
            current.files.append(f)
        bins.append(current)
    predicates = [str(t) for t in maintenance.predicate_strings(trees)]
    added: list[dict[str, Any]] = []
    if bins:
        added = _rewrite(spark, snapshot, bins, [], max_size, predicates, operation=(
            "REORG", {"predicate": json.dumps(predicates), "applyPurge": "true"}))
    if bins and not added:  # every row of those files was deleted: remove them
        _remove_only(snapshot, [f for b in bins for f in b.files], predicates)
    if added:
        return _metrics(snapshot, candidates, bins, added, False, started, spark)
    return _purge_metrics(snapshot, candidates, bins, started, spark)


def reorg_snapshot(uri: str, label: str) -> Snapshot:
    """The snapshot a REORG rewrites with Spark; refused (``label``: the statement) where
    Spark's writer cannot rewrite the table exactly."""
    snapshot = _spark_snapshot(uri)
    if snapshot is None:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"{label} on {uri}: headwater cannot rewrite this table's files with Spark (an "
            "unsupported feature, or object storage).",
            f"{label} rewrites files of the table with headwater's own commit.",
            f"Run {label} with delta-spark.")
    return snapshot


def _remove_only(snapshot: Snapshot, files: list[TargetFile], predicates: list[str]) -> None:
    now = int(time.time() * 1000)
    commit(Transaction(
        uri=snapshot.uri, read_version=snapshot.version, operation="REORG",
        parameters={"predicate": json.dumps(predicates), "applyPurge": "true"},
        metrics={"numRemovedFiles": len(files), "numAddedFiles": 0},
        actions=[remove_action(f, now, data_change=False) for f in files],
        read_paths=[f.log_path for f in files]))


def _purge_metrics(snapshot: Snapshot, candidates: list[TargetFile], bins: list[Bin],
                   started: int, spark: SparkSession) -> dict[str, Any]:
    """Metrics of a REORG that added no file (nothing to rewrite, or only deleted rows)."""
    metrics = _metrics(snapshot, candidates, [], [], False, started, spark)
    removed = [f for b in bins for f in b.files]
    metrics.update(numFilesRemoved=len(removed),
                   filesRemoved=_file_stats([f.size for f in removed]),
                   deletionVectorStats={
                       "numDeletionVectorsRemoved": sum(1 for f in removed
                                                        if f.deletion_vector),
                       "numDeletionVectorRowsRemoved": sum(len(f.deleted_rows)
                                                           for f in removed)})
    return metrics


def _clustering_checks(table: Any, uri: str, where: Sequence[str], zorder_by: Sequence[str],
                       full: bool) -> list[str]:
    """delta-spark's checks of an OPTIMIZE of a clustered table (one whose protocol has the
    clustering feature, even after CLUSTER BY NONE); returns its clustering columns."""
    clustered = "clustering" in (table.protocol().writer_features or [])
    if clustered and where:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", "OPTIMIZE command for Delta table with clustering doesn't "
            f"support partition predicates: {' AND '.join(where)}.",
            "A clustered table has no partitions; OPTIMIZE clusters the whole table.",
            "Remove the WHERE clause.", error_class="DELTA_CLUSTERING_WITH_PARTITION_PREDICATE")
    if clustered and zorder_by:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", "OPTIMIZE command for Delta table with clustering cannot "
            f"specify ZORDER BY ({', '.join(zorder_by)}).",
            "A clustered table is ordered by its clustering columns.",
            "Remove ZORDER BY (ALTER TABLE ... CLUSTER BY changes the columns).",
            error_class="DELTA_CLUSTERING_WITH_ZORDER_BY")
    columns = clustering.clustering_columns(uri, table) if clustered else []
    if full and not columns:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", "OPTIMIZE FULL is only supported for clustered tables with "
            "non-empty clustering columns.",
            "FULL reclusters every file by the table's clustering columns; this table has none.",
            "Run OPTIMIZE without FULL, or cluster the table first (ALTER TABLE ... CLUSTER BY).",
            error_class="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED")
    return columns


def _cluster(spark: SparkSession, uri: str, columns: list[str], full: bool,
             started: int) -> dict[str, Any]:
    """OPTIMIZE [FULL] of a table clustered by ``columns``: the files delta-spark's
    ClusteringStrategy picks (headwater.delta.clustering.candidates) rewritten as one ZCube,
    rows ordered along a space-filling curve of the clustering columns (headwater's Z-order
    curve; delta-spark uses a Hilbert curve), ``size / maxFileSize`` files at least one, each
    tagged with the ZCube's id and columns and clusteringProvider ``liquid``."""
    snapshot = _spark_snapshot(uri)
    if snapshot is None:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"OPTIMIZE of the clustered table at {uri}: headwater cannot rewrite this table's "
            "files with Spark (an unsupported feature, or object storage).",
            "Clustering rewrites files in the clustering order with headwater's own commit; "
            "delta-rs' optimize neither clusters nor commits to clustered tables.",
            "Recreate the table on local storage without the feature, or leave it unoptimized.")
    if snapshot.mapped:  # delta-spark's domain names columns by physical name
        known = {c.lower() for c in snapshot.schema.fieldNames()}
        # (logical name -> physical name) of the columns named by a physical name
        renamed = physical_names.logical_keys({c: c for c in columns}, snapshot.full_schema)
        by_physical = {physical: name for name, physical in renamed.items()}
        columns = [c if c.lower() in known else by_physical.get(c, c) for c in columns]
    adds = snapshot_adds(DeltaLog(uri), snapshot.table)
    chosen = {unquote(a["path"]) for a in clustering.candidates(adds, columns, full)}
    files = [f for f in snapshot.files if unquote(f.log_path) in chosen]
    max_size = _size_conf(spark, MAX_FILE_SIZE_CONF)
    bins = [Bin((), files)] if files else []
    added: list[dict[str, Any]] = []
    if bins:
        added = _rewrite(spark, snapshot, bins, columns, max_size, [],
                         clustered=(columns, full))
    metrics = _metrics(snapshot, list(snapshot.files), bins, added, False, started, spark)
    metrics["clusteringStats"] = _clustering_stats(adds, files, columns, full, len(added) > 0)
    return metrics


def _clustering_stats(adds: list[dict[str, Any]], chosen: list[TargetFile], columns: list[str],
                      full: bool, rewritten: bool) -> dict[str, Any]:
    """delta-spark's ClusteringStats: the table's files by whether their ZCube matches the
    clustering columns (any ZCube with FULL), and what was merged into one new ZCube."""
    def matching(add: dict[str, Any]) -> bool:
        cube = clustering.zcube_of(add)
        return cube is not None and (full or cube[1] == columns)

    cubes = {c[0] for c in map(clustering.zcube_of, adds) if c is not None}
    inside = [int(a.get("size") or 0) for a in adds if matching(a)]
    other = [int(a.get("size") or 0) for a in adds if not matching(a)]
    merged = [f.size for f in chosen] if rewritten else []
    return {"inputZCubeFiles": {"numFiles": len(inside), "size": sum(inside)},
            "inputOtherFiles": {"numFiles": len(other), "size": sum(other)},
            "inputNumZCubes": len(cubes),
            "mergedFiles": {"numFiles": len(merged), "size": sum(merged)},
            "numOutputZCubes": 1 if rewritten else 0}


def _spark_snapshot(uri: str) -> Snapshot | None:
    """The snapshot when Spark's writer can rewrite the table exactly, else None."""
    if "://" in uri:
        return None  # Spark has no Hadoop filesystem for object stores here
    try:
        snapshot = load_snapshot(uri, "OPTIMIZE", needs_rows=False)
    except HeadwaterError as exc:
        if exc.code == "HW_DML_UNSUPPORTED_FEATURE":
            return None  # unknown features, invariants: delta-rs rewrites
        raise
    return snapshot


def _size_conf(spark: SparkSession, key: str) -> int:
    value = spark.conf.get(key, None)
    return int(value) if value else DEFAULT_FILE_SIZE


def _select(spark: SparkSession, snapshot: Snapshot, where: list[str]) -> list[TargetFile]:
    """The files whose partition values every predicate accepts (Spark evaluates them)."""
    if not where:
        return list(snapshot.files)
    fields = [StructField("_hw_i", LongType())] + [
        snapshot.schema[c] for c in snapshot.partition_columns]
    values = data_frame(spark,
        [(i, *f.typed_values) for i, f in enumerate(snapshot.files)], StructType(fields))
    for predicate in where:
        values = values.where(F.expr(predicate))
    keep = {int(r[0]) for r in values.select("_hw_i").collect()}
    return [f for i, f in enumerate(snapshot.files) if i in keep]


def _bins(files: list[TargetFile], min_size: int, max_size: int, zorder: bool) -> list[Bin]:
    """delta-spark's bins: per partition, small files (all files when Z-ordering) packed up
    to ``max_size``; a compaction bin of a single file is left alone."""
    by_partition: dict[tuple[object, ...], list[TargetFile]] = {}
    for f in files:
        if zorder or f.size < min_size:
            by_partition.setdefault(f.typed_values, []).append(f)
    bins: list[Bin] = []
    for partition, members in by_partition.items():
        if zorder:
            bins.append(Bin(partition, list(members)))
            continue
        current = Bin(partition)
        for f in sorted(members, key=lambda f: f.size):
            if current.files and current.size + f.size > max_size:
                bins.append(current)
                current = Bin(partition)
            current.files.append(f)
        bins.append(current)
    return [b for b in bins if len(b.files) > 1 or (zorder and b.files)]


def _rewrite(spark: SparkSession, snapshot: Snapshot, bins: list[Bin], zorder_by: list[str],
             max_size: int, predicates: list[str],
             clustered: tuple[list[str], bool] | None = None,
             operation: tuple[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Write each bin's rows as new files (one Spark job) and commit them in one version.
    clustered: (clustering columns, FULL) when the bins are a clustered table's new ZCube
    (its files tagged, the commit's parameters delta-spark's for clustering). operation:
    another commit's (name, parameters) than OPTIMIZE's (REORG)."""
    keys = data_frame(spark,
        [(f.spark_key, i, max(1, b.size // max_size) if zorder_by else 1)
         for i, b in enumerate(bins) for f in b.files],
        StructType([StructField("_hw_key", StringType()), StructField(BIN, LongType()),
                    StructField("_hw_files", LongType())]))
    rows = scan(spark, snapshot, [f for b in bins for f in b.files])
    rows = rows.join(F.broadcast(keys), rows[FILE_COL] == keys["_hw_key"])
    if zorder_by:
        rows = _z_ordered(rows, zorder_by)
    out = _layout(rows, len(bins), zorder_by)
    written = Written(snapshot.uri)
    write_files(data_only(out, snapshot), snapshot, written)
    zcube = str(uuid.uuid4())
    for add in written.adds:
        add["dataChange"] = False
        if clustered is not None:
            add["tags"] = {**(add.get("tags") or {}), **clustering.zcube_tags(zcube, clustered[0])}
            add["clusteringProvider"] = clustering.PROVIDER
    removed = [f for b in bins for f in b.files]
    if not written.adds:
        written.cleanup()
        return []
    now = int(time.time() * 1000)
    actions = [remove_action(f, now, data_change=False) for f in removed]
    actions += [{"add": {**a, "path": log_path(a["path"])}} for a in written.adds]
    commit(Transaction(
        uri=snapshot.uri, read_version=snapshot.version,
        operation="OPTIMIZE" if operation is None else operation[0],
        parameters=_parameters(predicates, zorder_by, clustered) if operation is None
        else operation[1],
        metrics=_commit_metrics(written.adds, removed), actions=actions,
        read_paths=[f.log_path for f in removed], cleanup=written.cleanup))
    return written.adds


def _parameters(predicates: list[str], zorder_by: list[str],
                clustered: tuple[list[str], bool] | None) -> dict[str, str]:
    """delta-spark's Optimize operation parameters: zOrderBy empty and isFull added when the
    table is clustered."""
    if clustered is None:
        return {"predicate": json.dumps(predicates), "zOrderBy": json.dumps(zorder_by),
                "clusterBy": "[]", "auto": "false"}
    return {"predicate": json.dumps(predicates), "zOrderBy": "[]",
            "clusterBy": json.dumps(clustered[0]), "auto": "false",
            "isFull": "true" if clustered[1] else "false"}


def _z_ordered(rows: DataFrame, columns: list[str]) -> DataFrame:
    """``rows`` with ``_hw_z``: the bits of each column's range id (its ``ntile`` of 1024
    within the bin) interleaved, first column highest, as delta-spark's interleave_bits."""
    bits = min(RANGE_BITS, 62 // len(columns))
    ranges = 1 << bits
    ids = []
    for i, name in enumerate(columns):
        col = f"_hw_r{i}"
        rows = rows.withColumn(col, (F.ntile(ranges).over(
            Window.partitionBy(BIN).orderBy(F.col(f"`{name}`").asc_nulls_first())) - 1)
            .cast("long"))
        ids.append(col)
    z = F.lit(0).cast("long")
    n = len(ids)
    for b in range(bits):
        for i, col in enumerate(ids):
            bit = F.shiftright(F.col(col), b).bitwiseAND(F.lit(1))
            z = z.bitwiseOR(F.shiftleft(bit, b * n + (n - 1 - i)))
    return rows.withColumn(Z, z).drop(*ids)


def _layout(rows: DataFrame, tasks: int, zorder_by: list[str]) -> DataFrame:
    """One task per bin (one file per bin and partition folder); Z-ordered bins split into
    ``_hw_files`` range slices, their rows sorted by the z-value within each file."""
    if not zorder_by:
        return rows.repartition(tasks, BIN)
    ordered = Window.partitionBy(BIN).orderBy(Z)
    rows = rows.withColumn(PART, F.floor((F.row_number().over(ordered) - 1)
                                         * F.col("_hw_files")
                                         / F.count(F.lit(1)).over(Window.partitionBy(BIN))))
    parts = rows.select(BIN, PART).distinct().count()
    return rows.repartition(max(tasks, parts), BIN, PART).sortWithinPartitions(BIN, PART, Z)


def _commit_metrics(added: list[dict[str, Any]], removed: list[TargetFile]) -> dict[str, int]:
    sizes = sorted(int(a["size"]) for a in added)
    n = len(sizes)
    return {"numAddedFiles": n, "numRemovedFiles": len(removed),
            "numAddedBytes": sum(sizes), "numRemovedBytes": sum(f.size for f in removed),
            "minFileSize": sizes[0], "p25FileSize": sizes[n // 4], "p50FileSize": sizes[n // 2],
            "p75FileSize": sizes[n * 3 // 4], "maxFileSize": sizes[-1],
            "numDeletionVectorsRemoved": sum(1 for f in removed if f.deletion_vector),
            "numDeletionVectorRowsRemoved": sum(len(f.deleted_rows) for f in removed),
            "numDeletionVectorBytesRemoved": sum(int(f.deletion_vector.get("sizeInBytes") or 0)
                                                 for f in removed if f.deletion_vector)}


def _file_stats(sizes: list[int]) -> dict[str, Any]:
    if not sizes:
        return {"min": None, "max": None, "avg": 0.0, "totalFiles": 0, "totalSize": 0}
    return {"min": min(sizes), "max": max(sizes), "avg": sum(sizes) / len(sizes),
            "totalFiles": len(sizes), "totalSize": sum(sizes)}


def zorder_stats(files: int, size: int, partitions: int) -> dict[str, Any]:
    """delta-spark's ZOrderStats of its 'all' strategy: every file of a partition merged,
    one output cube per partition."""
    return {"strategyName": "all", "inputCubeFiles": {"num": 0, "size": 0},
            "inputOtherFiles": {"num": files, "size": size}, "inputNumCubes": 0,
            "mergedFiles": {"num": files, "size": size}, "numOutputCubes": partitions,
            "mergedNumCubes": None}


def _metrics(snapshot: Snapshot, candidates: list[TargetFile], bins: list[Bin],
             added: list[dict[str, Any]], zorder: bool, started: int,
             spark: SparkSession) -> dict[str, Any]:
    removed = [f.size for b in bins for f in b.files] if added else []
    partitions = len({b.partition for b in bins}) if added else 0
    columns = len(snapshot.schema.fields)
    indexed = int(snapshot.configuration.get(maintenance.INDEXED_COLUMNS_PROPERTY, "32"))
    return {
        "numFilesAdded": len(added), "numFilesRemoved": len(removed),
        "filesAdded": _file_stats([int(a["size"]) for a in added]),
        "filesRemoved": _file_stats(removed), "partitionsOptimized": partitions,
        "zOrderStats": zorder_stats(len(removed), sum(removed), partitions) if zorder else None,
        "clusteringStats": None, "numBins": len(bins) if added else 0, "numBatches": 1,
        "totalConsideredFiles": len(candidates),
        "totalFilesSkipped": len(candidates) - len(removed), "preserveInsertionOrder": False,
        "numFilesSkippedToReduceWriteAmplification": 0,
        "numBytesSkippedToReduceWriteAmplification": 0, "startTimeMs": started,
        "endTimeMs": int(time.time() * 1000),
        "totalClusterParallelism": spark.sparkContext.defaultParallelism,
        "totalScheduledTasks": 0, "autoCompactParallelismStats": None,
        "deletionVectorStats": {
            "numDeletionVectorsRemoved": sum(1 for b in bins for f in b.files
                                             if f.deletion_vector) if added else 0,
            "numDeletionVectorRowsRemoved": sum(len(f.deleted_rows) for b in bins
                                                for f in b.files) if added else 0},
        "numTableColumns": columns,
        "numTableColumnsWithStats": min(indexed, columns) if indexed >= 0 else columns,
    }


def _with_delta_rs(uri: str, where: Sequence[str], zorder_by: Sequence[str],
                   started: int) -> dict[str, Any]:
    """delta-rs' OPTIMIZE for tables Spark's writer cannot rewrite, in delta-spark's metrics."""
    raw = maintenance.optimize(uri, " AND ".join(f"({w})" for w in where) or None,
                               list(zorder_by) or None)

    def stats(key: str) -> dict[str, Any]:
        value = raw.get(key) or {}
        return json.loads(value) if isinstance(value, str) else dict(value)

    added, removed = stats("filesAdded"), stats("filesRemoved")
    partitions = int(raw.get("partitionsOptimized") or 0)
    zstats = zorder_stats(int(raw.get("numFilesRemoved") or 0),
                          int(removed.get("totalSize") or 0), partitions) if zorder_by else None
    return {
        "numFilesAdded": int(raw.get("numFilesAdded") or 0),
        "numFilesRemoved": int(raw.get("numFilesRemoved") or 0),
        "filesAdded": {k: added.get(k) for k in ("min", "max", "avg", "totalFiles",
                                                 "totalSize")},
        "filesRemoved": {k: removed.get(k) for k in ("min", "max", "avg", "totalFiles",
                                                     "totalSize")},
        "partitionsOptimized": partitions, "zOrderStats": zstats, "clusteringStats": None,
        "numBins": int(raw.get("numBatches") or 0), "numBatches": 1,
        "totalConsideredFiles": int(raw.get("totalConsideredFiles") or 0),
        "totalFilesSkipped": int(raw.get("totalFilesSkipped") or 0),
        "preserveInsertionOrder": bool(raw.get("preserveInsertionOrder")),
        "startTimeMs": started, "endTimeMs": int(time.time() * 1000),
    }
