"""Delta at Spark's native parquet speed, where a Python data source is the bottleneck.

The Python data source path moves every row through Arrow between the JVM and Python. For batch
writes (``df.write.format("delta")``, saveAsTable, insertInto, INSERT), the streaming sink
(:func:`native_sink`: Spark's parquet sink, then a driver commit) and pipeline flows, headwater instead lets
Spark's own parquet writer write the files (into a fresh folder under the table) and then
commits them to the Delta log from the driver, with stats read from the parquet footers and the
same ``txn`` exactly-once check as the Python sink. Batch reads of a table without column
mapping or deletion vectors hand the snapshot's files and partition values to Spark's parquet
reader (:mod:`headwater.delta.file_index`).

Both return None when the table needs what only the Python path handles
(:func:`python_writer_reason`); callers fall back.

Staged files are then moved next to the table's other files (the table root, or its
``col=value`` partition folders), where delta-spark keeps them: a write that fails before
its commit deletes them, and a driver killed before the commit leaves files no version
references (VACUUM removes them).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import Schema
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction, create_table_with_add_actions
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    FloatType,
    StructType,
    TimestampType,
)

from headwater.conf import storage
from headwater.conf.layout import (  # FAULT_*: test hooks (crash tests)
    FAULT_ENV,
    FAULT_TABLE_ENV,
    TIMESTAMP_TYPE_CONF,
)
from headwater.delta.batch import (
    check_replace_where,
    latest_table,
    parse_replace_where,
    replace_where_on_missing_table,
)
from headwater.delta.defaults import with_defaults
from headwater.delta.file_index import DeltaFileIndex, native_frame
from headwater.delta.files import FileWriter, file_stats
from headwater.delta.generated import (
    Generation,
    declares_generation,
    prepare,
    raised_high_water_marks,
)
from headwater.delta.log import (
    DeltaLog,
    add_actions,
    filesystem_for,
    normalize_uri,
    open_table,
)
from headwater.delta.schema import arrow_schema, as_nullable, spark_schema, strip_field_metadata
from headwater.delta.sink import (
    DEFAULT_TARGET_FILE_BYTES,
    WriteOptions,
    _delete_files,
    check_partitioning,
    check_schema,
    checkpoint_query_id,
    commit_files,
)
from headwater.delta.table_protocol import invalid_property, split_properties
from headwater.delta.write_commit import StreamUpdate, commit_write, deltalake_writes
from headwater.errors import HeadwaterError, translated
from headwater.spark.micro_batch_sink import MicroBatch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# writes rows as parquet into a new folder: (folder, partition columns, writer options) ->
# the files written (filesystem paths); only those are committed
Stager = Callable[[str, list[str], dict[str, str]], list[str]]
log = logging.getLogger("headwater.delta.write")
read_log = logging.getLogger("headwater.delta.native")  # reads: file_index, native_reads
# crash-test fault points (FAULT_ENV) around the commit: a batch write / pipeline, a stream
NATIVE_FAULTS = ("native_before_commit", "native_after_commit")
SINK_FAULTS = ("sink_before_commit", "sink_after_commit")
# Parquet codecs Spark's writer and Delta readers share; others go to the Python writer.
NATIVE_CODECS = {"snappy", "gzip", "zstd", "none", "uncompressed"}


def _column_mapped(table) -> bool:
    config = table.metadata().configuration or {}
    return config.get("delta.columnMapping.mode", "none") != "none"


def write_native(df: DataFrame, path: str, mode: str = "append",
                 txn: tuple[str, int] | None = None,
                 partition_by: list[str] | None = None,
                 merge_schema: bool = False, auto_compact: bool = False, *,
                 save_mode: str | None = None, replace_where: str | None = None,
                 options: dict[str, str] | None = None, user_metadata: str | None = None,
                 faults: tuple[str, str] = NATIVE_FAULTS,
                 properties: dict[str, str] | None = None,
                 stream: StreamUpdate | None = None,
                 batch: MicroBatch | None = None) -> int | None:
    """Write ``df`` with Spark's parquet writer and commit it as one Delta transaction.

    mode: "append" or "overwrite" (the whole table, or the partitions ``replace_where``
    names; one commit). Returns the rows committed (0 when ``txn`` was already committed:
    nothing is written twice), or None when the write needs the Python writer
    (:func:`python_writer_reason`; a debug line on the ``headwater.delta.write`` logger says
    which path was taken and why). merge_schema: new columns in ``df`` are added to the table
    (as ``mergeSchema``); otherwise they are an error. auto_compact: compact small files after
    the commit unless the table's property says otherwise (default False, see
    :func:`headwater.delta.sink.commit_files`). save_mode: the mode the user asked for
    (errorifexists, ignore) when a new table is written as an append, for its history.
    options: the writer's options (lower-cased keys): ``compression`` and ``maxRecordsPerFile``
    reach Spark's parquet writer. user_metadata: the commitInfo's ``userMetadata`` (default
    the ``userMetadata`` option). faults: the crash-test fault points around the commit.
    properties: the write's own table properties (delta-spark: a batch write's ``delta.*``
    options) for a table this write creates, over the session's ``properties.defaults.*``
    (read here, on the driver); an existing table keeps its own. stream: the micro-batch
    of a streaming write this is (its history: STREAMING UPDATE, as delta-spark's sink).
    batch: the streaming micro-batch ``df`` is (:meth:`MicroBatch.own_frame`: its schema and
    session): Spark's parquet sink writes its rows (:meth:`MicroBatch.write_parquet`, not
    ``df.write``), and the writes that compute columns first (generated / identity) take
    :meth:`MicroBatch.frame`.
    """
    uri = normalize_uri(path)
    options = {k.lower(): v for k, v in (options or {}).items()}
    if user_metadata is None:
        user_metadata = options.get("usermetadata")
    local = storage.bucket_of(uri) is None
    delta_log = DeltaLog(uri) if local else None  # an object store's credentials come later
    table = delta_log.table() if delta_log is not None and delta_log.exists() else None
    partition_columns = list(partition_by or [])
    reason = python_writer_reason(uri, df, partition_columns, table, options)
    if reason is not None:
        log.debug("Delta write to %s: the Python data source writer (%s)", uri, reason)
        return None
    filters = None
    if table is not None:
        if txn is not None:
            done = table.transaction_version(txn[0])
            if done is not None and done >= txn[1]:
                log.debug("Delta write to %s: txn %s already committed, skipped", uri, txn)
                return 0
        existing = list(table.metadata().partition_columns)
        check_partitioning(uri, existing, partition_columns)
        schema = spark_schema(table.schema().to_json())
        generation = Generation.of(schema)
        if generation or not deltalake_writes(table):
            if replace_where:
                raise HeadwaterError(
                    "HW_REPLACE_WHERE_UNSUPPORTED", f"replaceWhere into {uri}: a table with "
                    "generated or identity columns (or clustering) is overwritten whole.",
                    "headwater writes such tables on the driver, without partition filters "
                    "yet.", "Overwrite the table, or DELETE the rows and append the new ones.")
            log.debug("Delta write to %s: native, headwater's commit (generated / identity "
                      "columns or a feature deltalake cannot commit)", uri)
            return _write_own(df if batch is None else batch.frame(), uri, table, generation,
                              mode, txn, faults, user_metadata, stream)
        check_schema(uri, schema, df.schema, merge_schema)
        partition_columns = existing
        if replace_where:
            filters = parse_replace_where(replace_where, existing)
    elif replace_where:
        raise replace_where_on_missing_table(uri)
    new_properties = with_defaults(properties, df.sparkSession) if table is None else None
    adds = _stage_files(df, uri, partition_columns, options,
                        None if batch is None else batch.write_parquet)
    try:
        if filters:
            check_replace_where(uri, adds, df.schema, filters, str(replace_where))
        _fault(faults[0], uri)
        committed = commit_files(uri, adds, df.schema, mode, partition_columns, txn=txn,
                                 merge_schema=merge_schema, partition_filters=filters,
                                 auto_compact=auto_compact, save_mode=save_mode,
                                 user_metadata=user_metadata, properties=new_properties,
                                 stream=stream)
    except BaseException:
        _delete_staged(uri, _unreferenced(uri, adds))  # a failed commit leaves nothing behind
        raise
    _fault(faults[1], uri)
    rows = sum(json.loads(a["stats"])["numRecords"] for a in adds) if committed else 0
    log.debug("Delta write to %s: native (Spark's parquet writer, one driver commit), "
              "%d files, %d rows", uri, len(adds), rows)
    return rows


def python_writer_reason(uri: str, df: DataFrame, partition_by: list[str], table,
                         options: dict[str, str]) -> str | None:
    """Why a write into ``uri`` must take the Python data source writer, or None when Spark's
    parquet writer plus a driver commit (:func:`write_native`) writes what it would.

    ``table``: the table's snapshot (None: no table yet); ``partition_by``: the partition
    columns asked for (the table's own when it exists); ``options``: lower-cased writer
    options."""
    if storage.bucket_of(uri) is not None:
        return "an object-store table: Spark's parquet writer has no filesystem for it here"
    if "targetfilesize" in options:
        return "targetFileSize: Spark's parquet writer does not roll files by size"
    codec = str(options.get("compression", "snappy")).lower()
    if codec not in NATIVE_CODECS:
        return f"compression {codec!r}"
    schema = df.schema
    if table is not None:
        if _column_mapped(table):
            return "column mapping: files use physical column names"
        partition_by = list(table.metadata().partition_columns)
        schema = spark_schema(table.schema().to_json())
    types = {f.name.lower(): f.dataType for f in schema.fields}
    utc = str(df.sparkSession.conf.get("spark.sql.session.timeZone", "UTC")).upper() in (
        "UTC", "ETC/UTC", "Z", "GMT", "+00:00")
    for column in partition_by:
        dtype = types.get(column.lower())
        if isinstance(dtype, (BinaryType, FloatType, DoubleType)):
            return f"partition column {column} of type {dtype.simpleString()}"
        if isinstance(dtype, TimestampType) and not utc:
            return (f"timestamp partition column {column} with a session time zone other "
                    "than UTC (Spark names the folders in local time)")
    return None


def written_on_driver(path: str) -> bool:
    """True when writes into the table at ``path`` must go through :func:`write_rows`: it
    has generated or identity columns (their values are computed on the DataFrame) or a
    feature deltalake cannot commit to (identity columns, clustering).

    Local tables only: the driver path commits with a local put-if-absent, and an object-store
    table's credentials may reach this process only as the writer's options (which the data
    source registers later): opening it here would go to the cloud's default endpoint.
    Object-store tables go to the data source writer, which refuses tables it cannot fill."""
    uri = normalize_uri(path)
    if "://" in uri and not uri.startswith("file:"):
        return False
    log = DeltaLog(uri)
    if not log.exists():
        return False
    table = log.table()
    return declares_generation(table.schema().to_json()) or not deltalake_writes(table)


def write_rows(df: DataFrame, path: str, mode: str = "append",
               txn: tuple[str, int] | None = None, **settings: Any) -> int:
    """:func:`write_native` for a write that must take it (a table :func:`written_on_driver`,
    a stream's micro-batch): the rows committed; a write Spark's parquet writer cannot do is
    a clear error, and a check that failed inside Spark's job (a generated column's value) a
    HeadwaterError. settings: :func:`write_native`'s keyword arguments."""
    with translated():
        written = write_native(df, path, mode, txn, **settings)
    if written is None:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The write into the table at {path} needs the Python data source writer (an "
            "object store, column mapping, or a writer option only it honours), but this "
            "table or stream is written with Spark's parquet writer only.",
            "headwater computes generated / identity columns on the driver's DataFrame, and "
            "a stream started on the native sink keeps it; the table changed since, or lives "
            "where Spark's parquet writer cannot write.",
            "Keep tables with generated / identity columns on a local or mounted path; "
            "restart a stream after changing its table's features.")
    return written


def micro_batch_writer(path: str, checkpoint: str | None, complete: bool = False,
                       **settings: Any) -> Callable[[MicroBatch], None]:
    """The native Delta sink's handler of each micro-batch
    (:func:`headwater.spark.micro_batch_sink.start_with_sink`): written by Spark's parquet
    sink from the batch's own plan, then through :func:`write_rows` exactly once (a txn
    action keyed by the checkpoint's query id, as the Python sink does), replacing the rows in
    complete mode. settings: :func:`write_native`'s keyword arguments (partition_by,
    merge_schema, auto_compact, options)."""
    fallback = str(uuid.uuid4())

    def write(batch: MicroBatch) -> None:
        # the query's id: in its checkpoint's metadata, which Spark also sets on the stream's
        # thread (a checkpoint given by spark.sql.streaming.checkpointLocation + a name)
        query_id = checkpoint_query_id(checkpoint) or batch.spark.sparkContext \
            .getLocalProperty("sql.streaming.queryId") or fallback
        stream = StreamUpdate("Complete" if complete else "Append", query_id, batch.batch_id)
        # the batch's own plan, run once by Spark's parquet sink; foreachBatch's copy of its
        # rows (MicroBatch.frame) only for a table whose writes compute columns first
        write_rows(batch.own_frame(), path, "overwrite" if complete else "append",
                   txn=(f"headwater-stream-{query_id}", batch.batch_id), faults=SINK_FAULTS,
                   stream=stream, batch=batch, **settings)

    return write


def native_sink(df: DataFrame, path: str, options: dict[str, str], output_mode: str,
                partition_by: list[str]) -> Callable[[MicroBatch], None] | None:
    """The native Delta sink of a stream of ``df`` into the table at ``path``: the handler of
    each micro-batch (:func:`micro_batch_writer`), or None when the Python sink must
    write (update mode, or :func:`python_writer_reason`; logged at debug level).

    options: the stream writer's options (``checkpointLocation`` gives the txn's appId,
    ``mergeSchema``, ``autoCompact``, ``partitionBy``, ``compression``...); output_mode:
    append or complete (each micro-batch replaces the table); partition_by: the writer's
    ``partitionBy`` (for a new table)."""
    uri = normalize_uri(path)
    lowered = {k.lower(): v for k, v in options.items()}
    opts = WriteOptions.from_options({**lowered, "path": uri})
    partition_by = list(partition_by) or opts.partition_by
    if output_mode not in ("append", "complete"):
        if written_on_driver(uri):  # its micro-batches would be appended: duplicates
            raise HeadwaterError(
                "HW_SINK_OUTPUT_MODE",
                f"A stream in {output_mode} mode into the table at {path}, which has generated "
                "or identity columns (or clustering).",
                "Such a table is written on the driver, batch by batch, in append or complete "
                "mode only (delta-spark's Delta sink takes these two modes only).",
                "Write it in append or complete mode, or MERGE each micro-batch yourself in "
                "foreachBatch.", error_class="DELTA_UNSUPPORTED_OUTPUT_MODE")
        log.debug("Delta stream into %s: the Python sink (%s output mode)", uri, output_mode)
        return None
    table = None
    if storage.bucket_of(uri) is None and DeltaLog(uri).exists():
        table = DeltaLog(uri).table()
    reason = python_writer_reason(uri, df, partition_by, table, lowered)
    if reason is not None:
        log.debug("Delta stream into %s: the Python sink (%s)", uri, reason)
        return None
    log.debug("Delta stream into %s: the native sink (Spark's parquet sink, one driver "
              "commit per micro-batch)", uri)
    return micro_batch_writer(uri, lowered.get("checkpointlocation"), output_mode == "complete",
                        partition_by=partition_by, merge_schema=opts.merge_schema,
                        auto_compact=opts.auto_compact, options=lowered)


def _write_own(df: DataFrame, uri: str, table, generation: Generation, mode: str,
               txn: tuple[str, int] | None, faults: tuple[str, str] = NATIVE_FAULTS,
               user_metadata: str | None = None, stream: StreamUpdate | None = None) -> int:
    """A write into a table with generated / identity columns (their values added to ``df``
    first) or one deltalake cannot commit to: staged by Spark's parquet writer, committed by
    headwater (the identity high-water marks raised in the same commit)."""
    schema = generation.schema
    if not generation:  # no generated values, but NOT NULL and the columns still checked
        check_schema(uri, schema, df.schema, False)
    df, generated = prepare(df, generation, uri)
    partition_columns = list(table.metadata().partition_columns)
    adds = _stage_files(df, uri, partition_columns, {})
    if not adds and mode == "append":
        return 0  # nothing to add: an empty commit would only grow the log
    _fault(faults[0], uri)
    version = commit_write(uri, table, adds, mode, txn,
                           raised_high_water_marks(schema, generated, adds),
                           cleanup=lambda: _delete_staged(uri, adds),
                           user_metadata=user_metadata, stream=stream)
    _fault(faults[1], uri)
    if version is None:
        return 0
    return sum(json.loads(a["stats"])["numRecords"] for a in adds)


def replace_native(df: DataFrame, path: str, partition_by: list[str] | None = None,
                   name: str | None = None, description: str | None = None,
                   configuration: dict[str, str] | None = None) -> int:
    """Replace the table at ``path`` (created when missing) by ``df``: Spark's parquet writer
    writes the new files first, then ONE commit ("CREATE OR REPLACE TABLE") removes every old
    file and sets the new schema, partitioning, description and properties. Versions before it
    stay readable (time travel) until VACUUM. If ``df`` fails, its partial files are deleted and
    the table is exactly as it was. Returns the rows written.

    Properties outside Delta's ``delta.*`` namespace (e.g. ``'team'='sales'``) follow in a
    second commit: deltalake validates only Delta's own keys when it creates a table.

    Tables whose protocol needs more than reader 1 / writer 4 (column mapping, deletion
    vectors, table features) are refused: a replace would have to keep their protocol, which
    deltalake's replace does not do. Up to writer 4 (appendOnly, check constraints, change
    data feed) the replace commit's own definition sets the protocol again.
    """
    uri = normalize_uri(path)
    if declares_generation(df.schema.json()):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Replacing the table at {path} with generated or identity columns this way is "
            "not supported yet.", "This replace writes the data and the schema in one "
            "deltalake commit, which would drop the columns' generation.",
            "Replace it by name in the lakehouse (CREATE OR REPLACE TABLE name ... / "
            "DeltaTable.createOrReplace().tableName(...)), or with "
            "DeltaTable.createOrReplace().location(path).")
    log = DeltaLog(uri)
    if log.exists():
        protocol = log.table().protocol()
        if protocol.min_reader_version > 1 or protocol.min_writer_version > 4:
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE",
                f"The table at {path} uses Delta protocol ({protocol.min_reader_version}, "
                f"{protocol.min_writer_version}); headwater cannot replace it in one commit "
                "yet.", "Replacing must keep the table's features (e.g. column mapping), "
                "which the replace commit would drop.",
                "Drop the table and create it again, or overwrite rows with the same schema.")
    delta_keys, user_keys = split_properties(configuration)
    partition_columns = list(partition_by or [])
    data_schema = as_nullable(df.schema)
    schema = Schema.from_arrow(arrow_schema(data_schema))  # before writing: a bad type fails now
    if storage.bucket_of(uri) is not None:
        rows = _replace_through_driver(df, uri, data_schema, partition_columns, name,
                                       description, delta_keys)
    else:
        rows = _replace_staged(df, uri, schema, partition_columns, name, description,
                               delta_keys, path)
    if user_keys:
        open_table(uri).alter.set_table_properties(user_keys, raise_if_not_exists=False)
    return rows


