"""DELETE / UPDATE / MERGE on Delta tables: the entry points the SQL layer and
:class:`headwater.DeltaTable` call.

Two engines give the same rows and change data:

- ``"spark"``: copy-on-write where the data is. Spark reads the candidate files natively,
  rewrites the touched ones on executors, the driver commits removes + adds in one version.
- ``"delta-rs"``: deltalake's own delete / update / merge, on the driver. Faster for small
  tables (no Spark jobs), and the only one that commits to object storage for now.

``engine="auto"`` (the default) picks delta-rs for small targets (see
:func:`headwater.delta.dml.engine.choose`) when the statement is one delta-rs runs exactly like
Spark, and Spark otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from headwater.conf.layout import DELTA_AUTO_MERGE_CONF
from headwater.conf.options import parse_bool
from headwater.delta.dml import engine as engines
from headwater.delta.dml.common import ColumnOrSql, DmlResult
from headwater.delta.dml.merge_spec import MergeClause, MergeSpec

__all__ = ["DmlResult", "MergeBuilder", "MergeClause", "MergeSpec", "delete", "merge", "update"]


def delete(spark: SparkSession, path: str, condition: ColumnOrSql | None = None,
           engine: str = "auto", target_alias: str | None = None) -> DmlResult:
    """``DELETE FROM delta.`path` [WHERE condition]``.

    condition: SQL text or a Column; None deletes every row. engine: "auto", "spark" or
    "delta-rs". target_alias: the table's name in the condition (``t.id > 3``).
    Returns num_affected_rows (= num_deleted_rows) and the commit's metrics.
    """
    return engines.run(spark, path, engines.Delete(condition, target_alias), engine)


def update(spark: SparkSession, path: str, assignments: Mapping[str, ColumnOrSql],
           condition: ColumnOrSql | None = None, engine: str = "auto",
           target_alias: str | None = None) -> DmlResult:
    """``UPDATE delta.`path` SET col = value, ... [WHERE condition]``.

    assignments: target column -> new value (SQL text or Column), evaluated on the old row.
    condition: which rows to change (None: all). engine: see :func:`delete`.
    """
    return engines.run(spark, path, engines.Update(assignments, condition, target_alias),
                       engine)


def merge(spark: SparkSession, spec: MergeSpec, engine: str = "auto") -> DmlResult:
    """Run a complete :class:`MergeSpec` (what ``MERGE INTO`` says).

    The session conf ``spark.databricks.delta.schema.autoMerge.enabled=true`` turns schema
    evolution on for every MERGE, as in delta-spark."""
    if not spec.schema_evolution and parse_bool(
            DELTA_AUTO_MERGE_CONF, spark.conf.get(DELTA_AUTO_MERGE_CONF, None), False):
        spec = dataclasses.replace(spec, schema_evolution=True)
    return engines.run(spark, spec.path, engines.Merge(spec), engine)


class MergeBuilder:
    """Builds a MERGE clause by clause (snake_case; :class:`headwater.DeltaTable` offers
    delta-spark's camelCase names on top).

    path: the target table. source: the source DataFrame (alias it, ``df.alias('s')``, to
    name it in conditions). condition: the ON condition. target_alias: the target's name in
    conditions (``t`` in ``t.id = s.id``).
    """

    def __init__(self, spark: SparkSession, path: str, source: DataFrame,
                 condition: ColumnOrSql, target_alias: str | None = None) -> None:
        self.spark = spark
        self.spec = MergeSpec(path=path, source=source, condition=condition,
                              target_alias=target_alias)

    def _add(self, kind: str, action: str, condition: ColumnOrSql | None,
             assignments: Mapping[str, ColumnOrSql] | None) -> MergeBuilder:
        self.spec.clauses.append(MergeClause(kind, action, condition,
                                             dict(assignments) if assignments is not None
                                             else None))
        return self

    def when_matched_update(self, set: Mapping[str, ColumnOrSql] | None = None,
                            condition: ColumnOrSql | None = None) -> MergeBuilder:
        """WHEN MATCHED [AND condition] THEN UPDATE SET ... (``set=None``: UPDATE SET *)."""
        return self._add("matched", "update", condition, set)

    def when_matched_delete(self, condition: ColumnOrSql | None = None) -> MergeBuilder:
        return self._add("matched", "delete", condition, None)

    def when_not_matched_insert(self, values: Mapping[str, ColumnOrSql] | None = None,
                                condition: ColumnOrSql | None = None) -> MergeBuilder:
        """WHEN NOT MATCHED [AND condition] THEN INSERT ... (``values=None``: INSERT *)."""
        return self._add("not_matched", "insert", condition, values)

    def when_not_matched_by_source_update(self, set: Mapping[str, ColumnOrSql],
                                          condition: ColumnOrSql | None = None) -> MergeBuilder:
        return self._add("not_matched_by_source", "update", condition, set)

    def when_not_matched_by_source_delete(self, condition: ColumnOrSql | None = None
                                          ) -> MergeBuilder:
        return self._add("not_matched_by_source", "delete", condition, None)

    def with_schema_evolution(self) -> MergeBuilder:
        """``*`` clauses add the source's new columns to the table."""
        self.spec.schema_evolution = True
        return self

    def execute(self, engine: str = "auto") -> DmlResult:
        return merge(self.spark, self.spec, engine=engine)
