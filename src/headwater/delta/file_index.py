"""A Delta snapshot as Spark's own ``FileIndex``: batch reads at Spark's native parquet speed.

delta-spark reads a table through Spark's file source: a ``HadoopFsRelation`` whose file index
(``TahoeLogFileIndex``) asks the Delta log, each time a query is planned, which files make the
snapshot and what their partition values are. headwater has no jar for such a class, so
:class:`DeltaFileIndex` is a Python object that implements the JVM interface
``org.apache.spark.sql.execution.datasources.FileIndex`` through py4j's callback server (the
one ``foreachBatch`` uses). Spark's parquet reader then reads the files (vectorized, column
pruning, filter pushdown, the hidden ``_metadata`` columns) and rows never pass through Python.

What the index answers, per query (Spark calls ``listFiles`` while planning, on the driver):

- the files of the table's latest snapshot (refreshed incrementally from the log, as the
  Python reader does), or of the pinned version for time travel. So each new query of a
  DataFrame read once sees new commits, and the static side of a stream-static join sees the
  newest version at every micro-batch, both as in delta-spark. Also as in delta-spark (and
  unlike headwater's Python reader, which resolves the snapshot in every task): a DataFrame
  already executed keeps the files it listed when executed again, since Spark caches a
  DataFrame's physical plan;
- each file's partition values from the log (Delta does not require hive-style folders),
  as Spark's partition columns: the relation's data schema is the whole table schema
  (partition columns included, in the table's order; Spark takes their values from the
  index, not the files), the way delta-spark builds its relation;
- only the partitions Spark's partition filters keep: Spark does not evaluate those filters
  on the rows again, so they are evaluated here (in the JVM, with Catalyst's interpreted
  predicate over each partition's values).

A snapshot Spark's reader cannot read as it is (deletion vectors, column mapping, a changed
schema, missing files) is a HeadwaterError at planning, never wrong rows; whether a table is
read this way at all is :func:`headwater.delta.native_read.natively_readable`'s decision.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyarrow.fs as pafs
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from headwater.delta.batch import latest_table
from headwater.delta.log import DeltaLog, FileEntry, resolve_file
from headwater.delta.schema import physical_name, spark_schema, strip_field_metadata
from headwater.delta.snapshot_adds import snapshot_adds
from headwater.errors import HeadwaterError
from headwater.spark.plan import FILE_INDEX_PREFIX, register_file_index

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("headwater.delta.native")

FILE_INDEX = "org.apache.spark.sql.execution.datasources.FileIndex"
# A row-tracking read's per-file values (partition values to Spark, hidden from the reader)
BASE_ROW_ID_FIELD = "__hw_base_row_id"
ROW_COMMIT_VERSION_FIELD = "__hw_default_row_commit_version"
ROW_ID_FIELDS = (StructField(BASE_ROW_ID_FIELD, LongType(), True),
                 StructField(ROW_COMMIT_VERSION_FIELD, LongType(), True))
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_URI_PATH_SAFE = "/;:@&=+$,-_.!~*'()"  # as java.net.URI leaves a path (Spark's inputFiles)
_EPOCH_NTZ = dt.datetime(1970, 1, 1)


@dataclass
class _Listing:
    """One snapshot's files as Spark's PartitionDirectory objects (JVM), built once per
    version; ``rows`` are their partition values (Catalyst rows), in the same order."""

    version: int
    commit: tuple  # the version's commit file: (table, version, (mtime, size) or None)
    directories: list[Any]
    rows: list[Any]
    size: int
    paths: list[str]  # as Spark's inputFiles gives them (URIs)
    local_paths: list[str]
    all_directories: Any = None  # the Scala Seq of every directory, made when first asked


# (gateway, table, version, schema, partitioning) -> its listing, the most recent last
_listings: OrderedDict[tuple, _Listing] = OrderedDict()
_listings_lock = threading.Lock()
_SHARED_LISTINGS = 32


class _Jvm:
    """The JVM classes and constants the index uses, looked up once per gateway: py4j
    resolves ``jvm.a.b.C`` with a round trip each time, and Spark calls the index while it
    plans every query."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm
        self.gateway = spark.sparkContext._gateway
        self.jvm = jvm
        sources = jvm.org.apache.spark.sql.execution.datasources
        self.path = jvm.org.apache.hadoop.fs.Path
        self.file_status = jvm.org.apache.hadoop.fs.FileStatus
        self.string = jvm.java.lang.String
        self.system = jvm.java.lang.System
        self.array_list = jvm.java.util.ArrayList
        self.converters = jvm.scala.jdk.javaapi.CollectionConverters
        self.lines = jvm.java.util.regex.Pattern.compile("\n")
        self.to_paths = jvm.org.apache.hadoop.util.StringUtils
        self.local_fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(
            jvm.org.apache.hadoop.conf.Configuration())
        self.directory = sources.PartitionDirectory
        expressions = jvm.org.apache.spark.sql.catalyst.expressions
        self.row = expressions.GenericInternalRow
        self.and_ = expressions.And
        self.bound = expressions.BoundReference
        self.predicate = expressions.InterpretedPredicate
        self.utf8 = jvm.org.apache.spark.unsafe.types.UTF8String
        self.none = jvm.scala.Option.empty()
        self.empty_map = getattr(getattr(jvm.scala.collection.immutable, "Map$"),
                                 "MODULE$").empty()
        self.relation = sources.HadoopFsRelation
        self.parquet = sources.parquet.ParquetFileFormat()
        self.logical = getattr(getattr(sources, "LogicalRelation$"), "MODULE$")
        self.dataset = jvm.org.apache.spark.sql.classic.Dataset


