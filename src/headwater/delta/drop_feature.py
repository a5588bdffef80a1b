"""ALTER TABLE ... DROP FEATURE (``dropFeatureSupport``), including the features whose drop
first rewrites the table: deletion vectors and type widening, as delta-spark's drop WITH
TRUNCATE HISTORY.

delta-spark drops a reader-writer feature in two steps. The first call removes the feature's
traces from the current version and fails with DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD:
older versions still hold them.

- deletionVectors: ``delta.enableDeletionVectors`` set to false, then the files with
  deletion vectors rewritten, as ``REORG TABLE ... APPLY (PURGE)``. A version uses the
  feature when it adds or removes a file with a deletion vector.
- typeWidening (and typeWidening-preview): ``delta.enableTypeWidening`` unset, the files
  written before a type change rewritten in the table's types (REORG, delta-spark's
  REWRITE_TYPE_WIDENING), then the fields' ``delta.typeChanges`` removed from the schema. A
  version uses the feature when its metaData records type changes.

Once those versions are older than ``delta.dropFeatureTruncateHistory.retentionDuration``
(24 hours by default), the call again finds no trace in the newer history nor in the version
the truncated log starts from, truncates the log before them (a checkpoint at the last old
version, the older log files deleted) and commits the protocol without the feature. A trace
still within the retention fails with DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST.

delta-spark's default drop (without TRUNCATE HISTORY) keeps history and protects it with the
``checkpointProtection`` writer feature instead, which delta-rs (headwater's engine) cannot
write: it is refused, naming TRUNCATE HISTORY. Writer features (checkConstraints...) drop
in one commit (:func:`headwater.delta.protocol.drop_feature`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from headwater.conf.layout import DELTA_LOG
from headwater.delta import maintenance, metadata, row_tracking, type_widening
from headwater.delta.commit import Transaction, commit
from headwater.delta.log import DeltaLog, deletion_vector_paths, normalize_uri
from headwater.delta.optimize import purge, reorg, reorg_snapshot
from headwater.delta.protocol import Feature, Protocol, check_drop, commit_drop
from headwater.delta.protocol import drop_feature as drop_writer_feature
from headwater.delta.snapshot_adds import snapshot_adds
from headwater.delta.table_protocol import TYPE_WIDENING_PROPERTY
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELETION_VECTORS = "deletionVectors"
DV_PROPERTY = "delta.enableDeletionVectors"
TRUNCATE_RETENTION_PROPERTY = "delta.dropFeatureTruncateHistory.retentionDuration"
DEFAULT_TRUNCATE_RETENTION_HOURS = 24.0
_DROP_TYPE_WIDENING = "DROP FEATURE typeWidening"


@dataclass(frozen=True)
class HistoryFeature:
    """A reader-writer feature dropped WITH TRUNCATE HISTORY: how the first call removes its
    traces from the current version, and how a version of the history still shows them."""

    remove_traces: Callable[[SparkSession, str, Any], bool]  # (spark, uri, table): changed?
    commit_uses: Callable[[list[dict[str, Any]]], bool]  # a commit's actions use it
    state_uses: Callable[[Any], bool]  # a snapshot (deltalake) uses it
    first_call: str  # what the first call does, for the refusal without TRUNCATE HISTORY
    uses: str  # how a version uses the feature, for DELTA_FEATURE_DROP_HISTORICAL_...


def drop_feature(spark: SparkSession, path: str, name: str,
                 truncate_history: bool = False) -> Protocol:
    """Drop table feature ``name`` from the table at ``path``; returns the protocol after."""
    uri = normalize_uri(path)
    table = DeltaLog(uri).table()
    f = check_drop(table, name, truncate_history)
    if f.name == row_tracking.FEATURE:
        return _drop_row_tracking(uri, table, f, name)
    spec = HISTORY_FEATURES.get(f.name)
    if spec is None:
        return drop_writer_feature(uri, name, truncate_history)
    if not truncate_history:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"DROP FEATURE {f.name} of {uri} without TRUNCATE HISTORY is not supported.",
            "delta-spark's default drop protects the table's history with the "
            "checkpointProtection writer feature, which delta-rs (headwater's engine) cannot "
            "write; the table was left unchanged.",
            f"Run ALTER TABLE ... DROP FEATURE {f.name} TRUNCATE HISTORY (dropFeatureSupport("
            f"'{f.name}', True)): once {spec.first_call}, then again after "
            f"{TRUNCATE_RETENTION_PROPERTY} (24 hours by default).")
    if spec.remove_traces(spark, uri, table):
        raise _wait_error(f.name, _retention_text(DeltaLog(uri).table()))
    table = DeltaLog(uri).table()
    hours = maintenance.configured_retention_hours(
        table, spark, key=TRUNCATE_RETENTION_PROPERTY,
        default_hours=DEFAULT_TRUNCATE_RETENTION_HOURS)
    if hours is None:
        hours = DEFAULT_TRUNCATE_RETENTION_HOURS
    cutoff = int(time.time() * 1000 - hours * 3_600_000)
    log = DeltaLog(uri)
    boundary = _first_version_after(log, table.version(), cutoff, spec)
    if boundary is None:
        raise HeadwaterError(
            "HW_DELTA_PROTOCOL_INVALID",
            f"Cannot drop {f.name} from {uri}: versions within the retention period still "
            f"{spec.uses}.",
            f"Readers of those versions need the feature; {TRUNCATE_RETENTION_PROPERTY} is "
            f"{_retention_text(table)}.",
            "Wait until those versions are older than the retention period, then run the "
            "command again.", error_class="DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST")
    if boundary > 0:
        _truncate_before(log, boundary)
    return commit_drop(DeltaLog(uri).table(), f, name, True)


def _drop_row_tracking(uri: str, table: Any, f: Feature, name: str) -> Protocol:
    """delta-spark's drop of rowTracking (a writer feature: no history truncation): the
    property set to false and row ids suspended, every file re-added without its ids
    (ROW TRACKING UNBACKFILL), then the protocol without the feature, the row tracking
    properties and the ``delta.rowTracking`` domain removed, in one commit."""
    config = dict(table.metadata().configuration or {})
    suspend = {row_tracking.ENABLE_PROPERTY: "false", row_tracking.SUSPENDED_PROPERTY: "true"}
    if any(str(config.get(k, "")).lower() != v for k, v in suspend.items()):
        def disable(meta: dict[str, Any]) -> dict[str, Any]:
            meta["configuration"] = {**meta["configuration"], **suspend}
            return meta
        metadata.change_metadata(uri, "SET TBLPROPERTIES",
                                 {"properties": json.dumps(suspend)}, disable)
    log = DeltaLog(uri)
    table = log.table()
    with_ids = [a for a in snapshot_adds(log, table)
                if a.get("baseRowId") is not None or a.get("defaultRowCommitVersion") is not None]
    if with_ids:
        stripped = [{k: v for k, v in a.items()
                     if k not in ("baseRowId", "defaultRowCommitVersion")} for a in with_ids]
        commit(Transaction(
            uri=uri, read_version=table.version(), operation="ROW TRACKING UNBACKFILL",
            parameters={}, metrics={"numSuccessfulFiles": len(stripped)},
            actions=[{"add": {**a, "dataChange": False}} for a in stripped],
            read_paths=[a["path"] for a in with_ids],
            conflict_code="HW_DELTA_COMMIT_CONFLICT"))
        table = log.table()
    dropped = {row_tracking.ENABLE_PROPERTY, row_tracking.SUSPENDED_PROPERTY,
               row_tracking.ROW_ID_COLUMN_PROPERTY, row_tracking.COMMIT_VERSION_COLUMN_PROPERTY}
    configuration = {k: v for k, v in (table.metadata().configuration or {}).items()
                     if k not in dropped}
    new = Protocol.of_table(table).without(f)
    mark = row_tracking.state_at(log, table.version()).high_water_mark
    domain = row_tracking.domain_action(mark)
    domain["domainMetadata"]["removed"] = True
    commit(Transaction(
        uri=uri, read_version=table.version(), operation="DROP FEATURE",
        parameters={"featureName": name, "truncateHistory": "false"}, metrics={},
        actions=[new.action(), metadata.metadata_action(table, configuration=configuration),
                 domain], conflict_code="HW_DELTA_COMMIT_CONFLICT"))
    return new


def _remove_deletion_vectors(spark: SparkSession, uri: str, table: Any) -> bool:
    """delta-spark's DeletionVectorsPreDowngradeCommand: the property set to false, the
    files with deletion vectors purged. True when it had something to do."""
    changed = False
    config = dict(table.metadata().configuration or {})
    if any(k.lower() == DV_PROPERTY.lower() and str(v).strip().lower() == "true"
           for k, v in config.items()):
        def disable(meta: dict[str, Any]) -> dict[str, Any]:
            meta["configuration"] = {
                **{k: v for k, v in meta["configuration"].items()
                   if k.lower() != DV_PROPERTY.lower()}, DV_PROPERTY: "false"}
            return meta
        metadata.change_metadata(uri, "SET TBLPROPERTIES",
                                 {"properties": json.dumps({DV_PROPERTY: "false"})}, disable)
        changed = True
    if deletion_vector_paths(DeltaLog(uri).table()):
        purge(spark, uri)
        changed = True
    return changed


def _remove_type_widening(spark: SparkSession, uri: str, table: Any) -> bool:
    """delta-spark's TypeWideningPreDowngradeCommand: ``delta.enableTypeWidening`` unset, the
    files written before a type change rewritten in the table's types (REORG, as its
    REWRITE_TYPE_WIDENING), then the fields' ``delta.typeChanges`` removed from the schema in
    one metadata commit. True when it rewrote files or removed type changes. What would stop it (a table Spark
    cannot rewrite, row tracking, whose row ids a rewrite would lose) is refused before the
    first commit."""
    config = dict(table.metadata().configuration or {})
    keys = [k for k in config if k.lower() == TYPE_WIDENING_PROPERTY.lower()]
    changed = type_widening.has_type_changes(json.loads(table.schema().to_json()))
    if not changed and not any(str(config[k]).strip().lower() == "true" for k in keys):
        return False  # delta-spark's TypeWideningTableFeature.validateDropInvariants
    stale: set[str] = set()
    if changed:
        snapshot = reorg_snapshot(uri, _DROP_TYPE_WIDENING)
        stale = {f.log_path for f in type_widening.files_with_other_types(snapshot)}
        if stale:
            row_tracking.refuse_rewrite(snapshot.table.protocol(), uri, _DROP_TYPE_WIDENING)
    if keys:
        def unset(meta: dict[str, Any]) -> dict[str, Any]:
            meta["configuration"] = {k: v for k, v in meta["configuration"].items()
                                     if k not in keys}
            return meta
        metadata.change_metadata(uri, "UNSET TBLPROPERTIES", {
            "properties": json.dumps(keys), "ifExists": "true"}, unset)
    if stale:
        reorg(spark, uri, lambda f: f.log_path in stale, label=_DROP_TYPE_WIDENING)
    if changed:  # delta-spark's UpdateColumnMetadata("DROP FEATURE", the fields changed)
        _, fields = type_widening.without_type_changes(
            json.loads(DeltaLog(uri).table().schema().to_json()))

        def clean(meta: dict[str, Any]) -> dict[str, Any]:
            schema, _ = type_widening.without_type_changes(json.loads(meta["schemaString"]))
            meta["schemaString"] = json.dumps(schema, separators=(",", ":"))
            return meta
        metadata.change_metadata(uri, "DROP FEATURE", {"columns": json.dumps(fields)}, clean)
    return changed  # as delta-spark's: files rewritten or metadata removed (not the unset)


def _uses_deletion_vectors(actions: list[dict[str, Any]]) -> bool:
    """A commit that adds or removes a file with a deletion vector."""
    return any((a.get("add") or a.get("remove") or {}).get("deletionVector") for a in actions)


def _uses_type_widening(actions: list[dict[str, Any]]) -> bool:
    """A commit whose metaData records type changes (delta-spark's
    TypeWideningTableFeature.actionUsesFeature)."""
    return any(type_widening.has_type_changes(json.loads(a["metaData"]["schemaString"]))
               for a in actions if "metaData" in a)


def _first_version_after(log: DeltaLog, latest: int, cutoff_ms: int,
                         spec: HistoryFeature) -> int | None:
    """The first version of the history newer than ``cutoff_ms`` (latest + 1 when all are
    older), or None when one of those versions uses the feature (a trace a reader of that
    version needs the feature for), or the version before it, which the truncated log starts
    from (its checkpoint), still does."""
    version = latest
    while version >= 0:
        actions = log.read_commit(version)
        if actions is None:
            break  # cleaned up already: the log starts after it
        if _commit_time(log, version, actions) < cutoff_ms:
            break
        if spec.commit_uses(actions):
            return None
        version -= 1
    if 0 <= version < latest and _state_uses(log, version, spec):
        return None
    return version + 1


def _state_uses(log: DeltaLog, version: int, spec: HistoryFeature) -> bool:
    """True when the table's state at ``version`` uses the feature; False when that version
    cannot be read any more (no reader can time travel to it either)."""
    try:
        table = DeltaLog(log.uri).table(version)
    except Exception:  # noqa: BLE001 - deltalake cannot rebuild it: nothing to protect
        return False
    return spec.state_uses(table)


def _commit_time(log: DeltaLog, version: int, actions: list[dict[str, Any]]) -> int:
    for action in actions:
        info = action.get("commitInfo")
        if info is not None:
            stamp = info.get("inCommitTimestamp") or info.get("timestamp")
            if stamp is not None:
                return int(stamp)
    mtime = log.commit_mtime(version)
    return 0 if mtime is None else mtime // 1_000_000


def _truncate_before(log: DeltaLog, boundary: int) -> None:
    """A checkpoint at version ``boundary - 1``, then every log file of an older version
    deleted: the history before the retention period is gone, as TRUNCATE HISTORY says."""
    kept = boundary - 1
    DeltaLog(log.uri).table(kept).create_checkpoint()
    folder = f"{log.root}/{DELTA_LOG}"
    for info in log.fs.get_file_info(pafs.FileSelector(folder, recursive=False)):
        name = info.path.rsplit("/", 1)[-1].lstrip(".")  # .N.json.crc: Hadoop's checksums
        prefix = name[:20]
        if len(name) > 20 and prefix.isdigit() and int(prefix) < kept:
            log.fs.delete_file(info.path)


def _retention_text(table: Any) -> str:
    return str((table.metadata().configuration or {}).get(TRUNCATE_RETENTION_PROPERTY,
                                                          "24 hours"))


def _wait_error(name: str, retention: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_DELTA_PROTOCOL_INVALID",
        f"Dropping {name} was partially successful. The feature is now no longer used in the "
        "current version of the table. However, the feature is still present in historical "
        "versions of the table. The table feature cannot be dropped from the table protocol "
        "until these historical versions have expired.",
        f"Readers of older versions need the feature; {TRUNCATE_RETENTION_PROPERTY} = "
        f"{retention}.",
        "Wait for the historical versions to expire, then repeat this command.",
        error_class="DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD")


_TYPE_WIDENING = HistoryFeature(
    _remove_type_widening, _uses_type_widening,
    lambda table: type_widening.has_type_changes(json.loads(table.schema().to_json())),
    "to rewrite the files written before a type change and remove the type changes from "
    "the schema", "record type changes in their schema")
# The reader-writer features headwater drops WITH TRUNCATE HISTORY, by name.
HISTORY_FEATURES: dict[str, HistoryFeature] = {
    DELETION_VECTORS: HistoryFeature(
        _remove_deletion_vectors, _uses_deletion_vectors,
        lambda table: bool(deletion_vector_paths(table)), "to purge the deletion vectors",
        "use deletion vectors"),
    "typeWidening": _TYPE_WIDENING,
    "typeWidening-preview": _TYPE_WIDENING,
}
