"""Delta writes at Spark's native parquet speed: the write path's file writer and its steps.

The Python data source path moves every row through Arrow between the JVM and Python. For batch
writes (``df.write.format("delta")``, saveAsTable, insertInto, INSERT), the streaming sink
(:func:`native_sink`: Spark's parquet sink, then a driver commit) and pipeline flows, headwater
instead lets Spark's own parquet writer write the files (:mod:`headwater.delta.write.staging`)
and then commits them to the Delta log from the driver
(:func:`headwater.delta.write.commit.commit_files`), with stats read from the parquet footers
and the same ``txn`` exactly-once check as the Python sink.

:func:`write_native` takes one :class:`~headwater.delta.write.request.WriteRequest` through
the steps of every write: the table's protocol and schema checked, generated / identity values
computed (:func:`_write_own`), what an overwrite replaces resolved
(:mod:`headwater.delta.write.selective`), files written, one commit. It returns None when the
table needs what only the Python path handles (:func:`python_writer_reason`); callers fall back.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    FloatType,
    TimestampType,
)

from headwater.conf import storage
from headwater.conf.layout import (  # FAULT_*: test hooks (crash tests)
    FAULT_ENV,
    FAULT_TABLE_ENV,
)
from headwater.delta import physical_names
from headwater.delta.constraints import Constraints
from headwater.delta.defaults import with_defaults
from headwater.delta.generated import Generation, declares_generation, prepare, raised_high_water_marks
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import spark_schema
from headwater.delta.sink import checkpoint_query_id
from headwater.delta.write import replacement, selective
from headwater.delta.write.checks import (
    check_partitioning,
    check_schema,
    deltalake_writes,
    spelled_as_table,
    table_spelling,
    type_widening_enabled,
    widened_columns,
)
from headwater.delta.write.commit import (
    commit_files,
    commit_write,
    data_change_false,
    merged_schema,
)
from headwater.delta.write.request import StreamUpdate, WriteRequest
from headwater.delta.write.staging import delete_staged, stage_files, unreferenced
from headwater.errors import HeadwaterError, translated
from headwater.spark.micro_batch_sink import MicroBatch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("headwater.delta.write")
# crash-test fault points (FAULT_ENV) around the commit: a batch write / pipeline, a stream
NATIVE_FAULTS = ("native_before_commit", "native_after_commit")
SINK_FAULTS = ("sink_before_commit", "sink_after_commit")
# Parquet codecs Spark's writer and Delta readers share; others go to the Python writer.
NATIVE_CODECS = {"snappy", "gzip", "zstd", "none", "uncompressed"}


def spark_writer_settings(request: WriteRequest) -> dict[str, str]:
    """The settings of Spark's parquet writer a request gives: ``compression`` and
    ``maxrecordsperfile`` (:func:`headwater.delta.write.staging.stage_files`)."""
    settings = {"compression": request.codec}
    if request.max_records_per_file is not None:
        settings["maxrecordsperfile"] = str(request.max_records_per_file)
    return settings


def write_native(df: DataFrame, request: WriteRequest, *, batch: MicroBatch | None = None,
                 faults: tuple[str, str] = NATIVE_FAULTS) -> int | None:
    """Write ``df`` as ``request`` says with Spark's parquet writer and commit it as one Delta
    transaction.

    Returns the rows committed (0 when the request's ``txn`` was already committed: nothing
    is written twice), or None when the write needs the Python writer
    (:func:`python_writer_reason`; a debug line on the ``headwater.delta.write`` logger says
    which path was taken and why). A table this write creates gets ``request.properties``
    over the session's ``properties.defaults.*`` (read here, on the driver). faults: the
    crash-test fault points around the commit. batch: the streaming micro-batch ``df`` is
    (:meth:`MicroBatch.own_frame`: its schema and session): Spark's parquet sink writes its
    rows (:meth:`MicroBatch.write_parquet`, not ``df.write``), and the writes that compute
    columns first (generated / identity) take :meth:`MicroBatch.frame`.
    """
    uri = request.path
    local = storage.bucket_of(uri) is None
    delta_log = DeltaLog(uri) if local else None  # an object store's credentials come later
    table = delta_log.table() if delta_log is not None and delta_log.exists() else None
    reason = python_writer_reason(request, df, table)
    if reason is not None:
        log.debug("Delta write to %s: the Python data source writer (%s)", uri, reason)
        return None
    replacing: replacement.Replacement | None = None
    if table is not None:
        if request.txn is not None:
            done = table.transaction_version(request.txn[0])
            if done is not None and done >= request.txn[1]:
                log.debug("Delta write to %s: txn %s already committed, skipped", uri,
                          request.txn)
                return 0
        existing = list(table.metadata().partition_columns)
        check_partitioning(uri, existing, list(request.partition_by))
        schema = spark_schema(table.schema().to_json())
        generation = Generation.of(schema)
        if generation or not deltalake_writes(table):
            if request.selective:
                raise selective.refused_on_own_commit(request)
            log.debug("Delta write to %s: native, headwater's commit (generated / identity "
                      "columns or a feature deltalake cannot commit)", uri)
            return _write_own(df if batch is None else batch.frame(), request, table,
                              generation, faults)
        check_schema(uri, schema, df.schema, request.merge_schema)
        request = request.but(partition_by=tuple(existing))
        replacing = replacement.plan(df, request, table)
        constraints = Constraints.of(schema, table.metadata().configuration)
        respell = table_spelling(schema, list(df.columns)) is not None
        if constraints or respell or (replacing is not None and replacing.checks_rows):
            # the checks run in the projection Spark writes: a micro-batch's rows through
            # foreachBatch's DataFrame (its own plan goes to Spark's sink unchanged)
            if batch is not None:
                df, batch = batch.frame(), None
            df = constraints.enforce(spelled_as_table(df, schema), uri)
            if replacing is not None:
                df = replacing.checked(df)
    else:
        if request.replace_where is not None:
            raise selective.replace_where_on_missing_table(uri)
        request = request.but(properties=with_defaults(request.properties, df.sparkSession))
    staged_partitions = list(request.partition_by)
    logical_schema = df.schema
    if table is not None and physical_names.is_mapped(table):
        # the files hold physical names: foreachBatch's copy of a micro-batch's rows, renamed
        if batch is not None:
            df, batch = batch.frame(), None
        df, staged_partitions = _physical(df, table, staged_partitions)
        request = request.but(physical_names=True)
    adds = stage_files(df, uri, staged_partitions, spark_writer_settings(request),
                       None if batch is None else batch.write_parquet)
    filters = removes = None
    written = list(adds)  # the request's rows (a row-level replaceWhere adds the kept ones)
    try:
        if replacing is not None:
            filters, removes, kept = replacing.resolve(adds)
            adds = adds + kept
        fault(faults[0], uri)
        # the version the checks read (constraints, schema, what is replaced): a commit
        # made since is checked for conflicts (a constraint added meanwhile fails this write)
        committed = commit_files(
            request, adds, logical_schema, partition_filters=filters, removes=removes,
            read_version=None if table is None else table.version())
    except BaseException:
        delete_staged(uri, unreferenced(uri, adds))  # a failed commit leaves nothing behind
        if replacing is not None:
            replacing.cleanup()
        raise
    fault(faults[1], uri)
    rows = sum(json.loads(a["stats"])["numRecords"] for a in written) if committed else 0
    log.debug("Delta write to %s: native (Spark's parquet writer, one driver commit), "
              "%d files, %d rows", uri, len(adds), rows)
    return rows


def python_writer_reason(request: WriteRequest, df: DataFrame, table) -> str | None:
    """Why a write into ``uri`` must take the Python data source writer, or None when Spark's
    parquet writer plus a driver commit (:func:`write_native`) writes what it would.

    ``table``: the table's snapshot (None: no table yet)."""
    if storage.bucket_of(request.path) is not None:
        return "an object-store table: Spark's parquet writer has no filesystem for it here"
    if request.target_file_bytes is not None:
        return "targetFileSize: Spark's parquet writer does not roll files by size"
    if request.codec not in NATIVE_CODECS:
        return f"compression {request.codec!r}"
    partition_by = list(request.partition_by)
    schema = df.schema
    if table is not None:
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
    feature deltalake cannot commit to (identity columns, clustering), or column mapping
    (files hold physical names, which only Spark's parquet writer here writes).

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
    return declares_generation(table.schema().to_json()) or not deltalake_writes(table) \
        or physical_names.is_mapped(table)


def write_rows(df: DataFrame, request: WriteRequest, *, batch: MicroBatch | None = None,
               faults: tuple[str, str] = NATIVE_FAULTS) -> int:
    """:func:`write_native` for a write that must take it (a table :func:`written_on_driver`,
    a stream's micro-batch): the rows committed; a write Spark's parquet writer cannot do is
    a clear error, and a check that failed inside Spark's job (a generated column's value, a
    constraint) a HeadwaterError."""
    with translated():
        written = write_native(df, request, batch=batch, faults=faults)
    if written is None:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The write into the table at {request.path} needs the Python data source writer "
            "(an object store, column mapping, or a writer option only it honours), but this "
            "table or stream is written with Spark's parquet writer only.",
            "headwater computes generated / identity columns on the driver's DataFrame, and "
            "a stream started on the native sink keeps it; the table changed since, or lives "
            "where Spark's parquet writer cannot write.",
            "Keep tables with generated / identity columns on a local or mounted path; "
            "restart a stream after changing its table's features.")
    return written


