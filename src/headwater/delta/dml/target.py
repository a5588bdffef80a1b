"""The target of a DML statement: its snapshot (file list from the log, on the driver) and the
rows of chosen files read by Spark's own parquet reader (on executors).

Each row read carries ``_hw_file`` (the file it came from, as Spark names it) and
``_hw_row`` (its position in that file): touched files are found with them and only those are
rewritten. Partition values live in the log, not in the files, so for partitioned tables they
are joined in from a small broadcast table of (file, values).

Deletion vectors: Spark's parquet reader returns every row of a file, so the rows a file's
deletion vector deletes (read by deltalake, :func:`headwater.delta.log.deletion_vectors`) are
anti-joined away by (file, row position) before anything sees them. A DML then rewrites the
touched files without those rows and removes each old file together with its vector (the
remove names the add's ``deletionVector``, as log replay keys a file by path and vector):
copy-on-write, which every Delta reader accepts; no new deletion vector is written.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from headwater.delta import physical_names, row_tracking
from headwater.delta.constraints import Constraints
from headwater.delta.log import (
    DeltaLog,
    add_actions,
    deletion_vector_paths,
    deletion_vectors,
    normalize_uri,
    resolve_file,
)
from headwater.delta.metadata import metadata_action
from headwater.delta.schema import (
    format_partition_value,
    parse_partition_value,
    spark_schema,
    strip_field_metadata,
)
from headwater.delta.snapshot_adds import snapshot_adds
from headwater.errors import HeadwaterError
from headwater.spark.active import data_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FILE_COL, ROW_COL = "_hw_file", "_hw_row"
ROW_ID_COL, ROW_VERSION_COL = "_hw_row_id", "_hw_row_version"  # row tracking (scan)
# Table features whose rules this writer follows (or that do not concern a writer of files).
_SUPPORTED_WRITER_FEATURES = {
    "appendOnly", "invariants", "changeDataFeed", "timestampNtz", "domainMetadata",
    "v2Checkpoint", "vacuumProtocolCheck", "checkConstraints", "deletionVectors",
    "generatedColumns", "identityColumns", "clustering", "allowColumnDefaults",
    "inCommitTimestamp",  # headwater's commit writes each commit's inCommitTimestamp
    "rowTracking",  # the commit gives new files row ids; rewrites of rows are refused
    "typeWidening", "typeWidening-preview",  # Spark's parquet reader widens older files
}
_SUPPORTED_READER_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck",
                              "deletionVectors", "typeWidening", "typeWidening-preview"}
# The variant feature asks writers to write variant columns as Delta lays them out; a table
# without such a column (deltalake 1.6.6 adds the feature to every protocol it upgrades to
# table features) has nothing the rewrite could get wrong.
_VARIANT_FEATURES = {"variantType", "variantType-preview"}
# Deleted rows up to this many are broadcast to the scan's join (16 bytes-ish a row).
_BROADCAST_DELETED_ROWS = 1_000_000
# java.net.URI leaves these unquoted in a path; Hadoop's Path (Spark's file names) uses it.
_URI_PATH_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                     "_-!.~'()*,;:$&+=/@")


@dataclass(frozen=True)
class TargetFile:
    """One data file of the snapshot."""

    log_path: str  # exactly as the log names it (removes must repeat it)
    path: str  # where the filesystem finds it
    size: int
    partition_values: dict[str, str | None]  # as the log stores them
    typed_values: tuple  # partition values as Python objects, in partition column order
    num_records: int | None
    has_dv: bool
    min_values: dict[str, Any] = field(default_factory=dict)
    max_values: dict[str, Any] = field(default_factory=dict)
    # the add's deletion vector descriptor (its remove repeats it) and the rows it deletes
    deletion_vector: dict[str, Any] | None = None
    deleted_rows: tuple[int, ...] = ()
    # row tracking: the add's baseRowId and defaultRowCommitVersion
    base_row_id: int | None = None
    row_commit_version: int | None = None

    @property
    def spark_key(self) -> str:
        return spark_file_name(self.path)

    @property
    def live_records(self) -> int | None:
        """Rows a reader sees: the file's records minus those its deletion vector deletes."""
        if self.num_records is None:
            return None
        return self.num_records - len(self.deleted_rows)


