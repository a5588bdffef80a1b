"""``headwater.DeltaTable``: delta-spark's ``delta.tables.DeltaTable`` API without the jar.

delta-spark code runs with only the import changed::

    from headwater import DeltaTable          # was: from delta.tables import DeltaTable
    t = DeltaTable.forPath(spark, "/data/events")
    t.alias("t").merge(updates.alias("s"), "t.id = s.id") \\
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

Conditions and values are SQL text or Columns; aliases in conditions work as in delta-spark.
DML runs through :mod:`headwater.delta.dml` (copy-on-write on Spark, or delta-rs for small
tables), maintenance through :mod:`headwater.delta.maintenance`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from headwater.delta import dml, maintenance, manifest, protocol
from headwater.delta.clone import clone as clone_table
from headwater.delta.convert import convert_parquet
from headwater.delta.dml.common import (
    ColumnOrSql,
    DmlResult,
    checked_assignments,
    checked_condition,
)
from headwater.delta.dml.merge_spec import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause
from headwater.delta.drop_feature import drop_feature
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.optimize import optimize as run_optimize
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.lakehouse.catalog import lakehouse_of
from headwater.lakehouse.delta_spark.table_builder import DeltaTableBuilder, builder
from headwater.lakehouse.delta_spark.table_builder import (  # re-exported: delta.tables' names
    IdentityGenerator as IdentityGenerator,
)
from headwater.spark.active import data_frame
from headwater.spark.jvm import parse_multipart_identifier


class DeltaTable:
    """A Delta table by path, with delta-spark's methods. ``last_result`` holds the metrics
    of the last delete / update / merge (delta-spark's delete and update return None)."""

    def __init__(self, spark: SparkSession, path: str, alias: str | None = None) -> None:
        self._spark = spark
        self._path = normalize_uri(path)
        self._alias = alias
        self.last_result: DmlResult | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def forPath(cls, sparkSession: SparkSession, path: str,
                hadoopConf: Mapping[str, str] | None = None) -> DeltaTable:
        """The Delta table at ``path`` (HW_DELTA_TABLE_NOT_FOUND if there is none)."""
        DeltaLog(normalize_uri(path)).table()  # fails clearly when it is not a table
        return cls(sparkSession, path)

    @classmethod
    def forName(cls, sparkSession: SparkSession, tableOrViewName: str) -> DeltaTable:
        """A table of the session's lakehouse by name (or ``delta.`/path```)."""
        name = tableOrViewName.strip()
        if name.lower().startswith("delta.`") and name.endswith("`"):
            return cls.forPath(sparkSession, name[7:-1])
        lakehouse = lakehouse_of(sparkSession)
        if lakehouse is None:
            raise HeadwaterError(
                "HW_LAKEHOUSE_NOT_ATTACHED", f"DeltaTable.forName({name!r}): no lakehouse is attached "
                "to this session, so names cannot be resolved.",
                "headwater keeps table names in a lakehouse (no metastore).",
                "Start the session with headwater.spark_session(lakehouse=...) or use "
                "DeltaTable.forPath(spark, path).")
        return cls.forPath(sparkSession, str(_table_path(lakehouse, name)))

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """True when ``identifier`` (a path) holds a Delta table."""
        return DeltaLog(normalize_uri(identifier)).exists()

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[DeltaTable]:
        """A builder of a new table (name, location, columns, partitioning, clustering,
        comment, properties); ``execute()`` fails if the table exists (SQL CREATE TABLE).
        The session defaults to the active one."""
        return builder(sparkSession, "create", cls)

    @classmethod
    def createIfNotExists(  # noqa: N802 (delta-spark's name)
            cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[DeltaTable]:
        """A builder that creates the table unless it exists (CREATE TABLE IF NOT EXISTS);
        an existing table is kept as it is."""
        return builder(sparkSession, "createIfNotExists", cls)

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[DeltaTable]:
        """A builder that replaces an existing table (REPLACE TABLE: one commit, history
        kept); ``execute()`` fails if there is none."""
        return builder(sparkSession, "replace", cls)

    @classmethod
    def createOrReplace(  # noqa: N802 (delta-spark's name)
            cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder[DeltaTable]:
        """A builder that replaces the table, or creates it (CREATE OR REPLACE TABLE)."""
        return builder(sparkSession, "createOrReplace", cls)

    # -- reading ------------------------------------------------------------------------
    def toDF(self) -> DataFrame:
        """The table as a DataFrame, made anew at each call (as delta-spark's): read by
        Spark's parquet reader where the table allows it, and each query of it reads the
        table's latest version (a DataFrame already executed keeps its files, as Spark
        caches its plan: call ``toDF()`` again after DML to plan afresh)."""
        df = self._spark.read.format("delta").load(self._path)
        return df.alias(self._alias) if self._alias else df

    def alias(self, aliasName: str) -> DeltaTable:
        return DeltaTable(self._spark, self._path, aliasName)

    # -- DML ----------------------------------------------------------------------------
    # Arguments are checked as delta-spark's Python API checks them (same TypeError /
    # ValueError and words), before anything runs.
    def delete(self, condition: ColumnOrSql | None = None) -> None:
        """Delete the rows matching ``condition`` (SQL text or a Column; all rows when None)."""
        condition = checked_condition(condition)
        self.last_result = dml.delete(self._spark, self._path, condition,
                                      target_alias=self._alias)

    def update(self, condition: ColumnOrSql | None = None,
               set: Mapping[str, ColumnOrSql] | None = None) -> None:
        """Set columns (``set``: column -> SQL text or Column, required) on the rows matching
        ``condition`` (all rows when None)."""
        assignments = checked_assignments(set, "'set'")
        condition = checked_condition(condition)
        self.last_result = dml.update(self._spark, self._path, assignments, condition,
                                      target_alias=self._alias)

    def merge(self, source: DataFrame, condition: ColumnOrSql) -> DeltaMergeBuilder:
        """Start a MERGE of ``source`` into this table ON ``condition``."""
        if source is None:
            raise ValueError("'source' in merge cannot be None")
        if not isinstance(source, DataFrame):
            raise TypeError("Type of 'source' in merge must be DataFrame.")
        on = checked_condition(condition)
        if on is None:
            raise ValueError("'condition' in merge cannot be None")
        spec = dml.MergeSpec(path=self._path, source=source, condition=on,
                             target_alias=self._alias)
        return DeltaMergeBuilder(self, spec)

    # -- maintenance --------------------------------------------------------------------
    def history(self, limit: int | None = None) -> DataFrame:
        rows = maintenance.history(self._path, limit)
        return _frame(self._spark, rows, _HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        return _frame(self._spark, [maintenance.detail(self._path)], _DETAIL_SCHEMA)

    def optimize(self) -> DeltaOptimizeBuilder:
        return DeltaOptimizeBuilder(self)

    def vacuum(self, retentionHours: float | None = None) -> DataFrame:
        """Delete files no version within ``retentionHours`` (default: the table's
        delta.deletedFileRetentionDuration, 168 hours) references, and files the log never
        named, as delta-spark. Below the table's retention only when the session sets
        spark.databricks.delta.retentionDurationCheck.enabled=false. An empty DataFrame."""
        hours = None if retentionHours is None else float(retentionHours)
        maintenance.vacuum(self._path, hours,
                           enforce_retention=maintenance.retention_check_enabled(self._spark))
        return data_frame(self._spark, [], StructType([]))

    def generate(self, mode: str) -> None:
        """Write manifest files of ``mode`` (``symlink_format_manifest``, any case) for
        Presto, Trino, Athena and Hive: ``_symlink_format_manifest/[partition/]manifest``."""
        manifest.generate(self._spark, self._path, mode)

    @classmethod
    def convertToDelta(cls, sparkSession: SparkSession, identifier: str,
                       partitionSchema: str | StructType | None = None) -> DeltaTable:
        """Turn the parquet folder ``parquet.`path``` into a Delta table in place;
        ``partitionSchema``: its hive-style partition columns, a StructType or DDL text
        ("part int"). A folder that already is a Delta table is returned unchanged."""
        parts = parse_multipart_identifier(sparkSession, identifier)
        if len(parts) != 2 or parts[0].lower() != "parquet":
            raise DeltaAnalysisError(
                "HW_SQL_UNSUPPORTED",
                f"CONVERT TO DELTA only supports parquet tables, but you are trying to convert "
                f"{identifier}.", "headwater converts folders of parquet files, named "
                "parquet.`/path`; lakehouse tables are Delta tables already.",
                "Pass \"parquet.`/path/to/folder`\".",
                error_class="DELTA_CONVERT_NON_PARQUET_TABLE")
        schema = _struct(partitionSchema) if isinstance(partitionSchema, str) \
            else partitionSchema
        return cls(sparkSession, convert_parquet(parts[1], schema))

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """Raise the protocol to at least (readerVersion, writerVersion); never a downgrade
        (lower versions change nothing), as delta-spark."""
        if not isinstance(readerVersion, int):
            raise ValueError("The readerVersion needs to be an integer but got "
                             f"'{type(readerVersion)}'.")
        if not isinstance(writerVersion, int):
            raise ValueError("The writerVersion needs to be an integer but got "
                             f"'{type(writerVersion)}'.")
        protocol.upgrade(self._path, readerVersion, writerVersion)

    def addFeatureSupport(self, featureName: str) -> None:
        """Support table feature ``featureName`` (moving the protocol to table features,
        writer 7 or reader 3 / writer 7, where it has to)."""
        _check_type(featureName, str, "featureName", "a string")
        protocol.add_feature(self._path, featureName)

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """Drop table feature ``featureName``, leaving the weakest protocol that supports the
        rest (a legacy one where it can). headwater drops writer features whose removal
        rewrites nothing (checkConstraints without constraints) and deletionVectors with
        truncateHistory; see headwater.delta.drop_feature."""
        _check_type(featureName, str, "featureName", "a string")
        if truncateHistory is not None:
            _check_type(truncateHistory, bool, "truncateHistory", "a boolean")
        drop_feature(self._spark, self._path, featureName, bool(truncateHistory))

    def clone(self, target: str, isShallow: bool = False, replace: bool = False,
              properties: Mapping[str, str] | None = None) -> DeltaTable:
        """Clone the latest version to ``target`` (an absolute path, or a lakehouse table
        name); see :meth:`cloneAtVersion`."""
        _check_clone(target, isShallow, replace, properties)
        return self._clone(None, target, isShallow, replace, properties)

    def cloneAtVersion(self, version: int, target: str, isShallow: bool = False,
                       replace: bool = False, properties: Mapping[str, str] | None = None
                       ) -> DeltaTable:
        """A new table at ``target`` holding this table's ``version``: its schema,
        partitioning and properties (``properties`` override them) and its rows. Shallow:
        the clone's log names this table's files; deep: they are copied. replace: replace a
        table already at ``target`` (else DELTA_TABLE_ALREADY_EXISTS)."""
        _check_clone(target, isShallow, replace, properties, version=version)
        return self._clone(version, target, isShallow, replace, properties)

    def cloneAtTimestamp(self, timestamp: str, target: str, isShallow: bool = False,
                         replace: bool = False, properties: Mapping[str, str] | None = None
                         ) -> DeltaTable:
        """As :meth:`cloneAtVersion`, at the last version committed at or before
        ``timestamp`` ('2024-01-01' or '2024-01-01 10:00:00', the session's time zone)."""
        _check_clone(target, isShallow, replace, properties, timestamp=timestamp)
        commits = maintenance.commit_times(self._path)
        version = maintenance.version_at(self._path, commits, self._timestamp(timestamp))
        return self._clone(version, target, isShallow, replace, properties)

    def _clone(self, version: int | None, target: str, shallow: bool, replace: bool,
               properties: Mapping[str, str] | None) -> DeltaTable:
        by_path = target.startswith("/") or "://" in target or target.startswith("file:")
        lakehouse = None if by_path else lakehouse_of(self._spark)
        if not by_path and lakehouse is None:
            raise HeadwaterError(
                "HW_LAKEHOUSE_NOT_ATTACHED", f"clone({target!r}): no lakehouse is attached to "
                "this session, so a table name cannot be resolved.",
                "A clone's target is an absolute path or a lakehouse table name.",
                "Pass an absolute path, or start the session with "
                "headwater.spark_session(lakehouse=...).")
        path = target if lakehouse is None else str(lakehouse.path(target))
        clone_table(self._path, path, version, shallow=shallow, replace=replace,
                    properties=properties)
        if lakehouse is not None:
            lakehouse.register(target)
        return DeltaTable.forPath(self._spark, path)

    def restoreToVersion(self, version: int) -> DataFrame:
        _check_type(version, int, "version", "an int")
        return self._restore(maintenance.restore(self._path, version=version))

    def restoreToTimestamp(self, timestamp: str | dt.datetime) -> DataFrame:
        """Restore the last version committed at or before ``timestamp`` ('2024-01-01' or
        '2024-01-01 01:01:01', the session's time zone; headwater also takes a datetime)."""
        if not isinstance(timestamp, dt.datetime):
            _check_type(timestamp, str, "timestamp", "a string")
            timestamp = self._timestamp(timestamp)
        return self._restore(maintenance.restore(self._path, timestamp=timestamp))

    def _timestamp(self, text: str) -> dt.datetime:
        """``text`` read as Spark casts a string to a timestamp (session time zone), UTC."""
        row = self._spark.range(1).select(
            F.unix_micros(F.lit(text).try_cast("timestamp"))).first()
        micros = None if row is None else row[0]
        if micros is None:
            raise DeltaAnalysisError(
                "HW_DELTA_TIMESTAMP_INVALID",
                f"The provided timestamp ('{text}') cannot be converted to a valid timestamp.",
                "Time travel takes a timestamp Spark can read.",
                "Write it as 'yyyy-MM-dd' or 'yyyy-MM-dd HH:mm:ss'.",
                error_class="DELTA_TIMESTAMP_INVALID")
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(micros))

    def _restore(self, metrics: dict[str, Any]) -> DataFrame:
        # a lakehouse table's catalog entry keeps the schema it saw: the restored version's
        # schema may differ (an overwriteSchema, a replace or ADD COLUMNS since)
        lakehouse = lakehouse_of(self._spark)
        if lakehouse is not None:
            for name in lakehouse.tables():
                if normalize_uri(str(lakehouse.path(name))) == self._path:
                    lakehouse.register(name)
        keys = ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                "num_restored_files", "removed_files_size", "restored_files_size"]
        row = tuple(int(metrics.get(k) or 0) for k in keys)
        return data_frame(self._spark, [row], ", ".join(f"{k} long" for k in keys))

    def __repr__(self) -> str:
        return f"DeltaTable({self._path!r})"


class DeltaMergeBuilder:
    """delta-spark's merge builder: clauses in order, then ``execute()``. Immutable as
    delta-spark's: each method returns a new builder with one more clause."""

    def __init__(self, table: DeltaTable, spec: dml.MergeSpec) -> None:
        self._table = table
        self._spec = spec

    def _with(self, kind: str, action: str, condition: object,
              assignments: dict[str, ColumnOrSql] | None = None) -> DeltaMergeBuilder:
        clause = MergeClause(kind, action, checked_condition(condition), assignments)
        spec = dataclasses.replace(self._spec, clauses=[*self._spec.clauses, clause])
        return DeltaMergeBuilder(self._table, spec)

    def whenMatchedUpdate(self, condition: ColumnOrSql | None = None,
                          set: Mapping[str, ColumnOrSql] | None = None
                          ) -> DeltaMergeBuilder:
        """WHEN MATCHED [AND condition] THEN UPDATE SET the columns of ``set`` (required)."""
        assignments = checked_assignments(set, "'set' in whenMatchedUpdate")
        return self._with(MATCHED, "update", condition, assignments)

    def whenMatchedUpdateAll(self, condition: ColumnOrSql | None = None
                             ) -> DeltaMergeBuilder:
        """WHEN MATCHED [AND condition] THEN UPDATE SET * (every column from the source)."""
        return self._with(MATCHED, "update", condition)

    def whenMatchedDelete(self, condition: ColumnOrSql | None = None
                          ) -> DeltaMergeBuilder:
        return self._with(MATCHED, "delete", condition)

    def whenNotMatchedInsert(self, condition: ColumnOrSql | None = None,
                             values: Mapping[str, ColumnOrSql] | None = None
                             ) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED [AND condition] THEN INSERT the columns of ``values`` (required;
        columns left out are NULL)."""
        assignments = checked_assignments(values, "'values' in whenNotMatchedInsert")
        return self._with(NOT_MATCHED, "insert", condition, assignments)

    def whenNotMatchedInsertAll(self, condition: ColumnOrSql | None = None
                                ) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED [AND condition] THEN INSERT * (every column from the source)."""
        return self._with(NOT_MATCHED, "insert", condition)

    def whenNotMatchedBySourceUpdate(self, condition: ColumnOrSql | None = None,
                                     set: Mapping[str, ColumnOrSql] | None = None
                                     ) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET ``set`` (required)."""
        assignments = checked_assignments(set, "'set' in whenNotMatchedBySourceUpdate")
        return self._with(NOT_MATCHED_BY_SOURCE, "update", condition, assignments)

    def whenNotMatchedBySourceDelete(self, condition: ColumnOrSql | None = None
                                     ) -> DeltaMergeBuilder:
        return self._with(NOT_MATCHED_BY_SOURCE, "delete", condition)

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        """Let the MERGE add source columns the table lacks (``*`` clauses, and SET / INSERT
        of a source column by name)."""
        return DeltaMergeBuilder(self._table,
                                 dataclasses.replace(self._spec, schema_evolution=True))

    def execute(self) -> DataFrame:
        """Run the MERGE; a one-row DataFrame of num_affected_rows, num_updated_rows,
        num_deleted_rows, num_inserted_rows (non-null longs, as delta-spark 3+)."""
        result = dml.merge(self._table._spark, self._spec)
        self._table.last_result = result
        return result.frame(self._table._spark)


class DeltaOptimizeBuilder:
    """delta-spark's optimize builder: ``where`` (partition predicates, ANDed), then
    ``executeCompaction()`` or ``executeZOrderBy(cols)``; each returns one row of the table's
    path and delta-spark's OptimizeMetrics."""

    def __init__(self, table: DeltaTable) -> None:
        self._table = table
        self._where: list[str] = []

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        self._where.append(partitionFilter)
        return self

    def executeCompaction(self) -> DataFrame:
        return self._result(run_optimize(self._table._spark, self._table._path,
                                              self._where))

    def executeZOrderBy(self, *cols: str | list[str] | tuple[str, ...]) -> DataFrame:
        columns: Any = cols
        if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
            columns = cols[0]
        for c in columns:
            if type(c) is not str:
                raise TypeError(f"Z-order column must be str. Found {c} with type {type(c)}")
        return self._result(run_optimize(self._table._spark, self._table._path,
                                              self._where, list(columns)))

    def _result(self, metrics: dict[str, Any]) -> DataFrame:
        return optimize_frame(self._table._spark, self._table._path, metrics)


# -- helpers ----------------------------------------------------------------------------

_HISTORY_SCHEMA = ("version long, timestamp timestamp, userId string, userName string, "
                   "operation string, operationParameters map<string,string>, job string, "
                   "notebook string, clusterId string, readVersion long, isolationLevel string, "
                   "isBlindAppend boolean, operationMetrics map<string,string>, "
                   "userMetadata string, engineInfo string")
_DETAIL_SCHEMA = ("format string, id string, name string, description string, location string, "
                  "createdAt timestamp, lastModified timestamp, partitionColumns array<string>, "
                  "clusteringColumns array<string>, numFiles long, sizeInBytes long, "
                  "properties map<string,string>, minReaderVersion int, minWriterVersion int, "
                  "tableFeatures array<string>, statistics map<string,string>")


_FILE_STATS = "struct<min:long, max:long, avg:double, totalFiles:long, totalSize:long>"
_ZORDER_FILES = "struct<num:long, size:long>"
_CLUSTER_FILES = "struct<numFiles:long, size:long>"
# delta-spark's OptimizeMetrics, field by field
OPTIMIZE_SCHEMA = (
    f"path string, metrics struct<numFilesAdded:long, numFilesRemoved:long, "
    f"filesAdded:{_FILE_STATS}, filesRemoved:{_FILE_STATS}, partitionsOptimized:long, "
    f"zOrderStats:struct<strategyName:string, inputCubeFiles:{_ZORDER_FILES}, "
    f"inputOtherFiles:{_ZORDER_FILES}, inputNumCubes:long, mergedFiles:{_ZORDER_FILES}, "
    "numOutputCubes:long, mergedNumCubes:long>, "
    f"clusteringStats:struct<inputZCubeFiles:{_CLUSTER_FILES}, "
    f"inputOtherFiles:{_CLUSTER_FILES}, inputNumZCubes:long, mergedFiles:{_CLUSTER_FILES}, "
    "numOutputZCubes:long>, numBins:long, numBatches:long, totalConsideredFiles:long, "
    "totalFilesSkipped:long, preserveInsertionOrder:boolean, "
    "numFilesSkippedToReduceWriteAmplification:long, "
    "numBytesSkippedToReduceWriteAmplification:long, startTimeMs:long, endTimeMs:long, "
    "totalClusterParallelism:long, totalScheduledTasks:long, "
    "autoCompactParallelismStats:struct<maxClusterActiveParallelism:long, "
    "minClusterActiveParallelism:long, maxSessionActiveParallelism:long, "
    "minSessionActiveParallelism:long>, deletionVectorStats:struct<"
    "numDeletionVectorsRemoved:long, numDeletionVectorRowsRemoved:long>, "
    "numTableColumns:long, numTableColumnsWithStats:long>")


def optimize_frame(spark: SparkSession, path: str, metrics: dict[str, Any]) -> DataFrame:
    """OPTIMIZE's result as delta-spark returns it: the table's path and a metrics struct
    (fields the metrics lack are null)."""
    struct = _struct(OPTIMIZE_SCHEMA)
    metric_fields = struct["metrics"].dataType
    assert isinstance(metric_fields, StructType)
    values = {f.name: metrics.get(f.name) for f in metric_fields.fields}
    return data_frame(spark, [(maintenance.qualified(path), values)], struct)


def _check_type(value: Any, kind: type, name: str, article: str) -> None:
    """delta-spark's argument checks (``_verify_type_*``): a ValueError with its text."""
    if not isinstance(value, kind):
        raise ValueError(f"{name} needs to be {article} but got '{type(value)}'.")


def _check_clone(target: Any, shallow: Any, replace: Any, properties: Any,
                 timestamp: Any = "", version: Any = 0) -> None:
    """delta-spark's ``_verify_clone_types``, in its order."""
    _check_type(timestamp, str, "timestamp", "a string")
    _check_type(version, int, "version", "an int")
    _check_type(target, str, "target", "a string")
    _check_type(shallow, bool, "isShallow", "a boolean")
    _check_type(replace, bool, "replace", "a boolean")
    if properties is not None:
        _check_type(properties, dict, "properties", "a dict")
        for key, value in properties.items():
            _check_type(key, str, f"All property keys including {key}", "a string")
            _check_type(value, str, f"All property values including {value}", "a string")


def _struct(ddl: str) -> StructType:
    """A DDL column list as a StructType (``StructType.fromDDL`` is typed as any DataType)."""
    struct = StructType.fromDDL(ddl)
    assert isinstance(struct, StructType)
    return struct


def _frame(spark: SparkSession, rows: list[dict[str, Any]], schema: str) -> DataFrame:
    struct = _struct(schema)
    data = [tuple(_plain(row.get(f.name)) for f in struct.fields) for row in rows]
    return data_frame(spark, data, struct)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) or v is None else str(v) for k, v in value.items()}
    return value


def _table_path(lakehouse: Any, name: str) -> str:
    """The folder of lakehouse table ``name`` (HW_TABLE_NOT_FOUND when it does not exist)."""
    name = lakehouse.resolve(name).qualified  # in the session's current catalog and schema
    if not lakehouse.exists(name):
        raise HeadwaterError("HW_TABLE_NOT_FOUND", f"Table {name!r} is not in the lakehouse at "
                             f"{lakehouse.root}.", "forName looks tables up in the attached "
                             "lakehouse.", "Check the name (lakehouse.tables() lists them).")
    return str(lakehouse.path(name))
