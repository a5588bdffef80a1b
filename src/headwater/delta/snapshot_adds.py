"""A snapshot's add actions exactly as the log holds them (stats JSON, deletion vector, tags).

deltalake 1.6.6 lists a snapshot's files (``get_add_actions``) with parsed stats but without
their deletion vector descriptors, tags or row-tracking fields, which a commit that re-adds
or removes those very files must repeat (RESTORE: a file is the pair (path, deletion vector)).
So deltalake says *which* files are live at a version (it handles every checkpoint kind and
log replay), and their actions are read back from the log here: the newest add of each path
in the commits down to the newest checkpoint at or before that version, then that checkpoint
(classic, multi-part, or v2 with its sidecars). A live file found nowhere (a log whose
checkpoint is unreadable here) is described from deltalake's listing when it has no deletion
vector, else the snapshot cannot be read exactly: HW_DELTA_UNREADABLE.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from headwater.conf.layout import DELTA_LOG
from headwater.delta.log import DeltaLog, add_actions, deletion_vector_paths, resolve_file
from headwater.delta.schema import format_partition_value
from headwater.errors import HeadwaterError


def dv_id(descriptor: dict[str, Any] | None) -> str | None:
    """delta-spark's unique id of a deletion vector (``legacyUniqueIdExpression``): storage
    type and path or inline data, with the offset; None for no vector."""
    if not descriptor:
        return None
    ident = f"{descriptor.get('storageType')}{descriptor.get('pathOrInlineDv')}"
    offset = descriptor.get("offset")
    return ident if offset is None else f"{ident}@{offset}"


def file_key(add: dict[str, Any]) -> tuple[str, str | None]:
    """What makes two add actions the same file: (decoded path, deletion vector id)."""
    return unquote(add["path"]), dv_id(add.get("deletionVector"))


def snapshot_adds(log: DeltaLog, table: Any) -> list[dict[str, Any]]:
    """The add actions of every live file of ``table`` (a deltalake snapshot of ``log``'s
    table, at any version), as the log wrote them."""
    listed = add_actions(table).to_pylist()
    wanted = {unquote(row["path"]): row for row in listed}
    found: dict[str, dict[str, Any]] = {}
    version = table.version()
    checkpoint = checkpoint_at_or_before(log, version)
    for v in range(version, (-1 if checkpoint is None else checkpoint[0]), -1):
        actions = log.read_commit(v)
        if actions is None:
            break  # cleaned up: the checkpoint (or deltalake's listing) has the rest
        _take(found, wanted, (a["add"] for a in actions if "add" in a))
        if len(found) == len(wanted):
            break
    if len(found) < len(wanted) and checkpoint is not None:
        _take(found, wanted, _checkpoint_adds(log, checkpoint[1]))
    missing = [p for p in wanted if p not in found]
    if missing:
        with_dv = {unquote(p) for p in deletion_vector_paths(table)}
        root = log.root
        for path in missing:
            if resolve_file(root, path) in with_dv or path in with_dv:
                raise HeadwaterError(
                    "HW_DELTA_UNREADABLE",
                    f"The add action of {path} (version {version} of {log.uri}) with its "
                    "deletion vector was not found in the log.",
                    "A commit that re-adds or removes a file must name its deletion vector, "
                    "which only the log's own add action holds.",
                    "Checkpoint the table with the writer that wrote it, or pick a newer "
                    "version.")
            found[path] = _from_listing(wanted[path], list(table.metadata().partition_columns))
    return [found[p] for p in wanted]


def _take(found: dict[str, dict[str, Any]], wanted: dict[str, Any],
          adds: Iterable[dict[str, Any]]) -> None:
    """Keep the first add seen of each wanted path (callers go newest first)."""
    for add in adds:
        path = unquote(add["path"])
        if path in wanted and path not in found:
            found[path] = add


def checkpoint_at_or_before(log: DeltaLog, version: int) -> tuple[int, list[str]] | None:
    """(version, files) of the newest checkpoint at or before ``version``; None when none."""
    try:
        infos = log.fs.get_file_info(pafs.FileSelector(f"{log.root}/{DELTA_LOG}"))
    except FileNotFoundError:
        return None
    by_version: dict[int, list[str]] = {}
    for info in infos:
        name = info.base_name
        head, _, rest = name.partition(".checkpoint")
        if not rest or not head.isdigit() or not rest.endswith((".parquet", ".json")):
            continue
        by_version.setdefault(int(head), []).append(info.path)
    eligible = [v for v in by_version if v <= version]
    if not eligible:
        return None
    best = max(eligible)
    return best, sorted(by_version[best])


def _checkpoint_adds(log: DeltaLog, files: list[str]) -> Iterator[dict[str, Any]]:
    """The add actions of a checkpoint's files (and of a v2 checkpoint's sidecars)."""
    for path in files:
        if path.endswith(".json"):  # a v2 checkpoint written as JSON
            text = log.fs.open_input_stream(path).read().decode("utf-8")
            actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            yield from (a["add"] for a in actions if "add" in a)
            for sidecar in (a["sidecar"] for a in actions if "sidecar" in a):
                yield from _parquet_adds(log, _sidecar_path(log, sidecar["path"]))
            continue
        yield from _parquet_adds(log, path)
        with log.fs.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            if "sidecar" in parquet.schema_arrow.names:
                for sidecar in parquet.read(columns=["sidecar"]).column(0).to_pylist():
                    if sidecar:
                        yield from _parquet_adds(log, _sidecar_path(log, sidecar["path"]))


def _sidecar_path(log: DeltaLog, path: str) -> str:
    return path if "/" in path else f"{log.root}/{DELTA_LOG}/_sidecars/{path}"


def _parquet_adds(log: DeltaLog, path: str) -> Iterator[dict[str, Any]]:
    with log.fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        if "add" not in parquet.schema_arrow.names:
            return
        rows = parquet.read(columns=["add"]).column(0).to_pylist()
    for row in rows:
        if row:
            yield _as_json_action(row)


def _as_json_action(row: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's add struct as the JSON action (maps as objects, absent fields left
    out; parsed stats are dropped: ``stats`` keeps the JSON form)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None or key in ("stats_parsed", "partitionValues_parsed"):
            continue
        if key in ("partitionValues", "tags") and isinstance(value, list):
            value = dict(value)
        out[key] = value
    out.setdefault("partitionValues", {})
    return out


def _from_listing(row: dict[str, Any], partition_columns: list[str]) -> dict[str, Any]:
    """An add action rebuilt from deltalake's listing (path, size, partition values, the
    stats it parsed)."""
    values = row.get("partition") or {}
    stats: dict[str, Any] = {}
    if row.get("num_records") is not None:
        stats["numRecords"] = int(row["num_records"])
    for key, column in (("minValues", "min"), ("maxValues", "max"), ("nullCount", "null_count")):
        if row.get(column):
            stats[key] = {k: _jsonable(v) for k, v in row[column].items() if v is not None}
    return {"path": row["path"], "size": int(row["size_bytes"]),
            "partitionValues": {c: format_partition_value(values.get(c))
                                for c in partition_columns},
            "modificationTime": int(row["modification_time"] or 0), "dataChange": True,
            **({"stats": json.dumps(stats, separators=(",", ":"))} if stats else {})}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, (int, float, str, bool)):
        return value
    return str(value)