@dataclass
class Snapshot:
    uri: str
    version: int
    table: Any  # deltalake.DeltaTable at ``version``
    schema: StructType  # logical schema, Delta field metadata removed
    raw_schema_json: str
    partition_columns: list[str]
    configuration: dict[str, str]
    files: list[TargetFile]

    @property
    def cdf_enabled(self) -> bool:
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    @property
    def constraints(self) -> Constraints:
        """The table's NOT NULL and CHECK constraints, checked on every row a DML writes."""
        return Constraints.of(self.schema, self.configuration)

    @property
    def row_tracking_columns(self) -> tuple[str, str] | None:
        """(materialized row id column, materialized row commit version column) when row
        tracking is enabled: a rewrite writes each row's id and commit version into them."""
        config = self.configuration
        names = (config.get(row_tracking.ROW_ID_COLUMN_PROPERTY),
                 config.get(row_tracking.COMMIT_VERSION_COLUMN_PROPERTY))
        if not row_tracking.enables(config) or None in names or \
                row_tracking.FEATURE not in (self.table.protocol().writer_features or []):
            return None
        return names[0], names[1]  # type: ignore[return-value]

    @property
    def mapped(self) -> bool:
        """Column mapping: the files name columns by their physical names (the scan reads
        them so and renames, the rewrite writes them so, the log's keys are physical)."""
        return physical_names.mode_of(self.configuration) != "none"

    @property
    def partition_keys(self) -> list[str]:
        """The partition columns as the log's partitionValues key them (physical names
        under column mapping), in partition column order."""
        if not self.mapped:
            return list(self.partition_columns)
        return physical_names.physical_partition_columns(self.full_schema,
                                                         self.partition_columns)

    @property
    def data_columns(self) -> list[str]:
        return [f.name for f in self.schema.fields if f.name not in self.partition_columns]

    @property
    def full_schema(self) -> StructType:
        """The table's schema with Delta's column metadata (generation, identity)."""
        return spark_schema(self.raw_schema_json)

    def metadata_action(self, schema: StructType) -> dict[str, Any]:
        """A metaData action equal to the current one but with ``schema`` (schema evolution)."""
        return metadata_action(self.table,
                               json.dumps(schema.jsonValue(), separators=(",", ":")))


