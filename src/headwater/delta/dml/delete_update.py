"""DELETE and UPDATE, copy-on-write on Spark's executors.

1. Candidate files: the snapshot's files, pruned by partition values and min/max stats
   (:mod:`headwater.delta.dml.skipping`).
2. Spark reads the candidates natively and counts matching rows per file: the files with a
   count are the touched ones (only these per-file counts reach the driver).
3. Spark reads the touched files again and writes their rows back, deleted rows left out or
   updated rows changed (plus ``_change_data`` files when the change data feed is on).
4. The driver commits removes of the touched files + the new files as one version.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from headwater.delta.dml.common import (
    ColumnOrSql,
    DmlResult,
    sql_text,
    target_column_name,
    to_column,
)
from headwater.delta.dml.rewrite import CHANGE_TYPE, Written, commit_rewrite, data_only, write_files
from headwater.delta.dml.skipping import file_test, read_filter
from headwater.delta.dml.target import (
    FILE_COL,
    ROW_ID_COL,
    ROW_VERSION_COL,
    Snapshot,
    scan,
    with_row_ids,
)
from headwater.delta.generated import Generation, identity_update_error, recompute
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructField


def not_null(value: Column, field: StructField, uri: str) -> Column:
    """``value`` cast to the column's type; NULL into a NOT NULL column fails the job."""
    value = value.cast(field.dataType)
    if field.nullable:
        return value
    message = (f"[HW_DML_NOT_NULL_VIOLATED] NULL written into the NOT NULL column "
               f"{field.name!r} of {uri}. Why: Delta enforces NOT NULL on every write. "
               "Fix: give the column a value (e.g. coalesce(...)).")
    return F.when(value.isNull(), F.raise_error(F.lit(message))).otherwise(value)


def spark_delete(spark: SparkSession, snapshot: Snapshot, condition: ColumnOrSql | None,
                 alias: str | None = None) -> DmlResult:
    return _rewrite(spark, snapshot, "DELETE", to_column(condition), condition, None, alias)


def spark_update(spark: SparkSession, snapshot: Snapshot, assignments: Mapping[str, ColumnOrSql],
                 condition: ColumnOrSql | None, alias: str | None = None) -> DmlResult:
    if not assignments:
        raise HeadwaterError("HW_DML_INVALID", f"UPDATE of {snapshot.uri} has no assignments.",
                             "UPDATE sets at least one column.",
                             "Pass set={'column': 'new value expression'}.")
    columns = snapshot.schema.fieldNames()
    resolved = {target_column_name(k, columns, alias, snapshot.uri): to_column(v, "value")
                for k, v in assignments.items()}
    for spec in Generation.of(snapshot.full_schema).identities:
        if spec.name in resolved:
            raise identity_update_error(spec.name, snapshot.uri)
    return _rewrite(spark, snapshot, "UPDATE", to_column(condition), condition, resolved, alias)


def _rewrite(spark: SparkSession, snapshot: Snapshot, operation: str,
             cond: Column | None, raw_condition,
             assignments: dict[str, Column] | None, alias: str | None = None) -> DmlResult:
    started = time.time()
    test = file_test(snapshot, cond, alias)
    candidates = [f for f in snapshot.files if test is None or test(f)]

    def rows_of(files):
        df = scan(spark, snapshot, files)
        return df.alias(alias) if alias else df
    by_key = {f.spark_key: f for f in candidates}
    if cond is None:
        touched = list(candidates)
        live = [f.live_records for f in touched]
        matched = rows_of(touched).count() if None in live else sum(live)  # type: ignore[arg-type]
    else:
        counts = rows_of(candidates).where(cond).groupBy(FILE_COL).count().collect()
        touched = [by_key[row[0]] for row in counts]
        matched = sum(row[1] for row in counts)
    scan_ms = int((time.time() - started) * 1000)
    kind = "deleted" if operation == "DELETE" else "updated"
    if not touched:
        return DmlResult(operation, metrics={f"num{kind.title()}Rows": 0})

    written = Written(snapshot.uri)
    try:
        rewrite_started = time.time()
        base = rows_of(touched)
        hit = F.lit(True) if cond is None else F.coalesce(cond, F.lit(False))
        if operation == "DELETE":
            if cond is not None or snapshot.cdf_enabled:
                if cond is not None:  # the rows kept: copied with their ids
                    write_files(with_row_ids(base.where(~hit), snapshot,
                                             data_only(base.where(~hit), snapshot)),
                                snapshot, written)
                if snapshot.cdf_enabled:
                    cdc = data_only(base.where(hit), snapshot)
                    write_files(cdc.withColumn(CHANGE_TYPE, F.lit("delete")), snapshot, written,
                                cdc=True)
        else:
            new = [_assigned(f, assignments, hit, snapshot.uri) for f in snapshot.schema.fields]
            generation = Generation.of(snapshot.full_schema)

            def updated(rows):  # generated columns follow the columns they read
                if not generation:
                    return rows
                return recompute(rows, generation, snapshot.uri, checked=set(assignments))
            tracking = snapshot.row_tracking_columns
            kept = [] if tracking is None else [  # ids kept; an updated row's version is new
                F.col(ROW_ID_COL).alias(tracking[0]),
                F.when(hit, F.lit(None).cast("long")).otherwise(F.col(ROW_VERSION_COL))
                .alias(tracking[1])]
            rows = updated(base.select(*new, *kept))
            if tracking is not None and not set(tracking) <= set(rows.columns):
                raise HeadwaterError(  # generated columns recomputed: the ids would be lost
                    "HW_DELTA_UNSUPPORTED_FEATURE",
                    f"UPDATE on {snapshot.uri} is not supported: the table has row tracking "
                    "(rowTracking) and generated columns.",
                    "The rewrite recomputes the generated columns into a new row shape that "
                    "does not carry the rows' ids yet; the rows would get new ids.",
                    "Run the UPDATE with delta-spark, or drop the rowTracking feature first.",
                    error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
            write_files(snapshot.constraints.enforce(rows, snapshot.uri), snapshot, written)
            if snapshot.cdf_enabled:
                pre = data_only(base.where(hit), snapshot).withColumn(
                    CHANGE_TYPE, F.lit("update_preimage"))
                post = updated(base.where(hit).select(*new)).withColumn(
                    CHANGE_TYPE, F.lit("update_postimage"))
                write_files(pre.unionByName(post), snapshot, written, cdc=True)
        copied = written.rows_added - (matched if operation == "UPDATE" else 0)
        metrics = {f"num{kind.title()}Rows": matched, "numCopiedRows": copied,
                   "executionTimeMs": int((time.time() - started) * 1000),
                   "scanTimeMs": scan_ms,
                   "rewriteTimeMs": int((time.time() - rewrite_started) * 1000)}
        parameters = {"predicate": json.dumps([sql_text(raw_condition)] if raw_condition
                                              is not None else [])}
        version = commit_rewrite(snapshot, operation, parameters, metrics, candidates, touched,
                                 written, read_filter=read_filter(test, snapshot))
    except BaseException:
        written.cleanup()
        raise
    result = DmlResult(operation, num_affected_rows=matched, version=version, metrics=metrics)
    if operation == "DELETE":
        result.num_deleted_rows = matched
    else:
        result.num_updated_rows = matched
    return result


def _assigned(field: StructField, assignments: dict[str, Column], hit: Column,
              uri: str) -> Column:
    current = F.col(f"`{field.name}`")
    if field.name not in assignments:
        return current
    return F.when(hit, not_null(assignments[field.name], field, uri)).otherwise(current) \
        .alias(field.name)