def _replace_through_driver(df: DataFrame, uri: str, data_schema, partition_columns: list[str],
                            name: str | None, description: str | None,
                            delta_keys: dict) -> int:
    """An object-store table: Spark's parquet writer has no Hadoop filesystem for it (no
    hadoop-aws), so the rows come to the driver as Arrow (a failing ``df`` fails before
    anything is written), headwater's file writer puts them under the table, and ONE commit
    replaces the table, as :func:`_replace_staged` does: new schema, partitioning,
    description and properties (delta-rs' overwrite keeps an existing table's description
    and properties); files of a failed commit are deleted."""
    table = df.toArrow().cast(arrow_schema(data_schema))
    writer = FileWriter(uri, partition_columns, DEFAULT_TARGET_FILE_BYTES)
    try:
        for batch in table.to_batches():
            writer.write(batch)
        adds = writer.close().adds
        create_table_with_add_actions(
            uri, Schema.from_arrow(arrow_schema(data_schema)),
            [AddAction(a["path"], a["size"], a["partitionValues"], a["modificationTime"],
                       a["dataChange"], a["stats"]) for a in adds],
            mode="overwrite", partition_by=partition_columns or None, name=name,
            description=description, configuration=delta_keys or None,
            storage_options=storage.options_for(uri))
    except BaseException as exc:
        _delete_files(uri, _unreferenced(uri, writer.adds))
        raise invalid_property(exc, uri) from exc
    return int(table.num_rows)


