"""Reading the Delta log: one commit at a time, snapshots through delta-rs.

Streaming needs "the files added in version N", which no delta-rs API gives, so commits are
read as ``_delta_log/NNN.json`` through pyarrow's filesystems (local, S3, GCS, HDFS, ...).
Snapshots (the starting state of a stream, batch reads) come from delta-rs, which handles
checkpoints (classic, multi-part, v2), ``_last_checkpoint`` and log replay.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.types import TimestampNTZType

from headwater.conf import storage
from headwater.conf.layout import DELTA_LOG
from headwater.delta.schema import spark_schema
from headwater.errors import HeadwaterError


@dataclass(frozen=True)
class FileEntry:
    """One data file to read: where it is, its partition values and its place in the log."""

    path: str  # absolute path or URI of the parquet file
    size: int
    partition_values: dict[str, Any] = field(default_factory=dict)  # typed Python values
    modification_time: int = 0
    version: int = -1
    index: int = -1
    stats: str | None = None
    has_dv: bool = False


def normalize_uri(path: str) -> str:
    """Local paths become absolute with symlinks resolved (as delta-rs resolves them);
    other URIs are kept as given."""
    if path.startswith("file:"):
        path = unquote(urlparse(path).path)
    elif "://" in path:
        return path.rstrip("/")
    return os.path.realpath(os.path.expanduser(path))


def filesystem_for(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem for ``uri`` (with its registered storage credentials)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri
    return storage.pyarrow_filesystem(uri)


def open_table(uri: str, version: int | None = None):
    """delta-rs' DeltaTable at ``uri`` with its registered storage credentials."""
    from deltalake import DeltaTable  # noqa: PLC0415 - worker: deltalake only in the workers that open a snapshot

    return DeltaTable(uri, version=version, storage_options=storage.options_for(uri))


def arrow_dataset(table: Any, **kwargs: Any) -> Any:
    """``table.to_pyarrow_dataset(**kwargs)`` read through pyarrow's own filesystem.

    delta-rs' default filesystem is its Rust object store behind a pyarrow ``PyFileSystem``,
    called from Arrow's IO threads: a process that scanned through it aborted at interpreter
    exit (``terminate called without an active exception``, exit 134) in 22 of 30 runs here
    (``headwater status`` included), and in 0 of 30 through pyarrow's filesystem."""
    fs, path = filesystem_for(normalize_uri(table.table_uri))
    return table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(path, fs), **kwargs)


FILE_COLUMNS = ("path", "size_bytes", "modification_time", "num_records", "partition")


def add_actions(table: Any, flatten: bool = False,
                columns: Sequence[str] | None = None) -> pa.Table:
    """The snapshot's add actions (``table.get_add_actions``) as a pyarrow Table.

    Read through the Arrow C stream: ``pa.table()`` of a non-pyarrow object first asks whether
    it is a pandas DataFrame, which imports pandas (0.2 s of CPU in every fresh Spark Python
    worker that plans a Delta read). columns: only these (those the snapshot has), e.g.
    :data:`FILE_COLUMNS`; ``to_pylist`` of the min/max stats' tz-aware timestamps imports
    pandas too, and converts every file's stats for nothing."""
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=flatten)).read_all()
    if columns is None:
        return actions
    return actions.select([c for c in columns if c in actions.column_names])


def resolve_file(table_root: str, log_path: str) -> str:
    """A path from the log (URL-encoded, relative or absolute) -> a path the filesystem opens."""
    if "://" in log_path or log_path.startswith("file:"):
        parsed = urlparse(log_path)
        if parsed.scheme == "file":
            return unquote(parsed.path)
        return unquote(log_path)
    return f"{table_root.rstrip('/')}/{unquote(log_path)}"


# A commit (00000000000000000010.json) or a checkpoint (...checkpoint.parquet, multi-part or
# v2): the names that make a version; .crc files, log compactions and temp files do not.
_VERSIONED_LOG_FILE = re.compile(r"^(\d{20})\.(?:json$|checkpoint\.)")