def micro_batch_writer(request: WriteRequest, checkpoint: str | None
                       ) -> Callable[[MicroBatch], None]:
    """The native Delta sink's handler of each micro-batch
    (:func:`headwater.spark.micro_batch_sink.start_with_sink`): written by Spark's parquet
    sink from the batch's own plan, then through :func:`write_rows` exactly once (a txn
    action keyed by the checkpoint's query id, as the Python sink does), replacing the rows in
    complete mode (``request.mode`` overwrite)."""
    fallback = str(uuid.uuid4())
    complete = request.overwrite

    def write(batch: MicroBatch) -> None:
        # the query's id: in its checkpoint's metadata, which Spark also sets on the stream's
        # thread (a checkpoint given by spark.sql.streaming.checkpointLocation + a name)
        query_id = checkpoint_query_id(checkpoint) or batch.spark.sparkContext \
            .getLocalProperty("sql.streaming.queryId") or fallback
        stream = StreamUpdate("Complete" if complete else "Append", query_id, batch.batch_id)
        # the batch's own plan, run once by Spark's parquet sink; foreachBatch's copy of its
        # rows (MicroBatch.frame) only for a table whose writes compute columns first
        write_rows(batch.own_frame(),
                   request.but(txn=(f"headwater-stream-{query_id}", batch.batch_id),
                               stream=stream),
                   batch=batch, faults=SINK_FAULTS)

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
    request = WriteRequest.for_stream(lowered, path=uri, complete=output_mode == "complete",
                                      partition_by=partition_by)
    table = None
    if storage.bucket_of(uri) is None and DeltaLog(uri).exists():
        table = DeltaLog(uri).table()
    reason = python_writer_reason(request, df, table)
    if reason is not None:
        log.debug("Delta stream into %s: the Python sink (%s)", uri, reason)
        return None
    log.debug("Delta stream into %s: the native sink (Spark's parquet sink, one driver "
              "commit per micro-batch)", uri)
    return micro_batch_writer(request, lowered.get("checkpointlocation"))


