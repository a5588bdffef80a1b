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

from headwater.delta import dml, maintenance
from headwater.delta.dml.common import (
    ColumnOrSql,
    DmlResult,
    checked_assignments,
    checked_condition,
)
from headwater.delta.dml.merge import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.errors import HeadwaterError
from headwater.lakehouse.table_builder import DeltaTableBuilder, builder
from headwater.lakehouse.table_builder import (  # re-exported: delta.tables' names
    IdentityGenerator as IdentityGenerator,
)


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
        from headwater.lakehouse.catalog import lakehouse_of

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
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder of a new table (name, location, columns, partitioning, clustering,
        comment, properties); ``execute()`` fails if the table exists (SQL CREATE TABLE).
        The session defaults to the active one."""
        return builder(sparkSession, "create", cls)

    @classmethod
    def createIfNotExists(  # noqa: N802 (delta-spark's name)
            cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that creates the table unless it exists (CREATE TABLE IF NOT EXISTS);
        an existing table is kept as it is."""
        return builder(sparkSession, "createIfNotExists", cls)

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that replaces an existing table (REPLACE TABLE: one commit, history
        kept); ``execute()`` fails if there is none."""
        return builder(sparkSession, "replace", cls)

    @classmethod
    def createOrReplace(  # noqa: N802 (delta-spark's name)
            cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that replaces the table, or creates it (CREATE OR REPLACE TABLE)."""
        return builder(sparkSession, "createOrReplace", cls)

    # -- reading ------------------------------------------------------------------------
    def toDF(self) -> DataFrame:
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
        """Delete unreferenced files older than ``retentionHours`` (default 168)."""
        maintenance.vacuum(self._path, retentionHours)
        return self._spark.createDataFrame([], "path string")

    def restoreToVersion(self, version: int) -> DataFrame:
        return self._restore(maintenance.restore(self._path, version=version))

    def restoreToTimestamp(self, timestamp: str | dt.datetime) -> DataFrame:
        return self._restore(maintenance.restore(self._path, timestamp=timestamp))

    def _restore(self, metrics: dict[str, Any]) -> DataFrame:
        keys = ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                "num_restored_files", "removed_files_size", "restored_files_size"]
        row = tuple(int(metrics.get(k) or 0) for k in keys)
        return self._spark.createDataFrame([row], ", ".join(f"{k} long" for k in keys))

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
    def __init__(self, table: DeltaTable) -> None:
        self._table = table
        self._where: str | None = None

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        self._where = partitionFilter
        return self

    def executeCompaction(self) -> DataFrame:
        return self._result(maintenance.optimize(self._table._path, self._where))

    def executeZOrderBy(self, *cols: str | list[str]) -> DataFrame:
        columns = [c for group in cols for c in ([group] if isinstance(group, str) else group)]
        return self._result(maintenance.optimize(self._table._path, self._where, columns))

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
OPTIMIZE_SCHEMA = (f"path string, metrics struct<numFilesAdded:long, numFilesRemoved:long, "
                   f"filesAdded:{_FILE_STATS}, filesRemoved:{_FILE_STATS}, "
                   "partitionsOptimized:long, zOrderStats:string, numBatches:long, "
                   "totalConsideredFiles:long, totalFilesSkipped:long, "
                   "preserveInsertionOrder:boolean>")


def optimize_frame(spark: SparkSession, path: str, metrics: dict[str, Any]) -> DataFrame:
    """OPTIMIZE's result as delta-spark returns it: the table's path and a metrics struct."""
    import json

    from pyspark.sql.types import StructType

    struct = StructType.fromDDL(OPTIMIZE_SCHEMA)
    values: dict[str, Any] = {}
    for f in struct["metrics"].dataType.fields:  # type: ignore[attr-defined]
        value = metrics.get(f.name)
        if isinstance(value, str) and f.name.startswith("files"):
            value = json.loads(value)  # delta-rs gives the file stats as JSON text
        if f.name == "zOrderStats" and value is not None:
            value = json.dumps(value, default=str)
        values[f.name] = value
    return spark.createDataFrame([(path, values)], struct)


def _frame(spark: SparkSession, rows: list[dict[str, Any]], schema: str) -> DataFrame:
    from pyspark.sql.types import StructType

    struct = StructType.fromDDL(schema)
    data = [tuple(_plain(row.get(f.name)) for f in struct.fields) for row in rows]
    return spark.createDataFrame(data, struct)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) or v is None else str(v) for k, v in value.items()}
    return value


def _table_path(lakehouse: Any, name: str) -> str:
    """The folder of lakehouse table ``name`` (HW_TABLE_NOT_FOUND when it does not exist)."""
    if not lakehouse.exists(name):
        raise HeadwaterError("HW_TABLE_NOT_FOUND", f"Table {name!r} is not in the lakehouse at "
                             f"{lakehouse.root}.", "forName looks tables up in the attached "
                             "lakehouse.", "Check the name (lakehouse.tables() lists them).")
    return str(lakehouse.path(name))
