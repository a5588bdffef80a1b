"""Delta batch reads at Spark's native parquet speed.

:func:`read_native` hands a snapshot's files and partition values to Spark's parquet reader
(:mod:`headwater.delta.file_index`) where :func:`natively_readable` says it returns the same
rows; callers fall back to headwater's Python reader otherwise.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from headwater.delta import physical_names, row_tracking
from headwater.delta.batch import latest_table
from headwater.delta.file_index import (
    BASE_ROW_ID_FIELD,
    ROW_COMMIT_VERSION_FIELD,
    DeltaFileIndex,
    native_frame,
)
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import spark_schema, strip_field_metadata
from headwater.spark.hidden_columns import hide

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

read_log = logging.getLogger("headwater.delta.native")  # reads: file_index, native_reads


def _column_mapped(table) -> bool:
    return physical_names.mode_of(table.metadata().configuration) != "none"


def read_native(spark: SparkSession, path: str, version: int | str | None = None,
                pinned: bool = False, name: tuple[str, str] | None = None,
                row_ids: bool = False) -> DataFrame | None:
    """The table through Spark's parquet reader (a file index over the Delta log, see
    :mod:`headwater.delta.file_index`), or None when :func:`natively_readable` says the Python
    reader must read it (the caller falls back).

    version: a version number or timestamp (time travel): that version, always. Otherwise each
    query of the DataFrame reads the table's newest version, as delta-spark's reads do (and
    the static side of a stream-static join sees new versions at every micro-batch);
    ``pinned=True`` keeps the version current now instead. A pinned version whose files are
    gone (VACUUM) is a HW_DELTA_FILE_NOT_FOUND now; files that vanish later fail the query
    with the same code. name: (data source name, qualified name) of a lakehouse table read
    by name, for plan inspection (:func:`headwater.spark.plan.relations`). row_ids: on a
    table with row tracking, the hidden ``_metadata`` column also has ``row_id`` and
    ``row_commit_version`` (:func:`with_row_ids`; the DataFrames users read)."""
    uri = normalize_uri(path)
    log_ = DeltaLog(uri)
    # the latest snapshot: the process' cached one, brought up to date incrementally
    table = log_.table(version) if version is not None else latest_table(log_)
    full = spark_schema(table.schema().to_json())
    partitions = list(table.metadata().partition_columns)
    mapped = _mapped_schema(table, full, partitions)
    if not natively_readable(table, mapped is not None):
        read_log.debug("read of %s: headwater's Python reader (the table needs it)", uri)
        return None
    schema = strip_field_metadata(full)
    at = table.version() if version is not None or pinned else None
    tracked = row_ids and row_tracking.FEATURE in (table.protocol().writer_features or [])
    config = table.metadata().configuration or {}
    # row tracking's materialized columns (not column-mapped: named by the properties)
    materialized = [StructField(config[k], LongType(), True)
                    for k in (row_tracking.ROW_ID_COLUMN_PROPERTY,
                              row_tracking.COMMIT_VERSION_COLUMN_PROPERTY)
                    if tracked and config.get(k)]
    if mapped is not None:
        index = DeltaFileIndex(spark, uri, StructType(mapped.fields + materialized), partitions,
                               at, _mapped_readable, name=name, logical=full, row_ids=tracked)
    else:
        index = DeltaFileIndex(spark, uri, StructType(schema.fields + materialized),
                               partitions, at, natively_readable, name=name, row_ids=tracked)
    if at is not None:
        index.prepare()  # its files listed now: vacuumed ones are an error here
    read_log.debug("read of %s: Spark's parquet reader (%s)", uri,
              f"version {at}" if at is not None else "the latest version at each query")
    frame = native_frame(spark, index)
    if mapped is not None:  # the files' physical names -> the table's logical ones
        if not tracked:
            return physical_names.to_logical(frame, full, keep=tuple(partitions))
        shaped = frame.select(*[_column(f.name) for f in mapped.fields],
                              _row_tracking_metadata(frame, config).alias("_metadata"))
        return hide(physical_names.to_logical(shaped, full, keep=(*partitions, "_metadata")),
                    ["_metadata"])
    if not tracked:
        return frame
    return with_row_ids(frame, schema, config)


def _column(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def with_row_ids(frame: DataFrame, schema: StructType, config: dict[str, str]) -> DataFrame:
    """A row-tracking table's native ``frame`` (its columns, the materialized row tracking
    columns, each file's ids as partition values) as the table's columns, with a hidden
    ``_metadata`` that adds Delta's ``row_id`` (the materialized id if not null, else the
    file's baseRowId + the row's index in the file) and ``row_commit_version`` (likewise,
    else the file's defaultRowCommitVersion) to Spark's file metadata fields."""
    shaped = frame.select(*[_column(f.name) for f in schema.fields],
                          _row_tracking_metadata(frame, config).alias("_metadata"))
    return hide(shaped, ["_metadata"])


def _row_tracking_metadata(frame: DataFrame, config: dict[str, str]) -> Column:
    """Spark's ``_metadata`` fields of ``frame`` (a row-tracking table's native read) with
    Delta's ``row_id`` and ``row_commit_version`` added (see :func:`with_row_ids`)."""
    spark_meta = F.col("_metadata")
    fields = frame.select("_metadata.*").columns
    row_id = _column(BASE_ROW_ID_FIELD) + spark_meta["row_index"]
    commit_version = _column(ROW_COMMIT_VERSION_FIELD)
    id_column = config.get(row_tracking.ROW_ID_COLUMN_PROPERTY)
    version_column = config.get(row_tracking.COMMIT_VERSION_COLUMN_PROPERTY)
    if id_column:
        row_id = F.coalesce(_column(id_column), row_id)
    if version_column:
        commit_version = F.coalesce(_column(version_column), commit_version)
    return F.struct(*[spark_meta[f].alias(f) for f in fields],
                    row_id.alias("row_id"), commit_version.alias("row_commit_version"))


def _mapped_schema(table, full: StructType, partitions: list[str]) -> StructType | None:
    """The schema Spark's reader reads a name-mode table with (data columns by physical
    name, partition columns, whose values come from the log, by logical name), or None: not
    column-mapped in name mode, or a partition column's name is also a physical name."""
    if physical_names.mode_of(table.metadata().configuration) != "name":
        return None
    data = physical_names.physical_type(
        StructType([f for f in full.fields if f.name not in partitions]), ids=False)
    by_name = {f.name: f for f in strip_field_metadata(full).fields}
    physical = {f.name.lower() for f in data.fields}
    if any(c.lower() in physical for c in partitions):
        return None
    names = iter(data.fields)
    return StructType([by_name[f.name] if f.name in partitions else next(names)
                       for f in full.fields])


def _mapped_readable(table) -> bool:
    return natively_readable(table, True)


def natively_readable(table, mapping: bool = False) -> bool:
    """Spark's parquet reader, given the snapshot's files and their partition values from
    the log, returns the same rows: no column mapping (files name columns by physical name;
    ``mapping``: the caller reads name mode's physical names and renames), no reader
    features such as deletion vectors (rows the files still hold) or type widening (files
    may hold narrower types than the schema). Only local tables: Spark's reader opens
    paths through Hadoop, which has no s3 / az / gs filesystem here."""
    if "://" in table.table_uri and not table.table_uri.startswith("file:"):
        return False
    features = set(table.protocol().reader_features or [])
    if mapping:
        return physical_names.mode_of(table.metadata().configuration) == "name" and not (
            features - {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck",
                        "columnMapping"})
    return not (_column_mapped(table)
                or features - {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
