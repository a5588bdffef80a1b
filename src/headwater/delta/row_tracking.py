"""Delta's row tracking (``rowTracking`` writer feature): row ids and row commit versions.

Delta's protocol ("Row Tracking"): on a table whose protocol lists ``rowTracking`` (and
``domainMetadata``), every writer gives each new ``add`` a ``baseRowId`` (the row id of its
first row: one above the ``delta.rowTracking`` domain's ``rowIdHighWaterMark``, which then
rises by the file's ``numRecords``) and a ``defaultRowCommitVersion`` (the commit's
version), repeats both in a ``remove`` or a re-added file, and commits the new high-water
mark. A row's id is its file's ``baseRowId`` plus its index in the file, unless the file has
a materialized row id column (named by ``delta.rowTracking.materializedRowIdColumnName``)
with a value for it; its commit version likewise.

Every commit headwater writes passes :func:`assign` (:func:`headwater.delta.commit.commit`
and a first write's version 0), so no write path can forget it. Rows a commit *rewrites*
keep their ids only through the materialized columns of the new files: UPDATE and DELETE
write them (:mod:`headwater.delta.dml.delete_update`); the other rewrites (MERGE, OPTIMIZE,
REORG) refuse tables with the feature (:func:`refuse_rewrite`), never giving rows new ids
silently.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

from headwater.delta.log import DeltaLog
from headwater.delta.snapshot_adds import checkpoint_at_or_before, snapshot_adds
from headwater.errors import HeadwaterError

FEATURE = "rowTracking"
FEATURES = ("rowTracking", "domainMetadata")
DOMAIN = "delta.rowTracking"
ENABLE_PROPERTY = "delta.enableRowTracking"
SUSPENDED_PROPERTY = "delta.rowTrackingSuspended"
ROW_ID_COLUMN_PROPERTY = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN_PROPERTY = "delta.rowTracking.materializedRowCommitVersionColumnName"
# delta-spark's MaterializedRowId / MaterializedRowCommitVersion name prefixes
_ROW_ID_PREFIX = "_row-id-col-"
_COMMIT_VERSION_PREFIX = "_row-commit-version-col-"
NO_HIGH_WATER_MARK = -1


def _true(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def enables(properties: dict[str, str] | None) -> bool:
    """``delta.enableRowTracking = true`` among ``properties``."""
    return any(k.lower() == ENABLE_PROPERTY.lower() and _true(v)
               for k, v in (properties or {}).items())


def supported(protocol: dict[str, Any] | None) -> bool:
    """The protocol action (log form) lists the rowTracking writer feature."""
    return bool(protocol) and FEATURE in (protocol.get("writerFeatures") or [])


def enabled(protocol: dict[str, Any] | None, configuration: dict[str, str] | None) -> bool:
    """Row tracking enabled: supported, and ``delta.enableRowTracking = true``."""
    return supported(protocol) and enables(configuration)


def with_column_names(configuration: dict[str, str]) -> dict[str, str]:
    """The configuration with the materialized column names delta-spark sets on a table that
    supports row tracking (kept when already there)."""
    out = dict(configuration)
    out.setdefault(ROW_ID_COLUMN_PROPERTY, _ROW_ID_PREFIX + str(uuid.uuid4()))
    out.setdefault(COMMIT_VERSION_COLUMN_PROPERTY, _COMMIT_VERSION_PREFIX + str(uuid.uuid4()))
    return out


def domain_action(high_water_mark: int) -> dict[str, Any]:
    config = json.dumps({"rowIdHighWaterMark": high_water_mark}, separators=(",", ":"))
    return {"domainMetadata": {"domain": DOMAIN, "configuration": config, "removed": False}}


@dataclass
class TableState:
    """What a commit on top of a version needs: its protocol and configuration (log form),
    and the row id high-water mark (-1 when no id was ever assigned)."""

    protocol: dict[str, Any] | None
    configuration: dict[str, str]
    high_water_mark: int

    def saw(self, actions: Iterable[dict[str, Any]]) -> None:
        """Move on past a commit written meanwhile (its actions)."""
        for action in actions:
            if "protocol" in action:
                self.protocol = action["protocol"]
            elif "metaData" in action:
                self.configuration = dict(action["metaData"].get("configuration") or {})
            elif _is_domain(action):
                self.high_water_mark = max(self.high_water_mark, _mark(action))


def _is_domain(action: dict[str, Any]) -> bool:
    domain = action.get("domainMetadata")
    return bool(domain) and domain.get("domain") == DOMAIN


def _mark(action: dict[str, Any]) -> int:
    domain = action["domainMetadata"]
    if domain.get("removed"):
        return NO_HIGH_WATER_MARK
    config = json.loads(domain.get("configuration") or "{}")
    return int(config.get("rowIdHighWaterMark", NO_HIGH_WATER_MARK))


# (table, version) -> (its commit file's mtime, its state), for the next commit on top of a
# commit written here (a stream's micro-batches): the log is not read again. The mtime tells
# a table written again at the same path (its versions start over) from the one remembered.
_STATES: OrderedDict[tuple[str, int], tuple[int | None, TableState]] = OrderedDict()
_STATES_KEPT = 512
_states_lock = threading.Lock()


def remember(log: DeltaLog, version: int, state: TableState, actions: list[dict[str, Any]]
             ) -> TableState:
    """Keep the state after commit ``version`` (``state``: before it; ``actions``: it) and
    return it. Best effort: the commit stands whatever happens here."""
    after = replace(state)
    after.saw(actions)
    try:
        stamp = log.commit_mtime(version)
    except OSError:
        return after
    with _states_lock:
        _STATES[(log.uri, version)] = (stamp, after)
        while len(_STATES) > _STATES_KEPT:
            _STATES.popitem(last=False)
    return after


def _known(log: DeltaLog, version: int) -> TableState | None:
    """The remembered state of ``version``, if its commit file is the one remembered."""
    with _states_lock:
        known = _STATES.get((log.uri, version))
    if known is None or known[0] is None:
        return None
    try:
        if log.commit_mtime(version) != known[0]:
            return None
    except OSError:
        return None
    return replace(known[1])


def state_at(log: DeltaLog, version: int) -> TableState:
    """The :class:`TableState` of ``version`` (-1: no table yet): remembered from a commit
    written here, else from the log: the commits newest first down to the newest
    checkpoint, then that checkpoint. Commits are looked at as text first: only the lines
    that matter are parsed."""
    known = _known(log, version)
    return known if known is not None else _read_state(log, version)


def _read_state(log: DeltaLog, version: int) -> TableState:
    protocol: dict[str, Any] | None = None
    configuration: dict[str, str] | None = None
    mark: int | None = None
    if version < 0:
        return TableState(None, {}, NO_HIGH_WATER_MARK)
    checkpoint = checkpoint_at_or_before(log, version)
    stop = -1 if checkpoint is None else checkpoint[0]
    for v in range(version, stop, -1):
        base = _known(log, v) if v < version and (log.uri, v) in _STATES else None
        if base is not None:  # an older state remembered here: the newer commits on top
            return TableState(protocol if protocol is not None else base.protocol,
                              configuration if configuration is not None
                              else base.configuration,
                              base.high_water_mark if mark is None else mark)
        text = log._read_text(log.commit_path(v))  # noqa: SLF001 - the log's own reader
        if text is None:
            break
        for line in text.splitlines():
            if protocol is None and line.startswith('{"protocol"'):
                protocol = json.loads(line)["protocol"]
            elif configuration is None and line.startswith('{"metaData"'):
                configuration = dict(json.loads(line)["metaData"].get("configuration") or {})
            elif mark is None and line.startswith('{"domainMetadata"') and DOMAIN in line:
                action = json.loads(line)
                if _is_domain(action):
                    mark = _mark(action)
        if protocol is not None and configuration is not None and not supported(protocol):
            return TableState(protocol, configuration, NO_HIGH_WATER_MARK)
        if protocol is not None and configuration is not None and mark is not None:
            break
    if checkpoint is not None and (protocol is None or configuration is None or mark is None):
        found = _from_checkpoint(log, checkpoint[1])
        protocol = protocol if protocol is not None else found[0]
        configuration = configuration if configuration is not None else found[1]
        mark = mark if mark is not None else found[2]
    return TableState(protocol, configuration or {},
                      NO_HIGH_WATER_MARK if mark is None else mark)


def _from_checkpoint(log: DeltaLog, files: list[str]
                     ) -> tuple[dict[str, Any] | None, dict[str, str] | None, int | None]:
    protocol: dict[str, Any] | None = None
    configuration: dict[str, str] | None = None
    mark: int | None = None
    for path in files:
        if path.endswith(".json"):  # a V2 checkpoint in JSON: its non-file actions inline
            with log.fs.open_input_stream(path) as stream:
                text = stream.read().decode("utf-8")
            for line in text.splitlines():
                if line.startswith('{"protocol"'):
                    protocol = json.loads(line)["protocol"]
                elif line.startswith('{"metaData"'):
                    configuration = dict(json.loads(line)["metaData"].get("configuration")
                                         or {})
                elif line.startswith('{"domainMetadata"') and DOMAIN in line:
                    action = json.loads(line)
                    if _is_domain(action):
                        mark = _mark(action)
            continue
        if not path.endswith(".parquet"):
            continue
        with log.fs.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            names = parquet.schema_arrow.names
            columns = [c for c in ("protocol", "metaData", "domainMetadata") if c in names]
            if not columns:
                continue
            table = parquet.read(columns=columns)
        for column in columns:
            for row in table.column(column).to_pylist():
                if not row:
                    continue
                if column == "protocol":
                    protocol = {k: v for k, v in row.items() if v is not None}
                elif column == "metaData":
                    config = row.get("configuration") or {}
                    configuration = dict(config) if not isinstance(config, dict) else config
                elif row.get("domain") == DOMAIN:
                    mark = _mark({"domainMetadata": row})
    return protocol, configuration, mark


def assign(actions: list[dict[str, Any]], state: TableState, version: int,
           uri: str) -> list[dict[str, Any]]:
    """``actions`` as a commit at ``version`` on top of ``state`` must write them: when the
    resulting protocol supports row tracking (and it is not suspended), each add without a
    ``baseRowId`` gets the next ids and ``defaultRowCommitVersion = version``, a metaData
    gets the materialized column names, and the new high-water mark is committed. Removes
    and re-adds of known files keep the fields the caller copied from their add actions."""
    protocol = next((a["protocol"] for a in actions if "protocol" in a), state.protocol)
    meta = next((a["metaData"] for a in actions if "metaData" in a), None)
    configuration = state.configuration if meta is None else (meta.get("configuration") or {})
    if not supported(protocol) or _true(configuration.get(SUSPENDED_PROPERTY, "false")):
        return actions
    mark = state.high_water_mark
    out: list[dict[str, Any]] = []
    for action in actions:
        if "add" in action and action["add"].get("baseRowId") is None:
            add = dict(action["add"])
            records = _num_records(add, uri)
            add["baseRowId"] = mark + 1
            if add.get("defaultRowCommitVersion") is None:  # delta-rs writes explicit nulls
                add["defaultRowCommitVersion"] = version
            mark += records
            action = {"add": add}
        elif "add" in action and action["add"].get("defaultRowCommitVersion") is None:
            action = {"add": {**action["add"], "defaultRowCommitVersion": version}}
        elif "metaData" in action:
            meta = dict(action["metaData"])
            meta["configuration"] = with_column_names(dict(meta.get("configuration") or {}))
            action = {"metaData": meta}
        elif _is_domain(action):
            mark = max(mark, _mark(action))
            continue  # written once below, with the final mark
        out.append(action)
    if mark != state.high_water_mark or any(_is_domain(a) for a in actions):
        out.append(domain_action(mark))
    return out


def removes_with_ids(actions: list[dict[str, Any]], log: DeltaLog, version: int
                     ) -> list[dict[str, Any]]:
    """``actions`` with each remove repeating the ``baseRowId`` / ``defaultRowCommitVersion``
    of its file's add at ``version`` (the protocol's rule for removes), read from the log
    (deltalake's listing does not report them)."""
    if not any("remove" in a and a["remove"].get("baseRowId") is None for a in actions):
        return actions
    by_path = {unquote(a["path"]): a for a in snapshot_adds(log, log.table(version))}
    out = []
    for action in actions:
        if "remove" in action and action["remove"].get("baseRowId") is None:
            add = by_path.get(unquote(action["remove"]["path"]), {})
            fields = {k: add[k] for k in ("baseRowId", "defaultRowCommitVersion")
                      if add.get(k) is not None}
            action = {"remove": {**action["remove"], **fields}}
        out.append(action)
    return out


def _num_records(add: dict[str, Any], uri: str) -> int:
    stats = json.loads(add.get("stats") or "{}")
    if "numRecords" not in stats:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"A file committed to {uri} ({add['path']}) has no numRecords statistic, which "
            "the table's rowTracking feature needs to give its rows ids.",
            "Row tracking assigns each file's rows the ids baseRowId .. baseRowId + "
            "numRecords - 1; without the count the ids cannot be reserved.",
            "Write with statistics (the default), or drop the rowTracking feature.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    return int(stats["numRecords"])


def refuse_rewrite(protocol: Any, uri: str, operation: str) -> None:
    """Refuse ``operation``, which rewrites existing rows into new files, on a table with
    row tracking (``protocol``: a deltalake protocol): headwater does not write the
    materialized row id / row commit version columns that would keep the rows' ids."""
    if FEATURE not in (getattr(protocol, "writer_features", None) or []):
        return
    raise HeadwaterError(
        "HW_DELTA_UNSUPPORTED_FEATURE",
        f"{operation} on {uri} is not supported: the table has the rowTracking feature and "
        f"{operation} rewrites existing rows into new files.",
        "Row tracking keeps a row's id and commit version when its file is rewritten, by "
        "writing them into the new files' materialized row tracking columns; headwater does "
        "not write those columns yet, and giving the rows new ids would break every reader "
        "that tracks them.",
        "Run the statement with delta-spark, or drop the feature first (ALTER TABLE t DROP "
        "FEATURE rowTracking). Appends, streams, overwrites, RESTORE and reads work.",
        error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