def _unreferenced(uri: str, adds: list[dict]) -> list[dict]:
    """The ``adds`` the table at ``uri`` does not reference: safe to delete after a failed
    commit (one whose answer was lost may have landed). None when the table cannot be read:
    leftover files are harmless (VACUUM removes them), deleted referenced ones are not."""
    try:
        table = open_table(uri)
    except TableNotFoundError:
        return adds
    except Exception:  # noqa: BLE001 - see the docstring
        return []
    referenced = set(add_actions(table, flatten=True).column("path").to_pylist())
    return [a for a in adds if a["path"] not in referenced
            and unquote(a["path"]) not in referenced]


def _replace_staged(df: DataFrame, uri: str, schema, partition_columns: list[str],
                    name: str | None, description: str | None, delta_keys: dict,
                    path: str) -> int:
    """Spark's parquet writer stages the files under the table, then one commit adds them."""
    adds = _stage_files(df, uri, partition_columns, {})
    try:
        _fault("native_before_commit", uri)
        create_table_with_add_actions(
            uri, schema,
            [AddAction(a["path"], a["size"], a["partitionValues"], a["modificationTime"],
                       a["dataChange"], a["stats"]) for a in adds],
            mode="overwrite", partition_by=partition_columns or None, name=name,
            description=description, configuration=delta_keys or None)
    except BaseException as exc:
        _delete_staged(uri, _unreferenced(uri, adds))
        raise invalid_property(exc, path) from exc
    return sum(json.loads(a["stats"])["numRecords"] for a in adds)


