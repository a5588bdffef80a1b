"""One Delta write as one value: :class:`WriteRequest`, built once at each entry point.

Every way rows reach a Delta table (``df.write.format("delta")``, ``saveAsTable``,
``insertInto``, SQL ``INSERT``, the native and Python stream sinks, pipeline flows) builds a
``WriteRequest`` from what the user said (the writer's options, the save mode, the session's
delta-spark settings) and hands it to the one write path (:mod:`headwater.delta.write`): the
checks, the file writer and the commit read their settings from its typed fields, never from
a dozen loose flags. Options are parsed here, strictly: an option headwater does not
implement, whose absence would widen the write (``replaceUsing``, say), is refused.

Session settings (delta-spark's ``spark.databricks.delta.*`` and Spark's
``partitionOverwriteMode``) are resolved on the driver by :func:`with_session_settings` into
the writer's options, where an option the user set wins: the Python data source writers
build their request in a worker, which has no session.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from headwater.conf.layout import (
    DELTA_AUTO_MERGE_CONF,
    DELTA_DYNAMIC_OVERWRITE_CONF,
    DELTA_TXN_APP_ID_CONF,
    DELTA_TXN_AUTO_RESET_CONF,
    DELTA_TXN_VERSION_CONF,
    DELTA_USER_METADATA_CONF,
    PARTITION_OVERWRITE_CONF,
)
from headwater.conf.options import parse_bool, parse_columns, parse_int, parse_size
from headwater.delta.log import normalize_uri
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
# delta-spark / Databricks writer options headwater does not implement, each of which would
# make an overwrite replace more than the user asked if it were ignored.
_REFUSED_OPTIONS = {
    "replaceusing": ("replaceUsing", "Databricks' overwrite of the rows whose key columns "
                     "match the data's"),
    "replaceon": ("replaceOn", "Databricks' overwrite of the rows matching a join "
                  "condition with the data"),
}


@dataclass(frozen=True)
class StreamUpdate:
    """One micro-batch of a streaming write, recorded as delta-spark's DeltaSink records it
    (``DeltaOperations.StreamingUpdate``): operation STREAMING UPDATE with parameters
    outputMode (``Append`` / ``Complete``), queryId (the stream's id, kept in its
    checkpoint) and epochId (the batch id), and the metrics numAddedFiles, numRemovedFiles,
    numOutputRows, numOutputBytes."""

    output_mode: str
    query_id: str
    epoch_id: int

    OPERATION: ClassVar[str] = "STREAMING UPDATE"

    def parameters(self) -> dict[str, str]:
        return {"outputMode": self.output_mode, "queryId": self.query_id,
                "epochId": str(self.epoch_id)}

    @staticmethod
    def metrics(adds: list[dict[str, Any]], removed: int) -> dict[str, str]:
        rows = sum(json.loads(a["stats"])["numRecords"] for a in adds if a.get("stats"))
        return {"numAddedFiles": str(len(adds)), "numRemovedFiles": str(removed),
                "numOutputRows": str(rows),
                "numOutputBytes": str(sum(int(a["size"]) for a in adds))}


@dataclass(frozen=True)
class WriteRequest:
    """What one write asks of a Delta table.

    path: the table's URI. mode: ``append`` or ``overwrite``; an overwrite replaces the whole
    table unless ``replace_where`` (a SQL predicate: the rows matching it are replaced, and
    every written row must match it) or ``dynamic_partitions`` (only the partitions the data
    has) narrows it. partition_by: the partition columns asked for (a new table's; an
    existing table's must match). merge_schema: the data's new columns are added to the
    table. txn: (appId, version) of an idempotent write: skipped when the table has that
    application transaction at that version or later. user_metadata: the commitInfo's
    ``userMetadata``. data_change: false marks a write that only rearranges data
    (``dataChange=false`` on its add and remove actions). save_mode: the mode the user gave
    when it differs from ``mode`` (errorifexists / ignore run as an append of a new table),
    for the history. properties: the ``delta.*`` and other properties of a table this write
    creates (an existing table keeps its own). auto_compact: compact small files after the
    commit unless the table's property says otherwise. target_file_bytes: the Python
    writer's file size (None: not asked; the default size). codec / max_records_per_file:
    Spark's parquet writer settings. stream: the micro-batch this write is, recorded as
    STREAMING UPDATE. physical_names: the files hold the columns under their physical names
    (a column-mapped table written by :func:`headwater.delta.write.native.write_native`);
    only such files are committed to a column-mapped table.
    """

    path: str
    mode: str = "append"
    partition_by: tuple[str, ...] = ()
    replace_where: str | None = None
    dynamic_partitions: bool = False
    merge_schema: bool = False
    txn: tuple[str, int] | None = None
    user_metadata: str | None = None
    data_change: bool = True
    save_mode: str | None = None
    properties: Mapping[str, str] | None = None
    auto_compact: bool = False
    target_file_bytes: int | None = None
    codec: str = "snappy"
    max_records_per_file: int | None = None
    stream: StreamUpdate | None = None
    physical_names: bool = False

    @property
    def overwrite(self) -> bool:
        return self.mode == "overwrite"

    @property
    def selective(self) -> bool:
        """An overwrite of part of the table (replaceWhere or dynamic partitions)."""
        return self.overwrite and (self.replace_where is not None or self.dynamic_partitions)

    @property
    def file_bytes(self) -> int:
        return self.target_file_bytes or DEFAULT_TARGET_FILE_BYTES

    def but(self, **changes: Any) -> WriteRequest:
        """This request with ``changes`` (field -> value)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, path: str | None = None,
                     mode: str = "append", partition_by: list[str] | tuple[str, ...] = (),
                     stream: StreamUpdate | None = None) -> WriteRequest:
        """The request of a write with these writer ``options`` (any case; session settings
        already merged in by :func:`with_session_settings`): ``path`` (else the ``path``
        option), ``mode`` (append / overwrite), ``partition_by`` (else the ``partitionBy``
        option)."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        for key, (name, what) in _REFUSED_OPTIONS.items():
            if lowered.get(key) is not None:
                raise HeadwaterError(
                    "HW_OPTION_UNSUPPORTED", f"The Delta writer option {name} is not supported "
                    "by headwater.", f"{name} is {what}; ignoring it would overwrite the whole "
                    "table.", "Use replaceWhere with a predicate on the rows to replace, or "
                    "MERGE INTO with the key columns.")
        target = path or lowered.get("path")
        if not target:
            raise HeadwaterError(
                "HW_SINK_NO_PATH",
                "A delta write arrived without a table path.",
                "headwater never guesses a default location for your data.",
                "Pass a path: .save('/data/table') / .start('/data/table'), or use a "
                "Lakehouse table name.",
            )
        partitions = list(partition_by) or parse_columns("partitionBy", lowered.get("partitionby"))
        if not partitions and lowered.get("__partition_columns"):
            partitions = parse_columns("partitionBy", lowered["__partition_columns"])
        mode = mode.lower()
        replace_where = lowered.get("replacewhere")
        if replace_where is not None and not str(replace_where).strip():
            raise HeadwaterError(
                "HW_OPTION_INVALID", "replaceWhere is empty.", "An overwrite with an empty "
                "condition would replace the whole table, which is never what it means.",
                "Give the condition of the rows to replace, or drop the option to overwrite "
                "the whole table.", error_class="DELTA_FAILED_RECOGNIZE_PREDICATE")
        dynamic = str(lowered.get("partitionoverwritemode") or "static").strip().lower()
        if dynamic not in ("static", "dynamic"):
            raise HeadwaterError(
                "HW_OPTION_INVALID", f"partitionOverwriteMode={dynamic!r} is not a mode.",
                "Spark knows two partition overwrite modes.", "Use 'static' or 'dynamic'.")
        dynamic_partitions = mode == "overwrite" and dynamic == "dynamic"
        if dynamic_partitions and replace_where is not None:
            if "partitionoverwritemode" in lowered and not lowered.get("__hw_dynamic_from_conf"):
                raise HeadwaterError(
                    "HW_OPTION_CONFLICT", "A Delta overwrite with both replaceWhere and "
                    "partitionOverwriteMode=dynamic.", "They name different rows to replace.",
                    "Use one of them.",
                    error_class="DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE")
            dynamic_partitions = False  # the session's dynamic mode: replaceWhere wins
        if dynamic_partitions and parse_bool("overwriteSchema", lowered.get("overwriteschema"),
                                             False):
            raise HeadwaterError(
                "HW_OPTION_CONFLICT", "A Delta overwrite with both overwriteSchema=true and "
                "partitionOverwriteMode=dynamic.", "Replacing the schema replaces every "
                "partition; a dynamic overwrite keeps the partitions the data does not have.",
                "Drop one of the two options.",
                error_class="DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE")
        if dynamic_partitions and not parse_bool(
                DELTA_DYNAMIC_OVERWRITE_CONF, lowered.get("__hw_dynamic_enabled"), True):
            raise HeadwaterError(
                "HW_OPTION_CONFLICT", "Dynamic partition overwrite is turned off in this "
                f"session ({DELTA_DYNAMIC_OVERWRITE_CONF}=false).",
                "delta-spark refuses a dynamic overwrite then rather than overwrite more.",
                f"Set {DELTA_DYNAMIC_OVERWRITE_CONF}=true, or use replaceWhere.",
                error_class="DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED")
        target_size = lowered.get("targetfilesize")
        max_records = lowered.get("maxrecordsperfile")
        return cls(
            path=normalize_uri(str(target)),
            mode=mode,
            partition_by=tuple(partitions),
            replace_where=None if mode != "overwrite" else replace_where,
            dynamic_partitions=dynamic_partitions,
            merge_schema=parse_bool("mergeSchema", lowered.get("mergeschema"), False),
            txn=txn_option(lowered),
            user_metadata=lowered.get("usermetadata"),
            data_change=parse_bool("dataChange", lowered.get("datachange"), True),
            save_mode=lowered.get(SAVE_MODE_OPTION),
            properties=json.loads(lowered.get(TABLE_PROPERTIES_OPTION) or "{}") or None,
            auto_compact=parse_bool("autoCompact", lowered.get("autocompact"), False),
            target_file_bytes=None if target_size is None else parse_size(
                "targetFileSize", target_size, DEFAULT_TARGET_FILE_BYTES),
            codec=str(lowered.get("compression") or "snappy").lower(),
            max_records_per_file=None if max_records is None else parse_int(
                "maxRecordsPerFile", max_records, None, minimum=0),
            stream=stream,
        )

    @classmethod
    def for_stream(cls, options: Mapping[str, Any], *, path: str | None = None,
                   complete: bool = False, partition_by: list[str] | tuple[str, ...] = ()
                   ) -> WriteRequest:
        """The request of a stream's micro-batches: the stream writer's ``options``
        (``mergeSchema``, ``autoCompact``, ``partitionBy``, ``compression``,
        ``userMetadata``...); complete mode replaces the whole table at each micro-batch;
        the txn is set per micro-batch (the query's id and the batch id)."""
        request = cls.from_options(options, path=path,
                                   mode="overwrite" if complete else "append",
                                   partition_by=partition_by)
        return request.but(replace_where=None, dynamic_partitions=False, data_change=True,
                           txn=None)


def txn_option(options: Mapping[str, Any]) -> tuple[str, int] | None:
    """(txnAppId, txnVersion) from lower-cased writer options: Delta's idempotent writes."""
    app_id, version = options.get("txnappid"), options.get("txnversion")
    if (app_id is None) != (version is None):
        raise HeadwaterError(
            "HW_OPTION_CONFLICT",
            "txnAppId and txnVersion must be given together (as writer options, or as the "
            f"session settings {DELTA_TXN_APP_ID_CONF} and {DELTA_TXN_VERSION_CONF}).",
            "Together they identify one write, so a repeated write is skipped.",
            "Set both, e.g. txnAppId=<job id> and txnVersion=<batch id>.",
            error_class="DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS",
        )
    if app_id is None:
        return None
    return (str(app_id), parse_int("txnVersion", version, 0, minimum=0))


def with_session_settings(options: Mapping[str, Any], conf: Any,
                          overwrite: bool = False) -> dict[str, str]:
    """The writer's ``options`` (lower-cased) with delta-spark's session settings where the
    writer sets none: ``mergeSchema`` from the autoMerge setting, ``userMetadata``,
    ``txnAppId`` / ``txnVersion`` (both from the session, or both from the options) and, for
    an overwrite, ``partitionOverwriteMode``. conf: the session's ``spark.conf``."""
    lowered = {str(k).lower(): str(v) for k, v in options.items() if v is not None}

    def setting(name: str) -> str | None:
        value = conf.get(name, None)
        return None if value is None or str(value) == "" else str(value)

    if "mergeschema" not in lowered and parse_bool(
            DELTA_AUTO_MERGE_CONF, setting(DELTA_AUTO_MERGE_CONF), False):
        lowered["mergeschema"] = "true"
    user_metadata = setting(DELTA_USER_METADATA_CONF)
    if "usermetadata" not in lowered and user_metadata is not None:
        lowered["usermetadata"] = user_metadata
    if "txnappid" not in lowered and "txnversion" not in lowered:
        app_id, version = setting(DELTA_TXN_APP_ID_CONF), setting(DELTA_TXN_VERSION_CONF)
        if app_id is not None or version is not None:
            if app_id is None or version is None:
                txn_option({"txnappid": app_id, "txnversion": version})  # raises
            lowered["txnappid"], lowered["txnversion"] = str(app_id), str(version)
    if overwrite:
        mode = setting(PARTITION_OVERWRITE_CONF)
        if "partitionoverwritemode" not in lowered and mode is not None:
            lowered["partitionoverwritemode"] = mode
            lowered["__hw_dynamic_from_conf"] = "true"
        enabled = setting(DELTA_DYNAMIC_OVERWRITE_CONF)
        if enabled is not None:
            lowered["__hw_dynamic_enabled"] = enabled
    return lowered


def reset_session_txn(conf: Any) -> None:
    """delta-spark's ``txnVersion.autoReset.enabled``: after a write that took its txn from
    the session, the session's txnVersion is cleared (the next write must set a new one)."""
    if parse_bool(DELTA_TXN_AUTO_RESET_CONF, conf.get(DELTA_TXN_AUTO_RESET_CONF, None), False):
        conf.unset(DELTA_TXN_VERSION_CONF)