class DeltaLog:
    """Access to one table's log. ``reads`` counts the log files opened (for tests)."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = normalize_uri(uri)
        self.storage_options = storage_options or storage.options_for(self.uri)
        self.fs, self.root = filesystem_for(self.uri)
        self.reads = 0
        self._last_checkpoint: tuple[int, int | None] | None = None

    # -- single files -----------------------------------------------------------------
    def commit_path(self, version: int) -> str:
        return f"{self.root}/{DELTA_LOG}/{version:020d}.json"

    def _read_text(self, path: str) -> str | None:
        try:
            with self.fs.open_input_stream(path) as stream:
                data = stream.read()
        except FileNotFoundError:
            return None
        except OSError:
            if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
                return None
            raise
        self.reads += 1
        return data.decode("utf-8")

    def read_commit(self, version: int) -> list[dict[str, Any]] | None:
        """The actions of commit ``version``, or None if that commit file does not exist."""
        text = self._read_text(self.commit_path(version))
        if text is None:
            return None
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_for_commit(self, version: int, seconds: float) -> bool:
        """Wait up to ``seconds`` for commit ``version`` to exist; True once it does. A
        commit is one put-if-absent file, so its appearance is the commit: a stat every
        10 ms on a local disk (100 ms elsewhere: a HEAD request each)."""
        path = self.commit_path(version)
        step = 0.01 if isinstance(self.fs, pafs.LocalFileSystem) else 0.1
        deadline = time.monotonic() + seconds
        while True:
            if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(step, left))

    def committed_after(self, version: int) -> bool:
        """True when commit ``version + 1`` exists: the table changed since ``version`` (one
        stat; a commit is one put-if-absent file)."""
        return self.fs.get_file_info(self.commit_path(version + 1)).type != \
            pafs.FileType.NotFound

    @property
    def local(self) -> bool:
        """True for a table on this machine's file system (a stat costs no request)."""
        return isinstance(self.fs, pafs.LocalFileSystem)

    def commit_mtime(self, version: int) -> int | None:
        info = self.fs.get_file_info(self.commit_path(version))
        if info.type == pafs.FileType.NotFound:
            return None
        return info.mtime_ns

    def last_checkpoint_version(self) -> int | None:
        """Version in ``_last_checkpoint``; re-read only when the file changes (a stat)."""
        path = f"{self.root}/{DELTA_LOG}/_last_checkpoint"
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        if self._last_checkpoint is not None and self._last_checkpoint[0] == info.mtime_ns:
            return self._last_checkpoint[1]
        text = self._read_text(path)
        try:
            version = int(json.loads(text)["version"]) if text else None
        except (ValueError, KeyError):
            version = None
        self._last_checkpoint = (info.mtime_ns, version)
        return version

    def exists(self) -> bool:
        info = self.fs.get_file_info(f"{self.root}/{DELTA_LOG}")
        return info.type == pafs.FileType.Directory

    # -- snapshots (delta-rs) ---------------------------------------------------------
    def table(self, version: int | str | dt.datetime | None = None):
        from deltalake import DeltaTable  # noqa: PLC0415 - worker: deltalake only in the workers that open a snapshot
        from deltalake.exceptions import TableNotFoundError  # noqa: PLC0415 - worker: deltalake only in the workers that open a snapshot

        try:
            if isinstance(version, int) and not isinstance(version, bool):
                try:  # the version's log segment only, not the latest snapshot and then it
                    return DeltaTable(self.uri, version=version,
                                      storage_options=self.storage_options)
                except Exception:  # noqa: BLE001 - the path below says what is wrong (a
                    pass  # cleaned-up version is TableNotFoundError here, not a missing table)
            table = DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError as exc:
            raise HeadwaterError(
                "HW_DELTA_TABLE_NOT_FOUND",
                f"No Delta table at {self.uri}.",
                "The folder has no Delta log (no _delta_log commits), so it is not a Delta "
                "table (yet).",
                "Check the path, or write to it first (the first write creates the table).",
            ) from exc
        except Exception as exc:  # noqa: BLE001 - corrupt or unsupported logs
            raise HeadwaterError(
                "HW_DELTA_UNREADABLE",
                f"The Delta log at {self.uri} cannot be read: {exc}.",
                "delta-rs could not reconstruct the table state from its log.",
                "Check that the table is not corrupt and uses features delta-rs supports.",
            ) from exc
        if isinstance(version, (str, dt.datetime)):  # time travel by timestamp: the last
            version = self.version_at_or_before(parse_timestamp(version)  # commit at or before
                                                if isinstance(version, str) else version)
        if version is not None:
            try:
                table.load_as_version(version)
            except Exception as exc:  # noqa: BLE001
                raise HeadwaterError(
                    "HW_DELTA_VERSION_NOT_FOUND",
                    f"Version {version} of {self.uri} cannot be loaded: {exc}.",
                    "Time travel needs the version's log files, which log cleanup may remove.",
                    "Pick a version or timestamp within the table's retained history.",
                ) from exc
        return table

    def latest_version(self) -> int:
        """The newest version, from the log folder's listing as delta-spark finds it: opening
        the snapshot to ask replays the log (O(files), and imports delta-rs into the fresh
        process that plans every Delta stream)."""
        selector = pafs.FileSelector(f"{self.root}/{DELTA_LOG}", allow_not_found=True)
        try:  # one LIST per 1,000 log files on an object store: still less than a snapshot
            infos = self.fs.get_file_info(selector)
        except OSError:  # not a folder, no permission: delta-rs says what is wrong
            return self.table().version()
        versions = [int(match.group(1)) for info in infos
                    if (match := _VERSIONED_LOG_FILE.match(info.base_name))]
        if not versions:  # no commit yet: delta-rs says why (missing folder, unreadable log)
            return self.table().version()
        return max(versions)

    def snapshot_files(self, table) -> list[FileEntry]:
        """Data files of a loaded snapshot, in delta-spark's stream order (mtime, path)."""
        # no stats columns: their tz-aware timestamps import pandas in to_pylist (0.2-0.3 s
        # in the fresh process that plans every Delta stream)
        actions = add_actions(table, columns=FILE_COLUMNS)
        dv_paths = deletion_vector_paths(table)
        partition_cols = table.metadata().partition_columns
        rows = actions.to_pylist()
        entries = []
        schema = spark_schema(table.schema().to_json())
        names = {f.name: f for f in schema.fields}
        for row in sorted(rows, key=lambda r: (r["modification_time"], r["path"])):
            values = row.get("partition") or {}
            typed = {c: _typed_partition(values.get(c), names.get(c)) for c in partition_cols}
            path = resolve_file(self.root, row["path"])
            entries.append(FileEntry(
                path=path,
                size=int(row["size_bytes"]),
                partition_values=typed,
                modification_time=int(row["modification_time"] or 0),
                version=table.version(),
                # the snapshot keeps the row count of each add's stats
                stats=None if row.get("num_records") is None else
                json.dumps({"numRecords": int(row["num_records"])}),
                has_dv=path in dv_paths,
            ))
        unmatched = dv_paths - {e.path for e in entries}
        if unmatched:  # never return rows a deletion vector removed
            raise HeadwaterError(
                "HW_DELTA_UNREADABLE",
                f"Deletion vectors of {self.uri} name files not in its snapshot: "
                f"{sorted(unmatched)[:3]}.",
                "Rows they delete could not be matched to their data files.",
                "Check the table with the writer that created it.",
            )
        return [dataclasses.replace(e, index=i) for i, e in enumerate(entries)]

    def commit_millis(self, version: int) -> int | None:
        """The commit's time as delta-spark and DESCRIBE HISTORY give it: its file's
        modification time in whole milliseconds."""
        mtime = self.commit_mtime(version)
        return None if mtime is None else mtime // 1_000_000

    def version_at_or_before(self, when: dt.datetime) -> int:
        """Time travel by timestamp (``timestampAsOf``, ``TIMESTAMP AS OF``): the last version
        committed at or before ``when``, commit times in milliseconds as delta-spark and
        DESCRIBE HISTORY give them. A time before the first retained commit or after the
        latest is delta-spark's error."""
        latest = self.latest_version()
        target = to_millis(when)
        newest = self.commit_millis(latest)
        if newest is not None and target > newest:
            stamp = dt.datetime.fromtimestamp(newest / 1000, dt.UTC)
            raise HeadwaterError(
                "HW_DELTA_VERSION_NOT_FOUND", f"The provided timestamp ({when}) is after the "
                f"latest version available to the table at {self.uri} ({stamp}).",
                "Time travel reads a version that was committed at or before the time.",
                f"Use a timestamp before or at {stamp}.",
                error_class="DELTA_TIMESTAMP_GREATER_THAN_COMMIT")
        try:
            first_after = self.version_at_or_after(when)
        except HeadwaterError:  # no commit at or after: the latest one is active
            return latest
        if self.commit_millis(first_after) == target:
            return first_after
        if first_after == 0 or self.commit_millis(first_after - 1) is None:
            first = self.commit_millis(first_after)
            earliest = dt.datetime.fromtimestamp((first or 0) / 1000, dt.UTC)
            raise HeadwaterError(
                "HW_DELTA_VERSION_NOT_FOUND", f"The provided timestamp ({when}) is before the "
                f"earliest version available to the table at {self.uri} ({earliest}).",
                "No retained version was committed at or before that time.",
                f"Use a timestamp after {earliest} (DESCRIBE HISTORY lists them).",
                error_class="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION")
        return first_after - 1

    def version_at_or_after(self, when: dt.datetime) -> int:
        """The first version committed at or after ``when`` (commit file times, compared in
        milliseconds as delta-spark compares them: a time copied from DESCRIBE HISTORY names
        its own commit)."""
        latest = self.latest_version()
        target = to_millis(when)
        lo, hi = 0, latest
        first = None
        while lo <= hi:
            mid = (lo + hi) // 2
            mtime = self.commit_millis(mid)
            if mtime is None:  # cleaned up: everything older is gone too
                lo = mid + 1
                continue
            if mtime >= target:
                first, hi = mid, mid - 1
            else:
                lo = mid + 1
        if first is None:
            raise HeadwaterError(
                "HW_SOURCE_TIMESTAMP_AFTER_LATEST",
                f"startingTimestamp {when.isoformat()} is after the latest commit of {self.uri}"
                f" (version {latest}).",
                "A stream can only start from a commit that exists.",
                "Use an earlier startingTimestamp, or startingVersion='latest'.",
            )
        return first


