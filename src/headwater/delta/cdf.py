"""Reading Delta's change data feed (``readChangeFeed``), batch and streaming, delta-spark's way.

Rows are the table's columns plus ``_change_type`` (insert / update_preimage /
update_postimage / delete), ``_commit_version`` and ``_commit_timestamp``. Per commit:
- a commit with ``cdc`` actions: its ``_change_data`` files are the changes (its adds and
  removes are ignored, they hold the same rows);
- otherwise its adds with dataChange=true are inserts and its removes with dataChange=true are
  whole-file deletes; dataChange=false commits (OPTIMIZE) contribute nothing.
Every commit read must have ``delta.enableChangeDataFeed=true`` in force, as delta-spark checks.

The stream reuses the plain source's planner (offsets, read limits, AvailableNow, restarts):
:class:`ChangeFeedPlanner` only changes what a commit (or the starting snapshot) contributes.
``_commit_timestamp`` is the commit's ``commitInfo.timestamp`` (the file time when missing), as
delta-rs' ``load_cdf`` gives it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from headwater.conf.options import parse_int
from headwater.delta.files import read_entries
from headwater.delta.log import DeltaLog, FileEntry, deletion_vectors, resolve_file, to_millis
from headwater.delta.schema import arrow_schema, parse_partition_value
from headwater.delta.source import (
    MACHINE_PARALLELISM,
    DeltaInputPartition,
    DeltaStreamReader,
    Offset,
    SourceOptions,
    SourcePlanner,
    _parse_timestamp,
    split_entries,
)
from headwater.errors import HeadwaterError

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDF_PROPERTY = "delta.enableChangeDataFeed"


@dataclass(frozen=True)
class ChangeFile(FileEntry):
    """A file of the change feed. ``change_type`` None: a ``_change_data`` file whose rows
    carry their own ``_change_type``; otherwise every row of the file has this change."""

    change_type: str | None = None
    commit_ms: int = 0


def change_feed_schema(table_schema: StructType) -> StructType:
    """The table's columns followed by the three change columns (all nullable)."""
    return StructType(list(table_schema.fields) + [
        StructField(CHANGE_TYPE, StringType(), True),
        StructField(COMMIT_VERSION, LongType(), True),
        StructField(COMMIT_TIMESTAMP, TimestampType(), True),
    ])


def _enabled(configuration: dict[str, str] | None) -> bool:
    return str((configuration or {}).get(CDF_PROPERTY, "false")).lower() == "true"


def _commit_ms(actions: list[dict[str, Any]], log: DeltaLog, version: int) -> int:
    for action in actions:
        if "commitInfo" in action and action["commitInfo"].get("timestamp") is not None:
            return int(action["commitInfo"]["timestamp"])
    mtime = log.commit_mtime(version)
    return (mtime or 0) // 1_000_000