def spark_file_name(path: str) -> str:
    """The name Spark gives a local file in ``_metadata.file_path`` (Hadoop's Path URI)."""
    if "://" in path:
        return path
    quoted = "".join(ch if ch in _URI_PATH_SAFE or ord(ch) > 127 else
                     "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in path)
    return "file:" + quoted


def _refuse(uri: str, operation: str, what: str, fix: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_DML_UNSUPPORTED_FEATURE",
        f"{operation} on {uri} is not supported: the table {what}.",
        "headwater rewrites files copy-on-write and refuses tables whose rules it does not "
        "implement rather than risk wrong rows.",
        fix,
    )


def check_writable(table, uri: str, operation: str, needs_rows: bool = True) -> None:
    """Refuse tables this writer cannot change correctly, naming the feature. Column mapping
    is followed (the scan reads physical names, the rewrite writes them)."""
    protocol = table.protocol()
    config = table.metadata().configuration or {}
    writer = set(protocol.writer_features or [])
    reader = set(protocol.reader_features or [])
    supported_writer = _SUPPORTED_WRITER_FEATURES | {"columnMapping"}
    supported_reader = _SUPPORTED_READER_FEATURES | {"columnMapping"}
    if '"variant"' not in table.schema().to_json():
        supported_writer = supported_writer | _VARIANT_FEATURES
        supported_reader = supported_reader | _VARIANT_FEATURES
    if needs_rows and operation not in ("DELETE", "UPDATE"):  # MERGE: rows would get new ids
        row_tracking.refuse_rewrite(protocol, uri, operation)
    unknown = sorted((writer - supported_writer) | (reader - supported_reader))
    if unknown:
        raise _refuse(uri, operation, f"uses the table feature(s) {', '.join(unknown)}",
                      "Run the statement with a writer that supports them (delta-spark).")
    if protocol.min_writer_version > 7 or protocol.min_reader_version > 3:
        raise _refuse(uri, operation, f"needs protocol {protocol.min_reader_version}/"
                      f"{protocol.min_writer_version}", "Use a newer Delta writer.")
    if config.get("delta.appendOnly", "false").lower() == "true" and needs_rows:
        raise HeadwaterError(
            "HW_DML_APPEND_ONLY",
            f"{operation} on {uri} is not allowed: the table is append-only "
            "(delta.appendOnly=true).",
            "Append-only tables never change or remove rows they hold.",
            "Set delta.appendOnly=false first if changes are intended.",
        )
    # Generated and identity columns are kept by the rewrite (headwater.delta.generated);
    # NOT NULL and CHECK constraints are checked on the rows it writes
    # (headwater.delta.constraints). Legacy column invariants are not.
    if "delta.invariants" in table.schema().to_json():
        raise _refuse(uri, operation, "has column invariants (delta.invariants)",
                      "Run the statement with delta-spark, or replace the invariant by a "
                      "CHECK constraint.")


def load_snapshot(path: str, operation: str, needs_rows: bool = True) -> Snapshot:
    """The latest snapshot of the table at ``path``, checked for what ``operation`` needs."""
    uri = normalize_uri(path)
    log = DeltaLog(uri)
    table = log.table()
    check_writable(table, uri, operation, needs_rows)
    raw_json = table.schema().to_json()
    full_schema = spark_schema(raw_json)
    schema = strip_field_metadata(full_schema)
    partition_columns = list(table.metadata().partition_columns)
    configuration = dict(table.metadata().configuration or {})
    mapped = physical_names.mode_of(configuration) != "none"
    # under column mapping the log keys partition values by physical name (deltalake
    # reports them by logical name) and deltalake's stats are keyed by physical name
    keys = physical_names.physical_partition_columns(full_schema, partition_columns) \
        if mapped else partition_columns

    def stats(values: dict[str, Any] | None) -> dict[str, Any]:
        return physical_names.logical_keys(values or {}, full_schema) if mapped \
            else values or {}
    masks = deletion_vectors(table) if deletion_vector_paths(table) else {}
    # the log's own add actions hold the deletion vector descriptors deltalake does not list
    tracked = row_tracking.FEATURE in (table.protocol().writer_features or [])
    logged = {resolve_file(log.root, a["path"]): a
              for a in snapshot_adds(log, table)} if masks or tracked else {}
    descriptors = {p: a.get("deletionVector") for p, a in logged.items()}
    actions = add_actions(table).to_pylist()
    files = []
    for row in actions:
        values = row.get("partition") or {}
        typed = tuple(_utc(values.get(c)) for c in partition_columns)
        fs_path = resolve_file(log.root, row["path"])
        mask = masks.get(fs_path)
        files.append(TargetFile(
            log_path=row["path"], path=fs_path, size=int(row["size_bytes"]),
            partition_values={k: format_partition_value(values.get(c))
                              for c, k in zip(partition_columns, keys, strict=True)},
            typed_values=typed,
            num_records=row.get("num_records"), has_dv=mask is not None,
            min_values=stats(row.get("min")), max_values=stats(row.get("max")),
            deletion_vector=descriptors.get(fs_path) if mask is not None else None,
            deleted_rows=tuple(i for i, keep in enumerate(mask) if not keep)
            if mask is not None else (),
            base_row_id=logged.get(fs_path, {}).get("baseRowId"),
            row_commit_version=logged.get(fs_path, {}).get("defaultRowCommitVersion"),
        ))
    return Snapshot(uri, table.version(), table, schema, raw_json, partition_columns,
                    configuration, files)


def added_file(snapshot: Snapshot, add: dict[str, Any]) -> TargetFile:
    """A file another writer committed (its add action as the log stores it: partition values
    as strings, stats as JSON) described as the snapshot's files are, so the same file tests
    apply to it (:func:`headwater.delta.dml.skipping.read_filter`)."""
    values = add.get("partitionValues") or {}
    typed = tuple(_utc(parse_partition_value(values.get(k), snapshot.schema[c].dataType))
                  for c, k in zip(snapshot.partition_columns, snapshot.partition_keys,
                                  strict=True))
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    low, high = stats.get("minValues") or {}, stats.get("maxValues") or {}
    if snapshot.mapped:  # the stats' keys are physical names
        low = physical_names.logical_keys(low, snapshot.full_schema)
        high = physical_names.logical_keys(high, snapshot.full_schema)
    return TargetFile(
        log_path=add["path"], path=add["path"], size=int(add.get("size") or 0),
        partition_values=dict(values), typed_values=typed,
        num_records=stats.get("numRecords"), has_dv=bool(add.get("deletionVector")),
        deletion_vector=add.get("deletionVector"), min_values=low, max_values=high)


def _utc(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def scan(spark: SparkSession, snapshot: Snapshot, files: list[TargetFile]) -> DataFrame:
    """Rows of ``files`` with every table column, ``_hw_file`` and ``_hw_row`` (and, when
    row tracking is enabled, each row's id and commit version: ``_hw_row_id``,
    ``_hw_row_version``: the materialized values if the file has them, else the file's).
    Under column mapping the files are read by physical names and the columns renamed to
    logical ones (name mode; id mode, where files match columns by parquet field id, is
    refused)."""
    if physical_names.mode_of(snapshot.configuration) not in ("none", "name"):
        raise _refuse(snapshot.uri, "A rewrite of the files", "uses column mapping in id mode "
                      "(files matched to columns by parquet field id, which Spark's rewrite "
                      "does not read)", "Run the statement with delta-spark.")
    tracking = snapshot.row_tracking_columns
    data_schema = StructType([f for f in snapshot.schema.fields
                              if f.name not in snapshot.partition_columns])
    full_data = StructType([f for f in snapshot.full_schema.fields
                            if f.name not in snapshot.partition_columns])
    if snapshot.mapped:
        data_schema = physical_names.physical_type(full_data, ids=False)
    data_schema = StructType(data_schema.fields
                             + [StructField(c, LongType()) for c in tracking or ()])
    meta_fields = [StructField(FILE_COL, StringType()), StructField(ROW_COL, LongType())] + \
        [StructField(c, LongType()) for c in (ROW_ID_COL, ROW_VERSION_COL) if tracking]
    if not files:
        return data_frame(spark, [], StructType(list(snapshot.schema.fields) + meta_fields))
    reader = spark.read.schema(data_schema)
    df = reader.parquet(*[f.path for f in files])
    expected = {f.spark_key for f in files}
    actual = {name.replace("file:///", "file:/", 1) for name in df.inputFiles()}
    if expected != actual:  # an unusual file name: tag each file with its own name instead
        frames = [reader.parquet(f.path).select("*", F.lit(f.spark_key).alias(FILE_COL),
                                                F.col("_metadata.row_index").alias(ROW_COL))
                  for f in files]
        df = frames[0]
        for frame in frames[1:]:
            df = df.unionByName(frame)
    else:
        df = df.select("*", F.col("_metadata.file_path").alias(FILE_COL),
                       F.col("_metadata.row_index").alias(ROW_COL))
    if snapshot.mapped:
        df = physical_names.to_logical(df, full_data,
                                       keep=(FILE_COL, ROW_COL, *(tracking or ())))
    deleted = [(f.spark_key, row) for f in files for row in f.deleted_rows]
    if deleted:  # rows the files' deletion vectors delete are no rows of the table
        gone = data_frame(spark, deleted, StructType([StructField("_hw_dv_file", StringType()),
                                                      StructField("_hw_dv_row", LongType())]))
        if len(deleted) <= _BROADCAST_DELETED_ROWS:
            gone = F.broadcast(gone)
        df = df.join(gone, (df[FILE_COL] == gone["_hw_dv_file"])
                     & (df[ROW_COL] == gone["_hw_dv_row"]), "left_anti")
    if snapshot.partition_columns:
        part_fields = [snapshot.schema[c] for c in snapshot.partition_columns]
        values = data_frame(spark,
            [(f.spark_key, *f.typed_values) for f in files],
            StructType([StructField("_hw_key", StringType())] + part_fields))
        df = df.join(F.broadcast(values), df[FILE_COL] == values["_hw_key"]).drop("_hw_key")
    extra = []
    if tracking:
        ids = data_frame(spark, [(f.spark_key, f.base_row_id, f.row_commit_version)
                                 for f in files],
                         "_hw_id_key string, _hw_base long, _hw_version long")
        df = df.join(F.broadcast(ids), df[FILE_COL] == ids["_hw_id_key"], "left")
        extra = [F.coalesce(F.col(f"`{tracking[0]}`"), F.col("_hw_base") + F.col(ROW_COL))
                 .alias(ROW_ID_COL),
                 F.coalesce(F.col(f"`{tracking[1]}`"), F.col("_hw_version"))
                 .alias(ROW_VERSION_COL)]
    return df.select(*[F.col(f"`{c}`") for c in snapshot.schema.fieldNames()], FILE_COL, ROW_COL,
                     *extra)


def with_row_ids(rows: DataFrame, snapshot: Snapshot, data: DataFrame) -> DataFrame:
    """``data`` (``rows`` reduced to the table's columns) with the rows' ids and commit
    versions in the materialized row tracking columns, when row tracking is enabled: rows a
    rewrite copies keep both."""
    tracking = snapshot.row_tracking_columns
    if tracking is None:
        return data
    return rows.select(*[F.col(f"`{c}`") for c in data.columns],
                       F.col(ROW_ID_COL).alias(tracking[0]),
                       F.col(ROW_VERSION_COL).alias(tracking[1]))
