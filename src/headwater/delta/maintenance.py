"""Table maintenance through delta-rs: OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY / DETAIL.

Results carry delta-spark's names (the SQL layer turns them into DataFrames). OPTIMIZE commits
with dataChange=false, so streams reading the table see no duplicates. VACUUM keeps delta's
7-day default and, unlike delta-spark, refuses to delete files a named stream still needs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from headwater.delta.clustering import clustering_columns
from headwater.delta.log import DeltaLog, add_actions, normalize_uri
from headwater.errors import HeadwaterError

DEFAULT_RETENTION_HOURS = 168
HISTORY_COLUMNS = ["version", "timestamp", "userId", "userName", "operation",
                   "operationParameters", "job", "notebook", "clusterId", "readVersion",
                   "isolationLevel", "isBlindAppend", "operationMetrics", "userMetadata",
                   "engineInfo"]
DETAIL_COLUMNS = ["format", "id", "name", "description", "location", "createdAt",
                  "lastModified", "partitionColumns", "clusteringColumns", "numFiles",
                  "sizeInBytes", "properties", "minReaderVersion", "minWriterVersion",
                  "tableFeatures", "statistics"]
PartitionFilter = tuple[str, str, Any]


def _table(path: str):
    return DeltaLog(normalize_uri(path)).table()


def _failed(operation: str, uri: str, exc: Exception) -> HeadwaterError:
    return HeadwaterError(
        "HW_DELTA_OPERATION_FAILED", f"{operation} on {uri} failed in delta-rs: {exc}.",
        "headwater runs table maintenance through deltalake (delta-rs).",
        "Check the table's features and the message above; the table is unchanged.")


def partition_filters(where: str | Iterable[PartitionFilter] | None,
                      partition_columns: list[str], uri: str) -> list[PartitionFilter] | None:
    """``where`` as delta-rs partition filters [(col, op, value)]. SQL text is read with
    Spark's parser (active session): ANDs of ``col <op> literal`` / ``col IN (...)`` over
    partition columns only, as delta-spark's OPTIMIZE ... WHERE allows."""
    if where is None:
        return None
    if not isinstance(where, str):
        return [tuple(f) for f in where]  # type: ignore[misc]
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    problem = HeadwaterError(
        "HW_OPTIMIZE_WHERE_NOT_PARTITION",
        f"OPTIMIZE {uri} WHERE {where}: only conditions on partition columns "
        f"({', '.join(partition_columns) or 'none: the table is not partitioned'}) can "
        "choose what to compact.",
        "OPTIMIZE rewrites whole partitions; delta-spark has the same rule.",
        "Use ANDs of comparisons of partition columns with literals, e.g. date = '2024-01-01'.")
    if spark is None:
        raise problem
    tree = spark._jsparkSession.sessionState().sqlParser().parseExpression(where)
    ops = {"EqualTo": "=", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<",
           "LessThanOrEqual": "<=", "Not": "!=", "In": "in"}
    by_lower = {c.lower(): c for c in partition_columns}
    out: list[PartitionFilter] = []

    def kids(node):
        return [node.children().apply(i) for i in range(node.children().size())]

    def literal(node) -> str:
        if node.getClass().getSimpleName() != "Literal" or node.value() is None:
            raise problem
        return str(node.value().toString() if hasattr(node.value(), "toString")
                   else node.value())

    def column(node) -> str:
        if node.getClass().getSimpleName() != "UnresolvedAttribute":
            raise problem
        name = str(node.name()).strip("`").lower()
        if name not in by_lower:
            raise problem
        return by_lower[name]

    def walk(node) -> None:
        kind = node.getClass().getSimpleName()
        if kind == "And":
            for k in kids(node):
                walk(k)
        elif kind == "In":
            items = kids(node)
            out.append((column(items[0]), "in", [literal(k) for k in items[1:]]))
        elif kind == "Not" and kids(node)[0].getClass().getSimpleName() == "EqualTo":
            a, b = kids(kids(node)[0])
            out.append((column(a), "!=", literal(b)))
        elif kind in ops and kind != "Not":
            a, b = kids(node)
            out.append((column(a), ops[kind], literal(b)))
        else:
            raise problem

    walk(tree)
    return out


