"""MERGE, copy-on-write on Spark's executors.

Pass 1 joins the candidate target files with the source and keeps, per target file, only
aggregates (ON matches, clause matches, not-matched-by-source hits): the touched files, and the
multiple-match check. Pass 2 joins the touched files' rows with the source (full outer when
rows may be inserted), picks each row's clause in order, and writes the result (and change
data) with Spark's parquet writer. The driver commits removes + adds (+ cdc) in one version.
An insert-only MERGE rewrites nothing: it anti-joins the source with the target.
"""

from __future__ import annotations

import json
import time

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from headwater.delta.column_defaults import default_value
from headwater.delta.dml.common import (
    DmlResult,
    assigned_name,
    sql_text,
    target_column_name,
    to_column,
)
from headwater.delta.dml.delete_update import not_null
from headwater.delta.dml.merge_spec import (
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    MergeClause,
    MergeSpec,
    multiple_match_error,
)
from headwater.delta.dml.rewrite import CHANGE_TYPE, Written, commit_rewrite, write_files
from headwater.delta.dml.skipping import file_test, read_filter
from headwater.delta.dml.target import FILE_COL, ROW_COL, Snapshot, scan
from headwater.delta.generated import (
    Generation,
    IdentitySpec,
    explicit_identity_error,
    identity_update_error,
    identity_values,
    raised_high_water_marks,
    recompute,
)
from headwater.errors import HeadwaterError

T_MARK, S_MARK, ACTION = "_hw_t", "_hw_s", "_hw_action"


def evolved_schema(snapshot: Snapshot, spec: MergeSpec) -> StructType | None:
    """The table schema plus the source columns schema evolution adds, when it applies.

    As delta-spark (3.2+): with schema evolution, ``UPDATE SET *`` / ``INSERT *`` add every
    source column the table lacks, and an explicit ``SET col = ...`` / ``INSERT (col)`` of a
    column the table lacks adds it when the source has a column of that name (its type is the
    source column's). New columns come last, in the source's order, nullable.
    """
    if not spec.schema_evolution:
        return None
    known = {c.lower() for c in snapshot.schema.fieldNames()}
    wanted: set[str] = set()
    for clause in spec.clauses:
        if clause.star:
            wanted.update(c.lower() for c in spec.source.columns)
        for key in clause.assignments or {}:
            wanted.add(assigned_name(key, spec.target_alias).lower())
    new = [StructField(f.name, f.dataType, True) for f in spec.source.schema.fields
           if f.name.lower() in wanted and f.name.lower() not in known
           and not f.name.startswith("_hw_")]
    # the table's own fields keep their Delta metadata (generation, identity)
    return StructType(list(snapshot.full_schema.fields) + new) if new else None


