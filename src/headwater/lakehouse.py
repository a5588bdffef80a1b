"""A lakehouse: one root folder of Delta tables, addressed by name through Spark's catalog.

Layout under the root::

    <root>/<table>/_delta_log           tables of the default schema
    <root>/<schema>/<table>/_delta_log   tables of a named schema
    <root>/_checkpoints/<query>/         one checkpoint per writing query
    <root>/_warehouse/                   Spark's (empty) managed-table folders

Spark's catalog cannot carry a path to a Python data source (a catalog table backed by one
generic source loses its OPTIONS and LOCATION), so every table gets a data source of its own
with the path built in (``hw_<schema>__<table>``) and is registered as
``CREATE TABLE <name> USING hw_...``. Then ``spark.table``, ``spark.readStream.table``,
``writeStream.toTable``, ``SELECT`` and ``INSERT INTO/OVERWRITE`` work as the seeds write them.
The catalog lives in memory, so every table under the root is registered at session start.
"""

from __future__ import annotations

import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from headwater.checkpoint_lock import CheckpointLock
from headwater.errors import HeadwaterError
from headwater.triggers import Trigger, trigger_kwargs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

_PART = re.compile(r"^[a-z_][a-z0-9_]*$")
RESERVED_PREFIXES = ("_", ".")
# Tables headwater writes itself, queryable like any other (names users cannot take).
SYSTEM_TABLES = ("_event_log",)


@dataclass(frozen=True)
class TableName:
    """A validated table name: ``table`` or ``schema.table``, lower case."""

    schema: str | None
    table: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    @property
    def sql(self) -> str:
        return f"`{self.schema}`.`{self.table}`" if self.schema else f"`{self.table}`"

    @property
    def relative_path(self) -> Path:
        return Path(self.schema, self.table) if self.schema else Path(self.table)

    @property
    def source_name(self) -> str:
        """The per-table data source's name (an identifier Spark's parser accepts)."""
        return f"hw_{self.schema}__{self.table}" if self.schema else f"hw_{self.table}"


def parse_name(name: str) -> TableName:
    """``bronze``, ``sales.orders``, ``default.bronze`` or with backticks; never a path."""
    if not isinstance(name, str) or not name.strip():
        raise _bad_name(name, "a table name is a non-empty string")
    parts = [p.strip().strip("`").lower() for p in name.strip().split(".")]
    if parts[0] == "spark_catalog" and len(parts) == 3:
        parts = parts[1:]
    if parts[0] == "default" and len(parts) == 2:
        parts = parts[1:]
    if len(parts) > 2:
        raise _bad_name(name, "names have at most two parts, schema.table")
    if len(parts) == 1 and parts[0] in SYSTEM_TABLES:
        return TableName(None, parts[0])
    for part in parts:
        if not _PART.match(part) or part.startswith(RESERVED_PREFIXES):
            raise _bad_name(
                name, f"{part!r} must be letters, digits and underscores, not starting with a "
                "digit or underscore")
    return TableName(parts[0] if len(parts) == 2 else None, parts[-1])


def _bad_name(name: Any, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_TABLE_NAME_INVALID", f"{name!r} is not a valid table name: {why}.",
        "Table names become folders under the lakehouse root and must not leave it.",
        "Use names like 'bronze' or 'sales.orders'.",
    )


def _per_table_source(name: TableName, path: str) -> type:
    """A DeltaDataSource subclass whose path is fixed: Spark's catalog keeps the name only."""
    from headwater.delta.datasource import DeltaDataSource

    source_name = name.source_name

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k: v for k, v in options.items() if k.lower() != "path"}
        opts["path"] = path
        DeltaDataSource.__init__(self, opts)

    cls = type(source_name, (DeltaDataSource,), {
        "__init__": __init__,
        "name": classmethod(lambda cls: source_name),
        "__module__": __name__,
    })
    return cls


def list_tables(root: Path) -> list[str]:
    """Every Delta table under ``root`` (system tables first), as qualified names."""
    found = [n for n in SYSTEM_TABLES if (root / n / "_delta_log").is_dir()]
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.name.startswith(RESERVED_PREFIXES):
            continue
        if (entry / "_delta_log").is_dir():
            found.append(entry.name)
            continue
        for inner in sorted(entry.iterdir()):
            if inner.is_dir() and (inner / "_delta_log").is_dir() \
                    and not inner.name.startswith(RESERVED_PREFIXES):
                found.append(f"{entry.name}.{inner.name}")
    return [n for n in found if _PART.match(n.split(".")[-1])]


