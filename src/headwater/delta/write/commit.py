"""The one commit of a write: the written files, and what an overwrite replaces, as one version.

:func:`commit_files` is the last step of every write (:mod:`headwater.delta.write`): it takes
the :class:`~headwater.delta.write.request.WriteRequest`, the add actions of the files the
writer wrote and the data's schema, and commits them exactly once (a repeated ``txn`` is
skipped and its files deleted):

- a table's first write: version 0 written by headwater (:func:`create_with_write`), recorded
  as delta-spark records it (operation WRITE with the user's mode); deltalake's on object
  stores;
- plain appends and whole-table overwrites: deltalake's write transaction;
- micro-batches of a stream, selective overwrites (the removes computed by the caller:
  dynamic partitions, a replaceWhere on data columns), ``dataChange=false`` writes and tables
  deltalake 1.6.6 refuses to commit to (identity columns, liquid clustering: "Unsupported
  table features required"; its write transaction also cannot change the metadata with the
  data, which an identity column's high-water mark needs): headwater's own commit
  (:mod:`headwater.delta.commit`: add and remove actions, a new schema, the ``txn``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote

from pyspark.sql.types import StructType

from headwater.conf import storage
from headwater.conf.layout import DELTA_LOG
from headwater.delta import autocompact, physical_names, row_tracking
from headwater.delta.column_ddl import widen_field
from headwater.delta.column_defaults import FEATURE as DEFAULTS_FEATURE
from headwater.delta.column_defaults import feature_requested
from headwater.delta.commit import (
    ENGINE_INFO,
    Transaction,
    commit,
    delta_rs_conflict,
    log_path,
    put_if_absent,
)
from headwater.delta.log import (
    FILE_COLUMNS,
    add_actions,
    deletion_vector_paths,
    filesystem_for,
    open_table,
    resolve_file,
)
from headwater.delta.metadata import metadata_action
from headwater.delta.schema import arrow_schema, as_nullable, format_partition_value, spark_schema
from headwater.delta.table_protocol import first_protocol, invalid_property, split_properties
from headwater.delta.write.checks import (
    check_partitioning,
    check_schema,
    own_commit_allowed,
    type_widening_enabled,
    widened_columns,
)
from headwater.delta.write.request import SAVE_MODES, WriteRequest
from headwater.delta.write.selective import partition_removes_where
from headwater.errors import HeadwaterError
from headwater.errors.delta import ConcurrentTransactionException

BLIND_APPEND_RETRIES = 10
CONCURRENT_DELETE_READ = "a concurrent transaction deleted data this operation read"


def delete_files(path: str, adds: Sequence[dict]) -> None:
    """Delete the files of ``adds`` (paths as the log names them), ignoring missing ones."""
    fs, root = filesystem_for(path)
    for add in adds:
        try:
            fs.delete_file(resolve_file(root, add["path"]))
        except OSError:
            pass


def delete_unreferenced(path: str, adds: Sequence[dict]) -> None:
    """Delete the files of ``adds`` that no version of the table references (a writer's
    abort: a commit that failed after its version landed keeps its files)."""
    from deltalake.exceptions import TableNotFoundError  # noqa: PLC0415 - worker: deltalake only in the worker that commits

    try:
        table = open_table(path)
    except TableNotFoundError:
        delete_files(path, adds)
        return
    except Exception:  # noqa: BLE001 - unreadable: leftovers are harmless (VACUUM), deletes not
        return
    referenced = {unquote(p) for p in add_actions(table, flatten=True).column("path").to_pylist()}
    delete_files(path, [a for a in adds if unquote(a["path"]) not in referenced])


def _already_committed(table: Any, txn: tuple[str, int] | None) -> bool:
    if txn is None:
        return False
    done = table.transaction_version(txn[0])
    return done is not None and done >= txn[1]


def _refuse_own(request: WriteRequest, what: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_DELTA_UNSUPPORTED_FEATURE",
        f"{what} into the table at {request.path} is not supported by headwater's commit "
        "for this table (an object store, column mapping, or a writer feature headwater does "
        "not maintain).", "Such a write must remove chosen files, or mark its actions, "
        "which only headwater's own commit does; it never falls back to overwriting more.",
        "Write to a local table without those features, or use DELETE then an append.")


def commit_files(request: WriteRequest, adds: list[dict[str, Any]], data_schema: StructType,
                 partition_filters: list[tuple[str, str, Any]] | None = None,
                 removes: list[dict[str, Any]] | None = None,
                 read_version: int | None = None) -> bool:
    """Commit ``adds`` (written for ``request``) in one transaction. False when the request's
    ``txn`` was already committed (the files are deleted then).

    partition_filters: the partitions a replaceWhere on partition columns replaces
    (deltalake's filters); removes: the remove actions of a selective overwrite the caller
    computed (dynamic partitions, a replaceWhere on data columns) from the table at
    ``read_version``, committed by headwater's own commit with ``adds`` (commits after that
    version checked for conflicts). An existing table keeps its own properties; a new one gets
    ``request.properties`` (the session's ``properties.defaults.*`` and the write's
    ``delta.*`` options, resolved by the caller on the driver:
    :func:`headwater.delta.defaults.with_defaults`). A micro-batch of a stream
    (``request.stream``) is recorded as delta-spark records it (STREAMING UPDATE) by
    headwater's own commit on a local table; object-store tables, and tables with features
    such a commit does not follow, get deltalake's."""
    from deltalake import CommitProperties, Schema, Transaction  # noqa: PLC0415 - worker: deltalake only in the worker that commits
    from deltalake.exceptions import CommitFailedError, TableNotFoundError  # noqa: PLC0415 - worker: deltalake only in the worker that commits
    from deltalake.transaction import AddAction, create_table_with_add_actions  # noqa: PLC0415 - worker: deltalake only in the worker that commits

    path, txn, user_metadata = request.path, request.txn, request.user_metadata
    mode = "overwrite" if request.overwrite else "append"
    partition_by = list(request.partition_by)
    props = CommitProperties(
        app_transactions=[Transaction(*txn)] if txn else None,
        custom_metadata={"userMetadata": user_metadata} if user_metadata is not None else None,
    ) if txn or user_metadata is not None else None
    if not request.data_change:
        adds = [{**a, "dataChange": False} for a in adds]
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
        if not request.data_change:
            delete_files(path, adds)
            raise data_change_false(request, "create the table")
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
            delta_keys, _ = split_properties(dict(request.properties or {}))
            try:
                create_table_with_add_actions(path, schema, actions, mode="append",
                                              partition_by=partition_by or None,
                                              configuration=delta_keys or None,
                                              storage_options=storage.options_for(path),
                                              commit_properties=props)
            except Exception as exc:
                raise invalid_property(exc, path) from exc
            return True
        if create_with_write(request, schema.to_json(), adds):
            return True
        # another writer created the table first: add to it, unless the user's mode said
        # "only a new table" (checked before the write, lost since)
        save_mode = (request.save_mode or "").lower()
        if save_mode in ("errorifexists", "error", "ignore"):
            delete_files(path, adds)
            if save_mode == "ignore":
                return False
            raise HeadwaterError(
                "HW_DELTA_PATH_EXISTS", f"Cannot write to already existent path {path}: "
                "another writer created a table there while this write ran.",
                "A write without a mode (errorifexists) creates a new table only; nothing was "
                "written.", "Use .mode('append') to add rows to the table.",
                error_class="DELTA_PATH_EXISTS")
        table = open_table(path)
    if _already_committed(table, txn):
        delete_files(path, adds)  # a repeated attempt: its files are never referenced
        return False
    if not adds and mode == "append":
        return True  # nothing to add: an empty commit would only grow the log
    existing_parts = list(table.metadata().partition_columns)
    check_partitioning(path, existing_parts, partition_by)
    config = table.metadata().configuration or {}
    if physical_names.mode_of(config) != "none" and not (
            request.physical_names and "://" not in path and own_commit_allowed(table)):
        delete_files(path, adds)  # files named by logical names: never committed
        raise physical_names.unsupported_write(
            path, "A write through the Python data source writer (an object store, "
            "targetFileSize, a codec Spark's writer lacks, or another API than df.write / "
            "INSERT / a stream)")
    table_schema = spark_schema(table.schema().to_json())
    type_widening = type_widening_enabled(table)
    new_columns = check_schema(path, table_schema, data_schema, request.merge_schema,
                               type_widening)
    widened = widened_columns(table_schema, data_schema, request.merge_schema and type_widening)
    if (new_columns or widened) and not request.data_change:
        delete_files(path, adds)
        raise data_change_false(request, "change the columns "
                                 + ", ".join([*widened, *new_columns]))
    if "://" not in path and own_commit_allowed(table):
        # headwater's own commit, recorded as delta-spark records the write (operation,
        # parameters, operationMetrics), new and widened columns in the same version
        if partition_filters:
            removes = partition_removes_where(table, table_schema, partition_filters)
        return _commit_own(request, table, adds,
                           merged_schema(table_schema, data_schema, new_columns, widened), removes,
                           read_version)
    if removes is not None or not request.data_change or widened:
        delete_files(path, adds)
        raise _refuse_own(request, "A selective overwrite, a dataChange=false write or a "
                          "write that widens a column")
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
            if _already_committed(table, txn):  # another writer of this (app, batch) won
                delete_files(path, adds)
                return False
            check_partitioning(path, list(table.metadata().partition_columns), partition_by)
            check_schema(path, spark_schema(table.schema().to_json()), data_schema,
                         request.merge_schema, type_widening_enabled(table))
    if autocompact.enabled(config, request.auto_compact):
        table.update_incremental()
        autocompact.compact_if_due(table, request.auto_compact)
    return True


