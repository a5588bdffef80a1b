"""Auto-compaction: ``delta.autoOptimize.autoCompact=true`` compacts a table's small files after
a write commits, as delta-spark's auto compaction does.

A stream writing every few seconds leaves one small file per micro-batch (about 17,000 a day at
5 s batches). When a commit leaves at least ``headwater.autoCompact.minNumFiles`` files (default
50, as delta-spark's ``spark.databricks.delta.autoCompact.minNumFiles``) smaller than
``headwater.autoCompact.maxFileSize`` (default 128 MiB), delta-rs's OPTIMIZE compacts them. Its
commit carries dataChange=false: streams reading the table skip it, so no row is read twice.
The write has committed already; a failed compaction is logged, never raised.

Writers may pass a default for tables that do not set the property: ``headwater run`` turns
auto-compaction on for every table its pipeline writes (the ``auto_compact`` pipeline setting,
default true). The table property, when set, wins either way.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.conf.layout import (
    AUTO_COMPACT_MAX_FILE_SIZE_PROPERTY,
    AUTO_COMPACT_MIN_FILES_PROPERTY,
    AUTO_COMPACT_PROPERTY,
)
from headwater.conf.options import parse_int, parse_size
from headwater.delta import physical_names, row_tracking
from headwater.delta.log import add_actions
from headwater.errors import HeadwaterError

log = logging.getLogger("headwater.delta.autocompact")

DEFAULT_MIN_FILES = 50
DEFAULT_MAX_FILE_SIZE = 128 << 20


def enabled(configuration: dict[str, str] | None, default: bool = False) -> bool:
    """Whether auto-compaction is on for a table with these properties: the table property
    ``delta.autoOptimize.autoCompact`` when set (delta-spark's value ``auto`` counts as true),
    else ``default`` (the writer's setting; False outside ``headwater run``)."""
    value = (configuration or {}).get(AUTO_COMPACT_PROPERTY)
    if value is None:
        return default
    # Read after a write committed: a bad value must not fail that write, so only "true" and
    # "auto" turn it on (ALTER TABLE ... SET TBLPROPERTIES is where values get checked).
    return value.strip().lower() in ("true", "auto")


def compact_if_due(table: Any, default: bool = False,
                   settings_of: Any = None) -> dict[str, Any] | None:
    """Compact ``table`` (a deltalake DeltaTable at its latest version) when auto-compaction is
    on (see :func:`enabled`; ``default`` applies when the table does not say) and it has
    enough small files. Returns OPTIMIZE's metrics, or None when nothing ran.

    settings_of: the table whose properties decide (default ``table``): an AUTO CDC state
    table follows its target's."""
    config = (settings_of or table).metadata().configuration or {}
    if not enabled(config, default):
        return None
    if physical_names.mode_of(table.metadata().configuration) != "none":
        log.info("Auto-compaction of %s skipped: the table uses column mapping, which "
                 "delta-rs' compaction does not write", table.table_uri)
        return None
    if row_tracking.FEATURE in (table.protocol().writer_features or []):
        log.info("Auto-compaction of %s skipped: the table has row tracking, whose row ids "
                 "a compaction must keep (headwater's does not)", table.table_uri)
        return None
    try:
        min_files, max_size = _limits(config)
    except HeadwaterError as exc:
        log.warning("Auto-compaction of %s skipped: %s", table.table_uri, exc)
        return None
    sizes = add_actions(table).column("size_bytes").to_pylist()
    if sum(1 for size in sizes if size < max_size) < min_files:
        return None
    try:
        return dict(table.optimize.compact(target_size=max_size))
    except Exception as exc:  # noqa: BLE001 - the write committed; compaction waits for later
        log.warning("Auto-compaction of %s failed (it is retried after the next commit): %s",
                    table.table_uri, exc)
        return None


def _limits(config: dict[str, str]) -> tuple[int, int]:
    min_files = parse_int(AUTO_COMPACT_MIN_FILES_PROPERTY,
                          config.get(AUTO_COMPACT_MIN_FILES_PROPERTY), DEFAULT_MIN_FILES,
                          minimum=2)
    max_size = parse_size(AUTO_COMPACT_MAX_FILE_SIZE_PROPERTY,
                          config.get(AUTO_COMPACT_MAX_FILE_SIZE_PROPERTY), DEFAULT_MAX_FILE_SIZE)
    return min_files, max_size