def optimize(path: str, where: str | Iterable[PartitionFilter] | None = None,
             zorder_by: list[str] | None = None, target_size: int | None = None
             ) -> dict[str, Any]:
    """Compact small files (or Z-order them by ``zorder_by``) with dataChange=false.

    where: a partition predicate (SQL text or delta-rs filters) limiting the partitions.
    target_size: bytes per output file (delta-rs default, or delta.targetFileSize).
    Returns delta-spark's metrics: numFilesAdded, numFilesRemoved, filesAdded, filesRemoved,
    partitionsOptimized, numBatches, totalConsideredFiles, totalFilesSkipped.
    """
    table = _table(path)
    filters = partition_filters(where, list(table.metadata().partition_columns), table.table_uri)
    try:
        if zorder_by:
            return dict(table.optimize.z_order(list(zorder_by), partition_filters=filters,
                                               target_size=target_size))
        return dict(table.optimize.compact(partition_filters=filters, target_size=target_size))
    except Exception as exc:  # noqa: BLE001
        raise _failed("OPTIMIZE", table.table_uri, exc) from exc


def vacuum(path: str, retention_hours: float | None = None, dry_run: bool = False,
           enforce_retention: bool = True,
           oldest_version_needed: int | Mapping[str, int] | None = None,
           checkpoints_root: str | None = None) -> list[str]:
    """Delete files no version within ``retention_hours`` (default 168) references.

    Refuses less than 168 hours unless ``enforce_retention=False``. dry_run: only list them.
    oldest_version_needed: the oldest table version a reader still reads, or {reader name:
    version}; a file one of them still needs makes the whole VACUUM an error naming the
    reader. checkpoints_root: a folder of Spark checkpoints whose Delta source offsets name
    more readers (default: ``<lakehouse root>/_checkpoints`` of the active session's
    lakehouse, if any). Returns the files deleted (or to delete).
    """
    table = _table(path)
    hours = DEFAULT_RETENTION_HOURS if retention_hours is None else retention_hours
    if hours < DEFAULT_RETENTION_HOURS and enforce_retention:
        raise HeadwaterError(
            "HW_VACUUM_RETENTION_TOO_SHORT",
            f"VACUUM {table.table_uri} RETAIN {hours:g} HOURS is below the safe minimum of "
            f"{DEFAULT_RETENTION_HOURS} hours.",
            "Readers and writers still working on older versions would lose their files.",
            "Keep the default, or pass enforce_retention=False if no reader can be older.")
    try:
        candidates = table.vacuum(retention_hours=int(hours), dry_run=True,
                                  enforce_retention_duration=False)
    except Exception as exc:  # noqa: BLE001
        raise _failed("VACUUM", table.table_uri, exc) from exc
    readers = ({"a reader": oldest_version_needed} if isinstance(oldest_version_needed, int)
               else dict(oldest_version_needed or {}))
    root = checkpoints_root or _lakehouse_checkpoints()
    if root and candidates:
        readers.update(stream_positions(root, table.metadata().id))
    if readers and candidates:
        _check_readers(table, candidates, readers)
    if dry_run or not candidates:
        return list(candidates)
    try:
        return list(table.vacuum(retention_hours=int(hours), dry_run=False,
                                 enforce_retention_duration=False))
    except Exception as exc:  # noqa: BLE001
        raise _failed("VACUUM", table.table_uri, exc) from exc


def _check_readers(table, candidates: list[str], readers: dict[str, int]) -> None:
    """A reader at version v needs every file removed after v: refuse deleting one."""
    from urllib.parse import unquote

    log = DeltaLog(normalize_uri(table.table_uri))
    doomed = {unquote(p) for p in candidates}
    latest = table.version()
    for name, version in sorted(readers.items(), key=lambda kv: kv[1]):
        for v in range(int(version) + 1, latest + 1):
            for action in log.read_commit(v) or []:
                # a file removed after the reader's version, or change data it will read
                removed = action.get("remove") or action.get("cdc")
                if removed and unquote(removed["path"]) in doomed:
                    raise HeadwaterError(
                        "HW_VACUUM_READER_NEEDS_FILES",
                        f"VACUUM {table.table_uri} would delete {removed['path']}, which "
                        f"{name} still needs: it reads from version {version}, and the file "
                        f"belongs to version {v}.",
                        "Deleting it would make that reader fail (or silently skip rows).",
                        f"Let {name} catch up (or stop it for good), or keep a longer "
                        "retention.")


def _lakehouse_checkpoints() -> str | None:
    """``<state>/_checkpoints`` of the lakehouse attached to the active session (its state
    folder is in the session conf, so this room needs no lakehouse import)."""
    from pyspark.sql import SparkSession

    from headwater.conf.context import lakehouse_state_dir
    from headwater.conf.layout import CHECKPOINTS

    spark = SparkSession.getActiveSession()
    root = lakehouse_state_dir(spark) if spark is not None else None
    return f"{root.rstrip('/')}/{CHECKPOINTS}" if root else None


