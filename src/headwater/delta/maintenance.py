"""Table maintenance through delta-rs: OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY / DETAIL.

Results carry delta-spark's names (the SQL layer turns them into DataFrames). OPTIMIZE commits
with dataChange=false, so streams reading the table see no duplicates. VACUUM follows
delta-spark: it deletes every file under the table that no version within the retention
references (files the log never named included, hidden ``_``/``.`` ones excepted), refuses a
retention below the table's ``delta.deletedFileRetentionDuration`` (default 168 hours) unless
the session sets ``spark.databricks.delta.retentionDurationCheck.enabled=false``, and, unlike
delta-spark, refuses to delete files a named stream still needs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
from deltalake import DeltaTable as RsTable
from pyspark.sql import SparkSession

from headwater.conf.context import lakehouse_state_dir
from headwater.conf.layout import CHECKPOINTS, DELTA_LOG
from headwater.delta import row_tracking
from headwater.delta.clustering import clustering_columns
from headwater.delta.commit import Transaction, commit
from headwater.delta.log import DeltaLog, add_actions, filesystem_for, normalize_uri
from headwater.delta.protocol import Protocol
from headwater.delta.restore import restore_table
from headwater.delta.schema import spark_schema
from headwater.delta.write.checks import deltalake_writes
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.spark.jvm import JavaObject, field_value, jvm_view, parse_expression

DEFAULT_RETENTION_HOURS = 168
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
ZORDER_STATS_CHECK_CONF = "spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled"
INDEXED_COLUMNS_PROPERTY = "delta.dataSkippingNumIndexedCols"
HISTORY_COLUMNS = ["version", "timestamp", "userId", "userName", "operation",
                   "operationParameters", "job", "notebook", "clusterId", "readVersion",
                   "isolationLevel", "isBlindAppend", "operationMetrics", "userMetadata",
                   "engineInfo"]
DETAIL_COLUMNS = ["format", "id", "name", "description", "location", "createdAt",
                  "lastModified", "partitionColumns", "clusteringColumns", "numFiles",
                  "sizeInBytes", "properties", "minReaderVersion", "minWriterVersion",
                  "tableFeatures", "statistics"]
PartitionFilter = tuple[str, str, Any]


def _table(path: str) -> RsTable:
    return DeltaLog(normalize_uri(path)).table()


def _failed(operation: str, uri: str, exc: Exception) -> HeadwaterError:
    return HeadwaterError(
        "HW_DELTA_OPERATION_FAILED", f"{operation} on {uri} failed in delta-rs: {exc}.",
        "headwater runs table maintenance through deltalake (delta-rs).",
        "Check the table's features and the message above; the table is unchanged.")


def qualified(uri: str) -> str:
    """A table location as delta-spark prints it (Hadoop's qualified path: ``file:/x/t``)."""
    return f"file:{uri}" if "://" not in uri else uri


def _children(node: JavaObject) -> list[JavaObject]:
    return [node.children().apply(i) for i in range(node.children().size())]


def partition_predicate(where: str, partition_columns: list[str],
                        spark: SparkSession | None = None) -> JavaObject:
    """``where`` parsed by Spark's parser (a JVM expression), checked as delta-spark's OPTIMIZE
    checks it: every column it names must be a partition column."""
    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise HeadwaterError(
            "HW_OPTIMIZE_WHERE_NOT_PARTITION",
            f"OPTIMIZE ... WHERE {where} needs a Spark session to read the predicate.",
            "The predicate is read by Spark's SQL parser, as in delta-spark.",
            "Start a session first (headwater.spark_session()).")
    try:
        tree = parse_expression(spark, where)
    except Exception as exc:  # noqa: BLE001 - Spark's ParseException, in our words
        raise HeadwaterError(
            "HW_OPTIMIZE_WHERE_NOT_PARTITION", f"Cannot recognize the predicate '{where}'.",
            "OPTIMIZE ... WHERE takes a SQL condition on partition columns.",
            "Write e.g. WHERE date = '2024-01-01'.",
            error_class="DELTA_FAILED_RECOGNIZE_PREDICATE") from exc
    by_lower = {c.lower(): c for c in partition_columns}
    stack = [tree]
    while stack:
        node = stack.pop(0)
        if node.getClass().getSimpleName() == "UnresolvedAttribute":
            name = ".".join(str(p) for p in _seq(node.nameParts()))
            if name.lower() not in by_lower:
                raise DeltaAnalysisError(
                    "HW_OPTIMIZE_WHERE_NOT_PARTITION",
                    f"Predicate references non-partition column '{name}'. Only the partition "
                    f"columns may be referenced: [{', '.join(partition_columns)}]",
                    "OPTIMIZE rewrites whole partitions, so only partition columns can choose "
                    "them (delta-spark has the same rule).",
                    "Use a condition on the partition columns, or none to optimize the whole "
                    "table.", error_class="DELTA_NON_PARTITION_COLUMN_REFERENCE")
        stack[:0] = _children(node)
    return tree


def predicate_strings(expressions: Iterable[JavaObject]) -> list[str]:
    """Predicates as delta-spark records them in OPTIMIZE's history (``('key = a)``)."""
    out = []
    for tree in expressions:
        out.append(str(tree.simpleString(25)))
    return out


def _seq(value: JavaObject) -> list[JavaObject]:
    return [value.apply(i) for i in range(value.size())]


def partition_filters(where: str | Iterable[PartitionFilter] | None,
                      partition_columns: list[str], uri: str) -> list[PartitionFilter] | None:
    """``where`` as delta-rs partition filters [(col, op, value)]. SQL text is read with
    Spark's parser (active session) and checked as delta-spark checks it; delta-rs takes ANDs
    of ``col <op> literal`` / ``col IN (...)``."""
    if where is None:
        return None
    if not isinstance(where, str):
        return [tuple(f) for f in where]  # type: ignore[misc]
    tree = partition_predicate(where, partition_columns)
    problem = HeadwaterError(
        "HW_OPTIMIZE_WHERE_NOT_PARTITION",
        f"OPTIMIZE {uri} WHERE {where}: delta-rs' OPTIMIZE takes only ANDs of comparisons of "
        "partition columns with literals.",
        "Without Spark, headwater compacts through delta-rs, whose partition filters are "
        "simple comparisons.",
        "Use e.g. date = '2024-01-01' AND region IN ('eu', 'us'), or run OPTIMIZE through "
        "DeltaTable.optimize() / SQL, which takes any condition on partition columns.")
    ops = {"EqualTo": "=", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<",
           "LessThanOrEqual": "<=", "In": "in"}
    by_lower = {c.lower(): c for c in partition_columns}
    out: list[PartitionFilter] = []

    def literal(node) -> str:
        if node.getClass().getSimpleName() != "Literal" or node.value() is None:
            raise problem
        return str(node.value().toString() if hasattr(node.value(), "toString")
                   else node.value())

    def column(node) -> str:
        if node.getClass().getSimpleName() != "UnresolvedAttribute":
            raise problem
        return by_lower[".".join(str(p) for p in _seq(node.nameParts())).lower()]

    def walk(node) -> None:
        kind = node.getClass().getSimpleName()
        if kind == "And":
            for k in _children(node):
                walk(k)
        elif kind == "In":
            items = _children(node)
            out.append((column(items[0]), "in", [literal(k) for k in items[1:]]))
        elif kind == "Not" and _children(node)[0].getClass().getSimpleName() == "EqualTo":
            a, b = _children(_children(node)[0])
            out.append((column(a), "!=", literal(b)))
        elif kind in ops:
            a, b = _children(node)
            out.append((column(a), ops[kind], literal(b)))
        else:
            raise problem

    walk(tree)
    return out


def check_zorder_columns(spark: SparkSession | None, table: RsTable, columns: list[str]
                         ) -> None:
    """delta-spark's checks of ZORDER BY columns: data columns that exist and have stats."""
    if not columns:
        return
    partition_columns = {c.lower() for c in table.metadata().partition_columns}
    schema = spark_schema(table.schema().to_json())
    data = [f.name for f in schema.fields if f.name.lower() not in partition_columns]
    indexed = int((table.metadata().configuration or {}).get(INDEXED_COLUMNS_PROPERTY, "32"))
    with_stats = {c.lower() for c in data[:indexed]} if indexed >= 0 else \
        {c.lower() for c in data}
    check_stats = spark is None or str(spark.conf.get(ZORDER_STATS_CHECK_CONF, "true")).lower() \
        != "false"
    no_stats = []
    for name in columns:
        if name.lower() in partition_columns:
            raise HeadwaterError(
                "HW_OPTIMIZE_ZORDER_INVALID",
                f"{name} is a partition column. Z-Ordering can only be performed on data "
                "columns", "Files never mix partitions, so ordering by a partition column "
                "changes nothing.", "Z-order by data columns (the partition columns already "
                "cluster the table).", error_class="DELTA_ZORDERING_ON_PARTITION_COLUMN")
        if name.lower() not in {c.lower() for c in data}:
            raise HeadwaterError(
                "HW_OPTIMIZE_ZORDER_INVALID",
                f"Z-Ordering column {name} does not exist in data schema.",
                "ZORDER BY names columns of the table.",
                f"Use some of: {', '.join(data)}.",
                error_class="DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST")
        if name.lower() not in with_stats:
            no_stats.append(name)
    if no_stats and check_stats:
        raise HeadwaterError(
            "HW_OPTIMIZE_ZORDER_INVALID",
            f"Z-Ordering on [{', '.join(no_stats)}] will be ineffective, because we currently "
            "do not collect stats for these columns.",
            f"Only the first {indexed} columns ({INDEXED_COLUMNS_PROPERTY}) have min/max stats, "
            "which data skipping on Z-ordered files needs.",
            f"Raise {INDEXED_COLUMNS_PROPERTY}, or SET {ZORDER_STATS_CHECK_CONF} = false.",
            error_class="DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS")


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
    row_tracking.refuse_rewrite(table.protocol(), table.table_uri, "OPTIMIZE")
    filters = partition_filters(where, list(table.metadata().partition_columns), table.table_uri)
    check_zorder_columns(SparkSession.getActiveSession(), table, list(zorder_by or []))
    try:
        if zorder_by:
            return dict(table.optimize.z_order(list(zorder_by), partition_filters=filters,
                                               target_size=target_size))
        return dict(table.optimize.compact(partition_filters=filters, target_size=target_size))
    except Exception as exc:  # noqa: BLE001
        raise _failed("OPTIMIZE", table.table_uri, exc) from exc


def retention_check_enabled(spark: SparkSession | None = None) -> bool:
    """delta-spark's ``spark.databricks.delta.retentionDurationCheck.enabled`` of the session
    (default true; without a session, true)."""
    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        return True
    return str(spark.conf.get(RETENTION_CHECK_CONF, "true")).strip().lower() != "false"


def configured_retention_hours(table: RsTable, spark: SparkSession | None = None,
                               key: str = RETENTION_PROPERTY,
                               default_hours: float = DEFAULT_RETENTION_HOURS) -> float | None:
    """The table's ``delta.deletedFileRetentionDuration`` (or another interval property
    ``key``) in hours (168 / ``default_hours`` when unset), read with Spark's interval parser
    as delta-spark reads it; None without a Spark session (delta-rs then checks the retention
    with its own reading of the property)."""
    text = (table.metadata().configuration or {}).get(key)
    if not text:
        return float(default_hours)
    spark = spark or SparkSession.getActiveSession()
    jvm = jvm_view(spark) if spark is not None else None
    if jvm is None:
        return None
    value = jvm.org.apache.spark.unsafe.types.UTF8String.fromString(text)
    interval = jvm.org.apache.spark.sql.catalyst.util.IntervalUtils.safeStringToInterval(value)
    months, days, micros = (0, 0, 0) if interval is None else (
        field_value(interval, name) for name in ("months", "days", "microseconds"))
    if interval is None or months != 0:
        raise HeadwaterError(
            "HW_TABLE_PROPERTY_INVALID",
            f"{key} of {table.table_uri} is {text!r}, not an interval of days, "
            "hours or less.", "Delta needs a fixed duration (months vary in length).",
            "Set it to e.g. 'interval 7 days' (ALTER TABLE ... SET TBLPROPERTIES).")
    return days * 24 + micros / 3_600_000_000


def vacuum(path: str, retention_hours: float | None = None, dry_run: bool = False,
           enforce_retention: bool | None = None,
           oldest_version_needed: int | Mapping[str, int] | None = None,
           checkpoints_root: str | None = None, lite: bool = False) -> list[str]:
    """Delete the files under the table that no version within ``retention_hours`` references
    and that are older than that (the table's ``delta.deletedFileRetentionDuration`` when
    None, 168 hours by default): files removed by commits, and files the log never named
    (hidden ``_`` / ``.`` files and folders excepted), as delta-spark's VACUUM.

    enforce_retention: refuse a retention below the table's configured one (None: the
    session's ``spark.databricks.delta.retentionDurationCheck.enabled``, default true).
    dry_run: only list them. oldest_version_needed: the oldest table version a reader still
    reads, or {reader name: version}; a file one of them still needs makes the whole VACUUM
    an error naming the reader. checkpoints_root: a folder of Spark checkpoints whose Delta
    source offsets name more readers (default: ``<lakehouse root>/_checkpoints`` of the
    active session's lakehouse, if any). lite: delta-spark 3.3's VACUUM LITE: only files
    the log's remove actions name (delta-rs' lite mode, from the snapshot's tombstones; the
    folder is not listed). Files outside the table's folder (a shallow clone's, named by
    absolute path: the source table's) are never deleted. Returns the files deleted (or to
    delete), relative to the table.
    """
    table = _table(path)
    if enforce_retention is None:
        enforce_retention = retention_check_enabled()
    if retention_hours is not None and retention_hours < 0:
        raise HeadwaterError(
            "HW_VACUUM_RETENTION_TOO_SHORT",
            "Retention period for Vacuum can't be less than 0 hours.",
            "A negative retention would delete files of versions yet to come.",
            "Pass 0 hours or more.", error_class="DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE")
    configured = configured_retention_hours(table)
    hours = configured if retention_hours is None else float(retention_hours)
    if configured is not None and hours is not None and hours < configured \
            and enforce_retention:
        raise _too_short(table.table_uri, f"{hours:g} hours",
                         f"use a retention period of at least {int(-(-configured // 1))} hours")
    # delta-spark rounds the hours (math.round); delta-rs takes whole hours. Without a Spark
    # session to read the table's retention property (configured None), delta-rs reads it
    # and enforces it.
    whole = None if hours is None else int(hours + 0.5)
    rs_enforce = configured is None and enforce_retention
    try:
        candidates = table.vacuum(retention_hours=whole, dry_run=True,
                                  enforce_retention_duration=rs_enforce, full=not lite)
    except Exception as exc:  # noqa: BLE001
        if rs_enforce and "retention" in str(exc).lower():
            raise _too_short(table.table_uri, str(exc),
                             f"use a retention of at least the table's {RETENTION_PROPERTY}"
                             ) from exc
        raise _failed("VACUUM", table.table_uri, exc) from exc
    readers = ({"a reader": oldest_version_needed} if isinstance(oldest_version_needed, int)
               else dict(oldest_version_needed or {}))
    root = checkpoints_root or _lakehouse_checkpoints()
    if root and candidates:
        readers.update(stream_positions(root, table.metadata().id))
    if readers and candidates:
        _check_readers(table, candidates, readers)
    # a shallow clone's removes name the source's files: never this table's to delete
    outside = [c for c in candidates if _outside_table(c)]
    candidates = [c for c in candidates if not _outside_table(c)]
    if dry_run or not candidates:
        return list(candidates)
    if not deltalake_writes(table):  # in-commit timestamps, clustering...: delta-rs cannot
        return _vacuum_own(table, candidates, hours, configured,  # commit VACUUM's
                           enforce_retention)
    if outside:  # delta-rs would delete them too: delete only the table's own
        log = DeltaLog(normalize_uri(table.table_uri))
        for c in candidates:
            log.fs.delete_file(f"{log.root}/{unquote(c)}")
        return list(candidates)
    try:
        return list(table.vacuum(retention_hours=whole, dry_run=False,
                                 enforce_retention_duration=False, full=not lite))
    except Exception as exc:  # noqa: BLE001
        raise _failed("VACUUM", table.table_uri, exc) from exc


def _vacuum_own(table: RsTable, candidates: list[str], hours: float | None,
                configured: float | None, enforce_retention: bool) -> list[str]:
    """VACUUM of a table whose commits delta-rs cannot write (it refuses e.g. the
    in-commit timestamps VACUUM's history entries must carry): delta-spark's VACUUM START
    commit, the files deleted, its VACUUM END commit, written by headwater's own commit."""
    uri = normalize_uri(table.table_uri)
    if "://" in uri and not uri.startswith("file:"):
        features = sorted(Protocol.of_table(table).writer_features or ())
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"VACUUM of {uri} would delete {len(candidates)} files, but its history entries "
            f"cannot be committed there: the table uses writer features {features} that "
            "delta-rs does not write, and headwater commits only to local tables.",
            "VACUUM records VACUUM START / END commits, as delta-spark does.",
            "Run VACUUM with delta-spark, or on a local copy of the table. Nothing was "
            "deleted.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    log = DeltaLog(uri)
    sizes = {}
    for c in candidates:
        info = log.fs.get_file_info(f"{log.root}/{unquote(c)}")
        sizes[c] = info.size or 0
    default_ms = int((configured or DEFAULT_RETENTION_HOURS) * 3_600_000)
    start = {"retentionCheckEnabled": enforce_retention, "defaultRetentionMillis": default_ms}
    if hours is not None:
        start["specifiedRetentionMillis"] = int(hours * 3_600_000)
    version = _history_commit(uri, table.version(), "VACUUM START", start,
                              {"numFilesToDelete": len(candidates),
                               "sizeOfDataToDelete": sum(sizes.values())})
    deleted = 0
    try:
        for c in candidates:
            try:
                log.fs.delete_file(f"{log.root}/{unquote(c)}")
            except FileNotFoundError:  # deleted meanwhile (another VACUUM): gone either way
                pass
            deleted += 1
    except BaseException:
        _history_commit(uri, version, "VACUUM END", {"status": "FAILED"},
                        {"numDeletedFiles": deleted, "numVacuumedDirectories": 0})
        raise
    _history_commit(uri, version, "VACUUM END", {"status": "COMPLETED"},
                    {"numDeletedFiles": deleted, "numVacuumedDirectories": 0})
    return list(candidates)


def _history_commit(uri: str, read_version: int, operation: str, parameters: dict[str, Any],
                    metrics: dict[str, Any]) -> int:
    """A commit with only its commitInfo (VACUUM's history entries)."""
    return commit(Transaction(uri=uri, read_version=read_version, operation=operation,
                              parameters=parameters, metrics=metrics, actions=[],
                              reads_data=False))


def _outside_table(candidate: str) -> bool:
    """A vacuum candidate named by absolute path or URI (a shallow clone's source file)."""
    return "://" in candidate or candidate.startswith(("/", "file:"))


def _too_short(uri: str, given: str, otherwise: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_VACUUM_RETENTION_TOO_SHORT",
        "The specified VACUUM retention period is too low and may corrupt this Delta table if "
        f"any writes are in progress ({uri}: {given}).",
        "Readers and writers still working on older versions would lose their files.",
        "If no operations (insert, upsert, delete, optimize) are running, you can disable "
        f"this safety check by setting: {RETENTION_CHECK_CONF} = false. Otherwise, "
        f"{otherwise}.", error_class="DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT")


def _check_readers(table: RsTable, candidates: list[str], readers: dict[str, int]) -> None:
    """A reader at version v needs every file removed after v: refuse deleting one."""
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
    spark = SparkSession.getActiveSession()
    root = lakehouse_state_dir(spark) if spark is not None else None
    return f"{root.rstrip('/')}/{CHECKPOINTS}" if root else None


def stream_positions(checkpoints_root: str, table_id: str) -> dict[str, int]:
    """{stream: oldest version it still reads} for every Spark checkpoint under
    ``checkpoints_root`` (any depth) whose Delta source offsets name table ``table_id``.

    A stream resumes from the start of its last planned batch when that batch has no commit
    yet: then the two newest offset files count, and the oldest of their versions wins."""
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

    A timestamp picks the last version committed at or before it (the commit times history()
    shows; an ISO string without a zone is UTC). Returns delta-spark's metrics
    (num_removed_files, num_restored_files, ...). Tables deltalake cannot commit to (identity
    columns, clustering) are restored by headwater's own commit
    (:mod:`headwater.delta.restore`), the others by delta-rs."""
    if (version is None) == (timestamp is None):
        raise HeadwaterError("HW_DML_INVALID", "RESTORE needs exactly one of version or "
                             "timestamp.", "It names the state to go back to.",
                             "Pass version=3 or timestamp='2024-01-01 00:00:00'.")
    table = _table(path)
    commits = commit_times(path, table)
    when: dt.datetime | None = None
    if timestamp is not None:
        when = timestamp if isinstance(timestamp, dt.datetime) else \
            dt.datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
        version = version_at(table.table_uri, commits, when)
    assert version is not None
    earliest, latest = (commits[0][0], commits[-1][0]) if commits else (0, table.version())
    if not earliest <= version <= latest:
        raise DeltaAnalysisError(
            "HW_DELTA_VERSION_NOT_FOUND",
            f"Cannot restore table to version {version}. Available versions: [{earliest}, "
            f"{latest}].", "RESTORE goes back to a version the retained log still has.",
            "Pick a version listed by history().",
            error_class="DELTA_CANNOT_RESTORE_TABLE_VERSION")
    if not deltalake_writes(table):  # identity columns, clustering: headwater's own commit
        return restore_table(normalize_uri(path), table, version,
                             version if when is None else None, when)
    try:
        metrics = dict(table.restore(version))
    except Exception as exc:  # noqa: BLE001
        raise HeadwaterError(
            "HW_DELTA_VERSION_NOT_FOUND",
            f"RESTORE of {table.table_uri} to version {version} failed: {exc}.",
            "The version must exist in the retained log and its files must not be vacuumed.",
            "Pick a version listed by history().") from exc
    after = _table(path)
    sizes = pa_sizes(after)
    return {"table_size_after_restore": sizes[1], "num_of_files_after_restore": sizes[0],
            "num_removed_files": metrics.get("numRemovedFile", 0),
            "num_restored_files": metrics.get("numRestoredFile", 0), "version": after.version()}


def commit_times(path: str, table: RsTable | None = None) -> list[tuple[int, int]]:
    """(version, commit time in ms) of every retained commit, oldest first: the times
    history() shows, which time travel by timestamp goes by."""
    table = table if table is not None else _table(path)
    mtimes = _commit_mtimes(table)
    return sorted(_commit_time(mtimes, h) for h in table.history() if "version" in h)


def _commit_mtimes(table: RsTable) -> dict[int, int]:
    """{version: ms} of the commit files' modification times (one listing of the log): when
    delta-spark dates a commit, and when headwater's time travel reads it."""
    fs, root = filesystem_for(normalize_uri(table.table_uri))
    try:
        infos = fs.get_file_info(pafs.FileSelector(f"{root}/{DELTA_LOG}"))
    except FileNotFoundError:
        return {}
    return {int(i.base_name[:-5]): i.mtime_ns // 1_000_000 for i in infos
            if i.base_name.endswith(".json") and i.base_name[:-5].isdigit()
            and i.mtime_ns is not None}


def _commit_time(mtimes: dict[int, int], entry: dict[str, Any]) -> tuple[int, int]:
    """(version, ms) of a history entry: its commit file's time, or its commitInfo's time
    when the file is gone (cleaned up after a checkpoint)."""
    version = int(entry["version"])
    return version, mtimes.get(version, int(entry.get("timestamp") or 0))


def version_at(uri: str, commits: list[tuple[int, int]], when: dt.datetime) -> int:
    """The last version committed at or before ``when`` (delta-spark's active commit)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    since = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    millis = (since.days * 86_400 + since.seconds) * 1000 + since.microseconds // 1000
    before = [v for v, ts in commits if ts <= millis]
    if not before:
        first = dt.datetime.fromtimestamp(commits[0][1] / 1000, dt.UTC) if commits else None
        raise DeltaAnalysisError(
            "HW_DELTA_VERSION_NOT_FOUND",
            f"The provided timestamp ({when}) is before the earliest version available to "
            f"this table ({first}). Please use a timestamp after {first}.",
            f"No version of {uri} was committed at or before that time.",
            "Pick a time listed by history().",
            error_class="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION")
    return max(before)


def pa_sizes(table: RsTable) -> tuple[int, int]:
    actions = add_actions(table)
    sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
    return len(sizes), int(sum(sizes))


# deltalake's names of a write's metrics where delta-spark's differ from their camelCase form
_WRITE_METRICS = {"num_added_files": "numFiles", "num_added_rows": "numOutputRows",
                  "num_added_bytes": "numOutputBytes"}


def spark_metric_name(operation: str, key: str) -> str:
    """An operation metric as delta-spark names it: deltalake writes its commits' metrics in
    snake_case (``num_deleted_rows``), delta-spark in camelCase (``numDeletedRows``); a
    write's added files and rows are delta-spark's ``numFiles`` / ``numOutputRows``."""
    if "_" not in key:
        return key
    if operation.upper() in ("WRITE", "CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT",
                             "CREATE OR REPLACE TABLE AS SELECT") and key in _WRITE_METRICS:
        return _WRITE_METRICS[key]
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def history(path: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Newest first, one dict per commit with DESCRIBE HISTORY's columns; ``timestamp`` is
    the commit file's modification time (ms), as in delta-spark."""
    table = _table(path)
    mtimes = _commit_mtimes(table)
    out = []
    for entry in table.history(limit):
        row: dict[str, Any] = {c: None for c in HISTORY_COLUMNS}
        row.update({k: v for k, v in entry.items() if k in row})
        row["version"] = entry.get("version")
        millis = _commit_time(mtimes, entry)[1]  # the commit file's time, as delta-spark
        row["timestamp"] = dt.datetime.fromtimestamp(millis / 1000, dt.UTC)
        for key in ("operationParameters", "operationMetrics"):
            row[key] = {k: v if isinstance(v, str) else json.dumps(v)
                        for k, v in (entry.get(key) or {}).items()}
        row["operationMetrics"] = {spark_metric_name(str(entry.get("operation")), k): v
                                   for k, v in row["operationMetrics"].items()}
        out.append(row)
    return out


def detail(path: str) -> dict[str, Any]:
    """DESCRIBE DETAIL's one row for the table."""
    table = _table(path)
    meta, protocol = table.metadata(), table.protocol()
    count, size = pa_sizes(table)
    last = table.history(1)
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
        "tableFeatures": Protocol.of_table(table).names(), "statistics": {},
    }