_jvms: dict[int, _Jvm] = {}
_jvms_lock = threading.Lock()


def _jvm_of(spark: SparkSession) -> _Jvm:
    key = id(spark.sparkContext._gateway)
    with _jvms_lock:
        refs = _jvms.get(key)
        if refs is None:
            refs = _jvms[key] = _Jvm(spark)
        return refs


class DeltaFileIndex:
    """``FileIndex`` over one Delta table (see the module docstring). ``version``: a pinned
    version (time travel, or a read that must not move); None follows the latest snapshot.
    ``name``: (its data source's name, the qualified table name) for a lakehouse table read
    by name (plan inspection reports the read as one of that source)."""

    def __init__(self, spark: SparkSession, uri: str, schema: StructType,
                 partition_columns: list[str], version: int | None,
                 readable: Callable[[Any], bool],
                 name: tuple[str, str] | None = None,
                 entries: Callable[[], list[FileEntry]] | None = None,
                 row_ids: bool = False,
                 logical: StructType | None = None) -> None:
        self.uri = uri
        # row tracking: each file's baseRowId / defaultRowCommitVersion as two more
        # partition values (ROW_ID_FIELDS), and the table's materialized row tracking
        # columns (if named) read from the files, for _metadata.row_id / row_commit_version
        self.row_ids = row_ids
        # column mapping (name mode): ``schema`` names data columns by physical name, and
        # ``logical`` is the table's schema (with its field metadata) when read
        self.logical = logical
        # fixed files (a stream's micro-batch, listed when first asked), or None: a snapshot
        self.entries = entries
        self.schema = schema
        self.partition_columns = list(partition_columns)
        self.version = version
        self.name = name
        self._readable = readable
        self._j = _jvm_of(spark)
        self._jvm = spark._jvm
        self._gateway = self._j.gateway
        fields = {f.name: f for f in schema.fields}
        self.partition_schema = StructType([fields[c] for c in self.partition_columns]
                                           + (list(ROW_ID_FIELDS) if row_ids else []))
        # JVM values Spark asks for many times per query: made once (each callback that
        # builds one costs several py4j round trips)
        self._jpartition_schema = spark._jsparkSession.parseDataType(
            self.partition_schema.json())
        self._jroot_paths = self._seq([self._j.path(uri)])
        self._jnone = self._j.none
        self._lock = threading.Lock()
        self._listing: _Listing | None = None
        self._strings: dict[str, Any] = {}  # UTF8String per partition value, reused

    # --- what plan inspection reads (headwater.spark.plan.relations) ---------------------
    def relation_facts(self) -> tuple[str, tuple[str, ...] | None, str, tuple]:
        """(source, identifier, path, options) as the Python data source's relation had."""
        options = (("versionasof", str(self.version)),) if self.version is not None else ()
        if self.name is None:
            return "delta", None, self.uri, options
        return self.name[0], tuple(self.name[1].split(".")), self.uri, options

    # --- org.apache.spark.sql.execution.datasources.FileIndex -----------------------------
    def rootPaths(self) -> Any:  # noqa: N802 (Spark's names, through py4j)
        return self._jroot_paths

    def listFiles(self, partitionFilters: Any, dataFilters: Any) -> Any:  # noqa: N802, N803
        try:
            listing = self._current()
            keep = self._predicate(partitionFilters)
            if keep is None:
                if listing.all_directories is None:
                    listing.all_directories = self._seq(listing.directories)
                return listing.all_directories
            return self._seq([d for d, row in zip(listing.directories, listing.rows)
                              if keep.eval(row)])
        except HeadwaterError:
            raise
        except Exception as exc:
            log.exception("listing the files of %s failed", self.uri)
            raise HeadwaterError(
                "HW_DELTA_UNREADABLE", f"Listing the files of {self.uri} for Spark's parquet "
                f"reader failed: {type(exc).__name__}: {exc}.",
                "headwater hands the snapshot's files to Spark when a query is planned.",
                "Read the table again; if it persists, report it with this message.") from exc

    def inputFiles(self) -> Any:  # noqa: N802
        return self._strings_array(self._current().paths)

    def refresh(self) -> None:
        """Nothing to do: every ``listFiles`` asks the log for its newest version."""

    def sizeInBytes(self) -> int:  # noqa: N802
        with self._lock:
            if self._listing is not None:
                return self._listing.size
        return self._current().size

    def partitionSchema(self) -> Any:  # noqa: N802
        return self._jpartition_schema

    def isTimeTravel(self) -> bool:  # noqa: N802
        return self.version is not None

    def metadataOpsTimeNs(self) -> Any:  # noqa: N802
        return self._jnone

    def toString(self) -> str:  # noqa: N802
        at = f"@v{self.version}" if self.version is not None else ""
        return f"{FILE_INDEX_PREFIX}{self.uri}{at}]"

    def hashCode(self) -> int:  # noqa: N802
        return hash(id(self)) & 0x7FFFFFFF

    def equals(self, other: Any) -> bool:
        return other is self

    class Java:
        implements = [FILE_INDEX]

    # --- the snapshot ----------------------------------------------------------------------
    def prepare(self) -> None:
        """List the snapshot now (a pinned version's missing files fail here, not later)."""
        self._current()

    def _current(self) -> _Listing:
        """The listing of the snapshot a query reads now: the pinned version's, or the
        latest's (rebuilt only when the log has a new version)."""
        log_ = DeltaLog(self.uri)
        with self._lock:
            if self.entries is not None:  # a micro-batch's files: listed once
                if self._listing is None:
                    self._listing = self._listing_of(self.entries(), self.version or 0, ())
                return self._listing
            if self.version is not None:
                if self._listing is None:
                    self._listing = self._shared(log_, self.version, None)
                else:  # VACUUM may have deleted an old version's files since
                    missing = [p for p in self._listing.local_paths if not os.path.exists(p)]
                    if missing:
                        raise missing_files(self.uri, self.version, missing)
                return self._listing
            table = latest_table(log_)
            commit = _commit_signature(log_, table.version())
            if self._listing is None or self._listing.commit != commit:
                self._listing = self._shared(log_, table.version(), table)
            return self._listing

    def _shared(self, log_: DeltaLog, version: int, table: Any) -> _Listing:
        """The listing of ``version``, shared by the indexes of the same table, version and
        schema (a table read again and again lists each version once). The version's commit
        file (its name, time and size) identifies it: a table deleted and written again at
        the same path starts over at version 0 with other files."""
        commit = _commit_signature(log_, version)
        key = (id(self._gateway), commit, self.schema.json(), tuple(self.partition_columns),
               self.row_ids)
        with _listings_lock:
            listing = _listings.get(key)
            if listing is not None:
                _listings.move_to_end(key)
        if listing is not None:
            missing = [p for p in listing.local_paths if not os.path.exists(p)]
            if missing:
                raise missing_files(self.uri, version, missing)
            return listing
        listing = self._build(log_, table if table is not None else log_.table(version),
                              commit)
        if commit[2] is not None:  # a commit file cleaned up from the log: not shared
            with _listings_lock:
                _listings[key] = listing
                while len(_listings) > _SHARED_LISTINGS:
                    _listings.popitem(last=False)
        return listing

    def _build(self, log_: DeltaLog, table: Any, commit: tuple) -> _Listing:
        self._check(table)
        ids = None
        if self.row_ids:
            ids = {resolve_file(log_.root, a["path"]): (a.get("baseRowId"),
                                                        a.get("defaultRowCommitVersion"))
                   for a in snapshot_adds(log_, table)}
        return self._listing_of(log_.snapshot_files(table), table.version(), commit, ids)

    def _listing_of(self, entries: list[FileEntry], version: int, commit: tuple,
                    ids: dict[str, tuple[int | None, int | None]] | None = None) -> _Listing:
        missing = [e.path for e in entries if not os.path.exists(e.path)]
        if missing:
            raise missing_files(self.uri, version, missing)
        groups: dict[tuple, list[FileEntry]] = {}
        for entry in entries:
            key = tuple(entry.partition_values.get(c) for c in self.partition_columns)
            if self.row_ids:  # a file's own ids: one directory per (values, ids)
                key += (ids or {}).get(entry.path, (None, None))
            groups.setdefault(key, []).append(entry)
        ordered = [e for group in groups.values() for e in group]
        statuses = self._statuses([e.path for e in ordered])
        directories, rows = [], []
        j = self._j
        start = 0
        for key, group in groups.items():
            files = statuses
            if len(groups) > 1:  # this partition's part of the array
                files = self._gateway.new_array(j.file_status, len(group))
                j.system.arraycopy(statuses, start, files, 0, len(group))
            start += len(group)
            row = self._row(key)
            directories.append(j.directory.apply(row, files))
            rows.append(row)
        log.debug("native read of %s: version %s, %d files in %d partitions", self.uri,
                  version, len(entries), len(groups))
        return _Listing(version, commit, directories, rows, sum(e.size for e in entries),
                        ["file:" + quote(e.path, safe=_URI_PATH_SAFE) for e in ordered],
                        [e.path for e in ordered])

    def _check(self, table: Any) -> None:
        """The snapshot is still one Spark's reader returns the right rows of, with the
        schema and partitioning this DataFrame was analyzed with."""
        if not self._readable(table):
            raise HeadwaterError(
                "HW_NATIVE_READ_CHANGED",
                f"The table at {self.uri} (version {table.version()}) now needs headwater's "
                "own reader (deletion vectors, column mapping or another reader feature).",
                "This DataFrame was planned for Spark's parquet reader, which would return "
                "deleted rows or wrong columns of such a snapshot.",
                "Read the table again (spark.read.format('delta').load(...) or "
                "spark.table(...)): the new read uses headwater's reader.")
        full = spark_schema(table.schema().to_json())
        schema = strip_field_metadata(full)
        now = {f.name.lower(): f.dataType for f in schema.fields}
        planned = strip_field_metadata(self.logical) if self.logical is not None \
            else self.schema
        changed = [f.name for f in planned.fields
                   if f.name.lower() in now and now[f.name.lower()] != f.dataType]
        if self.logical is not None:  # a column dropped since: its files' data is no row's
            current = {physical_name(f) for f in full.fields}
            changed += [f"{f.name} dropped" for f in self.logical.fields
                        if physical_name(f) not in current]
        partitions = list(table.metadata().partition_columns)
        if changed or partitions != self.partition_columns:
            raise HeadwaterError(
                "HW_NATIVE_READ_CHANGED",
                f"The table at {self.uri} changed its "
                + (f"column types ({', '.join(changed)})" if changed else
                   f"partitioning ({self.partition_columns} -> {partitions})")
                + f" in version {table.version()}, after this DataFrame was read.",
                "A DataFrame keeps the schema it was analyzed with; the new files do not fit "
                "it.", "Read the table again.", error_class="DELTA_SCHEMA_CHANGED")

    # --- JVM values ------------------------------------------------------------------------
    def _statuses(self, paths: list[str]) -> Any:
        """Hadoop FileStatus[] of ``paths`` in their order, in three JVM calls (one per file
        would cost a py4j round trip each)."""
        hadoop_paths = self._j.to_paths.stringToPath(self._strings_array(paths))
        try:
            return self._j.local_fs.listStatus(hadoop_paths)
        except Exception as exc:  # noqa: BLE001 - a file deleted between the check and here
            gone = [p for p in paths if not os.path.exists(p)]
            if gone:
                raise missing_files(self.uri, None, gone) from exc
            raise

    def _strings_array(self, items: list[str]) -> Any:
        """A Java String[] of ``items`` in one call (none may contain a newline)."""
        if not items:
            return self._gateway.new_array(self._j.string, 0)
        if any("\n" in i for i in items):
            array = self._gateway.new_array(self._j.string, len(items))
            for i, item in enumerate(items):
                array[i] = item
            return array
        return self._j.lines.split("\n".join(items), -1)

    def _seq(self, items: list[Any]) -> Any:
        values = self._j.array_list()
        for item in items:
            values.add(item)
        return self._j.converters.asScala(values).toList()

    def _row(self, values: tuple) -> Any:
        """Catalyst's InternalRow of one partition's values (Catalyst's own representation:
        UTF8String, days, microseconds, Decimal)."""
        row = self._j.row(len(values))
        for i, (value, field) in enumerate(zip(values, self.partition_schema.fields)):
            _set(self, row, i, value, field.dataType)
        return row

    def _utf8(self, text: str) -> Any:
        cached = self._strings.get(text)
        if cached is None:
            cached = self._j.utf8.fromString(text)
            self._strings[text] = cached
        return cached

    def _predicate(self, filters: Any) -> Any:
        """Catalyst's interpreted predicate of the partition filters (their columns bound to
        the positions of the partition values), or None when there are none."""
        if filters.isEmpty():
            return None
        j = self._j
        predicate = filters.apply(0)
        for i in range(1, filters.size()):
            predicate = j.and_(predicate, filters.apply(i))
        lowered = [c.lower() for c in self.partition_columns]
        bindings = []
        references = predicate.references().toSeq()
        for i in range(references.size()):
            attribute = references.apply(i)
            position = lowered.index(str(attribute.name()).lower())
            bindings.append((attribute, j.bound(position, attribute.dataType(), True)))
        # a Scala Map is a PartialFunction: transform replaces exactly its keys
        return j.predicate(predicate.transform(_scala_map(j, bindings)))