_active: "Lakehouse | None" = None
_active_guard = threading.Lock()


def active_lakehouse() -> "Lakehouse | None":
    """The lakehouse attached to the current session, if any."""
    return _active


class Lakehouse:
    """A root folder of Delta tables, registered by name in the session's catalog.

    root: the folder; created when missing.
    spark: the session; the active one when None (a local session is started if none is).
    attach: register the tables now and make this the session's lakehouse (default True).
    """

    def __init__(self, root: str | Path, spark: "SparkSession | None" = None,
                 attach: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
        if spark is None:
            from headwater.session import spark_session

            spark = spark_session(conf={"spark.sql.warehouse.dir": str(self.root / "_warehouse")})
        self.spark = spark
        self._locks: dict[str, tuple[CheckpointLock, Any]] = {}
        self._registered: set[str] = set()
        # foreachBatch threads of concurrent flows may create side tables at once
        self._create_lock = threading.RLock()
        if attach:
            self.attach()

    # --- names and paths ---------------------------------------------------------------

    def path(self, name: str) -> str:
        """The table's folder (it may not exist yet)."""
        return str(self.root / parse_name(name).relative_path)

    def exists(self, name: str) -> bool:
        return (Path(self.path(name)) / "_delta_log").is_dir()

    def tables(self) -> list[str]:
        """Every Delta table under the root, as qualified names, sorted."""
        return list_tables(self.root)

    def checkpoint(self, name: str, flow: str | None = None) -> str:
        """The checkpoint folder of the query writing ``name`` (one per flow)."""
        base = self.root / "_checkpoints" / parse_name(name).qualified
        return str(base / flow if flow else base)

    # --- catalog -------------------------------------------------------------------------

    def attach(self) -> "Lakehouse":
        """Register every table under the root and make this the session's lakehouse."""
        global _active
        with _active_guard:
            _active = self
        _install_catalog_hooks()
        for name in self.tables():
            self.register(name)
        return self

    def register(self, name: str) -> None:
        """(Re)register one existing table in Spark's catalog, with its current schema."""
        tname = parse_name(name)
        path = self.path(name)
        if not self.exists(name):
            raise self._not_found(tname)
        self.spark.dataSource.register(_per_table_source(tname, path))
        if tname.schema:
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{tname.schema}`")
        # The catalog keeps the schema seen at CREATE; re-creating refreshes it.
        self.spark.sql(f"DROP TABLE IF EXISTS {tname.sql}")
        self.spark.sql(f"CREATE TABLE {tname.sql} USING {tname.source_name}")
        self._registered.add(tname.qualified)

    def refresh(self) -> None:
        """Re-register every table (after schema changes written by other processes)."""
        for name in self.tables():
            if name in SYSTEM_TABLES and name in self._registered:
                continue  # their schema never changes: registered once is enough
            self.register(name)

    def create_table(
        self,
        name: str,
        schema: "StructType",
        partition_by: Iterable[str] = (),
        comment: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> str:
        """Create an empty Delta table (all columns nullable) unless it exists; return its path.

        An existing table is kept as it is; its partitioning must match ``partition_by``.
        """
        with self._create_lock:
            return self._create_table(name, schema, partition_by, comment, properties)

    def _create_table(self, name, schema, partition_by, comment, properties) -> str:
        from deltalake import DeltaTable

        from headwater.delta.schema import arrow_schema, as_nullable
        from headwater.delta.sink import check_partitioning

        tname = parse_name(name)
        path = self.path(name)
        partition_by = list(partition_by)
        if self.exists(name):
            if partition_by:  # only then is the log worth opening (side tables: every batch)
                check_partitioning(path, list(DeltaTable(path).metadata().partition_columns),
                                   partition_by)
        else:
            missing = [c for c in partition_by if c not in schema.fieldNames()]
            if missing:
                raise HeadwaterError(
                    "HW_SINK_PARTITION_MISMATCH",
                    f"partition_by names columns {missing} that table {tname.qualified} does "
                    "not have.", "Partition columns must be columns of the table.",
                    f"Use some of: {', '.join(schema.fieldNames())}.")
            names = [f.name.lower() for f in schema.fields]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise HeadwaterError(
                    "HW_TABLE_SCHEMA_INVALID",
                    f"Table {tname.qualified} would have duplicate columns {dupes}.",
                    "Delta column names are unique, ignoring case (a join often repeats one).",
                    "Rename or drop the duplicates, e.g. .select(...) or .withColumnRenamed(...).")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            DeltaTable.create(
                path, arrow_schema(as_nullable(schema)), mode="ignore",
                partition_by=partition_by or None, name=tname.table, description=comment,
                configuration=dict(properties or {}) or None,
            )
        if tname.qualified not in self._registered:
            self.register(name)
        return path

    def drop(self, name: str) -> None:
        """Remove a table from the catalog and delete its data and its checkpoints."""
        tname = parse_name(name)
        self.spark.sql(f"DROP TABLE IF EXISTS {tname.sql}")
        self._registered.discard(tname.qualified)
        shutil.rmtree(self.path(name), ignore_errors=True)
        shutil.rmtree(self.checkpoint(name), ignore_errors=True)

    # --- reading and writing -------------------------------------------------------------

    def read(self, name: str, **options: Any) -> "DataFrame":
        """A batch DataFrame of the table's latest version (or versionAsOf/timestampAsOf)."""
        tname = self._existing(name)
        return self.spark.read.format(tname.source_name).options(**_strs(options)).load()

    def read_stream(self, name: str, **options: Any) -> "DataFrame":
        """A streaming DataFrame over the table (Delta source options: maxFilesPerTrigger, ...)."""
        tname = self._existing(name)
        return self.spark.readStream.format(tname.source_name).options(**_strs(options)).load()

    def write(self, df: "DataFrame", name: str, mode: str = "append", **options: Any) -> None:
        """Write a batch DataFrame; the table is created from its schema when missing."""
        tname = parse_name(name)
        self.create_table(name, df.schema, partition_by=_columns(options.get("partitionBy")))
        df.write.format(tname.source_name).mode(mode).options(**_strs(options)).save()

    def write_stream(
        self,
        df: "DataFrame",
        name: str,
        trigger: Trigger = None,
        output_mode: str = "append",
        query_name: str | None = None,
        checkpoint: str | None = None,
        partition_by: Iterable[str] = (),
        keys: Iterable[str] | None = None,
        **options: Any,
    ) -> "StreamingQuery":
        """Start a streaming write of ``df`` into table ``name`` and return the query.

        trigger: see :mod:`headwater.triggers`; default a micro-batch every 500 ms.
        output_mode: "append" (default), "complete" (the table is replaced each batch) or
            "update" (changed rows are MERGEd by ``keys``, default the aggregate's group keys).
        query_name: default the table name.
        checkpoint: default ``<root>/_checkpoints/<table>``; one query per checkpoint (locked).
        partition_by: partition columns when the table is created.
        """
        tname = parse_name(name)
        kwargs = trigger_kwargs(trigger)
        mode = _output_mode(output_mode)
        checkpoint = checkpoint or self.checkpoint(name)
        self.create_table(name, df.schema, partition_by=partition_by)
        lock = self._lock(checkpoint, query_name or tname.qualified)
        try:
            writer = (df.writeStream.trigger(**kwargs).option("checkpointLocation", checkpoint)
                      .queryName(query_name or tname.qualified))
            if mode == "update":
                from headwater.delta.merge import merge_batch
                from headwater.pipeline.plan import group_keys

                merge_keys = list(keys) if keys else group_keys(df)
                path = self.path(name)
                app_id = f"headwater-merge-{tname.qualified}"
                writer = writer.outputMode("update").foreachBatch(
                    lambda batch, batch_id: merge_batch(batch, path, merge_keys, app_id, batch_id))
                query = writer.start()
            else:
                query = (writer.format(tname.source_name).outputMode(mode)
                         .options(**_strs(options)).start())
        except BaseException:
            lock.release()
            raise
        self._locks[checkpoint] = (lock, query)
        return query

    def _lock(self, checkpoint: str, owner: str) -> CheckpointLock:
        held = self._locks.pop(checkpoint, None)
        if held is not None:
            lock, query = held
            if query.isActive:
                self._locks[checkpoint] = held  # the acquire below refuses
            else:
                lock.release()  # a finished query of ours: its lock can go
        return CheckpointLock(checkpoint, owner).acquire()

    def release_locks(self) -> None:
        """Drop the locks of queries that have ended."""
        for checkpoint, (lock, query) in list(self._locks.items()):
            if not query.isActive:
                lock.release()
                self._locks.pop(checkpoint, None)

    def _existing(self, name: str) -> TableName:
        tname = parse_name(name)
        if not self.exists(name):
            raise self._not_found(tname)
        if tname.qualified not in self._registered:
            self.register(name)
        return tname

    def _not_found(self, tname: TableName) -> HeadwaterError:
        return HeadwaterError(
            "HW_TABLE_NOT_FOUND", f"Table {tname.qualified} does not exist in the lakehouse at "
            f"{self.root}.", f"There is no Delta table at {self.path(tname.qualified)}; tables "
            f"here: {', '.join(self.tables()) or 'none yet'}.",
            "Check the name, or create the table first (a stream's toTable, write_stream, or "
            "CREATE TABLE through Lakehouse.sql).")

    # --- SQL -----------------------------------------------------------------------------

    def sql(self, query: str) -> "DataFrame":
        """``spark.sql`` plus what Spark cannot do alone with Python sources:
        ``CREATE TABLE`` (columns or AS SELECT) and ``DROP TABLE`` go through the lakehouse, and
        ``delta.`/path``` reads a Delta table by path."""
        from headwater.sql_statements import run_sql

        return run_sql(self, query)


def _strs(options: dict[str, Any]) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()
            if v is not None}


def _columns(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [c.strip() for c in value.split(",") if c.strip()]
    return list(value)


def _output_mode(mode: str) -> str:
    text = str(mode).lower()
    if text not in ("append", "complete", "update"):
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"Output mode {mode!r} is not one of append, complete, update.",
            "The output mode says what each micro-batch writes to the table.",
            "Use 'append' (new rows), 'complete' (whole result) or 'update' (changed rows).")
    return text


# --- seed-style table creation -------------------------------------------------------------

_hooks_installed = False


def _install_catalog_hooks() -> None:
    """Make a stream's first ``toTable``/a first ``saveAsTable`` create the table in the
    lakehouse (Spark alone would create it at a default location headwater cannot see)."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    from pyspark.sql.readwriter import DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    original_to_table = DataStreamWriter.toTable
    original_save_as_table = DataFrameWriter.saveAsTable

    def toTable(self, tableName, format=None, outputMode=None, partitionBy=None,  # noqa: N802
                queryName=None, **options):
        _create_for(self._df, tableName, format, partitionBy)
        return original_to_table(self, tableName, format=None, outputMode=outputMode,
                                 partitionBy=None, queryName=queryName, **options)

    def saveAsTable(self, name, format=None, mode=None, partitionBy=None,  # noqa: N802
                    **options):
        lakehouse = active_lakehouse()
        if lakehouse is None or not _is_delta(format):
            return original_save_as_table(self, name, format=format, mode=mode,
                                          partitionBy=partitionBy, **options)
        existed = lakehouse.exists(name)
        mode_text = (mode or "errorifexists").lower()
        if existed and mode_text in ("error", "errorifexists"):
            raise HeadwaterError(
                "HW_TABLE_EXISTS", f"Table {parse_name(name).qualified} already exists.",
                "saveAsTable's default mode refuses to write into an existing table.",
                "Use .mode('append') or .mode('overwrite').")
        if existed and mode_text == "ignore":
            return None
        lakehouse.write(self._df, name, mode="overwrite" if mode_text == "overwrite" else
                        "append", partitionBy=partitionBy, **options)
        return None

    DataStreamWriter.toTable = toTable
    if not hasattr(DataStreamWriter, "table"):
        # Databricks' spelling, used throughout the seeds: writeStream...table("silver").
        DataStreamWriter.table = toTable
    DataFrameWriter.saveAsTable = saveAsTable


def _is_delta(fmt: str | None) -> bool:
    return fmt is None or fmt.lower() == "delta"


def _create_for(df: "DataFrame", name: str, fmt: str | None, partition_by: Any) -> None:
    lakehouse = active_lakehouse()
    if lakehouse is None or not _is_delta(fmt):
        return
    if not lakehouse.exists(name):
        lakehouse.create_table(name, df.schema, partition_by=_columns(partition_by))
    else:
        lakehouse._existing(name)