def to_millis(when: dt.datetime) -> int:
    """Milliseconds since 1970 (UTC for a naive time), exactly (no float rounding)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    since = when.astimezone(dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (since.days * 86_400 + since.seconds) * 1000 + since.microseconds // 1000


def parse_timestamp(text: str, option: str = "timestampAsOf") -> dt.datetime:
    """A timestamp as users write them: ``2024-01-01``, ``2024-01-01 09:25:07.454``,
    ``2024-01-01T09:25:07Z``, with an offset or not (UTC then)."""
    raw = text.strip()
    try:
        value = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise HeadwaterError(
            "HW_DELTA_TIMESTAMP_INVALID", f"{option} {text!r} is not a timestamp.",
            "It is read as an ISO 8601 date or date and time (milliseconds allowed).",
            "Use e.g. '2024-01-01', '2024-01-01 09:25:07.454' or '2024-01-01T09:25:07Z'.",
        ) from exc
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _typed_partition(value: Any, spark_field) -> Any:
    """delta-rs gives typed partition values; timestamps come back tz-aware UTC."""
    if isinstance(value, dt.datetime) and spark_field is not None:
        if isinstance(spark_field.dataType, TimestampNTZType):
            return value.replace(tzinfo=None)
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
    return value


def deletion_vector_paths(table) -> set[str]:
    """Paths of the snapshot's files that carry a deletion vector."""
    if "deletionVectors" not in set(table.protocol().reader_features or []):
        return set()
    return set(deletion_vectors(table))


def deletion_vectors(table) -> dict[str, list[bool]]:
    """File path (as :func:`resolve_file` gives it for this table) -> keep mask.

    delta-rs reports fully-qualified URIs under its own (symlink-resolved) table URI, so
    matching goes through the path relative to that URI: a miss would return deleted rows.
    """
    prefix = table.table_uri.rstrip("/") + "/"
    _, root = filesystem_for(normalize_uri(table.table_uri))
    reader = pa.RecordBatchReader.from_stream(table.deletion_vectors())
    out: dict[str, list[bool]] = {}
    for batch in reader:
        for uri, mask in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            if not uri.startswith(prefix):
                raise HeadwaterError(
                    "HW_DELTA_UNREADABLE",
                    f"A deletion vector names {uri}, outside the table at {table.table_uri}.",
                    "Rows it deletes could not be matched to their data file.",
                    "Check the table with the writer that created it.",
                )
            out[resolve_file(root, uri[len(prefix):])] = mask
    return out