def _set(index: DeltaFileIndex, row: Any, i: int, value: Any, dtype: DataType) -> None:
    """Put one partition value into ``row`` as Catalyst stores values of ``dtype``."""
    if value is None:
        row.setNullAt(i)
    elif isinstance(dtype, StringType):
        row.update(i, index._utf8(str(value)))
    elif isinstance(dtype, LongType):
        row.setLong(i, int(value))
    elif isinstance(dtype, IntegerType):
        row.setInt(i, int(value))
    elif isinstance(dtype, ShortType):
        row.setShort(i, int(value))
    elif isinstance(dtype, ByteType):
        row.setByte(i, int(value))
    elif isinstance(dtype, BooleanType):
        row.setBoolean(i, bool(value))
    elif isinstance(dtype, DoubleType):
        row.setDouble(i, float(value))
    elif isinstance(dtype, FloatType):
        row.setFloat(i, float(value))
    elif isinstance(dtype, DateType):
        row.setInt(i, (value - dt.date(1970, 1, 1)).days)
    elif isinstance(dtype, TimestampType):
        stamp = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        row.setLong(i, _micros(stamp - _EPOCH))
    elif isinstance(dtype, TimestampNTZType):
        row.setLong(i, _micros(value.replace(tzinfo=None) - _EPOCH_NTZ))
    elif isinstance(dtype, DecimalType):
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        jdecimal = index._jvm.org.apache.spark.sql.types.Decimal.apply(number)
        jdecimal.changePrecision(dtype.precision, dtype.scale)
        row.update(i, jdecimal)
    elif isinstance(dtype, BinaryType):
        row.update(i, bytes(value) if not isinstance(value, str) else value.encode("utf-8"))
    else:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_TYPE",
            f"Partition column type {dtype.simpleString()} is not supported.",
            "Delta partition values are primitive types.", "Partition by another column.")


