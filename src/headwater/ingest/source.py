"""The file stream source: ``format("cloudFiles")`` (Auto Loader's name) and ``read_files``.

Spark's file source is kept for batch reads; streams use this source because the file
source needs a fixed schema, nulls bad fields silently, and keeps every seen file in driver
memory. Listing and file tracking are headwater's (``index.py``); parsing runs in the Python
workers on the executors (``parse.py``), one task per group of files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StringType, StructField, StructType

from headwater.conf import storage
from headwater.conf.layout import COMMIT_WAIT_OPTION, FILE_INDEX, RESCUED_DATA
from headwater.conf.options import parse_bool, parse_choice, parse_int, parse_size
from headwater.conf.read_limits import default_read_limit, limits_of
from headwater.delta.source import MACHINE_PARALLELISM
from headwater.errors import HeadwaterError
from headwater.ingest import landing
from headwater.ingest.clean import clean_quietly
from headwater.ingest.file_metadata import METADATA_COLUMN, METADATA_FIELD
from headwater.ingest.formats.common import FileEntry, ParseSettings
from headwater.ingest.index import FileIndex
from headwater.ingest.infer import add_new_fields, infer_schema
from headwater.ingest.parse import RecordParser
from headwater.ingest.schema_hints import apply_hints, parse_ddl
from headwater.ingest.schemas import SchemaStore

FORMATS = ("json", "csv", "parquet")
EVOLUTION_MODES = ("addNewColumns", "rescue", "failOnNewColumns", "none")
CLEAN_MODES = ("off", "archive", "delete")
# how often a waiting stream (a continuous pipeline's) looks for newly landed files, at most,
# and the time a look may take per folder of the landing tree (a stat each, about 2 us):
# a tree of 10,000 folders is looked at every 0.5 s, the processing-time trigger's pace
ARRIVAL_POLL_SECONDS = 0.05
FOLDER_LOOK_SECONDS = 0.00005


@dataclass
class IngestOptions:
    path: str
    fmt: str
    schema_location: str
    schema_json: str | None
    hints: str | None
    evolution: str
    rescued_column: str | None
    multi_line: bool
    header: bool
    sep: str
    max_files: int | None
    max_bytes: int | None
    include_existing: bool
    files: landing.FileFilter
    clean_source: str
    archive_dir: str | None
    sample_files: int
    sample_bytes: int
    ignore_missing: bool
    # set by continuous pipeline runs (conf.layout.COMMIT_WAIT_OPTION) on a local folder's
    # stream: with no new file, latestOffset waits up to this long for one to land
    arrival_wait_ms: int = 0

    @classmethod
    def parse(cls, options: dict[str, str]) -> IngestOptions:
        opts: dict[str, str] = {}
        for key, value in options.items():
            key = key.lower()
            opts[key[len("cloudfiles."):] if key.startswith("cloudfiles.") else key] = value
        path = opts.get("path")
        if not path:
            raise _option_error("path", "is missing", "Pass the landing folder: "
                                "read_files('/data/landing') or .load('/data/landing').")
        fmt = parse_choice("format", opts.get("format"), FORMATS, "json")
        location = opts.get("schemalocation")
        if not location:
            raise _option_error(
                "schema_location", "is missing",
                "Pass .option(\"cloudFiles.schemaLocation\", folder) (read_files: "
                "schema_location=): a folder for the schema versions and the list of ingested "
                "files. headwater.read_files picks one for you inside a pipeline or with a "
                "lakehouse attached.")
        explicit = opts.get("schema")
        if explicit and not explicit.lstrip().startswith("{"):
            # a DDL string, as Databricks' read_files(..., schema => 'id INT, ...') and
            # .option("schema", ...) give it; read_files in Python passes the JSON form
            explicit = parse_ddl(explicit, "schema").json()
        matched = parse_choice("schema_evolution_mode", opts.get("schemaevolutionmode") or None,
                               EVOLUTION_MODES, "none" if explicit else "addNewColumns")
        if explicit and matched == "addNewColumns":
            raise _option_error("schema_evolution_mode", "is 'addNewColumns' with an explicit "
                                "schema", "An explicit schema is used as given, so new columns "
                                "could never be added: drop schema= (schema_hints= fixes "
                                "chosen types), or use 'rescue' or 'failOnNewColumns'.")
        sep = opts.get("sep", opts.get("delimiter", ","))
        if len(sep) != 1:
            raise _option_error("sep", f"is {sep!r}", "Give one character, e.g. ',' or ';'.")
        rescued = opts.get("rescueddatacolumn", RESCUED_DATA)
        rescued = None if rescued.strip().lower() in ("", "none", "null") else rescued.strip()
        if matched == "rescue" and rescued is None:
            raise _option_error("rescued_data_column", "is off while schema_evolution_mode is "
                                "'rescue'", "Name a rescued data column, or pick another mode.")
        if not parse_bool("inferColumnTypes", opts.get("infercolumntypes"), True):
            # Auto Loader's default: JSON and CSV columns all strings. headwater always types
            # them (https://docs.databricks.com/en/ingestion/cloud-object-storage/auto-loader/schema.html)
            raise _option_error("inferColumnTypes", "is false", "headwater always infers "
                                "column types (as inferColumnTypes=true): drop the option, "
                                "or give string columns with schema_hints / schema.")
        clean = parse_choice("clean_source", opts.get("cleansource"), CLEAN_MODES, "off")
        archive = opts.get("sourcearchivedir") or opts.get("archivedir")
        # a glob in the path (/landing/*/orders-*.json): its folder is read, the glob filters
        folder, path_glob = landing.split_glob(path)
        root = landing.normalize(folder)
        if landing.is_remote(location):
            raise _option_error("schema_location", f"is on an object store ({location})",
                                "It holds the stream's file index (SQLite): give a local "
                                "path or a mount.")
        if clean == "archive":
            if not archive:
                raise _option_error("archive_dir", "is missing for clean_source='archive'",
                                    "Name the folder processed files are moved to.")
            archive = landing.normalize(archive)
            if archive == root or archive.startswith(root + ("/" if landing.is_remote(root)
                                                             else os.sep)):
                raise _option_error("archive_dir", f"{archive} is inside the landing folder",
                                    "Archived files would be found again: pick a folder "
                                    "outside it.")
        return cls(
            path=root, fmt=fmt, schema_location=os.path.abspath(location),
            schema_json=explicit, hints=opts.get("schemahints"), evolution=matched,
            rescued_column=rescued,
            multi_line=parse_bool("multiLine", opts.get("multiline"), False),
            header=parse_bool("header", opts.get("header"), True), sep=sep,
            max_files=_max_files(opts.get("maxfilespertrigger")),
            max_bytes=parse_size("maxBytesPerTrigger", opts.get("maxbytespertrigger"), None),
            include_existing=parse_bool("includeExistingFiles",
                                        opts.get("includeexistingfiles"), True),
            files=landing.FileFilter(opts.get("pathglobfilter"), path_glob),
            clean_source=clean, archive_dir=archive,
            sample_files=parse_int("schemaInference.sampleSize.numFiles",
                                   opts.get("schemainference.samplesize.numfiles"), 1000,
                                   minimum=1),
            sample_bytes=parse_size("schemaInference.sampleSize.numBytes",
                                    opts.get("schemainference.samplesize.numbytes"), 256 << 20),
            ignore_missing=parse_bool("ignoreMissingFiles", opts.get("ignoremissingfiles"),
                                      False),
            arrival_wait_ms=parse_int(COMMIT_WAIT_OPTION, opts.get(COMMIT_WAIT_OPTION), 0,
                                      minimum=0),
        )

    @property
    def index_path(self) -> str:
        return os.path.join(self.schema_location, FILE_INDEX)

    def settings(self) -> ParseSettings:
        return ParseSettings(fmt=self.fmt, rescued_column=self.rescued_column,
                             evolution=self.evolution, multi_line=self.multi_line,
                             header=self.header, sep=self.sep)


def _max_files(raw: str | None) -> int | None:
    if raw is not None and str(raw).strip().lower() == "none":
        return None  # read_files(max_files_per_trigger=None): no limit
    return parse_int("maxFilesPerTrigger", raw, 1000, minimum=1)


def _option_error(option: str, problem: str, fix: str) -> HeadwaterError:
    return HeadwaterError("HW_OPTION_INVALID", f"File ingestion option {option} {problem}.",
                          "The file stream cannot start without it.", fix)


# --- schema ------------------------------------------------------------------------------


def resolve_schema(opts: IngestOptions) -> StructType:
    """The data schema (without the rescued column): explicit, stored, or inferred now."""
    if opts.schema_json:
        schema = StructType.fromJson(json.loads(opts.schema_json))
    else:
        store = SchemaStore(opts.schema_location)
        latest = store.latest()
        if latest is None:
            samples = landing.sample(opts.path, opts.files, opts.sample_files,
                                     opts.sample_bytes)
            hints = parse_ddl(opts.hints) if opts.hints else StructType([])
            if not samples and not hints.fields:
                raise HeadwaterError(
                    "HW_INGEST_NO_FILES",
                    f"No files to infer a schema from in {opts.path}.",
                    "Without a schema, the first files that land decide it, and none has yet.",
                    "Land a file first, or pass schema= (or schema_hints= for the columns you "
                    "know).")
            inferred = infer_schema(samples, opts.settings())
            store.save(apply_hints(inferred, hints),
                       f"inferred from {len(samples)} file(s)")
            latest = store.latest()
        schema = latest[1]
    if opts.hints:
        schema = apply_hints(schema, parse_ddl(opts.hints))
    if opts.rescued_column and opts.rescued_column in schema.fieldNames():
        raise _option_error("rescued_data_column", f"{opts.rescued_column!r} is also a data "
                            "column", "Name the rescued data column differently.")
    return schema


# --- the data source ---------------------------------------------------------------------


class FilesDataSource(DataSource):
    """``spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")...``"""

    #: partitions a micro-batch aims for; a session registers a subclass with its own value
    parallelism: int = MACHINE_PARALLELISM

    def __init__(self, options: dict[str, str]) -> None:
        credentials, rest = storage.split_options(options)
        super().__init__(rest)  # storage options stay out of every other option dict
        self.opts = IngestOptions.parse(rest)
        for uri in (self.opts.path, self.opts.archive_dir):
            if uri:
                storage.register(uri, credentials)
        # Spark pickles the source and its reader into its Python workers: carry them along
        self.credentials = [storage.Credentials.for_uri(u)
                            for u in (self.opts.path, self.opts.archive_dir) if u]

    @classmethod
    def name(cls) -> str:
        return "cloudFiles"

    def schema(self) -> StructType:
        schema = resolve_schema(self.opts)
        names = schema.fieldNames()
        if self.opts.rescued_column:
            schema = StructType(list(schema.fields)).add(
                StructField(self.opts.rescued_column, StringType()))
        if METADATA_COLUMN not in names:  # a data column of that name wins, as in Spark
            # last; hidden from SELECT * by the DataFrame headwater hands out (hidden_columns)
            schema = StructType(list(schema.fields)).add(METADATA_FIELD)
        return schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = self.opts
        if opts.rescued_column and opts.rescued_column not in schema.fieldNames():
            # ``.schema(...)`` given without the rescued column: nowhere to keep misfits, so
            # a record that does not fit stops the stream (HW_INGEST_BAD_RECORD) instead.
            opts = dataclasses.replace(opts, rescued_column=None)
        if opts.evolution == "addNewColumns" and not opts.schema_json and \
                not SchemaStore(opts.schema_location).versions():
            # ``.schema(...)``: Spark never asked schema(), so nothing was inferred or stored
            # and the given schema cannot evolve. Keep it, rescue unknown fields.
            opts = dataclasses.replace(opts, evolution="none")
        # ``_metadata`` is the source's when it is last and of its type (not a data column)
        metadata = bool(schema.fields) and schema.fields[-1] == METADATA_FIELD
        data = StructType([f for f in schema.fields[:len(schema.fields) - metadata]
                           if f.name != opts.rescued_column])
        reader = FilesStreamReader(opts, data, self.parallelism, metadata)
        reader.credentials = self.credentials
        return reader


