"""Which engine runs a DML: Spark copy-on-write, or delta-rs on the driver.

``auto`` runs delta-rs when the target (and a MERGE's source) is small and the statement is one
delta-rs runs exactly like Spark (:mod:`headwater.delta.dml.deltars` decides), else Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from headwater.delta.column_defaults import with_keyword_resolved
from headwater.delta.constraints import refuse_checks_on_deltalake
from headwater.delta.dml import delete_update, deltars, merge_spark
from headwater.delta.dml.common import ColumnOrSql, DmlResult, target_column_name
from headwater.delta.dml.merge_spec import MergeSpec
from headwater.delta.dml.target import Snapshot, load_snapshot
from headwater.errors import HeadwaterError, translated
from headwater.spark.jvm import active_in_thread, optimized_plan_stats

ENGINES = ("auto", "spark", "delta-rs")
# Largest target (bytes of its data files) ``auto`` gives delta-rs. benchmarks/dml_crossover.py
# (this machine, 2 shared cores; DELETE of 1% / UPDATE of 1%, median of 3 after a warm-up):
#   rows (MB)       DELETE spark / delta-rs    MERGE spark / delta-rs  (wall seconds)
#   10k (0.2)       14.4 / 0.37                13.6 / 1.02
#   100k (1.8)       8.0 / 0.92                16.8 / 1.69
#   1M (14.9)       11.3 / 2.51                56.8 / 7.02
# delta-rs was faster at every size measured; its time grows with the bytes it rewrites
# (~0.15 s/MB for DELETE here) while Spark's is mostly fixed job cost, so the lines cross
# near 64 MB by extrapolation. The bound also caps what the driver holds in memory.
DELTA_RS_MAX_TARGET_BYTES = 64 * 1024 * 1024
# A MERGE's source is collected to the driver for delta-rs: only small ones.
DELTA_RS_MAX_SOURCE_ROWS = 1_000_000


@dataclass(frozen=True)
class Delete:
    """DELETE [WHERE condition] (None: every row); alias names the table in the condition."""

    condition: ColumnOrSql | None = None
    alias: str | None = None
    name = "DELETE"


@dataclass(frozen=True)
class Update:
    """UPDATE SET assignments [WHERE condition]."""

    assignments: Mapping[str, ColumnOrSql]
    condition: ColumnOrSql | None = None
    alias: str | None = None
    name = "UPDATE"


@dataclass(frozen=True)
class Merge:
    """MERGE INTO spec.path USING spec.source ON ... (the clauses in ``spec``)."""

    spec: MergeSpec
    name = "MERGE"


Operation = Delete | Update | Merge


def run(spark: SparkSession, path: str, operation: Operation, engine: str = "auto"
        ) -> DmlResult:
    """Run ``operation`` on the table at ``path`` with ``spark`` as this thread's active
    session (a user's thread may have none: the DML's own Spark jobs and plan lookups ask for
    it)."""
    with active_in_thread(spark), translated():  # a constraint failed in Spark's job: ours
        return _run(spark, path, operation, engine)


def _run(spark: SparkSession, path: str, operation: Operation, engine: str) -> DmlResult:
    if engine not in ENGINES:
        raise HeadwaterError("HW_OPTION_INVALID", f"Unknown DML engine {engine!r}.",
                             "DML runs on Spark's executors or on the driver with delta-rs.",
                             f"Use one of {', '.join(ENGINES)}.")
    snapshot = load_snapshot(path, operation.name)
    operation = _default_keyword_resolved(operation, snapshot)
    spec = operation.spec if isinstance(operation, Merge) else None
    # delta-rs checks CHECK constraints in its own SQL dialect: Spark's rewrite checks them
    # as delta-spark does (auto), unless the user asked for delta-rs
    checked = bool(snapshot.constraints.checks)
    if engine == "delta-rs" and checked and not isinstance(operation, Delete):
        refuse_checks_on_deltalake(snapshot.table, path, operation.name)
    if engine == "delta-rs" or (engine == "auto" and not checked and _small(snapshot, spec)):
        try:
            return _delta_rs(spark, snapshot, operation)
        except deltars.NotPortable as why:
            if engine == "delta-rs":
                raise HeadwaterError(
                    "HW_DML_ENGINE_UNSUPPORTED",
                    f"{operation.name} on {path} cannot run on delta-rs: {why}.",
                    "delta-rs evaluates SQL differently from Spark outside a small common "
                    "set, and lacks some table features; headwater never lets it guess.",
                    "Use engine='spark' (or 'auto', which picks Spark for this statement).",
                ) from None

    if isinstance(operation, Delete):
        return delete_update.spark_delete(spark, snapshot, operation.condition,
                                          operation.alias)
    if isinstance(operation, Update):
        return delete_update.spark_update(spark, snapshot, operation.assignments,
                                          operation.condition, operation.alias)
    return merge_spark.spark_merge(spark, snapshot, operation.spec)


def _default_keyword_resolved(operation: Operation, snapshot: Snapshot) -> Operation:
    """``operation`` with each ``DEFAULT`` value (UPDATE SET c = DEFAULT, MERGE's SET and
    INSERT VALUES) replaced by the SQL of the column's default, NULL where it has none."""
    fields = {f.name: f for f in snapshot.full_schema.fields}
    columns = list(fields)

    def resolved(assignments: Mapping[str, ColumnOrSql], alias: str | None
                 ) -> dict[str, ColumnOrSql]:
        return with_keyword_resolved(
            assignments, fields, lambda key: target_column_name(key, columns, alias,
                                                                snapshot.uri))

    if isinstance(operation, Update):
        return replace(operation, assignments=resolved(operation.assignments, operation.alias))
    if isinstance(operation, Merge):
        spec = operation.spec
        clauses = [replace(c, assignments=None if c.assignments is None else
                           resolved(c.assignments, spec.target_alias)) for c in spec.clauses]
        return replace(operation, spec=replace(spec, clauses=clauses))
    return operation


def _small(snapshot: Snapshot, spec: MergeSpec | None) -> bool:
    if any("://" in f.log_path or f.log_path.startswith(("/", "file:"))
           for f in snapshot.files):
        return False  # a shallow clone's files by absolute path: delta-rs refuses them
    if sum(f.size for f in snapshot.files) > DELTA_RS_MAX_TARGET_BYTES:
        return False
    if spec is None:
        return True
    # the source's size: Spark's estimate from its optimized plan (no job runs)
    stats = optimized_plan_stats(spec.source)
    rows = stats.rowCount()
    if rows.isDefined():
        return int(str(rows.get())) <= DELTA_RS_MAX_SOURCE_ROWS
    return int(str(stats.sizeInBytes())) <= DELTA_RS_MAX_TARGET_BYTES


def _delta_rs(spark: SparkSession, snapshot: Snapshot, operation: Operation) -> DmlResult:
    if isinstance(operation, Delete):
        return deltars.delete(spark, snapshot, operation.condition, operation.alias)
    if isinstance(operation, Update):
        return deltars.update(spark, snapshot, operation.assignments, operation.condition,
                              operation.alias)
    return deltars.merge(spark, snapshot, operation.spec)
