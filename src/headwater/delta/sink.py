"""Committing written files as one Delta transaction, exactly once, and the streaming sink.

Executors write parquet files and return add actions; the driver commits them in one
transaction that carries a ``txn`` action (appId, version). delta-rs does not skip a repeated
(appId, version) by itself, so the commit checks the table's transaction version first: a
batch that is already committed is skipped and the files of the repeated attempt deleted.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from headwater.conf import storage
from headwater.conf.layout import (
    DELTA_LOG,
    FAULT_ENV,  # a test hook: crash tests kill the driver here
)
from headwater.conf.options import parse_bool, parse_columns, parse_size
from headwater.delta import autocompact
from headwater.delta.commit import ENGINE_INFO, delta_rs_conflict, log_path, put_if_absent
from headwater.delta.files import collect_adds, write_task
from headwater.delta.generated import declares_generation
from headwater.delta.log import DeltaLog, filesystem_for, normalize_uri, open_table, resolve_file
from headwater.delta.schema import arrow_schema, as_nullable, spark_schema
from headwater.delta.table_protocol import first_protocol, invalid_property, split_properties
from headwater.delta.write_commit import (
    StreamUpdate,
    commit_write,
    deltalake_writes,
    own_commit_allowed,
)
from headwater.errors import HeadwaterError

DEFAULT_TARGET_FILE_BYTES = 128 * 1024 * 1024
# Internal writer option: the save mode the user asked for when headwater's path writer runs
# it as an append (Spark refuses errorifexists / ignore for Python sources), for the history.
SAVE_MODE_OPTION = "__hw_save_mode"
# Internal writer option: the properties a table created by this write gets (JSON): the
# session's properties.defaults.* under the write's own delta.* options, resolved on the driver
# by headwater's hooks (the Python writer's commit runs in a worker, without the session).
TABLE_PROPERTIES_OPTION = "__hw_table_properties"
SAVE_MODES = {"append": "Append", "overwrite": "Overwrite", "errorifexists": "ErrorIfExists",
              "error": "ErrorIfExists", "ignore": "Ignore"}


@dataclass
class WriteOptions:
    path: str
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    codec: str = "snappy"
    auto_compact: bool = False  # compact small files after the commit (the table's property wins)
    save_mode: str | None = None  # the mode the user asked for (SAVE_MODE_OPTION)
    user_metadata: str | None = None  # delta-spark's userMetadata: kept in the commitInfo
    table_properties: dict[str, str] = field(default_factory=dict)  # TABLE_PROPERTIES_OPTION

    @classmethod
    def from_options(cls, options: dict[str, str]) -> WriteOptions:
        path = options.get("path")
        if not path:
            raise HeadwaterError(
                "HW_SINK_NO_PATH",
                "A delta write arrived without a table path.",
                "headwater never guesses a default location for your data.",
                "Pass a path: .save('/data/table') / .start('/data/table'), or use a "
                "Lakehouse table name.",
            )
        partition_by = parse_columns("partitionBy", options.get("partitionby"))
        if not partition_by and options.get("__partition_columns"):
            partition_by = parse_columns("partitionBy", options["__partition_columns"])
        return cls(
            path=normalize_uri(path),
            partition_by=partition_by,
            merge_schema=parse_bool("mergeSchema", options.get("mergeschema"), False),
            target_file_bytes=parse_size("targetFileSize", options.get("targetfilesize"),
                                         DEFAULT_TARGET_FILE_BYTES),
            codec=options.get("compression", "snappy").lower(),
            auto_compact=parse_bool("autoCompact", options.get("autocompact"), False),
            save_mode=options.get(SAVE_MODE_OPTION),
            user_metadata=options.get("usermetadata"),
            table_properties=json.loads(options.get(TABLE_PROPERTIES_OPTION) or "{}"),
        )


# --- schema enforcement ----------------------------------------------------------------


def schema_differences(table: StructType, data: StructType) -> tuple[list[str], list[str]]:
    """(columns only in the data, columns whose types differ) — names are case-insensitive."""
    by_name = {f.name.lower(): f for f in table.fields}
    extra, mismatched = [], []
    for f in data.fields:
        existing = by_name.get(f.name.lower())
        if existing is None:
            extra.append(f.name)
        elif existing.dataType.simpleString() != f.dataType.simpleString():
            mismatched.append(
                f"{f.name} (table {existing.dataType.simpleString()}, "
                f"data {f.dataType.simpleString()})"
            )
    return extra, mismatched


def check_schema(path: str, table: StructType, data: StructType, merge_schema: bool) -> list[str]:
    """Raise on a mismatch; return the new columns to add when mergeSchema is on."""
    extra, mismatched = schema_differences(table, data)
    if mismatched:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data does not fit the Delta table at {path}: mismatched column types: "
            f"{', '.join(mismatched)}.",
            "Delta enforces the table schema on every write; changing a column's type would "
            "make existing files unreadable.",
            "Cast the columns to the table's types, or write to a new table.",
        )
    if extra and not merge_schema:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data has columns the Delta table at {path} does not: {', '.join(extra)}.",
            "Delta enforces the table schema on every write.",
            "Drop those columns, or add .option('mergeSchema', 'true') to add them to the table.",
        )
    return extra


def refuse_driver_only(path: str, table: Any) -> None:
    """Refuse a table whose writes need the driver: generated or identity columns (values
    computed on the DataFrame before it is written) or a feature deltalake cannot commit
    (identity, clustering). headwater's own entry points send those to
    :func:`headwater.delta.native.write_native`; a data source writer gets here only through
    another API (``df.writeTo``, a parameterized INSERT), and never writes wrong values."""
    if declares_generation(table.schema().to_json()) or not deltalake_writes(table):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The table at {path} has generated or identity columns or liquid clustering, "
            "which this write path cannot fill in or commit.",
            "headwater computes those values on the driver's DataFrame and commits the table "
            "itself; a Python data source writer only receives finished rows.",
            "Write with INSERT INTO (no parameter markers), df.write.format('delta'), "
            "saveAsTable, writeStream.toTable / start(path), or DeltaTable's merge.")


def check_partitioning(path: str, existing: list[str], requested: list[str]) -> None:
    if requested and [c.lower() for c in requested] != [c.lower() for c in existing]:
        raise HeadwaterError(
            "HW_SINK_PARTITION_MISMATCH",
            f"partitionBy {requested} does not match the table at {path}, partitioned by "
            f"{existing or 'nothing'}.",
            "A Delta table's partition columns are fixed when it is created.",
            "Drop partitionBy (the table's own partitioning is used) or write to a new table.",
        )


# --- the commit ------------------------------------------------------------------------


def _delete_files(path: str, adds: Sequence[dict]) -> None:
    fs, root = filesystem_for(path)
    for add in adds:
        try:
            fs.delete_file(resolve_file(root, add["path"]))
        except OSError:
            pass


BLIND_APPEND_RETRIES = 10
CONCURRENT_DELETE_READ = "a concurrent transaction deleted data this operation read"


def commit_files(
    path: str,
    adds: list[dict[str, Any]],
    data_schema: StructType,
    mode: str,
    partition_by: list[str],
    txn: tuple[str, int] | None = None,
    merge_schema: bool = False,
    partition_filters: list[tuple[str, str, Any]] | None = None,
    auto_compact: bool = False,
    save_mode: str | None = None,
    user_metadata: str | None = None,
    properties: dict[str, str] | None = None,
    stream: StreamUpdate | None = None,
) -> bool:
    """Commit ``adds`` in one transaction. False when ``txn`` was already committed.

    auto_compact: compact small files after the commit unless the table's
    ``delta.autoOptimize.autoCompact`` property says otherwise (default False: only the
    property decides; ``headwater run`` passes its pipeline setting). save_mode: the mode
    the user gave (errorifexists, ignore, ...) when it differs from ``mode``; a commit that
    creates a local table records it as delta-spark does (operation WRITE). user_metadata:
    the commitInfo's ``userMetadata`` (delta-spark's writer option of that name).
    properties: the table properties of a table this commit creates (the session's
    ``properties.defaults.*`` and the write's ``delta.*`` options, resolved by the caller on
    the driver: :func:`headwater.delta.defaults.with_defaults`); an existing table keeps its
    own. stream: the micro-batch of a streaming write this commit is: recorded as delta-spark
    records it (STREAMING UPDATE) by headwater's own commit on a local table (deltalake
    names every commit it writes itself: WRITE); object-store tables, and tables with
    features such a commit does not follow, get deltalake's."""
    from deltalake import CommitProperties, Schema, Transaction  # noqa: PLC0415 - worker: deltalake only in the worker that commits
    from deltalake.exceptions import CommitFailedError, TableNotFoundError  # noqa: PLC0415 - worker: deltalake only in the worker that commits
    from deltalake.transaction import AddAction, create_table_with_add_actions  # noqa: PLC0415 - worker: deltalake only in the worker that commits

    props = CommitProperties(
        app_transactions=[Transaction(*txn)] if txn else None,
        custom_metadata={"userMetadata": user_metadata} if user_metadata is not None else None,
    ) if txn or user_metadata is not None else None
    actions = [
        AddAction(a["path"], a["size"], a["partitionValues"], a["modificationTime"],
                  a["dataChange"], a["stats"])
        for a in adds
    ]
    data_schema = as_nullable(data_schema)
    try:
        table = open_table(path)
    except TableNotFoundError:
        table = None
    if table is None:
        for col in partition_by:
            if col not in data_schema.fieldNames():
                raise HeadwaterError(
                    "HW_SINK_PARTITION_MISMATCH",
                    f"partitionBy column {col!r} is not in the data written to {path}.",
                    "Partition columns must be columns of the table.",
                    f"Use one of: {', '.join(data_schema.fieldNames())}.",
                )
        schema = Schema.from_arrow(arrow_schema(data_schema))
        if "://" in path:
            delta_keys, _ = split_properties(properties)
            try:
                create_table_with_add_actions(path, schema, actions, mode="append",
                                              partition_by=partition_by or None,
                                              configuration=delta_keys or None,
                                              storage_options=storage.options_for(path),
                                              commit_properties=props)
            except Exception as exc:
                raise invalid_property(exc, path) from exc
            return True
        if create_with_write(path, schema.to_json(), adds, partition_by, txn,
                             SAVE_MODES.get((save_mode or mode).lower(), "Append"),
                             user_metadata, properties,
                             None if stream is None else (
                                 stream.OPERATION, stream.parameters(),
                                 stream.metrics(adds, 0))):
            return True
        # another writer created the table first: add to it, unless the user's mode said
        # "only a new table" (checked before the write, lost since)
        if (save_mode or "").lower() in ("errorifexists", "error", "ignore"):
            _delete_files(path, adds)
            if (save_mode or "").lower() == "ignore":
                return False
            raise HeadwaterError(
                "HW_DELTA_PATH_EXISTS", f"Cannot write to already existent path {path}: "
                "another writer created a table there while this write ran.",
                "A write without a mode (errorifexists) creates a new table only; nothing was "
                "written.", "Use .mode('append') to add rows to the table.",
                error_class="DELTA_PATH_EXISTS")
        table = open_table(path)
    if txn is not None:
        done = table.transaction_version(txn[0])
        if done is not None and done >= txn[1]:
            _delete_files(path, adds)  # a repeated attempt: its files are never referenced
            return False
    if not adds and mode == "append":
        return True  # nothing to add: an empty commit would only grow the log
    existing_parts = list(table.metadata().partition_columns)
    check_partitioning(path, existing_parts, partition_by)
    config = table.metadata().configuration or {}
    if config.get("delta.columnMapping.mode", "none") != "none":
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The table at {path} uses column mapping, which headwater's writer does not "
            "support yet.",
            "Files in a column-mapped table use physical column names.",
            "Write to a table without column mapping.",
        )
    table_schema = spark_schema(table.schema().to_json())
    new_columns = check_schema(path, table_schema, data_schema, merge_schema)
    if stream is not None and "://" not in path and own_commit_allowed(table):
        return _commit_stream(path, table, adds, mode, txn, stream, user_metadata,
                              _merged(table_schema, data_schema, new_columns), auto_compact)
    if new_columns:
        from deltalake.schema import Field  # noqa: PLC0415 - worker: deltalake only in the worker that evolves the schema

        arrow = arrow_schema(data_schema)
        table.alter.add_columns([Field.from_arrow(arrow.field(c)) for c in new_columns])
        table = open_table(path)
    blind_append = mode == "append" and not partition_filters
    for attempt in range(BLIND_APPEND_RETRIES + 1):
        try:
            table.create_write_transaction(
                actions, mode=mode, schema=table.schema(), partition_by=existing_parts or None,
                partition_filters=partition_filters, commit_properties=props,
            )
            break
        except CommitFailedError as exc:
            # delta-rs counts every file of the snapshot as read by a write, so a DELETE /
            # UPDATE / OPTIMIZE committed meanwhile fails even a blind append, which Delta's
            # WriteSerializable isolation (delta-spark) lets through: it read nothing.
            if not blind_append or CONCURRENT_DELETE_READ not in str(exc) \
                    or attempt == BLIND_APPEND_RETRIES:
                raise delta_rs_conflict(exc, "WRITE", path, "HW_DELTA_COMMIT_CONFLICT") from exc
            table = open_table(path)
            if txn is not None:  # another writer of this (app, batch) committed meanwhile
                done = table.transaction_version(txn[0])
                if done is not None and done >= txn[1]:
                    _delete_files(path, adds)
                    return False
            check_partitioning(path, list(table.metadata().partition_columns), partition_by)
            check_schema(path, spark_schema(table.schema().to_json()), data_schema, merge_schema)
    if autocompact.enabled(config, auto_compact):
        table.update_incremental()
        autocompact.compact_if_due(table, auto_compact)
    return True