class FilesPartition(InputPartition):
    def __init__(self, files: list[FileEntry]) -> None:
        super().__init__(None)
        self.files = files


class FilesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: IngestOptions, schema: StructType,
                 parallelism: int = MACHINE_PARALLELISM, metadata: bool = False) -> None:
        self.opts = opts
        self.parallelism = parallelism
        self.schema = schema
        self.metadata = metadata  # rows carry the _metadata column
        self.cap: int | None = None
        self._index = None
        self.credentials: list[storage.Credentials] = []

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_index"] = None  # the index stays on the driver
        return state

    @property
    def index(self):
        if self._index is None:
            index = FileIndex(self.opts.index_path, self.opts.path, self.opts.files)
            identity = f"{self.opts.path} {self.opts.fmt} {self.opts.files.describe()}"
            owner = index.get("stream")
            if owner is not None and owner != identity:
                index.close()
                raise _option_error(
                    "schema_location", f"{self.opts.schema_location} belongs to another "
                    f"stream ({owner}), not this one ({identity})",
                    "Its file list says which of that stream's files were read: give each "
                    "stream (folder, format, path filter) its own schema location.")
            with index.transaction():
                index.put("stream", identity)
                index.put("root", self.opts.path)
                index.put("clean_source", self.opts.clean_source)
                index.put("archive_dir", self.opts.archive_dir or "")
                # where credentials come from (never what they are): see clean_remote
                index.put("storage_options", "given" if storage.options_for(self.opts.path)
                          else "")
            if index.get("first_listing") is None:
                # The first listing of this schema location decides what "existing" means.
                index.discover(state="new" if self.opts.include_existing else "skipped")
                index.put("first_listing", "done")
            self._index = index
        return self._index

    def _offset(self, seq: int) -> dict:
        return {"seq": seq, "hw_file_index": self.opts.index_path}

    def initialOffset(self) -> dict:
        # Always 0: Spark asks more than once (and again after a restart before batch 0
        # commits), so a start that moved would lose files. Files that existed before the
        # stream's first listing are marked 'skipped' instead, when include_existing is off.
        return self._offset(0)

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_read_limit(self.opts.max_files, self.opts.max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap = self.index.discover()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["seq"])
        if self.opts.clean_source != "off":
            clean_quietly(self.opts.index_path, begin)  # ``start`` is committed by now
        max_files, max_bytes = limits_of(limit, self.opts.max_bytes)
        looked = False
        if self.cap is None:
            known = self.index.max_seq()
            if max_files is None or known - begin < max_files:
                self.index.discover()  # the backlog is short: look for new files
                looked = True
        end = self.index.end_for(begin, self.cap, max_files, max_bytes)
        if end == begin and self.cap is None and not looked:
            # the "backlog" was skipped files (includeExistingFiles=false): nothing to read
            self.index.discover()
            end = self.index.end_for(begin, self.cap, max_files, max_bytes)
        if end == begin and self.waits_for_files:
            end = self._wait_for_files(begin, max_files, max_bytes)
        return self._offset(end)

    @property
    def waits_for_files(self) -> bool:
        """A continuous pipeline's stream of a local folder (the wait option) outside
        AvailableNow: listing an object store this often would cost a request each time."""
        return bool(self.opts.arrival_wait_ms) and self.cap is None \
            and not landing.is_remote(self.opts.path)

    def _wait_for_files(self, begin: int, max_files: int | None, max_bytes: int | None) -> int:
        """Nothing new at ``begin``: look for new files up to the wait and answer as soon as
        one landed, so a continuous pipeline's file flow starts its micro-batch when a file
        lands instead of at its next poll. ``begin`` again when none came in time.

        A look is a stat of each known folder (no listing, no index query); the folders
        are listed (:meth:`FileIndex.discover`) only when one's change time moved. Looks
        come every :data:`ARRIVAL_POLL_SECONDS`, or less often in a tree of many folders
        (:data:`FOLDER_LOOK_SECONDS` each), so the wait costs a few percent of a core."""
        deadline = time.monotonic() + self.opts.arrival_wait_ms / 1000
        times = self.index.folder_times()
        while time.monotonic() < deadline:
            pause = max(ARRIVAL_POLL_SECONDS, len(times) * FOLDER_LOOK_SECONDS)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            if self.index.folder_times(times) == times:
                continue
            self.index.discover()
            times = self.index.folder_times()  # new subfolders included
            end = self.index.end_for(begin, self.cap, max_files, max_bytes)
            if end != begin:
                return end
        return begin

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        files = self.index.files_between(int(start["seq"]), int(end["seq"]))
        if not files:
            return []
        total = sum(f.size for f in files)
        count = max(self.parallelism, total // (128 << 20))
        count = min(count, len(files))
        groups: list[list[FileEntry]] = [[] for _ in range(count)]
        sizes = [0] * count
        for entry in files:  # in seq order, each to the lightest group so far
            i = sizes.index(min(sizes))
            groups[i].append(entry)
            sizes[i] += entry.size
        return [FilesPartition(g) for g in groups if g]

    def read(self, partition: InputPartition) -> Iterator:
        parser = RecordParser(self.schema, self.opts.settings(), self.metadata)
        yield from parser.parse(partition.files, self._read_bytes)
        if parser.observed.fields:
            self._evolve(parser)

    def _read_bytes(self, entry: FileEntry) -> bytes | None:
        # A replayed batch reads the archived copy first: a newer file may have landed
        # under the same name since.
        candidates = [entry.archived_to] if entry.archived_to else []
        candidates.append(entry.path)
        if self.opts.archive_dir:
            candidates.append(landing.join(self.opts.archive_dir,
                                           landing.relative(entry.path, self.opts.path)))
        for candidate in candidates:
            data = landing.read_file(candidate)
            if data is not None:
                return data
        if self.opts.ignore_missing:
            return None
        raise HeadwaterError(
            "HW_INGEST_FILE_MISSING",
            f"{entry.path} was found by the stream but is gone before it was read.",
            "A file was deleted or moved out of the landing folder while the stream was "
            "behind, or a replayed batch needs a file cleanSource deleted.",
            "Put the file back, or set ignore_missing_files=True to skip missing files.")

    def _evolve(self, parser: RecordParser) -> None:
        _, added = add_new_fields(self.schema, parser.observed)
        if not added:
            return
        columns = ", ".join(added)
        if self.opts.evolution == "failOnNewColumns":
            raise HeadwaterError(
                "HW_INGEST_NEW_COLUMNS",
                f"New columns in {parser.new_in}: {columns}.",
                "schema_evolution_mode is 'failOnNewColumns'.",
                "Add them with schema_hints or a new schema, or use "
                "schema_evolution_mode='addNewColumns' (or 'rescue' to keep them in "
                f"{self.opts.rescued_column or 'the rescued data column'}).")
        version = SchemaStore(self.opts.schema_location).add_columns(
            parser.observed, self.schema, f"new columns in {parser.new_in}")
        raise HeadwaterError(
            "HW_INGEST_SCHEMA_EVOLVED",
            f"New columns in {parser.new_in}: {columns}; schema version {version} in "
            f"{self.opts.schema_location} has them.",
            "With schema_evolution_mode='addNewColumns' the stream stops so that it can "
            "restart with the new schema (no row of this batch was written).",
            "Restart the stream: it picks the new schema up. `headwater run` restarts it "
            "by itself.")


def source_id(path: str, fmt: str = "json", glob: str | None = None) -> str:
    """Names a file stream's default schema location: its folder, format and filter."""
    key = f"{landing.normalize(path)}|{fmt.lower()}|{glob or ''}"
    return hashlib.sha1(key.encode()).hexdigest()[:12]