def _stage(df: DataFrame, uri: str, partition_columns: list[str],
           options: dict[str, str] | None = None,
           stage: Stager | None = None) -> tuple[str, list[dict]]:
    """Write ``df`` with Spark's parquet writer into a fresh folder under the table; return the
    folder and the add actions of its files. A failed write leaves no folder behind.
    options (lower-cased): ``compression`` (default snappy) and ``maxrecordsperfile`` reach
    Spark's writer. stage: writes the rows instead of ``df.write`` (same options)."""
    options = options or {}
    staging = f"hw-{int(time.time())}-{uuid.uuid4().hex[:12]}"
    if stage is not None:
        settings = {"compression": str(options.get("compression", "snappy")).lower(),
                    TIMESTAMP_TYPE_CONF: "TIMESTAMP_MICROS"}
        if options.get("maxrecordsperfile") is not None:
            settings["maxRecordsPerFile"] = str(options["maxrecordsperfile"])
        try:
            written = stage(f"{uri}/{staging}", partition_columns, settings)
            return staging, _adds(uri, staging, df, partition_columns, set(written))
        except BaseException:
            _remove_dir(uri, staging)
            raise
    writer = (df.write.mode("errorifexists").partitionBy(*partition_columns)
              .option("compression", str(options.get("compression", "snappy")).lower())
              # INT64 microseconds (with min/max stats), not Spark's INT96 default; a write
              # option (Spark reads it over the session's), so the session's conf stays
              .option(TIMESTAMP_TYPE_CONF, "TIMESTAMP_MICROS"))
    if options.get("maxrecordsperfile") is not None:
        writer = writer.option("maxRecordsPerFile", str(options["maxrecordsperfile"]))
    if _one_attempt_per_task(df.sparkSession):
        # Hadoop's committer v1 renames every file twice (task, then job commit) and writes a
        # _SUCCESS marker: ~5% of a 3 M-row write here. v2 moves each file once, at task
        # commit. Its known risk is a task attempt that fails mid-commit and is retried,
        # leaving files of both attempts. Here a failed task fails the job (the staging
        # folder is then deleted, never committed); only attempts Spark retries without
        # counting a failure (a killed attempt, a stage retried after a fetch failure) get
        # another try, and they write the same part-file names, which v2 overwrites.
        writer = (writer.option("mapreduce.fileoutputcommitter.algorithm.version", "2")
                  .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"))
    try:
        writer.parquet(f"{uri}/{staging}")
        return staging, _adds(uri, staging, df, partition_columns)
    except BaseException:
        _remove_dir(uri, staging)
        raise


_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)\])?")  # local[N, F] retries failed tasks