def stream_positions(checkpoints_root: str, table_id: str) -> dict[str, int]:
    """{stream: oldest version it still reads} for every Spark checkpoint under
    ``checkpoints_root`` (any depth) whose Delta source offsets name table ``table_id``.

    A stream resumes from the start of its last planned batch when that batch has no commit
    yet: then the two newest offset files count, and the oldest of their versions wins."""
    from pathlib import Path

    out: dict[str, int] = {}
    base = Path(checkpoints_root)
    if not base.is_dir():
        return out
    for offsets in sorted(base.rglob("offsets")):
        if not offsets.is_dir():
            continue
        batches = sorted(int(f.name) for f in offsets.iterdir() if f.name.isdigit())
        versions = []
        done = batches and (offsets.parent / "commits" / str(batches[-1])).exists()
        for batch in batches[-1:] if done else batches[-2:]:
            for line in (offsets / str(batch)).read_text().splitlines()[2:]:
                try:
                    offset = json.loads(line)
                except ValueError:
                    continue  # "-": a source without an offset yet
                if isinstance(offset, dict) and offset.get("reservoirId") == table_id:
                    # inside snapshot V it needs V's files; before commit V, V-1's
                    version = int(offset["reservoirVersion"])
                    versions.append(version if offset.get("isStartingVersion") else version - 1)
        if versions:
            name = f"the stream with checkpoint {offsets.parent.relative_to(base.parent)}"
            out[name] = min(versions)
    return out


def restore(path: str, version: int | None = None,
            timestamp: str | dt.datetime | None = None) -> dict[str, Any]:
    """Restore the table to ``version`` or ``timestamp`` (one of the two) as a new commit.
    Returns delta-spark's metrics (num_removed_files, num_restored_files, ...)."""
    if (version is None) == (timestamp is None):
        raise HeadwaterError("HW_DML_INVALID", "RESTORE needs exactly one of version or "
                             "timestamp.", "It names the state to go back to.",
                             "Pass version=3 or timestamp='2024-01-01 00:00:00'.")
    table = _table(path)
    target: Any = version
    if timestamp is not None:
        target = timestamp if isinstance(timestamp, dt.datetime) else \
            dt.datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
        if target.tzinfo is None:
            target = target.replace(tzinfo=dt.UTC)
    try:
        metrics = dict(table.restore(target))
    except Exception as exc:  # noqa: BLE001
        raise HeadwaterError(
            "HW_DELTA_VERSION_NOT_FOUND",
            f"RESTORE of {table.table_uri} to {target} failed: {exc}.",
            "The version must exist in the retained log and its files must not be vacuumed.",
            "Pick a version listed by history().") from exc
    after = _table(path)
    sizes = pa_sizes(after)
    return {"table_size_after_restore": sizes[1], "num_of_files_after_restore": sizes[0],
            "num_removed_files": metrics.get("numRemovedFile", 0),
            "num_restored_files": metrics.get("numRestoredFile", 0), "version": after.version()}


def pa_sizes(table) -> tuple[int, int]:
    actions = add_actions(table)
    sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
    return len(sizes), int(sum(sizes))


def history(path: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Newest first, one dict per commit with DESCRIBE HISTORY's columns."""
    table = _table(path)
    out = []
    for entry in table.history(limit):
        row = {c: None for c in HISTORY_COLUMNS}
        row.update({k: v for k, v in entry.items() if k in row})
        row["version"] = entry.get("version")
        ts = entry.get("timestamp")
        row["timestamp"] = (dt.datetime.fromtimestamp(ts / 1000, dt.UTC)
                            if isinstance(ts, (int, float)) else ts)
        for key in ("operationParameters", "operationMetrics"):
            row[key] = {k: v if isinstance(v, str) else json.dumps(v)
                        for k, v in (entry.get(key) or {}).items()}
        out.append(row)
    return out


def detail(path: str) -> dict[str, Any]:
    """DESCRIBE DETAIL's one row for the table."""
    table = _table(path)
    meta, protocol = table.metadata(), table.protocol()
    count, size = pa_sizes(table)
    last = table.history(1)
    features = sorted(set(protocol.reader_features or []) | set(protocol.writer_features or []))
    return {
        "format": "delta", "id": meta.id, "name": meta.name, "description": meta.description,
        "location": table.table_uri,
        "createdAt": dt.datetime.fromtimestamp(meta.created_time / 1000, dt.UTC)
        if meta.created_time else None,
        "lastModified": dt.datetime.fromtimestamp(last[0]["timestamp"] / 1000, dt.UTC)
        if last else None,
        "partitionColumns": list(meta.partition_columns),
        "clusteringColumns": clustering_columns(normalize_uri(path), table),
        "numFiles": count, "sizeInBytes": size,
        "properties": dict(meta.configuration or {}),
        "minReaderVersion": protocol.min_reader_version,
        "minWriterVersion": protocol.min_writer_version,
        "tableFeatures": features, "statistics": {},
    }