def spark_merge(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec) -> DmlResult:
    spec.validate()
    started = time.time()
    alias = spec.target_alias
    on = to_column(spec.condition, "ON condition")
    matched, inserts, by_source = (spec.of_kind(k) for k in
                                   (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE))
    new_schema = evolved_schema(snapshot, spec)
    if new_schema is not None and snapshot.mapped:
        raise HeadwaterError(
            "HW_DML_UNSUPPORTED_FEATURE",
            f"MERGE with schema evolution into the column-mapped table at {snapshot.uri}: "
            "adding the source's columns "
            f"{', '.join(new_schema.fieldNames()[len(snapshot.schema.fields):])} is not "
            "supported yet.", "New columns of a column-mapped table need a column id and a "
            "physical name, which Spark's MERGE does not assign yet; nothing was written.",
            "Add the columns first (ALTER TABLE ... ADD COLUMNS), then run the MERGE.")
    schema = new_schema or snapshot.schema
    # every target row is read when rows not matched by the source may change
    test = None if by_source else file_test(snapshot, on, alias)
    candidates = [f for f in snapshot.files if test is None or test(f)]
    by_key = {f.spark_key: f for f in candidates}

    def target(files):
        df = scan(spark, snapshot, files).withColumn(T_MARK, F.lit(True))
        return df.alias(alias) if alias else df

    # --- pass 1: touched files --------------------------------------------------------
    touched, dedupe = [], False
    if matched or by_source:
        joined = target(candidates).join(spec.source.withColumn(S_MARK, F.lit(True)), on,
                                         "left" if by_source else "inner")
        s_here = F.col(S_MARK).isNotNull()
        aggs = [F.count(F.when(s_here, 1)).alias("m"),
                F.count(F.when(s_here & _any(matched), 1)).alias("mm"),
                F.max(F.when(~s_here & _any(by_source), 1).otherwise(0)).alias("nm")]
        per_file = (joined.groupBy(FILE_COL, ROW_COL).agg(*aggs).groupBy(FILE_COL)
                    .agg(F.max("m").alias("m"), F.max("mm").alias("mm"), F.max("nm").alias("nm"))
                    .where("m > 0 OR nm > 0").collect())
        if spec.checks_multiple_matches and any(r["mm"] > 1 for r in per_file):
            raise multiple_match_error(snapshot.uri)
        touched = [by_key[r[FILE_COL]] for r in per_file]
        dedupe = any(r["m"] > 1 for r in per_file)
    scan_ms = int((time.time() - started) * 1000)
    if not touched and not inserts:
        return DmlResult("MERGE", metrics={"numTargetRowsCopied": 0})

    # --- pass 2: rewrite ----------------------------------------------------------------
    src = spec.source.withColumn(S_MARK, F.lit(True))
    if matched or by_source:
        tgt = target(touched)
        joined = tgt.join(src, on, "full" if inserts else "left")
        has_target = True
    else:  # insert only: source rows without a match in the (candidate) target
        tgt = target(candidates)
        joined = src.join(tgt, on, "left_anti")
        has_target = False
    t_here = F.col(T_MARK).isNotNull() if has_target else F.lit(False)
    s_here = F.col(S_MARK).isNotNull()
    labelled = _labels(matched, inserts, by_source)
    action = None
    for label, clause in labelled:
        where = {MATCHED: t_here & s_here, NOT_MATCHED: ~t_here & s_here,
                 NOT_MATCHED_BY_SOURCE: t_here & ~s_here}[clause.kind]
        cond = F.coalesce(to_column(clause.condition), F.lit(False)) \
            if clause.condition is not None else F.lit(True)
        action = (F.when(where & cond, label) if action is None
                  else action.when(where & cond, label))
    assert action is not None
    joined = joined.withColumn(ACTION, action.otherwise(
        F.when(t_here, F.lit("copy")).otherwise(F.lit("drop"))))
    if dedupe:  # a target row joined with several source rows: keep one (the acting) pair
        window = Window.partitionBy(FILE_COL, ROW_COL).orderBy(
            (F.col(ACTION) == "copy").asc())
        joined = (joined.withColumn("_hw_rank", F.row_number().over(window))
                  .where(~t_here | (F.col("_hw_rank") == 1)).drop("_hw_rank"))

    current = {f.name: (tgt[f"`{f.name}`"] if has_target and f.name in
                        snapshot.schema.fieldNames() else F.lit(None).cast(f.dataType))
               for f in schema.fields}
    posts = []
    defaults_from = {f.name: f for f in snapshot.full_schema.fields}
    for i, field in enumerate(schema.fields):
        value = None
        for label, clause in labelled:
            if clause.action == "delete":
                continue
            assigned = _value(clause, field, spec, src, snapshot, schema, alias)
            if assigned is None:  # an insert stores the column's DEFAULT (else NULL)
                assigned = current[field.name] if clause.action == "update" \
                    else default_value(defaults_from.get(field.name, field))
            else:
                assigned = not_null(assigned, field, snapshot.uri)
            value = (F.when(F.col(ACTION) == label, assigned) if value is None
                     else value.when(F.col(ACTION) == label, assigned))
        post = current[field.name] if value is None else value.otherwise(current[field.name])
        posts.append(post.alias(f"_hw_post_{i}"))
    pres = [current[f.name].alias(f"_hw_pre_{i}") for i, f in enumerate(schema.fields)]
    # Counted from the cached result, not with an Observation: Observation.get never
    # returned for a MERGE run inside foreachBatch (the metrics never arrived).
    base = joined.select(F.col(ACTION), *pres, *posts)

    kinds = {label: clause.action for label, clause in labelled}
    updates = [lb for lb, a in kinds.items() if a == "update"]
    deletes = [lb for lb, a in kinds.items() if a == "delete"]
    insert_labels = [lb for lb, a in kinds.items() if a == "insert"]
    names = schema.fieldNames()
    full_schema = new_schema or snapshot.full_schema
    generation = Generation.of(full_schema)
    fresh_ids = _generated_identities(generation, labelled, spec, snapshot)
    if fresh_ids and snapshot.cdf_enabled:
        raise HeadwaterError(
            "HW_DML_UNSUPPORTED_FEATURE",
            f"MERGE into {snapshot.uri}: inserting rows with generated identity values into a "
            "table with the change data feed is not supported yet.",
            "The change data feed would need the same generated values as the data files.",
            "Give the identity values in the INSERT clause (GENERATED BY DEFAULT), or insert "
            "the new rows with INSERT INTO first.")
    written = Written(snapshot.uri)
    base = base.persist()
    try:
        rewrite_started = time.time()
        counts = {r[0]: r[1] for r in base.groupBy(ACTION).count().collect()}
        data = base.where(F.col(ACTION).isin(updates + insert_labels + ["copy"])).select(
            F.col(ACTION), *[F.col(f"_hw_post_{i}").alias(n) for i, n in enumerate(names)])
        for identity, labels in fresh_ids.items():
            data = identity_values(data, [identity], where=F.col(ACTION).isin(labels))
        if generation:  # generated columns follow the columns they read; given ones checked
            assigning = _assigning(generation, labelled, spec, snapshot)
            data = recompute(data, generation, snapshot.uri,
                             {n: F.col(ACTION).isin(lbs) for n, lbs in assigning.items()})
        else:
            data = data.drop(ACTION)
        write_files(snapshot.constraints.enforce(data, snapshot.uri), snapshot, written)
        if snapshot.cdf_enabled:
            pre = base.where(F.col(ACTION).isin(updates + deletes)).select(
                *[F.col(f"_hw_pre_{i}").alias(n) for i, n in enumerate(names)],
                F.when(F.col(ACTION).isin(updates), "update_preimage").otherwise("delete")
                .alias(CHANGE_TYPE))
            post = base.where(F.col(ACTION).isin(updates + insert_labels)).select(
                *[F.col(f"_hw_post_{i}").alias(n) for i, n in enumerate(names)],
                F.when(F.col(ACTION).isin(updates), "update_postimage").otherwise("insert")
                .alias(CHANGE_TYPE))
            if generation:
                post = recompute(post.drop(CHANGE_TYPE), generation, snapshot.uri) \
                    .withColumn(CHANGE_TYPE, post[CHANGE_TYPE])
            write_files(pre.unionByName(post), snapshot, written, cdc=True)
        metrics = _metrics(counts, labelled, spec.source.count())
        metrics.update(scanTimeMs=scan_ms, rewriteTimeMs=int((time.time() - rewrite_started)
                                                             * 1000),
                       executionTimeMs=int((time.time() - started) * 1000))
        parameters = {"predicate": json.dumps(sql_text(spec.condition)),
                      "matchedPredicates": json.dumps([_describe(c) for c in matched]),
                      "notMatchedPredicates": json.dumps([_describe(c) for c in inserts]),
                      "notMatchedBySourcePredicates": json.dumps([_describe(c) for c in by_source])}
        changed = sum(metrics[k] for k in ("numTargetRowsUpdated", "numTargetRowsDeleted",
                                           "numTargetRowsInserted"))
        if changed == 0 and new_schema is None:
            # Rows matched but no clause acted: the table is unchanged, so nothing is
            # committed (a commit of copies would read as deletes + inserts in the change feed).
            written.cleanup()
            version = None
        else:
            marked = raised_high_water_marks(full_schema, [i.name for i in fresh_ids],
                                             written.adds)
            version = commit_rewrite(snapshot, "MERGE", parameters, metrics, candidates,
                                     touched, written, new_schema=marked or new_schema,
                                     read_filter=read_filter(test, snapshot))
    except BaseException:
        written.cleanup()
        raise
    finally:
        base.unpersist()
    upd, dele, ins = (metrics["numTargetRowsUpdated"], metrics["numTargetRowsDeleted"],
                      metrics["numTargetRowsInserted"])
    return DmlResult("MERGE", num_affected_rows=upd + dele + ins, num_updated_rows=upd,
                     num_deleted_rows=dele, num_inserted_rows=ins, version=version,
                     metrics=metrics)


