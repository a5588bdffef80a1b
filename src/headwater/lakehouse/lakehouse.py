"""A lakehouse: one root folder of Delta tables, addressed by name through Spark's catalog.

Layout under the root::

    <root>/<table>/_delta_log           tables of the default schema
    <root>/<schema>/<table>/_delta_log   tables of a named schema
    <root>/_event_log/                   the pipeline event log (a Delta table)
    <state>/_checkpoints/<query>/        one checkpoint per writing query
    <state>/_warehouse/                  Spark's (empty) managed-table folders

``<state>`` is the root itself, or the local ``state_dir`` of a root on an object store.

Spark's catalog cannot carry a path to a Python data source (a catalog table backed by one
generic source loses its OPTIONS and LOCATION), so every table gets a data source of its own
with the path built in (``hw_<schema>__<table>``) and is registered as
``CREATE TABLE <name> USING hw_...``. Then ``spark.table``, ``spark.readStream.table``,
``writeStream.toTable``, ``SELECT`` and ``INSERT INTO/OVERWRITE`` work as the seeds write them.
The catalog lives in memory, so every table under the root is registered at session start.

Why one module: :class:`Lakehouse` is the public object users hold; its methods
are thin (names, catalog registration, replace, SQL and locks live in their own modules), and
splitting the class would split its documentation.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.functions import col
from pyspark.sql.types import StructType

from headwater.conf.database import check_catalog, spark_database, split_database
from headwater.conf.layout import (
    CATALOG_MARKER,
    CHECKPOINTS,
    DELTA_LOG,
    LAKEHOUSE_STATE_CONF,
    SYSTEM_TABLES,
    TEMPORARY,
    WAREHOUSE,
)
from headwater.conf.location import AnyPath, location, remove_tree, state_folder
from headwater.conf.options import parse_bool
from headwater.conf.triggers import Trigger, trigger_kwargs
from headwater.delta import definition
from headwater.delta.clustering import clustering_columns
from headwater.delta.constraints import schema_overwrite
from headwater.delta.create import create_delta_table
from headwater.delta.generated import Generation
from headwater.delta.log import DeltaLog, normalize_uri, open_table
from headwater.delta.schema import as_nullable, spark_schema, strip_field_metadata
from headwater.delta.update_mode import merge_batch
from headwater.delta.write.checks import (
    check_partitioning,
    type_widening_enabled,
    written_type,
)
from headwater.delta.write.native import native_sink, write_native, write_rows
from headwater.delta.write.replace_table import declared_schema, replace_native
from headwater.delta.write.request import WriteRequest, reset_session_txn, with_session_settings
from headwater.errors import HeadwaterError, translated
from headwater.lakehouse import catalog, external, hooks, native_reads
from headwater.lakehouse.catalog import columns_option as _columns
from headwater.lakehouse.catalog import per_table_source
from headwater.lakehouse.names import (
    TableName,
    catalog_schemas,
    list_catalogs,
    list_tables,
    name_taken_error,
    parse_name,
    resolve,
)
from headwater.lakehouse.sources import start_session
from headwater.lakehouse.sql.router import run_sql
from headwater.spark.catalog_ddl import columns_sql
from headwater.spark.checkpoint_lock import CheckpointLock, guarded
from headwater.spark.jvm import (
    alter_catalog_schema,
    catalog_table,
    current_database,
    has_jvm_writer,
)
from headwater.spark.micro_batch_sink import start_with_sink
from headwater.spark.plan import group_keys
from headwater.spark.raw_sql import raw_sql
from headwater.spark.session import session_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery


class Lakehouse:
    """A root folder of Delta tables, registered by name in the session's catalog.

    root: the folder; created when missing. A local path, or an object-store URI
        (``s3://bucket/lake``, ``az://``, ``gs://``: credentials from ``[storage]``,
        ``spark_session(storage_options=...)`` or the environment).
    state_dir: a local folder (or mount) for checkpoints, run files (``_runs``),
        ``read_files`` state (``_ingest``) and Spark's warehouse; default the root, which must
        then be local (else ``HW_LAKEHOUSE_STATE_DIR_MISSING``: no guessed folder, whose loss
        would make every stream start over). Created when missing.
    spark: the session; the active one when None (a local session is started if none is).
    attach: register the tables now and make this the session's lakehouse (default True):
        ``spark.sql``, ``saveAsTable`` and ``toTable`` in that session then reach this
        lakehouse, until :meth:`detach`. ``Lakehouse.of(spark)`` returns it.
    """

    def __init__(self, root: str | os.PathLike[str], spark: SparkSession | None = None,
                 attach: bool = True, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.root: AnyPath = location(root)
        self.state_dir: Path = state_folder(self.root, state_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if spark is None:
            spark = SparkSession.getActiveSession()
        if spark is None:
            spark = start_session(warehouse=self.state_dir / WAREHOUSE)
        self.spark = spark
        self._locks: dict[str, tuple[CheckpointLock, Any]] = {}
        self._registered: set[str] = set()
        self._catalogs: set[str] = set(list_catalogs(self.root))
        # qualified name -> folder: tables kept out of the catalog (see keep_private)
        self._private: dict[str, str] = {}
        # foreachBatch threads of concurrent flows may create side tables at once, and a run's
        # views commit their replaces from threads: a table's creation (or replace commit)
        # and its catalog registration happen together, one thread at a time
        self._create_lock = threading.RLock()
        if attach:
            self.attach()

    # --- names and paths ---------------------------------------------------------------

    def path(self, name: str) -> str:
        """The table's folder (it may not exist yet): under the root, or an external table's
        location."""
        tname = parse_name(name)
        private = self._private.get(tname.qualified)
        if private is not None:
            return private
        self._check_catalog_folder(tname)
        return external.location_of(self.state_dir, tname) or str(self.root / tname.relative_path)

    def resolve(self, name: str | list[str], session: SparkSession | None = None
                ) -> TableName:
        """What ``name``, as a user wrote it in ``session`` (default the lakehouse's), names:
        one- and two-part names in the session's current catalog and schema."""
        return resolve(name, session or self.spark)

    def catalogs(self) -> list[str]:
        """The lakehouse's catalogs besides ``spark_catalog`` (CREATE CATALOG, or the first
        table named ``catalog.schema.table``)."""
        return sorted(self._catalogs)

    def create_catalog(self, name: str, comment: str | None = None) -> bool:
        """Make catalog ``name`` (its folder under the root, with a marker file); False when
        it exists. A schema of ``spark_catalog`` of that name (a folder of tables) is
        refused: the two would share the folder."""
        catalog = check_catalog(name, "Catalog")
        if catalog is None:
            return False
        self._check_catalog_folder(TableName("default", "_", catalog), creating=True)
        marker = self.root / catalog / CATALOG_MARKER
        if catalog in self._catalogs or marker.is_file():
            self._catalogs.add(catalog)
            return False
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"name": catalog, "comment": comment}))
        self._catalogs.add(catalog)
        raw_sql(self.spark, f"CREATE DATABASE IF NOT EXISTS `{spark_database(catalog, None)}`")
        return True

    def forget_catalog(self, name: str) -> None:
        """Forget catalog ``name`` (DROP CATALOG removes its folder)."""
        self._catalogs.discard(name)

    def _check_catalog_folder(self, tname: TableName, creating: bool = False) -> None:
        """A catalog and a schema of ``spark_catalog`` never share a folder under the root."""
        if tname.catalog is None:
            if tname.schema is None and tname.table in self._catalogs:
                raise HeadwaterError(
                    "HW_TABLE_NAME_INVALID", f"{tname.qualified}: {tname.table!r} is a catalog "
                    f"of the lakehouse at {self.root}, not a table.",
                    "A catalog and a table of that name would share one folder.",
                    "Use another table name.")
            if tname.schema in self._catalogs:
                raise HeadwaterError(
                    "HW_TABLE_NAME_INVALID", f"{tname.qualified}: {tname.schema!r} is a catalog "
                    f"of the lakehouse at {self.root}, not a schema of spark_catalog.",
                    "A catalog and a schema of that name would share one folder.",
                    f"Name the table in the catalog ({tname.schema}.<schema>.{tname.table}) "
                    "or use another schema name.")
            return
        if tname.catalog in self._catalogs:
            return
        folder = self.root / tname.catalog
        if (folder / CATALOG_MARKER).is_file():
            self._catalogs.add(tname.catalog)
        elif (folder / DELTA_LOG).is_dir():
            raise HeadwaterError(
                "HW_CATALOG_NAME_INVALID", f"{tname.qualified}: {tname.catalog!r} is a table of "
                f"the lakehouse at {self.root}, not a catalog.",
                "A catalog and a table of that name would share one folder.",
                "Name the catalog differently.")
        elif folder.is_dir() and any((inner / DELTA_LOG).is_dir() for inner in folder.iterdir()):
            raise HeadwaterError(
                "HW_CATALOG_NAME_INVALID", f"{tname.qualified}: {tname.catalog!r} is a schema "
                f"of spark_catalog in the lakehouse at {self.root} (it holds tables), not a "
                "catalog.", "A catalog and a schema of that name would share one folder.",
                f"Name the catalog differently, or move the tables of schema {tname.catalog}.")
        elif not creating:
            raise HeadwaterError(
                "HW_CATALOG_NOT_FOUND", f"{tname.qualified}: the catalog {tname.catalog} does "
                f"not exist in the lakehouse at {self.root}.",
                "Tables are created in existing catalogs (as Unity Catalog does); a misspelt "
                "catalog would otherwise become a new one.",
                f"Run CREATE CATALOG {tname.catalog}, or check the name.",
                error_class="CATALOG_NOT_FOUND")

    def keep_private(self, name: str) -> str:
        """Make ``name`` a private table of this Lakehouse object (a pipeline's TEMPORARY
        table): stored under ``<root>/_temporary/``, which :meth:`tables` never lists, so
        other sessions and ``headwater tables`` do not see it; here it is read and written by
        name like any table. Returns its folder."""
        tname = parse_name(name)
        folder = str(self.root / TEMPORARY / tname.relative_path)
        self._private[tname.qualified] = folder
        return folder

    def exists(self, name: str) -> bool:
        return (location(self.path(name)) / DELTA_LOG).is_dir()

    def is_external(self, name: str) -> bool:
        """True when ``name`` is an external table (its data lives outside the root)."""
        return external.location_of(self.state_dir, parse_name(name)) is not None

    def tables(self) -> list[str]:
        """Every Delta table of the lakehouse (under the root, then the external ones whose
        location holds a table), as qualified names."""
        under_root = list_tables(self.root)
        return under_root + [n for n in external.names(self.state_dir)
                             if n not in under_root and self.exists(n)]

    def register_external(self, name: str, path: str) -> None:
        """Make ``name`` refer to the Delta table at ``path`` (outside the root), as
        ``CREATE TABLE name ... LOCATION path`` does: registered in Spark's catalog now and at
        every session start; ``DROP TABLE`` forgets the name and keeps the data."""
        tname = parse_name(name)
        if (self.root / tname.relative_path / DELTA_LOG).is_dir():
            raise HeadwaterError(
                "HW_TABLE_EXISTS", f"Table {tname.qualified} already exists under the "
                f"lakehouse root {self.root}.",
                "A name refers to one table: the one under the root, or an external location.",
                "Drop the table first, or choose another name.",
                error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
        external.record(self.state_dir, tname, normalize_uri(path))
        self.register(tname.qualified)

    def rename(self, name: str, new_name: str) -> None:
        """``ALTER TABLE name RENAME TO new_name``: a table under the root moves to the new
        name's folder (its checkpoints stay with the old name); an external table keeps its
        location under the new name."""
        old, new = parse_name(name), parse_name(new_name)
        if not self.exists(name):
            raise self._not_found(old)
        if self.exists(new_name):
            raise HeadwaterError(
                "HW_TABLE_EXISTS", f"Cannot rename {old.qualified} to {new.qualified}: that "
                "table exists.", "A name refers to one table.", "Choose another name.",
                error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
        raw_sql(self.spark, f"DROP TABLE IF EXISTS {old.sql}")
        self._registered.discard(old.qualified)
        external.forget(self.state_dir, new)  # a stale record (its data deleted) would shadow
        place = external.location_of(self.state_dir, old)
        if place is not None:
            external.record(self.state_dir, new, place)  # the new name first: never lost
            external.forget(self.state_dir, old)
        else:
            target = self.root / new.relative_path
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(str(self.root / old.relative_path), str(target))
        self.register(new.qualified)

    def set_location(self, name: str, path: str) -> None:
        """``ALTER TABLE name SET LOCATION path``: the name now refers to the Delta table at
        ``path`` (it must exist). The old data is left on disk, as delta-spark does: a managed
        table's folder is renamed to a hidden ``.<table>.before-set-location-<time>`` beside
        it (so a later DROP cannot bring it back under the name)."""
        tname = parse_name(name)
        if not self.exists(name):
            raise self._not_found(tname)
        if not DeltaLog(normalize_uri(path)).exists():
            raise HeadwaterError(
                "HW_DELTA_TABLE_NOT_FOUND", f"ALTER TABLE {tname.qualified} SET LOCATION "
                f"{path}: there is no Delta table there.",
                "SET LOCATION points the name at an existing table.",
                "Write the table at that path first.", error_class="DELTA_MISSING_DELTA_TABLE")
        managed = self.root / tname.relative_path
        external.record(self.state_dir, tname, normalize_uri(path))
        if (managed / DELTA_LOG).is_dir():
            # The managed folder no longer belongs to the name; left in place it would come
            # back as the table after a DROP. Kept aside (hidden), not deleted.
            aside = managed.parent / f".{tname.table}.before-set-location-{int(time.time())}"
            os.rename(str(managed), str(aside))
        self.register(tname.qualified)

    def checkpoint(self, name: str, flow: str | None = None) -> str:
        """The checkpoint folder of the query writing ``name`` (one per flow)."""
        base = self.state_dir / CHECKPOINTS / parse_name(name).qualified
        return str(base / flow if flow else base)

    # --- catalog -------------------------------------------------------------------------

    @staticmethod
    def of(spark: SparkSession | None) -> Lakehouse | None:
        """The lakehouse attached to ``spark`` (or to the session it was cloned from, such as
        a foreachBatch batch's ``sparkSession``), or None.

        ``headwater.spark_session(lakehouse=...)`` attaches one: get it back with
        ``headwater.Lakehouse.of(spark)``.
        """
        lake = catalog.lakehouse_of(spark)
        return lake if isinstance(lake, Lakehouse) else None  # only Lakehouses are attached

    def attach(self) -> Lakehouse:
        """Register every table under the root and make this the session's lakehouse (a
        lakehouse attached to the same session before is detached)."""
        previous = catalog.attach(self)
        if isinstance(previous, Lakehouse):  # same root and session: its entries are ours now
            self._registered |= previous._registered
            previous._registered = set()
        hooks.install(run_sql)  # spark.sql and the writers, while any lakehouse is attached
        for catalog_name in sorted(self._catalogs):  # empty schemas of catalogs too
            for schema in catalog_schemas(self.root, catalog_name):
                raw_sql(self.spark, "CREATE DATABASE IF NOT EXISTS "
                        f"`{spark_database(catalog_name, schema)}`")
        for name in self.tables():
            self.register(name)
        return self

    def detach(self) -> None:
        """Stop being the session's lakehouse: its tables leave Spark's catalog (so nothing can
        change a catalog copy alone), and once no lakehouse is attached anywhere ``spark.sql``
        and the writers are Spark's own methods again. The tables stay on disk."""
        if not catalog.detach(self):
            return
        if split_database(current_database(self.spark))[0] in self._catalogs:
            raw_sql(self.spark, "USE `default`")  # a catalog's schema: gone from the session
        for qualified in sorted(self._registered):
            raw_sql(self.spark, f"DROP TABLE IF EXISTS {parse_name(qualified).sql}")
        self._registered.clear()
        for row in raw_sql(self.spark, "SHOW DATABASES").collect():
            if split_database(row[0])[0] in self._catalogs:
                raw_sql(self.spark, f"DROP DATABASE IF EXISTS `{row[0]}` CASCADE")
        if not catalog.any_attached():
            hooks.uninstall()

    def register(self, name: str) -> None:
        """(Re)register one existing table in Spark's catalog, with its current schema."""
        tname = parse_name(name)
        path = self.path(name)
        if not self.exists(name):
            raise self._not_found(tname)
        self.spark.dataSource.register(
            per_table_source(tname, path, session_parallelism(self.spark)))
        if tname.catalog is not None and tname.catalog not in self._catalogs:
            self.create_catalog(tname.catalog)  # its first table makes the catalog
        if tname.database:
            raw_sql(self.spark, f"CREATE DATABASE IF NOT EXISTS `{tname.database}`")
        # The catalog keeps the schema seen at CREATE: a copy of this table's source gets the
        # new one in place (readers never find the name missing); anything else is created.
        schema = self._source_schema(path)
        held = self.catalog_holder(tname.qualified)
        if held == tname.source_name and schema is not None:
            if not self._in_catalog(tname, schema):
                alter_catalog_schema(self.spark, tname.sql, schema.json())
        elif schema is None or not self._in_catalog(tname, schema):
            if held is not None and held != tname.source_name:
                raise name_taken_error(tname.qualified, held,
                                       f"Registering the lakehouse table at {path} as")
            raw_sql(self.spark, f"DROP TABLE IF EXISTS {tname.sql}")
            columns = columns_sql(self.spark, schema) if schema is not None else ""
            raw_sql(self.spark, f"CREATE TABLE {tname.sql} {columns}USING {tname.source_name}")
        self._registered.add(tname.qualified)

    def catalog_holder(self, name: str) -> str | None:
        """What holds ``name`` in Spark's catalog: its provider (the table's data source
        name when headwater registered it, ``parquet``...), ``view``, or None (nothing)."""
        tname = parse_name(name)
        try:
            meta = catalog_table(self.spark, tname.sql)
        except Exception:  # noqa: BLE001 - a name the catalog cannot hold: nothing there
            return None
        if meta is None:
            return None
        if str(meta.tableType().name()).upper() == "VIEW":
            return "view"
        provider = meta.provider()
        return str(provider.get()) if provider.isDefined() else "table"

    def foreign_holder(self, name: str) -> str | None:
        """What else holds ``name`` in Spark's catalog (another provider's table, a view):
        :meth:`catalog_holder`, unless nothing does or it is this lakehouse's registration."""
        holder = self.catalog_holder(name)
        return holder if holder not in (None, parse_name(name).source_name) else None

    def _source_schema(self, path: str) -> StructType | None:
        """The table's columns as its source would answer them, read here from the log of a
        local table (so Spark asks no Python worker for them); None for Spark to ask the
        source (an object-store table's credentials may reach the source only)."""
        uri = normalize_uri(path)
        if "://" in uri and not uri.startswith("file:"):
            return None
        try:
            return strip_field_metadata(spark_schema(DeltaLog(uri).table().schema().to_json()))
        except Exception:  # noqa: BLE001 - the source answers (or raises its own error)
            return None

    def _in_catalog(self, tname: TableName, schema: StructType) -> bool:
        """True when Spark's catalog holds ``tname`` as this table's source with exactly
        ``schema``: registering it again would change nothing."""
        try:
            meta = catalog_table(self.spark, tname.sql)
            if meta is None:
                return False
            provider = meta.provider()
            if not provider.isDefined() or str(provider.get()) != tname.source_name:
                return False
            return bool(StructType.fromJson(json.loads(meta.schema().json())) == schema)
        except Exception:  # noqa: BLE001 - unknown to the catalog as such: register it
            return False

    def share_with(self, session: SparkSession) -> None:
        """Make this lakehouse the one of ``session`` too (another session of the same Spark
        application, e.g. ``spark.newSession()``): it sees the same catalog, so only its
        data sources and the lakehouse conf keys are needed."""
        session.conf.set(catalog.ROOT_KEY, str(self.root))
        session.conf.set(LAKEHOUSE_STATE_CONF, str(self.state_dir))
        parallelism = session_parallelism(self.spark)
        for qualified in sorted(self._registered):
            tname = parse_name(qualified)
            session.dataSource.register(per_table_source(tname, self.path(qualified),
                                                         parallelism))

    def refresh(self) -> None:
        """Re-register every table (after schema changes written by other processes)."""
        for name in self.tables():
            if name in SYSTEM_TABLES and name in self._registered:
                continue  # their schema never changes: registered once is enough
            self.register(name)

    def create_table(
        self,
        name: str,
        schema: StructType,
        partition_by: Iterable[str] = (),
        comment: str | None = None,
        properties: dict[str, str] | None = None,
        declared: bool = False,
        cluster_by: Iterable[str] | None = None,
    ) -> str:
        """Create an empty Delta table unless it exists; return its path.

        cluster_by: liquid clustering columns of a new table (headwater.delta.definition
        writes the clustering domain; OPTIMIZE clusters by them).

        declared: ``schema`` is a declaration (CREATE TABLE's columns, a pipeline's schema):
        its NOT NULL columns are recorded (``nullable: false``) and enforced on every write;
        otherwise it is a DataFrame's and every column is nullable, as delta-spark creates
        tables from data. An existing table is kept as it is; its partitioning must match
        ``partition_by``.

        An existing table this lakehouse registered, with no partitioning or clustering to
        check, is answered without the creation lock: a side table (quarantine, late rows)
        is ensured at every micro-batch of its flow, which must not wait for another
        table's creation or a replace's commit.
        """
        if not partition_by and cluster_by is None and self.exists(name) \
                and parse_name(name).qualified in self._registered:
            return self.path(name)
        with self._create_lock:
            return self._create_table(name, schema, partition_by, comment, properties,
                                      declared, cluster_by)

    def _create_table(self, name: str, schema: StructType, partition_by: Iterable[str],
                      comment: str | None, properties: dict[str, str] | None,
                      declared: bool = False, cluster_by: Iterable[str] | None = None
                      ) -> str:
        tname = parse_name(name)
        path = self.path(name)
        partition_by = list(partition_by)
        if self.exists(name):
            if partition_by:  # only then is the log worth opening (side tables: every batch)
                check_partitioning(path, list(open_table(path).metadata().partition_columns),
                                   partition_by)
            if cluster_by is not None:
                have = clustering_columns(path)
                if [c.lower() for c in have] != [c.lower() for c in cluster_by]:
                    raise HeadwaterError(
                        "HW_PIPELINE_UNSUPPORTED", f"Table {tname.qualified} is clustered by "
                        f"{have or 'nothing'}, but is declared with cluster_by="
                        f"{list(cluster_by)}.", "headwater does not change an existing "
                        "table's clustering (ALTER TABLE ... CLUSTER BY is not built yet).",
                        f"Run a full refresh of {tname.qualified} (headwater run "
                        "--full-refresh) to recreate it clustered, or keep its clustering.")
        else:
            _check_new_table(tname, schema, partition_by)
            # generated / identity columns: the definition as declared, NOT NULL included
            keep = declared or definition.needs_definition(schema)
            if cluster_by is not None:  # the clustering domain: headwater's own commit
                location(path).parent.mkdir(parents=True, exist_ok=True)
                definition.create(self.spark, path, definition.TableDefinition(
                    schema if keep else as_nullable(schema), partition_by, list(cluster_by),
                    comment, dict(properties or {}), tname.table), tname.qualified)
            else:
                create_delta_table(path, schema if keep else as_nullable(schema),
                                   partition_by, tname.table, comment, properties)
        if tname.qualified not in self._registered:
            self.register(name)
        return path

    def replace(
        self,
        name: str,
        df: DataFrame,
        partition_by: Iterable[str] = (),
        comment: str | None = None,
        properties: dict[str, str] | None = None,
        declared: bool | StructType = False,
        cluster_by: Iterable[str] | None = None,
    ) -> int:
        """Replace table ``name`` (created when missing) by the rows of ``df``; return them.
        declared: ``df``'s schema is a declaration (its NOT NULL columns are kept), or the
        declared schema (a pipeline's): its NOT NULL columns are recorded and checked.

        ``df`` is computed first (it may read the table itself); then ONE Delta commit
        replaces data, schema, partitioning (``partition_by``), description (``comment``) and
        properties (``properties``; those not given are gone, as with CREATE OR REPLACE).
        The table's history stays: ``versionAsOf`` an older version reads the old rows until
        VACUUM. If ``df`` fails, the table is exactly as it was (same version, same files).
        """
        tname = parse_name(name)
        partition_by = list(partition_by)
        if cluster_by is not None or definition.needs_definition(df.schema, properties):
            # generated / identity / DEFAULT columns, clustering: the definition's commit
            return self._replace_definition(tname, df, partition_by, comment, properties,
                                            declared, cluster_by)
        _check_new_table(tname, df.schema, partition_by)
        location(self.path(name)).parent.mkdir(parents=True, exist_ok=True)
        # the query runs and its files are written outside the creation lock (views of a run
        # recompute at once); the lock is held around the commit and the registration only
        return replace_native(df, self.path(name), partition_by, name=tname.table,
                              description=comment, configuration=properties,
                              declared=declared, committing=self._committing(name))

    @contextlib.contextmanager
    def _committing(self, name: str) -> Iterator[None]:
        """Around a replace's commit: the creation lock held (no other thread creates or
        registers a table meanwhile: the table's existence, its commit and its catalog copy
        change together), then the catalog copy gets the new schema."""
        with self._create_lock:
            yield
            self.register(name)

    def _replace_definition(self, tname: TableName, df: DataFrame, partition_by: list[str],
                            comment: str | None, properties: dict[str, str] | None,
                            declared: bool | StructType = False,
                            cluster_by: Iterable[str] | None = None) -> int:
        """replace() of a schema with generated / identity / DEFAULT columns or clustering
        (CREATE OR REPLACE TABLE with them, a clustered materialized view): the empty table of
        that definition in one commit, then ``df``'s rows (their generated values computed)
        in a second one. ``df`` is computed first (a local checkpoint): a query that fails
        leaves the table as it was, and it runs once."""
        path = self.path(tname.qualified)
        with translated():
            df = df.localCheckpoint(eager=True)
        # NOT NULL as declared; a DataFrame's own nullability is not a declaration
        schema = df.schema if declared is True or definition.needs_definition(df.schema) \
            else declared_schema(df.schema, declared)
        table_def = definition.TableDefinition(
            schema, partition_by, None if cluster_by is None else list(cluster_by), comment,
            dict(properties or {}), tname.table)
        with self._committing(tname.qualified):
            location(path).parent.mkdir(parents=True, exist_ok=True)
            if self.exists(tname.qualified):
                definition.replace(self.spark, path, table_def, tname.qualified, or_create=True)
            else:
                definition.create(self.spark, path, table_def, tname.qualified)
        # the rows: an append to the table now defined, outside the creation lock
        return write_rows(df, WriteRequest(path=normalize_uri(path))) if not df.isEmpty() else 0

    def drop(self, name: str) -> None:
        """Remove a table from the catalog and delete its data and its checkpoints; an
        external table's data stays (its name is forgotten), as in delta-spark."""
        tname = parse_name(name)
        raw_sql(self.spark, f"DROP TABLE IF EXISTS {tname.sql}")
        self._registered.discard(tname.qualified)
        if external.location_of(self.state_dir, tname) is not None:
            external.forget(self.state_dir, tname)
        else:
            remove_tree(location(self.path(name)))
        remove_tree(Path(self.checkpoint(name)))

    # --- reading and writing -------------------------------------------------------------

    def read(self, name: str, **options: Any) -> DataFrame:
        """A batch DataFrame of the table's latest version (or versionAsOf/timestampAsOf):
        Spark's parquet reader where the table allows it (each query of the DataFrame then
        reads the newest version, unless a version is given), headwater's reader otherwise."""
        tname = self._existing(name)
        native = native_reads.read_table(self, self.spark, tname.qualified, _strs(options))
        if native is not None:
            return native
        return self.spark.read.format(tname.source_name).options(**_strs(options)).load()

    def read_stream(self, name: str, **options: Any) -> DataFrame:
        """A streaming DataFrame over the table (Delta source options: maxFilesPerTrigger, ...)."""
        tname = self._existing(name)
        return self.spark.readStream.format(tname.source_name).options(**_strs(options)).load()

    def write(self, df: DataFrame, name: str, mode: str = "append",
              partition_by: Iterable[str] = (), **options: Any) -> None:
        """Write a batch DataFrame; the table is created from its schema when missing.

        mode: "append" (default) or "overwrite" (rows replaced; the schema must still fit).
        partition_by: partition columns when the table is created; an existing table must
            have the same (``partitionBy`` in ``options`` is read too, as before).
        options: Delta writer options, e.g. ``mergeSchema="true"``.

        The rows go through Spark's parquet writer and one driver commit
        (:func:`headwater.delta.write.native.write_native`), or the table's Python data source
        writer where that cannot write the table (an object store, column mapping, ...).
        """
        tname = parse_name(name)
        partition_by = list(partition_by) or _columns(options.pop("partitionBy", None))
        path = self.path(name)
        overwrite = mode == "overwrite"
        # delta-spark's session settings (autoMerge, userMetadata, txn, partitionOverwriteMode)
        # under the writer's options; the request checks them all before the table is touched
        lowered = with_session_settings(_strs(options), self.spark.conf, overwrite=overwrite)
        request = WriteRequest.from_options(lowered, path=path,
                                            mode="overwrite" if overwrite else "append",
                                            partition_by=partition_by)
        existed = self.exists(name)
        # delta-spark: a writer's delta.* options are the new table's properties, set by
        # the same commit as its first rows (a write that fails leaves no table behind)
        properties = {k: v for k, v in _strs(options).items() if k.lower().startswith("delta.")}
        if existed or not properties:
            self.create_table(name, df.schema, partition_by=partition_by)
        else:
            _check_new_table(tname, df.schema, partition_by)
            location(path).parent.mkdir(parents=True, exist_ok=True)
            request = request.but(properties=properties)
        with translated():
            written = write_native(df, request)  # Spark's parquet writer and one driver commit
        if written is None:  # what only the Python writer does (an object store, ...)
            if not self.exists(name):  # its table first (two commits on object stores)
                self.create_table(name, df.schema, partition_by=partition_by,
                                  properties=properties or None)
            df.write.format(tname.source_name).mode(mode).options(**lowered).save()
        elif not existed:
            self.register(name)
        if "txnappid" not in {k.lower() for k in options} and request.txn is not None:
            reset_session_txn(self.spark.conf)
        if existed and request.merge_schema:
            self.register(name)  # the catalog copy gets the evolved schema

    def insert_into(self, df: DataFrame, name: str, overwrite: bool = False,
                    options: dict[str, str] | None = None) -> None:
        """``df.write.insertInto(name)`` in a session with this lakehouse: ``df``'s columns go
        to the table's by position, cast to its types (as Spark's insertInto), then
        :meth:`write` (appended, or replacing the rows with ``overwrite``). Data without the
        generated / identity columns fills the others (their values are computed)."""
        tname = self._existing(name)
        table = open_table(self.path(name))
        schema = spark_schema(table.schema().to_json())
        fields = schema.fields
        generation = Generation.of(schema)
        automatic = set(generation.expressions) | {i.name for i in generation.identities}
        if automatic and len(df.columns) == len(fields) - len(automatic):
            fields = [f for f in fields if f.name not in automatic]
        if len(df.columns) != len(fields):
            raise HeadwaterError(
                "HW_SINK_SCHEMA_MISMATCH", f"insertInto({tname.qualified!r}): the data has "
                f"{len(df.columns)} columns, the table {len(fields)} "
                f"({', '.join(f.name for f in fields)}).",
                "insertInto matches columns by position.",
                "Select one value per table column, in the table's order.",
                error_class="INSERT_COLUMN_ARITY_MISMATCH")
        types = {f.name: f.dataType for f in as_nullable(StructType(fields)).fields}
        # schema evolution on a table with type widening: a wider type Delta widens by
        # itself stays, and the write widens the column (delta-spark's insertInto)
        merge = with_session_settings(options or {}, self.spark.conf).get("mergeschema")
        widen = parse_bool("mergeSchema", merge, False) and type_widening_enabled(table)
        for field, given in zip(fields, df.schema.fields, strict=True):
            types[field.name] = written_type(types[field.name], given.dataType, widen)
        rows = df.toDF(*[f.name for f in fields]).select(  # NOT NULL is checked by the write
            *[col(f"`{f.name}`").cast(types[f.name]).alias(f.name) for f in fields])
        self.write(rows, name, mode="overwrite" if overwrite else "append", **(options or {}))

    def save_as_table(self, df: DataFrame, name: str, mode: str = "errorifexists",
                      partition_by: Iterable[str] = (),
                      options: dict[str, str] | None = None) -> None:
        """``df.write.saveAsTable(name)`` in a session with this lakehouse (the writer's mode,
        partitionBy and options as set on it). mode: errorifexists/error (default: an existing
        table is an error), ignore, append, overwrite; with option ``overwriteSchema=true`` an
        overwrite replaces the schema too (one commit, as Delta does)."""
        options = dict(options or {})
        mode = mode.lower()
        existed = self.exists(name)
        if existed and mode in ("error", "errorifexists"):
            raise HeadwaterError(
                "HW_TABLE_EXISTS", f"Table {parse_name(name).qualified} already exists.",
                "saveAsTable's default mode refuses to write into an existing table.",
                "Use .mode('append') or .mode('overwrite').")
        if existed and mode == "ignore":
            return
        overwrite_schema = parse_bool(
            "overwriteSchema", {k.lower(): v for k, v in options.items()}.get("overwriteschema"),
            False)
        if mode == "overwrite" and overwrite_schema:
            if existed:  # delta-spark keeps the properties (constraints checked), refuses
                df, kept = schema_overwrite(df, self.path(name))  # an append-only table
                with translated():
                    self.replace(name, df, partition_by=partition_by, properties=kept)
                return
            self.replace(name, df, partition_by=partition_by, properties={
                k: v for k, v in options.items() if k.lower().startswith("delta.")} or None)
            return
        self.write(df, name, mode="overwrite" if mode == "overwrite" else "append",
                   partition_by=partition_by, **options)

    def write_stream(
        self,
        df: DataFrame,
        name: str,
        trigger: Trigger = None,
        output_mode: str = "append",
        query_name: str | None = None,
        checkpoint: str | None = None,
        partition_by: Iterable[str] = (),
        keys: Iterable[str] | None = None,
        **options: Any,
    ) -> StreamingQuery:
        """Start a streaming write of ``df`` into table ``name`` and return the query.

        trigger: see :mod:`headwater.conf.triggers`; default a micro-batch every 500 ms.
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
                merge_keys = list(keys) if keys else group_keys(df)
                path = self.path(name)
                app_id = f"headwater-merge-{tname.qualified}"
                def merge(batch: DataFrame, batch_id: int) -> None:
                    merge_batch(batch, path, merge_keys, app_id, batch_id)

                writer = writer.outputMode("update").foreachBatch(merge)
                query = writer.start()
            else:
                sink = native_sink(df, self.path(name),
                                   {**_strs(options), "checkpointLocation": checkpoint}, mode,
                                   [])
                if sink is not None and has_jvm_writer(writer):
                    # Spark's parquet sink, driver commits (Spark Connect: the Python sink)
                    query = start_with_sink(writer.outputMode(mode),
                                            f"DeltaSink[{self.path(name)}]", sink)
                else:
                    query = (writer.format(tname.source_name).outputMode(mode)
                             .options(**_strs(options)).start())
        except BaseException:
            lock.release()
            raise
        guarded_query: StreamingQuery = guarded(query, lock)  # stopped if the lease is taken
        self._locks[checkpoint] = (lock, guarded_query)
        return guarded_query

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

    def sql(self, query: str) -> DataFrame:
        """Run one SQL statement on this lakehouse; the same as ``spark.sql`` in the session
        it is attached to. Spark's parser classifies the statement: CREATE [OR REPLACE] TABLE,
        DROP TABLE and ALTER TABLE go to the Delta tables (see :mod:`headwater.lakehouse.sql.ddl`),
        ``delta.`/path``` reads a Delta table by path, everything else is Spark's."""
        return run_sql(self, query)


def active_lakehouse() -> Lakehouse | None:
    """The lakehouse attached to the active SparkSession (``Lakehouse.of(active session)``)."""
    if not catalog.any_attached():
        return None
    try:
        spark = SparkSession.active()
    except Exception:  # no session at all
        return None
    return Lakehouse.of(spark)


def _check_new_table(tname: TableName, schema: StructType, partition_by: list[str]) -> None:
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


def _strs(options: dict[str, Any]) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()
            if v is not None}




def _output_mode(mode: str) -> str:
    text = str(mode).lower()
    if text not in ("append", "complete", "update"):
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"Output mode {mode!r} is not one of append, complete, update.",
            "The output mode says what each micro-batch writes to the table.",
            "Use 'append' (new rows), 'complete' (whole result) or 'update' (changed rows).")
    return text