def _scala_map(j: _Jvm, pairs: list[tuple[Any, Any]]) -> Any:
    result = j.empty_map
    for key, value in pairs:
        result = result.updated(key, value)
    return result


def scala_map(spark: SparkSession, pairs: list[tuple[Any, Any]]) -> Any:
    """An immutable Scala Map of JVM objects (also a PartialFunction, for ``transform``)."""
    return _scala_map(_jvm_of(spark), pairs)


def _commit_signature(log_: DeltaLog, version: int) -> tuple:
    """(table, version, (mtime, size) of its commit file): what tells a version's listing
    from that of another table written at the same path later."""
    info = log_.fs.get_file_info(log_.commit_path(version))
    stat = None if info.type == pafs.FileType.NotFound else (info.mtime_ns, info.size)
    return (log_.uri, version, stat)


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def missing_files(uri: str, version: int | None, paths: list[str]) -> HeadwaterError:
    at = f"Version {version} of" if version is not None else "A snapshot of"
    return HeadwaterError(
        "HW_DELTA_FILE_NOT_FOUND",
        f"{at} the table at {uri} lists {len(paths)} data file(s) missing on storage, "
        f"e.g. {paths[0]}.",
        "VACUUM deletes the files of versions older than its retention (time travel to them "
        "then fails), or the files were deleted outside Delta.",
        "Read a version whose files are still present (DESCRIBE HISTORY), or restore the "
        "files.", error_class="DELTA_FILE_NOT_FOUND_DETAILED")


def native_frame(spark: SparkSession, index: DeltaFileIndex, streaming: bool = False
                 ) -> DataFrame:
    """A DataFrame over ``index``: Spark's parquet file source, the table's column order.
    ``streaming``: a micro-batch's DataFrame (what a v1 streaming source's getBatch returns:
    isStreaming, so Spark plans it as the batch of its source)."""
    j = _jvm_of(spark)
    ensure_callback_server_started(j.gateway)
    register_file_index(index)
    jspark = spark._jsparkSession
    relation = j.relation(index, index._jpartition_schema,
                          jspark.parseDataType(index.schema.json()), j.none, j.parquet,
                          j.empty_map, jspark)
    return DataFrame(j.dataset.ofRows(jspark, j.logical.apply(relation, streaming)), spark)