def data_change_false(request: WriteRequest, what: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_OPTION_CONFLICT", f"A write with dataChange=false would {what} at {request.path}.",
        "dataChange=false marks a write that only rearranges the table's data; it cannot "
        "change the table's metadata.", "Drop the dataChange option for this write.",
        error_class="DELTA_DATA_CHANGE_FALSE")


def merged_schema(table: StructType, data: StructType, new_columns: list[str],
            widened: Sequence[str] = ()) -> StructType | None:
    """The table's schema with the ``widened`` columns given the data's types (recorded in
    their ``delta.typeChanges`` as ALTER COLUMN TYPE records them) and the data's
    ``new_columns`` added at the end (nullable, as mergeSchema adds them); None when there
    are none of either."""
    if not new_columns and not widened:
        return None
    wider = {f.name.lower(): f.dataType.jsonValue() for f in data.fields}
    fields = []
    for field in table.jsonValue()["fields"]:
        if field["name"] in widened:
            widen_field(field, wider[field["name"].lower()])
        fields.append(field)
    added = [f for f in data.fields if f.name in new_columns]
    return StructType([*StructType.fromJson({"type": "struct", "fields": fields}).fields,
                       *added])


def _commit_own(request: WriteRequest, table: Any, adds: list[dict[str, Any]],
                schema: StructType | None, removes: list[dict[str, Any]] | None,
                read_version: int | None = None) -> bool:
    """:func:`commit_write` of ``adds`` (and ``removes``), then auto compaction when due.
    False when the request's txn was committed before (its files deleted)."""
    path = request.path
    version = commit_write(request, table, adds, schema,
                           cleanup=lambda: delete_files(path, adds), removes=removes,
                           read_version=read_version)
    if version is None:
        return False
    if autocompact.enabled(table.metadata().configuration or {}, request.auto_compact):
        table.update_incremental()
        autocompact.compact_if_due(table, request.auto_compact)
    return True


