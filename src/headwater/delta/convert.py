"""CONVERT TO DELTA: a folder of parquet files becomes a Delta table in place (delta-rs'
``convert_to_deltalake`` writes the log), shared by SQL ``CONVERT TO DELTA parquet.`path``` and
``DeltaTable.convertToDelta``. Converting a folder that already is a Delta table changes
nothing, as in delta-spark.
"""

from __future__ import annotations

from deltalake import Schema, convert_to_deltalake
from pyspark.sql.types import StructType

from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import arrow_schema
from headwater.errors import HeadwaterError


def convert_parquet(path: str, partition_schema: StructType | None = None,
                    collect_stats: bool = True) -> str:
    """Write a Delta log for the parquet files under ``path`` (hive-style partition folders
    named by ``partition_schema``'s columns, typed by it). Returns the table's URI."""
    uri = normalize_uri(path)
    if DeltaLog(uri).exists():
        return uri
    partition_by = Schema.from_arrow(arrow_schema(partition_schema)) \
        if partition_schema is not None and partition_schema.fields else None
    try:
        convert_to_deltalake(uri, partition_by=partition_by,
                             partition_strategy="hive" if partition_by else None,
                             collect_stats=collect_stats)
    except Exception as exc:  # noqa: BLE001
        raise HeadwaterError(
            "HW_DELTA_OPERATION_FAILED", f"CONVERT TO DELTA parquet.`{path}` failed in "
            f"delta-rs: {exc}.", "The folder must hold parquet files (hive-style partition "
            "folders when a partition schema is given) and no Delta table yet.",
            "Check the path and the partition columns; nothing was written.") from exc
    return uri