def _merged(table: StructType, data: StructType, new_columns: list[str]) -> StructType | None:
    """The table's schema with the data's ``new_columns`` added at the end (nullable, as
    mergeSchema adds them); None when there are none."""
    if not new_columns:
        return None
    added = [f for f in data.fields if f.name in new_columns]
    return StructType([*table.fields, *added])


def _commit_stream(path: str, table: Any, adds: list[dict[str, Any]], mode: str,
                   txn: tuple[str, int] | None, stream: StreamUpdate,
                   user_metadata: str | None, schema: StructType | None,
                   auto_compact: bool) -> bool:
    """A micro-batch committed by headwater (:func:`headwater.delta.write_commit.commit_write`:
    adds, the removes of a complete-mode batch, a new schema, the txn) as STREAMING UPDATE.
    False when ``txn`` was committed before (its files deleted)."""
    version = commit_write(path, table, adds, mode, txn, schema,
                           cleanup=lambda: _delete_files(path, adds),
                           user_metadata=user_metadata, stream=stream)
    if version is None:
        return False
    if autocompact.enabled(table.metadata().configuration or {}, auto_compact):
        table.update_incremental()
        autocompact.compact_if_due(table, auto_compact)
    return True


def create_with_write(path: str, schema_json: str, adds: list[dict[str, Any]],
                      partition_by: list[str], txn: tuple[str, int] | None,
                      mode_name: str, user_metadata: str | None = None,
                      properties: dict[str, str] | None = None,
                      operation: tuple[str, dict[str, str], dict[str, str]] | None = None
                      ) -> bool:
    """Create the local table at ``path`` holding ``adds`` as version 0, recorded as
    delta-spark records a table's first write: operation WRITE with the user's mode
    (``ErrorIfExists`` for a plain ``save()``) and partitionBy (delta-rs would record CREATE
    TABLE). False, with nothing written, when version 0 exists already. properties: the new
    table's properties (its protocol follows from them, as deltalake's create computes it);
    operation: (name, parameters, metrics) recorded instead of WRITE's (a stream's first
    micro-batch: STREAMING UPDATE)."""
    now = int(time.time() * 1000)
    rows = sum(json.loads(a["stats"]).get("numRecords", 0) for a in adds if a.get("stats"))
    name, parameters, metrics = operation or (
        "WRITE", {"mode": mode_name, "partitionBy": json.dumps(list(partition_by))},
        {"numFiles": str(len(adds)), "numOutputRows": str(rows),
         "numOutputBytes": str(sum(int(a["size"]) for a in adds))})
    properties = dict(properties or {})
    mapping = properties.get("delta.columnMapping.mode", "none").lower()
    if mapping != "none":  # the files would need physical names and ids in the schema
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The first write into {path} would create a table with "
            f"delta.columnMapping.mode={mapping} (from the write's options or the session's "
            "spark.databricks.delta.properties.defaults.columnMapping.mode).",
            "headwater's first-write commit does not give columns the physical names and ids "
            "column mapping needs; the table would be unreadable.",
            "Unset the column-mapping default (or option) for this write, or create the "
            "table with column mapping elsewhere (delta-spark) and append to it.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    protocol = first_protocol(spark_schema(schema_json), list(partition_by), properties, path)
    actions: list[dict[str, Any]] = [
        {"commitInfo": {
            "timestamp": now, "operation": name, "operationParameters": parameters,
            "isolationLevel": "Serializable", "isBlindAppend": True,
            "operationMetrics": metrics,
            "engineInfo": ENGINE_INFO, "txnId": str(uuid.uuid4()),
            **({"userMetadata": user_metadata} if user_metadata is not None else {})}},
        {"protocol": protocol},
        {"metaData": {
            "id": str(uuid.uuid4()), "name": None, "description": None,
            "format": {"provider": "parquet", "options": {}}, "schemaString": schema_json,
            "partitionColumns": list(partition_by), "configuration": properties,
            "createdTime": now}},
        *({"add": {**a, "path": log_path(a["path"])}} for a in adds),
    ]
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    os.makedirs(os.path.join(path, DELTA_LOG), exist_ok=True)
    payload = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    return put_if_absent(path, 0, payload.encode("utf-8"))