def _one_attempt_per_task(spark: SparkSession) -> bool:
    """True when a task runs once: Spark's local master without retries (``local``,
    ``local[N]``, ``local[*]``); a failed task then fails the job. (Spark never speculates
    in local mode: TaskSchedulerImpl starts speculation only when not local.)"""
    return _LOCAL_MASTER.fullmatch(spark.sparkContext.master or "") is not None


def _stage_files(df: DataFrame, uri: str, partition_columns: list[str],
                 options: dict[str, str], stage: Stager | None = None) -> list[dict]:
    """:func:`_stage`, then the files moved beside the table's others (``part-*.parquet`` at
    the root, or under their ``col=value`` folders) and the staging folder removed; returns
    their add actions. Spark names each file with its job's UUID: no clash with other files.
    A failure deletes whatever was staged or moved."""
    staging, adds = _stage(df, uri, partition_columns, options, stage)
    fs, root = filesystem_for(uri)
    moved: list[dict] = []
    made: set[str] = set()
    try:
        for add in adds:
            relative = add["path"][len(staging) + 1:]
            parent = relative.rpartition("/")[0]
            if parent and parent not in made:
                fs.create_dir(f"{root}/{parent}", recursive=True)
                made.add(parent)
            fs.move(f"{root}/{add['path']}", f"{root}/{relative}")
            moved.append({**add, "path": relative})
    except BaseException:
        _delete_staged(uri, moved)
        _remove_dir(uri, staging)
        raise
    _remove_dir(uri, staging)
    return moved