class ChangeFeedPlanner(SourcePlanner):
    """The plain source's planner, with a commit's change files in place of its adds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cdf_on: dict[int, bool] = {}  # version -> CDF in force at that version

    def _enabled_at(self, version: int, actions: list[dict[str, Any]]) -> bool:
        for action in actions:
            if "metaData" in action:
                on = _enabled(action["metaData"].get("configuration"))
                break
        else:
            previous = self._cdf_on.get(version - 1)
            on = previous if previous is not None else _enabled(
                self.log.table(version).metadata().configuration)
        self._cdf_on[version] = on
        return on

    def _admit(self, version: int, actions: list[dict[str, Any]]) -> list[FileEntry]:
        for action in actions:
            if "metaData" in action:
                self._check_metadata(version, action["metaData"])
        if not self._enabled_at(version, actions):
            raise not_recorded(self.log.uri, version)
        when = _commit_ms(actions, self.log, version)
        cdcs = [a["cdc"] for a in actions if "cdc" in a]
        if cdcs:
            chosen = [(c, None) for c in cdcs]
        else:
            chosen = [(a["add"], "insert") for a in actions
                      if "add" in a and a["add"].get("dataChange", True)]
            chosen += [(a["remove"], "delete") for a in actions
                       if "remove" in a and a["remove"].get("dataChange", True)]
        out: list[FileEntry] = []
        for i, (action, kind) in enumerate(chosen):
            if action.get("deletionVector"):
                raise HeadwaterError(
                    "HW_DELTA_UNSUPPORTED_FEATURE",
                    f"Version {version} of {self.log.uri} changes a file with a deletion "
                    "vector, which has no change data files.",
                    "Reading such changes from the change data feed is not supported yet.",
                    "Read the table by version (versionAsOf) instead, or rewrite it without "
                    "deletion vectors (delta.enableDeletionVectors=false, then OPTIMIZE).")
            raw = action.get("partitionValues") or {}
            out.append(ChangeFile(
                path=resolve_file(self.log.root, action["path"]),
                size=int(action.get("size") or 0),
                partition_values={c: parse_partition_value(raw.get(c), self._types[c])
                                  for c in self.partition_columns},
                version=version, index=i, change_type=kind, commit_ms=when))
        return out

    def _snapshot(self, version: int) -> list[FileEntry]:
        """A stream without a starting version first reads the table as inserts."""
        if version not in self._snapshots:
            entries = super()._snapshot(version)
            actions = self.log.read_commit(version) or []
            when = _commit_ms(actions, self.log, version)
            self._snapshots[version] = [
                ChangeFile(**{f.name: getattr(e, f.name) for f in dataclasses.fields(e)},
                           change_type="insert", commit_ms=when)
                for e in entries]
        return self._snapshots[version]


def not_recorded(uri: str, version: int) -> HeadwaterError:
    return HeadwaterError(
        "HW_CDF_NOT_RECORDED",
        f"Change data was not recorded for version {version} of {uri}: "
        f"{CDF_PROPERTY} was not true then.",
        "The change data feed only covers commits made while the table property was on.",
        f"Read from a version after the one that set {CDF_PROPERTY}=true "
        "(DESCRIBE HISTORY shows it), or enable it with ALTER TABLE ... SET TBLPROPERTIES.")


# --- reading change files (executors) --------------------------------------------------------


def read_changes(path: str, entries: Sequence[ChangeFile], table_schema: StructType,
                 schema: StructType, partition_columns: list[str]) -> Iterator[pa.RecordBatch]:
    """Arrow batches of ``schema`` (table columns + the three change columns)."""
    target = arrow_schema(schema)
    width = len(table_schema.fields)
    file_schema = StructType(list(table_schema.fields) + [schema.fields[width]])
    file_target = pa.schema(list(target)[:width + 1])
    dvs = None
    if any(e.has_dv for e in entries):  # only a starting snapshot's files carry them
        dvs = deletion_vectors(DeltaLog(path).table(entries[0].version))
    ts_type = target.field(COMMIT_TIMESTAMP).type
    for entry in entries:
        for batch in read_entries(path, [entry], file_schema, file_target, partition_columns,
                                  deletion_vectors=dvs):
            n = batch.num_rows
            columns = list(batch.columns)
            if entry.change_type is not None:
                columns[width] = pa.array([entry.change_type] * n, target.field(width).type)
            columns.append(pa.array([entry.version] * n, pa.int64()))
            columns.append(pa.array([entry.commit_ms * 1000] * n,
                                    pa.timestamp("us", tz="UTC")).cast(ts_type))
            yield pa.RecordBatch.from_arrays(columns, schema=target)


# --- batch reads ------------------------------------------------------------------------------


def _version_option(options: dict[str, Any], key: str, name: str) -> int | None:
    return parse_int(name, options.get(key), None, minimum=0)


def version_range(log: DeltaLog, options: dict[str, Any]) -> tuple[int, int]:
    """(start, end) of a batch read from startingVersion/-Timestamp, endingVersion/-Timestamp.

    The end defaults to (and is clamped at) the latest version, as delta-spark does."""
    for first, second in (("startingversion", "startingtimestamp"),
                          ("endingversion", "endingtimestamp")):
        if options.get(first) is not None and options.get(second) is not None:
            raise HeadwaterError(
                "HW_OPTION_CONFLICT", f"{first} and {second} were both given.",
                "A change feed range has one start and one end.", "Keep only one of the two.")
    latest = log.latest_version()
    start = _version_option(options, "startingversion", "startingVersion")
    if start is None and options.get("startingtimestamp") is not None:
        start = log.version_at_or_after(_parse_timestamp(options["startingtimestamp"]))
    if start is None:
        raise HeadwaterError(
            "HW_CDF_NO_START",
            f"A batch change data feed read of {log.uri} needs where to start.",
            "delta-spark has the same rule: the range of versions must be explicit.",
            "Add .option('startingVersion', 0) or .option('startingTimestamp', '2026-01-31').")
    if start > latest:
        raise HeadwaterError(
            "HW_SOURCE_VERSION_AFTER_LATEST",
            f"startingVersion {start} is after the latest version {latest} of {log.uri}.",
            "The change data feed covers commits that exist.",
            f"Use a version between 0 and {latest}.")
    end = _version_option(options, "endingversion", "endingVersion")
    if end is None and options.get("endingtimestamp") is not None:
        end = _version_at_or_before(log, _parse_timestamp(options["endingtimestamp"]), latest)
    end = latest if end is None else min(end, latest)
    if end < start:
        raise HeadwaterError(
            "HW_OPTION_INVALID",
            f"The change data feed range of {log.uri} ends ({end}) before it starts ({start}).",
            "The ending version or timestamp must not come before the starting one.",
            "Swap or fix the two options.")
    return start, end


def _version_at_or_before(log: DeltaLog, when: dt.datetime, latest: int) -> int:
    try:
        first_after = log.version_at_or_after(when)
    except HeadwaterError as exc:
        if exc.code == "HW_SOURCE_TIMESTAMP_AFTER_LATEST":
            return latest
        raise
    # commit times in milliseconds, as DESCRIBE HISTORY shows them and delta-spark compares
    return first_after if log.commit_millis(first_after) == to_millis(when) else first_after - 1


def changes_between(planner: ChangeFeedPlanner, start: int, end: int) -> list[FileEntry]:
    """The change files of versions ``start`` to ``end`` (both included)."""
    if planner.log.read_commit(start) is None:
        raise HeadwaterError(
            "HW_DELTA_VERSION_NOT_FOUND",
            f"Version {start} of {planner.log.uri} is no longer in its log.",
            "Log cleanup (delta.logRetentionDuration) removed it, so its changes are lost.",
            "Read the change feed from a retained version (DESCRIBE HISTORY lists them).")
    table_id = planner.table_id
    return planner.files_between(Offset(table_id, start, -1, False),
                                 Offset(table_id, end + 1, -1, False))


class ChangeFeedBatchReader(DataSourceReader):
    """``spark.read.format('delta').option('readChangeFeed', 'true')``: planned once."""

    def __init__(self, path: str, options: dict[str, Any], schema: StructType,
                 table_schema: StructType, partition_columns: list[str], table_id: str,
                 parallelism: int = MACHINE_PARALLELISM) -> None:
        self.path, self.schema, self.table_schema = path, schema, table_schema
        self.partition_columns, self.parallelism = partition_columns, parallelism
        log = DeltaLog(path)
        start, end = version_range(log, options)
        planner = ChangeFeedPlanner(log, table_schema, partition_columns, table_id,
                                    SourceOptions())
        self.entries = changes_between(planner, start, end)

    def partitions(self) -> Sequence[InputPartition]:
        groups = split_entries(self.entries, self.parallelism)
        return [DeltaInputPartition(group) for group in groups] or [DeltaInputPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_changes(self.path, partition.entries, self.table_schema, self.schema,
                            self.partition_columns)


class ChangeFeedStreamReader(DeltaStreamReader):
    """``spark.readStream.format('delta').option('readChangeFeed', 'true')``: the plain
    stream (offsets, limits, AvailableNow, restart) over change files."""

    @property
    def planner(self) -> SourcePlanner:
        if self._planner is None:
            self._planner = ChangeFeedPlanner(DeltaLog(self.path), self.table_schema,
                                              self.partition_columns, self.table_id,
                                              self.options)
        return self._planner

    def read(self, partition: InputPartition) -> Iterator:
        return read_changes(self.path, partition.entries, self.table_schema, self.schema,
                            self.partition_columns)