def _generated_identities(generation: Generation, labelled, spec: MergeSpec,
                          snapshot: Snapshot) -> dict[IdentitySpec, list[str]]:
    """The identity columns whose values the MERGE's inserts generate -> the labels of the
    insert clauses that leave them out (GENERATED ALWAYS columns may not be given)."""
    out: dict[IdentitySpec, list[str]] = {}
    source = {c.lower() for c in spec.source.columns}
    columns = snapshot.schema.fieldNames()
    for identity in generation.identities:
        for label, clause in labelled:
            if clause.action == "update" and not clause.star and any(
                    target_column_name(k, columns, spec.target_alias, snapshot.uri)
                    == identity.name for k in clause.assignments or {}):
                raise identity_update_error(identity.name, snapshot.uri)
            if clause.action != "insert":
                continue
            given = identity.name.lower() in source if clause.star else any(
                target_column_name(k, columns, spec.target_alias, snapshot.uri)
                == identity.name for k in clause.assignments or {})
            if given and not identity.allow_explicit_insert:
                raise explicit_identity_error(identity.name, snapshot.uri)
            if not given:
                out.setdefault(identity, []).append(label)
    return out


def _assigning(generation: Generation, labelled, spec: MergeSpec,
               snapshot: Snapshot) -> dict[str, list[str]]:
    """The generated columns a clause gives a value (``*`` from a source column of that name,
    or an assignment) -> the labels of those clauses: their values are checked, not
    overwritten (delta-spark: DELTA_VIOLATE_CONSTRAINT_WITH_VALUES)."""
    out: dict[str, list[str]] = {}
    source = {c.lower() for c in spec.source.columns}
    columns = snapshot.schema.fieldNames()
    for name in generation.expressions:
        for label, clause in labelled:
            if clause.action == "delete":
                continue
            given = name.lower() in source if clause.star else any(
                target_column_name(k, columns, spec.target_alias, snapshot.uri) == name
                for k in clause.assignments or {})
            if given:
                out.setdefault(name, []).append(label)
    return out