def _write_own(df: DataFrame, request: WriteRequest, table, generation: Generation,
               faults: tuple[str, str] = NATIVE_FAULTS) -> int:
    """A write into a table with generated / identity columns (their values added to ``df``
    first) or one deltalake cannot commit to: staged by Spark's parquet writer, committed by
    headwater (the identity high-water marks raised in the same commit)."""
    uri = request.path
    schema = generation.schema
    evolved = None
    if not generation:  # no generated values, but NOT NULL and the columns still checked
        # schema evolution: wider types on a table with type widening enabled (widened in
        # this commit); new columns where the files hold logical names
        type_widening = type_widening_enabled(table)
        new_columns = check_schema(uri, schema, df.schema, request.merge_schema, type_widening)
        if new_columns and physical_names.is_mapped(table):  # no physical names given here
            check_schema(uri, schema, df.schema, False, type_widening)  # raises
        widened = widened_columns(schema, df.schema, request.merge_schema and type_widening)
        if (new_columns or widened) and not request.data_change:
            raise data_change_false(request, "change the columns "
                                    + ", ".join([*widened, *new_columns]))
        evolved = merged_schema(schema, df.schema, new_columns, widened)
        if evolved is not None:  # the rows as the evolved table's (new and wider columns)
            generation = Generation.of(evolved)
    df, generated = prepare(df, generation, uri)
    df = Constraints.of(schema, table.metadata().configuration).enforce(df, uri)
    partition_columns = list(table.metadata().partition_columns)
    if physical_names.is_mapped(table):
        df, partition_columns = _physical(df, table, partition_columns)
    adds = stage_files(df, uri, partition_columns, {})
    if not adds and not request.overwrite:
        return 0  # nothing to add: an empty commit would only grow the log
    fault(faults[0], uri)
    version = commit_write(request, table, adds,
                           evolved or raised_high_water_marks(schema, generated, adds),
                           cleanup=lambda: delete_staged(uri, adds))
    fault(faults[1], uri)
    if version is None:
        return 0
    return sum(json.loads(a["stats"])["numRecords"] for a in adds)


def _physical(df: DataFrame, table, partition_columns: list[str]
              ) -> tuple[DataFrame, list[str]]:
    """``df`` and its partition columns as a column-mapped table's files name them."""
    schema = spark_schema(table.schema().to_json())
    return (physical_names.to_physical(df, schema),
            physical_names.physical_partition_columns(schema, partition_columns))


def fault(point: str, uri: str) -> None:
    """Crash tests: SIGKILL the whole driver (this process group: Python and its JVM) at
    ``point`` when the FAULT_ENV test hook names it and FAULT_TABLE_ENV is part of the path."""
    if os.environ.get(FAULT_ENV) == point and os.environ.get(FAULT_TABLE_ENV, "") in uri:
        os.killpg(os.getpgrp(), signal.SIGKILL)
