"""Delta batch reads at Spark's native parquet speed.

:func:`read_native` hands a snapshot's files and partition values to Spark's parquet reader
(:mod:`headwater.delta.file_index`) where :func:`natively_readable` says it returns the same
rows; callers fall back to headwater's Python reader otherwise.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql.types import StructType

from headwater.delta import physical_names
from headwater.delta.batch import latest_table
from headwater.delta.file_index import DeltaFileIndex, native_frame
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import spark_schema, strip_field_metadata

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

read_log = logging.getLogger("headwater.delta.native")  # reads: file_index, native_reads


def _column_mapped(table) -> bool:
    return physical_names.mode_of(table.metadata().configuration) != "none"


def read_native(spark: SparkSession, path: str, version: int | str | None = None,
                pinned: bool = False, name: tuple[str, str] | None = None
                ) -> DataFrame | None:
    """The table through Spark's parquet reader (a file index over the Delta log, see
    :mod:`headwater.delta.file_index`), or None when :func:`natively_readable` says the Python
    reader must read it (the caller falls back).

    version: a version number or timestamp (time travel): that version, always. Otherwise each
    query of the DataFrame reads the table's newest version, as delta-spark's reads do (and
    the static side of a stream-static join sees new versions at every micro-batch);
    ``pinned=True`` keeps the version current now instead. A pinned version whose files are
    gone (VACUUM) is a HW_DELTA_FILE_NOT_FOUND now; files that vanish later fail the query
    with the same code. name: (data source name, qualified name) of a lakehouse table read
    by name, for plan inspection (:func:`headwater.spark.plan.relations`)."""
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
    index = DeltaFileIndex(spark, uri, schema if mapped is None else mapped, partitions, at,
                           _mapped_readable if mapped is not None else natively_readable,
                           name=name, logical=None if mapped is None else full)
    if at is not None:
        index.prepare()  # its files listed now: vacuumed ones are an error here
    read_log.debug("read of %s: Spark's parquet reader (%s)", uri,
              f"version {at}" if at is not None else "the latest version at each query")
    df = native_frame(spark, index)
    if mapped is not None:  # the files' physical names -> the table's logical ones
        df = physical_names.to_logical(df, full, keep=tuple(partitions))
    return df


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