def commit_write(request: WriteRequest, table: Any, adds: list[dict[str, Any]],
                 schema: StructType | None = None,
                 cleanup: Callable[[], None] | None = None,
                 removes: list[dict[str, Any]] | None = None,
                 read_version: int | None = None) -> int | None:
    """Commit ``adds`` to the table at ``request.path`` on top of ``table`` (the deltalake
    snapshot the write read) in one version, by headwater's own commit: an append, or an
    overwrite that removes every current file, or the ``removes`` given (a selective
    overwrite, chosen from the table at ``read_version``: default ``table``'s); ``schema``:
    the table's new schema (e.g. raised identity high-water marks, new
    columns); the request's ``txn``, ``user_metadata``, ``data_change`` and ``stream``
    recorded. Returns the version, or None when ``txn`` was committed before (nothing is
    written twice; ``cleanup`` deletes the new files then). An overwrite of an append-only
    table is refused (delta-spark's DELTA_CANNOT_MODIFY_APPEND_ONLY)."""
    uri, txn, mode = request.path, request.txn, request.mode
    if _already_committed(table, txn):
        if cleanup is not None:
            cleanup()
        return None
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    meta = table.metadata()
    if schema is not None:
        actions.append(metadata_action(
            table, json.dumps(schema.jsonValue(), separators=(",", ":"))))
    read: list[str] = []
    removing: list[dict[str, Any]] = []
    if mode == "overwrite":
        if str((meta.configuration or {}).get("delta.appendOnly", "false")).lower() == "true":
            if cleanup is not None:
                cleanup()
            raise HeadwaterError(
                "HW_DELTA_APPEND_ONLY",
                f"This table is configured to only allow appends: {uri} cannot be "
                "overwritten (nor written by a complete-mode stream).",
                "delta.appendOnly=true forbids removing files.",
                "Append instead, or set 'delta.appendOnly' = 'false' first "
                "(ALTER TABLE ... SET TBLPROPERTIES).",
                error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY")
        if removes is not None:
            removing = list(removes)
        else:
            if deletion_vector_paths(table):  # deltalake does not report the vectors
                if cleanup is not None:
                    cleanup()
                raise HeadwaterError(
                    "HW_DELTA_UNSUPPORTED_FEATURE",
                    f"Overwriting the table at {uri} is not supported: it has deletion "
                    "vectors.", "An overwrite must remove each file with its deletion "
                    "vector, which deltalake does not report.", "Purge them first (REORG "
                    "TABLE ... APPLY (PURGE) in delta-spark), or delete the rows with DELETE "
                    "and append.")
            partition_columns = list(meta.partition_columns)
            # the log's keys: physical names under column mapping (deltalake reports logical)
            keys = physical_names.physical_partition_columns(
                spark_schema(table.schema().to_json()), partition_columns) \
                if physical_names.is_mapped(table) else partition_columns
            for row in add_actions(table, columns=FILE_COLUMNS).to_pylist():
                values = row.get("partition") or {}
                removing.append({"remove": {
                    "path": row["path"], "dataChange": True, "deletionTimestamp": now,
                    "extendedFileMetadata": True, "size": int(row["size_bytes"]),
                    "partitionValues": {k: format_partition_value(values.get(c))
                                        for c, k in zip(partition_columns, keys,
                                                        strict=True)}}})
        if not request.data_change:
            removing = [{"remove": {**r["remove"], "dataChange": False}} for r in removing]
        read = [r["remove"]["path"] for r in removing]
        actions += removing
    actions += [{"add": {**a, "path": log_path(a["path"]),
                         "dataChange": bool(a.get("dataChange", True)) and request.data_change}}
                for a in adds]
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    rows = sum(json.loads(a["stats"])["numRecords"] for a in adds if a.get("stats"))
    operation = "WRITE"
    parameters: dict[str, Any] = {"mode": "Overwrite" if mode == "overwrite" else "Append",
                                  "partitionBy": list(meta.partition_columns)}
    if request.replace_where is not None and mode == "overwrite":
        parameters["predicate"] = [request.replace_where]
    metrics: dict[str, Any] = {"numFiles": len(adds), "numOutputRows": rows,
                               "numOutputBytes": sum(int(a["size"]) for a in adds)}
    if mode == "overwrite":
        metrics["numRemovedFiles"] = len(removing)
        metrics["numRemovedBytes"] = sum(int(r["remove"].get("size") or 0) for r in removing)
    extra: dict[str, Any] = {"isBlindAppend": mode == "append" and schema is None}
    stream = request.stream
    if stream is not None:  # delta-spark's DeltaSink: blind when it only adds files
        operation, parameters = stream.OPERATION, dict(stream.parameters())
        metrics = dict(stream.metrics(adds, len(read)))
        extra = {"isBlindAppend": not read, "isolationLevel": "Serializable"}
    transaction = Transaction(
        # the older of the two snapshots: the checks' and the one the removes were read from
        uri=uri, read_version=table.version() if read_version is None
        else min(read_version, table.version()),
        operation=operation,
        parameters=parameters, metrics=metrics,
        actions=actions, read_paths=read, cleanup=cleanup,
        app_id=txn[0] if txn else None,
        # an append reads nothing: concurrent appends never conflict with it (a concurrent
        # metadata change, e.g. another write's identity high-water mark, does)
        reads_data=mode == "overwrite", conflict_code="HW_DELTA_COMMIT_CONFLICT",
        extra={**extra,
               **({"userMetadata": request.user_metadata}
                  if request.user_metadata is not None else {})})
    try:
        return commit(transaction)
    except ConcurrentTransactionException:
        # another writer of the same (appId, version) committed first (a zombie stream, a
        # retried job): the batch is in the table once, which is what the txn promises
        if _already_committed(open_table(uri), txn):
            return None
        raise


def create_with_write(request: WriteRequest, schema_json: str,
                      adds: list[dict[str, Any]]) -> bool:
    """Create the local table at ``request.path`` holding ``adds`` as version 0, recorded as
    delta-spark records a table's first write: operation WRITE with the user's mode
    (``ErrorIfExists`` for a plain ``save()``) and partitionBy (delta-rs would record CREATE
    TABLE); a stream's first micro-batch as STREAMING UPDATE. False, with nothing written,
    when version 0 exists already. The table's properties are ``request.properties`` (its
    protocol follows from them, as deltalake's create computes it)."""
    path, partition_by = request.path, list(request.partition_by)
    now = int(time.time() * 1000)
    rows = sum(json.loads(a["stats"]).get("numRecords", 0) for a in adds if a.get("stats"))
    mode_name = SAVE_MODES.get((request.save_mode or request.mode).lower(), "Append")
    stream = request.stream
    name, parameters, metrics = (stream.OPERATION, stream.parameters(),
                                 stream.metrics(adds, 0)) if stream is not None else (
        "WRITE", {"mode": mode_name, "partitionBy": json.dumps(partition_by)},
        {"numFiles": str(len(adds)), "numOutputRows": str(rows),
         "numOutputBytes": str(sum(int(a["size"]) for a in adds))})
    properties = dict(request.properties or {})
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
    # delta.feature.allowColumnDefaults: recorded in the protocol, not as a property
    properties, defaults = feature_requested(properties, path)
    protocol = first_protocol(spark_schema(schema_json), partition_by, properties, path,
                              frozenset({DEFAULTS_FEATURE}) if defaults else frozenset())
    txn = request.txn
    actions: list[dict[str, Any]] = [
        {"commitInfo": {
            "timestamp": now, "operation": name, "operationParameters": parameters,
            "isolationLevel": "Serializable", "isBlindAppend": True,
            "operationMetrics": metrics,
            "engineInfo": ENGINE_INFO, "txnId": str(uuid.uuid4()),
            **({"userMetadata": request.user_metadata}
               if request.user_metadata is not None else {})}},
        {"protocol": protocol},
        {"metaData": {
            "id": str(uuid.uuid4()), "name": None, "description": None,
            "format": {"provider": "parquet", "options": {}}, "schemaString": schema_json,
            "partitionColumns": partition_by, "configuration": properties,
            "createdTime": now}},
        *({"add": {**a, "path": log_path(a["path"])}} for a in adds),
    ]
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    # row tracking (delta.enableRowTracking): the files' row ids from 0, the mark committed
    actions = row_tracking.assign(actions, row_tracking.TableState(None, {}, -1), 0, path)
    os.makedirs(os.path.join(path, DELTA_LOG), exist_ok=True)
    payload = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    return put_if_absent(path, 0, payload.encode("utf-8"))