def _delete_staged(uri: str, adds: list[dict]) -> None:
    """Delete files of ``adds`` (paths as on disk, relative to the table: not URL-encoded)."""
    fs, root = filesystem_for(uri)
    for add in adds:
        try:
            fs.delete_file(f"{root}/{add['path']}")
        except OSError:
            pass


def _adds(uri: str, staging: str, df: DataFrame, partition_columns: list[str],
          written: set[str] | None = None) -> list[dict]:
    """The add actions of the parquet files under ``staging`` (all, or those in
    ``written``: filesystem paths; the others are deleted with the folder)."""
    fs, root = filesystem_for(uri)
    data_fields = [f for f in df.schema.fields if f.name not in partition_columns]
    schema = arrow_schema(StructType(data_fields))
    spelled = {c.lower(): c for c in partition_columns}  # the table's spelling of each column
    adds = []
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/{staging}", recursive=True))
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if info.type != pafs.FileType.File or not name.endswith(".parquet") \
                or name.startswith((".", "_")):
            continue
        if written is not None and info.path not in written:
            continue
        with fs.open_input_file(info.path) as handle:
            meta = pq.read_metadata(handle)
        relative = info.path[len(root) + 1:]
        if meta.num_rows == 0:
            fs.delete_file(info.path)
            continue
        values: dict[str, str | None] = {}
        for part in info.path[len(root) + len(staging) + 2:].split("/")[:-1]:
            key, _, raw = part.partition("=")
            value = unquote(raw)
            values[spelled.get(unquote(key).lower(), unquote(key))] = \
                None if value == HIVE_NULL else value
        adds.append({
            "path": relative, "size": info.size, "partitionValues": values,
            "modificationTime": int(info.mtime_ns // 1_000_000) if info.mtime_ns else
            int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps(file_stats(meta, schema), separators=(",", ":")),
        })
    listed = {info.path for info in infos}
    if written is not None and not written <= listed:  # never commit less than was written
        raise HeadwaterError(
            "HW_DELTA_FILE_NOT_FOUND",
            f"Spark's parquet sink listed files that are not in the staging folder {staging} "
            f"of {uri}: {sorted(written - listed)[:3]}.",
            "Committing the files found would drop the rows of the others.",
            "Retry the stream; if it happens again, report it with the table's path layout.")
    return adds


def _remove_dir(uri: str, staging: str) -> None:
    fs, root = filesystem_for(uri)
    try:
        fs.delete_dir(f"{root}/{staging}")
    except OSError:
        pass


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
    if not natively_readable(table):
        read_log.debug("read of %s: headwater's Python reader (the table needs it)", uri)
        return None
    schema = strip_field_metadata(spark_schema(table.schema().to_json()))
    at = table.version() if version is not None or pinned else None
    index = DeltaFileIndex(spark, uri, schema, list(table.metadata().partition_columns), at,
                           natively_readable, name=name)
    if at is not None:
        index.prepare()  # its files listed now: vacuumed ones are an error here
    read_log.debug("read of %s: Spark's parquet reader (%s)", uri,
              f"version {at}" if at is not None else "the latest version at each query")
    return native_frame(spark, index)


def natively_readable(table) -> bool:
    """Spark's parquet reader, given the snapshot's files and their partition values from
    the log, returns the same rows: no column mapping (files name columns by physical name),
    no reader features such as deletion vectors (rows the files still hold) or type widening
    (files may hold narrower types than the schema). Only local tables: Spark's reader opens
    paths through Hadoop, which has no s3 / az / gs filesystem here."""
    if "://" in table.table_uri and not table.table_uri.startswith("file:"):
        return False
    features = set(table.protocol().reader_features or [])
    return not (_column_mapped(table)
                or features - {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})


def _fault(point: str, uri: str) -> None:
    """Crash tests: SIGKILL the whole driver (this process group: Python and its JVM) at
    ``point`` when the FAULT_ENV test hook names it and FAULT_TABLE_ENV is part of the path."""
    if os.environ.get(FAULT_ENV) == point and os.environ.get(FAULT_TABLE_ENV, "") in uri:
        os.killpg(os.getpgrp(), signal.SIGKILL)
