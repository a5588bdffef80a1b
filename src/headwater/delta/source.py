"""The Delta streaming source: offsets over the log, read limits, AvailableNow, append-only.

An offset is (tableId, version, index, isStartingVersion), as in delta-spark:
- isStartingVersion=True: inside the snapshot of ``version``; files up to ``index`` are done.
- otherwise: inside commit ``version``; its files up to ``index`` are done (-1: none).
Offsets are canonical: once every file of a version is done the offset moves to
(version + 1, -1, False), so "no new data" returns the start offset unchanged.

The planning logic (:class:`SourcePlanner`) is plain Python over a :class:`DeltaLog`, so tests
can count the log files it reads. Two adapters hand it to Spark:

- :class:`headwater.delta.native_source.NativeDeltaSource` (the usual one): a v1 streaming
  Source the JVM calls through py4j; Spark's parquet reader reads each micro-batch's files,
  so rows never pass through Python;
- :class:`DeltaStreamReader` here: the Python data source's reader, which reads the files with
  pyarrow and sends the rows to Spark as Arrow batches. Streams the native source cannot take
  read through it: a change feed (:mod:`headwater.delta.cdf` builds on it), deletion vectors,
  column mapping, object stores, sessions without a JVM on the driver.

Both write the same offset JSON, so a checkpoint of either is continued by the other.

Why one module: the offset rules (canonical offsets, limits, snapshot vs commit
positions, append-only checks) are one state machine read top to bottom; the planner/adapter
split already separates what Spark calls from what decides.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from headwater.conf.options import parse_bool, parse_int, parse_size
from headwater.conf.read_limits import default_read_limit, limits_of
from headwater.delta import physical_names
from headwater.delta.log import DeltaLog, FileEntry, deletion_vectors, resolve_file
from headwater.delta.schema import (
    arrow_schema,
    parse_partition_value,
    read_compatible,
    spark_schema,
)
from headwater.errors import HeadwaterError

log = logging.getLogger("headwater.delta.source")

DEFAULT_MAX_FILES = 1000
# How many partitions a scan aims for, as Spark's file sources use defaultParallelism (its
# task slots). A data source knows it from the class Spark instantiates: registration
# (ingest/registration.py) registers a subclass per session carrying that session's
# ``defaultParallelism``; a source class used as it is falls back to this machine's cores.
MACHINE_PARALLELISM = os.cpu_count() or 2


@dataclass(frozen=True)
class Offset:
    table_id: str
    version: int
    index: int
    is_starting: bool

    def to_dict(self) -> dict[str, Any]:
        return {"sourceVersion": 1, "reservoirId": self.table_id, "reservoirVersion": self.version,
                "index": self.index, "isStartingVersion": self.is_starting}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Offset:
        return cls(str(data["reservoirId"]), int(data["reservoirVersion"]), int(data["index"]),
                   bool(data["isStartingVersion"]))


@dataclass
class SourceOptions:
    max_files: int | None = DEFAULT_MAX_FILES
    max_bytes: int | None = None
    starting_version: str | None = None
    starting_timestamp: str | None = None
    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    fail_on_data_loss: bool = True
    # set by continuous pipeline runs (conf.layout.COMMIT_WAIT_OPTION): with nothing new,
    # latestOffset waits this long for the table's next commit (commit-driven hops)
    commit_wait_ms: int = 0

    @classmethod
    def from_options(cls, options: dict[str, str]) -> SourceOptions:
        if options.get("schematrackinglocation") is not None:
            raise HeadwaterError(
                "HW_OPTION_UNSUPPORTED",
                "The Delta source option schemaTrackingLocation is not supported yet.",
                "delta-spark keeps a schema log there to stream across a column-mapped "
                "table's RENAME / DROP COLUMN; headwater's Delta source keeps none, and "
                "ignoring the option would hide that the stream stops at such a change.",
                "Leave the option out: a stream stops at a rename or drop "
                "(DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG) and restarts from "
                "a new checkpoint after it.")
        max_bytes = parse_size("maxBytesPerTrigger", options.get("maxbytespertrigger"), None)
        opts = cls(
            # maxBytesPerTrigger alone lifts the default file cap
            max_files=parse_int("maxFilesPerTrigger", options.get("maxfilespertrigger"),
                                None if max_bytes else DEFAULT_MAX_FILES, minimum=1),
            max_bytes=max_bytes,
            starting_version=options.get("startingversion"),
            starting_timestamp=options.get("startingtimestamp"),
            ignore_deletes=parse_bool("ignoreDeletes", options.get("ignoredeletes"), False),
            ignore_changes=parse_bool("ignoreChanges", options.get("ignorechanges"), False),
            skip_change_commits=parse_bool("skipChangeCommits",
                                           options.get("skipchangecommits"), False),
            fail_on_data_loss=parse_bool("failOnDataLoss", options.get("failondataloss"), True),
            commit_wait_ms=parse_int("__hw_commit_wait_ms", options.get("__hw_commit_wait_ms"),
                                     0, minimum=0),
        )
        if opts.starting_version is not None and opts.starting_timestamp is not None:
            raise HeadwaterError(
                "HW_OPTION_CONFLICT",
                "startingVersion and startingTimestamp were both given.",
                "A stream starts from one point of the table's history.",
                "Keep only one of the two options.",
            )
        return opts


class SourcePlanner:
    """Walks the log from an offset: which files come next, within limits and rules."""

    def __init__(self, log_: DeltaLog, schema: StructType, partition_columns: list[str],
                 table_id: str, options: SourceOptions) -> None:
        self.log = log_
        self.schema = schema
        self.partition_columns = partition_columns
        self.table_id = table_id
        self.options = options
        self._commits: dict[int, list[FileEntry] | None] = {}
        self._snapshots: dict[int, list[FileEntry]] = {}
        self._mtimes: dict[int, int] = {}
        self._types = {f.name: f.dataType for f in schema.fields}
        self._initial: Offset | None = None
        self._mapping_checked = False
        # partitionValues name columns by physical name under column mapping
        self._partition_keys = dict(zip(partition_columns,
                                        physical_names.physical_partition_columns(
                                            schema, partition_columns), strict=True))

    # -- where a new stream starts --------------------------------------------------
    def initial_offset(self) -> Offset:
        """Where a new stream starts, decided once per reader: Spark asks again when it
        plans batch 0, and the latest version may have moved by then."""
        if self._initial is None:
            self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> Offset:
        opts = self.options
        if opts.starting_version is not None:
            text = str(opts.starting_version).strip().lower()
            if text == "latest":
                return Offset(self.table_id, self.log.latest_version() + 1, -1, False)
            version = parse_int("startingVersion", opts.starting_version, 0, minimum=0)
            latest = self.log.latest_version()
            if version > latest:
                raise HeadwaterError(
                    "HW_SOURCE_VERSION_AFTER_LATEST",
                    f"startingVersion {version} is after the latest version {latest} of "
                    f"{self.log.uri}.",
                    "A stream can only start from a commit that exists.",
                    f"Use a version between 0 and {latest}, or 'latest'.",
                )
            return Offset(self.table_id, version, -1, False)
        if opts.starting_timestamp is not None:
            when = _parse_timestamp(opts.starting_timestamp)
            return Offset(self.table_id, self.log.version_at_or_after(when), -1, False)
        return Offset(self.table_id, self.log.latest_version(), -1, True)

    # -- planning -------------------------------------------------------------------
    def latest_offset(self, start: Offset, max_files: int | None, max_bytes: int | None,
                      cap_version: int | None = None) -> Offset:
        self._check_identity(start)
        self._check_mapping_at_start(start)
        self.forget_before(start.version)
        end = start
        count = size = 0
        for entry, after in self._walk(start, cap_version):
            if max_files is not None and count >= max_files:
                break
            if max_bytes is not None and count > 0 and size >= max_bytes:
                break
            if entry is not None:
                if max_bytes is not None and count > 0 and size + entry.size > max_bytes:
                    break
                count += 1
                size += entry.size
            end = after
        return end

    def files_between(self, start: Offset, end: Offset) -> list[FileEntry]:
        out: list[FileEntry] = []
        start = _starting_within(start, end)
        if start == end:
            return out
        for entry, after in self._walk(start, None):
            if entry is not None:
                out.append(entry)
            if _position(after) >= _position(end):
                break
        return out

    def _walk(self, start: Offset, cap_version: int | None
              ) -> Iterator[tuple[FileEntry | None, Offset]]:
        """(file, offset after it) from ``start`` on; (None, offset) marks a version's end."""
        version, index = start.version, start.index
        if start.is_starting:
            yield from self._items(self._snapshot(version), version, index, starting=True)
            version, index = version + 1, -1
        while cap_version is None or version <= cap_version:
            files = self._commit(version)
            if files is None:
                resume = self._after_missing_commit(version)
                if resume is None:
                    return
                yield None, Offset(self.table_id, resume, -1, False)
                version, index = resume, -1
                continue
            yield from self._items(files, version, index, starting=False)
            version, index = version + 1, -1

    def _items(self, files: list[FileEntry], version: int, index: int, starting: bool
               ) -> Iterator[tuple[FileEntry | None, Offset]]:
        after_last = Offset(self.table_id, version + 1, -1, False)  # canonical end of version
        for entry in files[index + 1:]:
            last = entry.index == len(files) - 1
            yield entry, after_last if last else Offset(self.table_id, version, entry.index,
                                                        starting)
        if index + 1 >= len(files):
            yield None, after_last

    def _snapshot(self, version: int) -> list[FileEntry]:
        if version not in self._snapshots:
            table = self.log.table(version)
            self._snapshots[version] = self.log.snapshot_files(table)
        return self._snapshots[version]

    def _commit(self, version: int) -> list[FileEntry] | None:
        if version in self._commits:
            return self._commits[version]
        actions = self.log.read_commit(version)
        if actions is None:
            return None  # not committed yet (or cleaned up): do not cache, it may appear
        self._mtimes[version] = self.log.commit_mtime(version) or 0
        files = self._admit(version, actions)
        self._commits[version] = files
        return files

    def _admit(self, version: int, actions: list[dict[str, Any]]) -> list[FileEntry]:
        """The files a commit contributes to the stream, under the append-only rule."""
        adds, removes = [], []
        for action in actions:
            if "metaData" in action:
                self._check_metadata(version, action["metaData"])
            elif "add" in action and action["add"].get("dataChange", True):
                adds.append(action["add"])
            elif "remove" in action and action["remove"].get("dataChange", True):
                removes.append(action["remove"])
        opts = self.options
        if removes:
            if opts.skip_change_commits:
                return []
            if opts.ignore_deletes and not adds:
                return []
            if not opts.ignore_changes:
                raise HeadwaterError(
                    "HW_SOURCE_NOT_APPEND_ONLY",
                    f"Version {version} of the streaming source {self.log.uri} updates or "
                    f"deletes existing rows ({len(removes)} files removed, {len(adds)} added).",
                    "A streaming source must be append-only: rows already streamed cannot "
                    "change.",
                    "Set .option('skipChangeCommits', 'true') to skip such commits, "
                    "'ignoreDeletes' to skip pure deletes, or 'ignoreChanges' to re-emit "
                    "rewritten files; or restart from a new checkpoint.",
                )
        entries = []
        for i, add in enumerate(adds):
            if add.get("deletionVector"):
                raise HeadwaterError(
                    "HW_DELTA_UNSUPPORTED_FEATURE",
                    f"Version {version} of {self.log.uri} adds a file with a deletion vector "
                    "to the stream.",
                    "Streaming re-emitted files with deletion vectors is not supported yet.",
                    "Use skipChangeCommits to skip commits that change existing rows.",
                )
            raw = add.get("partitionValues") or {}
            typed = {c: parse_partition_value(raw.get(self._partition_keys[c], raw.get(c)),
                                              self._types[c])
                     for c in self.partition_columns}
            entries.append(FileEntry(
                path=resolve_file(self.log.root, add["path"]), size=int(add.get("size", 0)),
                partition_values=typed, modification_time=int(add.get("modificationTime", 0)),
                version=version, index=i, stats=add.get("stats"),
            ))
        return entries

    def _check_metadata(self, version: int, metadata: dict[str, Any]) -> None:
        if metadata.get("id") and metadata["id"] != self.table_id:
            raise _recreated(self.log.uri, version)
        # As delta-spark's DeltaSource checks it: data of this version must read with the
        # stream's schema, by name (a commit that changes only Delta's own column metadata,
        # an identity column's high-water mark, a comment, or the order of columns leaves the
        # stream as it is; a restarted stream reads older versions with its newer schema).
        change = physical_names.non_additive_change(self.schema, metadata["schemaString"])
        if change is not None:  # column mapping: a rename or a drop
            raise physical_names.stream_change_error(self.log.uri, version, change)
        new_schema = spark_schema(metadata["schemaString"])
        if not read_compatible(new_schema, self.schema):
            old = {f.name: f.dataType.simpleString() for f in self.schema.fields}
            new = {f.name: f.dataType.simpleString() for f in new_schema.fields}
            changed = sorted(set(old.items()) ^ set(new.items()))
            raise HeadwaterError(
                "HW_SOURCE_SCHEMA_CHANGED",
                f"The schema of the streaming source {self.log.uri} changed at version "
                f"{version}: {', '.join(f'{n}:{t}' for n, t in changed)}.",
                "A running stream's schema is fixed when it starts.",
                "Restart the query: it resumes from its checkpoint with the new schema "
                "(downstream sinks may need mergeSchema).",
            )

    def _check_mapping_at_start(self, start: Offset) -> None:
        """Once per planner: a stream resumed (or started) at a version whose schema has a
        column-mapped column this stream's schema renamed or dropped is refused, as
        delta-spark refuses it without a schema tracking location."""
        if self._mapping_checked or not physical_names.has_ids(self.schema):
            self._mapping_checked = True
            return
        version = start.version if start.is_starting else max(start.version - 1, 0)
        try:
            schema_json = self.log.table(version).schema().to_json()
        except Exception:  # noqa: BLE001 - the version is gone (log cleanup): the walk says so
            return
        self._mapping_checked = True
        change = physical_names.non_additive_change(self.schema, schema_json, later=False)
        if change is not None:
            raise physical_names.stream_change_error(self.log.uri, version, change)

    def _check_identity(self, start: Offset) -> None:
        if start.table_id != self.table_id:
            raise _recreated(self.log.uri, start.version)
        # The commit just before our position must be the one we read: a table deleted and
        # recreated under the same path has new commit files.
        previous = start.version - 1
        known = self._mtimes.get(previous)
        if known is not None and self.log.commit_mtime(previous) not in (known, None):
            current = self.log.table().metadata().id
            if current != self.table_id:
                raise _recreated(self.log.uri, previous)

    def _after_missing_commit(self, version: int) -> int | None:
        """Commit ``version`` is missing: not written yet (None), or lost to log cleanup."""
        if not self.log.exists():
            raise HeadwaterError(
                "HW_SOURCE_TABLE_DELETED",
                f"The streaming source table {self.log.uri} no longer exists.",
                "Its _delta_log folder is gone.",
                "Restore the table, or start a new stream with a new checkpoint.",
            )
        checkpoint = self.log.last_checkpoint_version()
        if checkpoint is None or checkpoint < version:
            if self.log.commit_mtime(version + 1) is not None:
                raise HeadwaterError(
                    "HW_DELTA_UNREADABLE",
                    f"The Delta log of {self.log.uri} has a gap: commit {version} is missing "
                    f"but commit {version + 1} exists.",
                    "Commits must be contiguous; reading past a gap would skip data.",
                    "Restore the missing commit file from a backup.",
                )
            return None
        message = (f"Commit {version} of {self.log.uri} was removed by log cleanup before the "
                   f"stream read it (the log is kept from checkpoint {checkpoint} on).")
        if self.options.fail_on_data_loss:
            raise HeadwaterError(
                "HW_SOURCE_DATA_LOSS", message,
                "Files added in the missing commits can no longer be found.",
                "Restart with a new checkpoint, or set failOnDataLoss=false to skip the lost "
                "commits.",
            )
        log.warning("%s Skipping to version %d (failOnDataLoss=false).", message, checkpoint + 1)
        return checkpoint + 1

    def forget_before(self, version: int) -> None:
        for cache in (self._commits, self._snapshots, self._mtimes):
            for v in [v for v in cache if v < version - 1]:
                del cache[v]