def _any(clauses: list[MergeClause]) -> Column:
    """True where some clause's condition holds (False when there is no clause)."""
    if not clauses:
        return F.lit(False)
    if any(c.condition is None for c in clauses):
        return F.lit(True)
    out = None
    for c in clauses:
        cond = F.coalesce(to_column(c.condition), F.lit(False))
        out = cond if out is None else out | cond
    return out


def _labels(matched, inserts, by_source) -> list[tuple[str, MergeClause]]:
    return ([(f"m{i}", c) for i, c in enumerate(matched)]
            + [(f"b{i}", c) for i, c in enumerate(by_source)]
            + [(f"n{i}", c) for i, c in enumerate(inserts)])


def _value(clause: MergeClause, field: StructField, spec: MergeSpec, src: DataFrame,
           snapshot: Snapshot, schema: StructType, alias: str | None) -> Column | None:
    """The value ``clause`` assigns to ``field``, or None when it leaves it alone."""
    if clause.star:
        by_lower = {c.lower(): c for c in spec.source.columns}
        name = by_lower.get(field.name.lower())
        if name is not None:
            return src[f"`{name}`"]
        if spec.schema_evolution:
            return None
        raise HeadwaterError(
            "HW_MERGE_SOURCE_COLUMN_MISSING",
            f"MERGE into {snapshot.uri}: {clause.describe()} needs the source column "
            f"{field.name!r}, which the source ({', '.join(spec.source.columns)}) lacks.",
            "UPDATE SET * and INSERT * take every target column from the source column of "
            "the same name.",
            "Add the column to the source, list the assignments explicitly, or enable "
            "schema evolution (withSchemaEvolution()).")
    columns = schema.fieldNames()  # the evolved schema: SET may name a column it adds
    for key, value in (clause.assignments or {}).items():
        if target_column_name(key, columns, alias, snapshot.uri) == field.name:
            return to_column(value, "value")
    return None


def _describe(clause: MergeClause) -> dict:
    out = {"actionType": clause.action}
    if clause.condition is not None:
        out["predicate"] = sql_text(clause.condition)
    return out


def _metrics(counts: dict, labelled, source_rows: int) -> dict:
    def total(kind: str, action: str) -> int:
        return sum(int(counts.get(lb, 0)) for lb, c in labelled
                   if c.kind == kind and c.action == action)

    m_upd, b_upd = total(MATCHED, "update"), total(NOT_MATCHED_BY_SOURCE, "update")
    m_del, b_del = total(MATCHED, "delete"), total(NOT_MATCHED_BY_SOURCE, "delete")
    inserted = total(NOT_MATCHED, "insert")
    copied = int(counts.get("copy", 0))
    return {"numSourceRows": source_rows, "numTargetRowsInserted": inserted,
            "numTargetRowsUpdated": m_upd + b_upd, "numTargetRowsMatchedUpdated": m_upd,
            "numTargetRowsNotMatchedBySourceUpdated": b_upd,
            "numTargetRowsDeleted": m_del + b_del, "numTargetRowsMatchedDeleted": m_del,
            "numTargetRowsNotMatchedBySourceDeleted": b_del, "numTargetRowsCopied": copied,
            "numOutputRows": inserted + m_upd + b_upd + copied}