def inject_fault(point: str) -> None:
    """Crash tests: SIGKILL the driver (its JVM and the Python process that started it).

    Commits run in a Python worker forked by the driver JVM, so the driver is found among
    this process's ancestors: the JVM runs SparkSubmit, its parent is the Python driver.
    """
    if os.environ.get(FAULT_ENV) != point:
        return
    pid = os.getpid()
    while pid > 1:
        parent = _parent_pid(pid)
        if "SparkSubmit" in _cmdline(pid):
            for victim in (parent, pid):
                if victim > 1:
                    os.kill(victim, signal.SIGKILL)
            break
        pid = parent
    os.kill(os.getpid(), signal.SIGKILL)


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().decode("utf-8", "replace")


# --- the streaming sink ----------------------------------------------------------------


def checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The query id Spark keeps in ``<checkpoint>/metadata``: stable across restarts."""
    if not checkpoint:
        return None
    try:
        fs, root = filesystem_for(normalize_uri(checkpoint))
        with fs.open_input_stream(f"{root}/metadata") as stream:
            first = stream.read().decode("utf-8").splitlines()[0]
        return json.loads(first)["id"]
    except (OSError, IndexError, KeyError, ValueError):
        return None


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """append: one transaction per micro-batch; complete: one overwrite per micro-batch."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts = WriteOptions.from_options(options)
        self.schema = schema
        self.complete = overwrite
        self.checkpoint = options.get("checkpointlocation")
        self.fallback_query_id = str(uuid.uuid4())
        self.fallback_app_id = f"headwater-{self.fallback_query_id}"
        # Resolved once on the driver and pickled to the tasks: no log replay per task.
        self.partition_columns = self._check_existing_table()

    def _check_existing_table(self) -> list[str]:
        log = DeltaLog(self.opts.path)
        if not log.exists():
            return self.opts.partition_by
        table = log.table()
        refuse_driver_only(self.opts.path, table)
        existing = list(table.metadata().partition_columns)
        check_partitioning(self.opts.path, existing, self.opts.partition_by)
        check_schema(self.opts.path, spark_schema(table.schema().to_json()), self.schema,
                     self.opts.merge_schema)
        return existing

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(self.opts.path, self.partition_columns, self.opts.target_file_bytes,
                          self.opts.codec, iterator)

    def app_id(self) -> str:
        query_id = checkpoint_query_id(self.checkpoint)
        return f"headwater-stream-{query_id}" if query_id else self.fallback_app_id

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        adds = collect_adds(messages)
        stream = StreamUpdate("Complete" if self.complete else "Append",
                              checkpoint_query_id(self.checkpoint) or self.fallback_query_id,
                              batchId)
        inject_fault("sink_before_commit")
        commit_files(
            self.opts.path, adds, self.schema,
            mode="overwrite" if self.complete else "append",
            partition_by=self.partition_columns, txn=(self.app_id(), batchId),
            merge_schema=self.opts.merge_schema, auto_compact=self.opts.auto_compact,
            user_metadata=self.opts.user_metadata, properties=self.opts.table_properties,
            stream=stream,
        )
        inject_fault("sink_after_commit")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        adds = collect_adds(messages)
        _delete_files(self.opts.path, adds)
