"""Writing a DML's new files with Spark's parquet writer and committing them in one version.

New data files go to a fresh folder under the table, change-data files (``_change_type``
column, table partitioning) under ``_change_data/``; stats come from the parquet footers.
Then the driver commits removes of the rewritten files + adds (+ cdc) as one transaction
(:mod:`headwater.delta.commit`); on any failure the new folders are deleted.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs
from pyspark.sql import functions as F

from headwater.delta import physical_names
from headwater.delta.commit import Transaction, commit, log_path
from headwater.delta.dml.target import Snapshot, TargetFile
from headwater.delta.log import filesystem_for
from headwater.delta.write.staging import remove_dir, staged_adds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

CHANGE_TYPE = "_change_type"
CDC_DIR = "_change_data"


@dataclass
class Written:
    """Files a DML wrote but has not committed yet."""

    uri: str
    adds: list[dict[str, Any]] = field(default_factory=list)
    cdcs: list[dict[str, Any]] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)

    def cleanup(self) -> None:
        for folder in self.folders:
            remove_dir(self.uri, folder)

    @property
    def rows_added(self) -> int:
        return sum(json.loads(a["stats"])["numRecords"] for a in self.adds)


def _prepare_session(df: DataFrame) -> None:
    spark = df.sparkSession
    if spark.conf.get("spark.sql.parquet.outputTimestampType") == "INT96":
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def write_files(df: DataFrame, snapshot: Snapshot, written: Written, cdc: bool = False) -> None:
    """Write ``df`` (table columns, plus ``_change_type`` when ``cdc``) partitioned like the
    table; record its add (or cdc) actions in ``written``. Under column mapping the files,
    their folders, partition values and stats name the columns by physical name."""
    _prepare_session(df)
    stamp = f"hw-{int(time.time())}-{uuid.uuid4().hex[:12]}"
    folder = f"{CDC_DIR}/{stamp}" if cdc else stamp
    written.folders.append(folder)
    partition_columns = snapshot.partition_columns
    if snapshot.mapped:
        df = physical_names.to_physical(  # row tracking's materialized columns as named
            df, snapshot.full_schema, keep=(CHANGE_TYPE, *(snapshot.row_tracking_columns or ())))
        partition_columns = snapshot.partition_keys
    (df.write.mode("errorifexists").partitionBy(*partition_columns)
     .option("compression", "snappy")
     # the commit is the log's: no _SUCCESS marker left in the folder once VACUUM removed
     # the files (VACUUM skips names starting with "_", so the folder would stay forever)
     .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
     .parquet(f"{snapshot.uri}/{folder}"))
    actions = staged_adds(snapshot.uri, folder, df, partition_columns)
    if cdc:
        written.cdcs.extend({"cdc": {"path": a["path"], "partitionValues": a["partitionValues"],
                                     "size": a["size"], "dataChange": False}} for a in actions)
    else:
        written.adds.extend(actions)


def remove_action(f: TargetFile, now: int, data_change: bool = True) -> dict[str, Any]:
    """The remove of ``f``, with its deletion vector: log replay keys a file by both."""
    remove: dict[str, Any] = {"path": f.log_path, "dataChange": data_change,
                              "deletionTimestamp": now, "extendedFileMetadata": True,
                              "partitionValues": f.partition_values, "size": f.size}
    if f.deletion_vector:
        remove["deletionVector"] = f.deletion_vector
    return {"remove": remove}


def commit_rewrite(snapshot: Snapshot, operation: str, parameters: dict[str, Any],
                   metrics: dict[str, Any], read: list[TargetFile], removed: list[TargetFile],
                   written: Written, new_schema: StructType | None = None,
                   read_filter: Callable[[dict[str, Any]], bool] | None = None) -> int | None:
    """Commit removes of ``removed`` + ``written``'s files; None when there was nothing to do.
    read: the files the operation read; read_filter: which files added concurrently it would
    have read (:class:`headwater.delta.commit.Transaction`)."""
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    if new_schema is not None:
        actions.append(snapshot.metadata_action(new_schema))
    actions += [remove_action(f, now) for f in removed]
    # new files' paths URI-encoded as the log stores them (a partition folder such as
    # "ts=2024-01-01 10%3A00" is named "...10%253A00" in the log; readers decode it)
    actions += [{"add": {**a, "path": log_path(a["path"])}} for a in written.adds]
    actions += [{kind: {**entry, "path": log_path(entry["path"])}}
                for cdc in written.cdcs for kind, entry in cdc.items()]
    metrics.update(numRemovedFiles=len(removed), numAddedFiles=len(written.adds),
                   numAddedChangeFiles=len(written.cdcs),
                   numRemovedBytes=sum(f.size for f in removed),
                   numAddedBytes=sum(a["size"] for a in written.adds))
    if not actions:
        written.cleanup()
        return None
    return commit(Transaction(
        uri=snapshot.uri, read_version=snapshot.version, operation=operation,
        parameters=parameters, metrics=metrics, actions=actions,
        read_paths=[f.log_path for f in read], cleanup=written.cleanup,
        read_filter=read_filter,
    ))


def data_only(df: DataFrame, snapshot: Snapshot, schema: StructType | None = None):
    """``df`` reduced to the table's columns, in the table's order."""
    names = (schema or snapshot.schema).fieldNames()
    return df.select(*[F.col(f"`{c}`") for c in names])


def folder_exists(uri: str, folder: str) -> bool:
    fs, root = filesystem_for(uri)
    return fs.get_file_info(f"{root}/{folder}").type != pafs.FileType.NotFound