def _position(offset: Offset) -> tuple[int, int, int]:
    return offset.version, 0 if offset.is_starting else 1, offset.index


def _recreated(uri: str, version: int) -> HeadwaterError:
    return HeadwaterError(
        "HW_SOURCE_TABLE_RECREATED",
        f"The streaming source {uri} was deleted and recreated (a new table id, seen at "
        f"version {version}).",
        "The checkpoint's offsets belong to the old table; resuming could skip or repeat data.",
        "Start the stream again with a new checkpoint location.",
    )


def _parse_timestamp(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"startingTimestamp {text!r} is not a timestamp.",
            "It is parsed as ISO 8601.", "Use e.g. '2026-01-31' or '2026-01-31T12:00:00Z'.",
        ) from exc
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


# --- Spark adapter ---------------------------------------------------------------------


class DeltaInputPartition(InputPartition):
    def __init__(self, entries: list[FileEntry]) -> None:
        super().__init__(None)
        self.entries = entries


def split_entries(entries: Sequence[FileEntry], parallelism: int,
                  max_bytes: int = 128 << 20, open_cost: int = 4 << 20) -> list[list[FileEntry]]:
    """Spark's file-partition packing: split size from total bytes and parallelism."""
    if not entries:
        return []
    total = sum(e.size + open_cost for e in entries)
    split = min(max_bytes, max(open_cost, total // max(1, parallelism)))
    groups: list[list[FileEntry]] = []
    current: list[FileEntry] = []
    current_size = 0
    for entry in entries:
        if current and current_size + entry.size > split:
            groups.append(current)
            current, current_size = [], 0
        current.append(entry)
        current_size += entry.size + open_cost
    if current:
        groups.append(current)
    return groups


def _starting_within(start: Offset, end: Offset) -> Offset:
    """A start no later than what ``end`` covers.

    For batch 0 Spark asks ``initialOffset()`` again when it plans the batch; a restart that
    replays batch 0 asks a new reader, whose answer, the table's latest version, may have
    moved past the versions the batch's end offset was computed over: reading that newer
    snapshot would take rows the next batch reads again. On an append-only table the snapshot
    at the last version the end covers holds exactly the rows of the older snapshot plus the
    commits between, so the batch reads the same rows either way.
    """
    if not start.is_starting:
        # startingVersion=latest asked again by a restart replaying batch 0: never past its end
        return end if _position(start) > _position(end) else start
    covered = end.version if end.is_starting else end.version - 1
    if start.version <= covered:
        return start
    return Offset(start.table_id, covered, -1, True)


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, path: str, options: dict[str, str], schema: StructType,
                 table_schema: StructType, partition_columns: list[str], table_id: str,
                 parallelism: int = MACHINE_PARALLELISM) -> None:
        self.path = path
        self.parallelism = parallelism
        self.schema = schema
        self.table_schema = table_schema
        self.partition_columns = partition_columns
        self.table_id = table_id
        self.options = SourceOptions.from_options(options)
        self.cap_version: int | None = None
        self._planner: SourcePlanner | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None  # caches stay on the driver
        return state

    @property
    def planner(self) -> SourcePlanner:
        if self._planner is None:
            self._planner = SourcePlanner(DeltaLog(self.path), self.table_schema,
                                          self.partition_columns, self.table_id, self.options)
        return self._planner

    def initialOffset(self) -> dict:
        return self.planner.initial_offset().to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_read_limit(self.options.max_files, self.options.max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap_version = self.planner.log.latest_version()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = Offset.from_dict(start)
        max_files, max_bytes = limits_of(limit, self.options.max_bytes)
        end = self.planner.latest_offset(begin, max_files, max_bytes, self.cap_version)
        if end == begin and self.waits_for_commits:
            end = self.wait_for_commit(begin, max_files, max_bytes)
        return start if end == begin else end.to_dict()

    @property
    def waits_for_commits(self) -> bool:
        """A continuous pipeline's stream (the commit wait option) outside AvailableNow."""
        return bool(self.options.commit_wait_ms) and self.cap_version is None

    def wait_for_commit(self, begin: Offset, max_files: int | None,
                         max_bytes: int | None) -> Offset:
        """Nothing new at ``begin``: wait (up to the commit wait) for the table's next
        commits and answer as soon as one brings data, so a continuous pipeline's downstream
        flow starts its micro-batch when its input commits instead of at its next poll. A
        commit without data for the stream (OPTIMIZE, a metadata change) waits for the
        next one. ``begin`` again when none came in time: the query then asks once more."""
        log = self.planner.log
        deadline = time.monotonic() + self.options.commit_wait_ms / 1000
        version = log.latest_version() + 1
        while log.wait_for_commit(version, deadline - time.monotonic()):
            end = self.planner.latest_offset(begin, max_files, max_bytes, None)
            if end != begin:
                return end
            version += 1
        return begin

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        entries = self.planner.files_between(Offset.from_dict(start), Offset.from_dict(end))
        groups = split_entries(entries, self.parallelism)
        return [DeltaInputPartition(group) for group in groups]

    def read(self, partition: InputPartition) -> Iterator:
        # Spark's planner process unpickles this reader too, at every query start, but never
        # reads rows: the reading stack (pyarrow.parquet, pyarrow.compute: ~40 ms) is imported
        # only in the workers that do.
        from headwater.delta.files import read_entries  # noqa: PLC0415 - worker: pyarrow.parquet only where rows are read
        entries = partition.entries
        dvs = None
        if any(e.has_dv for e in entries):  # only snapshot files carry them here
            dvs = deletion_vectors(DeltaLog(self.path).table(entries[0].version))
        return read_entries(self.path, entries, self.table_schema, arrow_schema(self.schema),
                            self.partition_columns, deletion_vectors=dvs)

    def commit(self, end: dict) -> None:
        self.planner.forget_before(Offset.from_dict(end).version)
