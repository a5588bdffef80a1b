"""AUTO CDC on Delta: apply one micro-batch of change events to a target table, exactly once.

Where state lives: Databricks keeps AUTO CDC's per-key state hidden. headwater keeps it in a
Delta table of its own inside the target's folder, ``<target>/_hw_cdc_state`` (Delta readers,
VACUUM and delta-rs skip names starting with ``_``; dropping the table drops its state). For
SCD1 whose target keeps the sequence column (``sequence_by`` names a column among the output
columns), a live row's sequence *is* its applied sequence, so the state holds only tombstones
(deletes, and when) and truncate rows, appended. SCD2 appends every delete as a tombstone
too (the history shows the rest). Otherwise (SCD1 with the sequence not kept) it holds one
row per key: the highest sequence applied, whether that event was a delete (a tombstone) and
when; plus one ``truncate`` row holding the latest truncate's sequence. See :mod:`.state`.
The target itself holds only the user's columns (SCD2: and ``__START_AT`` / ``__END_AT``),
so any reader of the path sees a plain table.

Where it runs: batches with one key column run on the driver (:mod:`.driver` for SCD1;
:mod:`.history` for SCD2): one Spark job collects the batch's
deduplicated events to Arrow, and only the batch's keys' stored rows and state are read, with
delta-rs; the target is never collected whole. A micro-batch is bounded by its source
(maxFilesPerTrigger / maxOffsetsPerTrigger); one larger than ``driver.DRIVER_MAX_EVENTS``
events (Spark's plan estimate) and the other shapes run the arithmetic in Spark
(:mod:`.timeline`), with the same results; :attr:`CdcResult.engine` says which ran.

Exactly once: the changed rows are collected (only rows that change) and merged with delta-rs
in one commit carrying txn(app_id, batch_id); then the state table gets its rows in one commit
with the same txn. A replayed batch finds both txns and does nothing. A crash between the two
commits leaves the state behind; the replay skips the target and recomputes the state from the
old state and the same batch, which gives the same rows (SCD1, tombstones only: the batch's
deletes newer than the old tombstones and than the committed target's rows, the same ones as
the first time; an appended copy of one would change nothing; SCD2: the batch's deletes not
yet tombstones, read off the batch alone). Tombstones older than ``tombstone_gc_seconds``
are deleted with the state commit: after that an older upsert for the key is applied again
(Databricks' documented behaviour).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StringType, StructField, StructType, TimestampType

from headwater.conf.layout import CDC_STATE
from headwater.delta.cdc import driver, history, state, targets
from headwater.delta.cdc import timeline as tl
from headwater.delta.cdc.spec import (
    END_AT,
    SEQ,
    START_AT,
    TRUNCATE,
    CdcSpec,
    check_events,
    events_of,
)
from headwater.delta.log import normalize_uri
from headwater.delta.native_read import read_native
from headwater.delta.write.native import fault

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CDC_TARGET_PROPERTIES = {"delta.enableChangeDataFeed": "true"}


@dataclass
class CdcResult:
    """What one batch did to the target. applied: False when its txn was already committed
    (a replay; every count is then 0).

    SCD1: ``upserted`` rows inserted or updated, ``deleted`` rows removed.
    SCD2: ``history_rows`` history rows written (versions opened, closed or corrected),
    ``upserted`` of those the current version of their key (``__END_AT`` NULL), ``deleted``
    history rows removed (an out-of-order event rewrote a key's history).
    """

    applied: bool = True
    upserted: int = 0
    deleted: int = 0
    history_rows: int = 0
    truncated: bool = False
    target_version: int | None = None
    engine: str = ""  # "driver" or "spark": where the batch's arithmetic ran

    def counts(self) -> dict[str, int]:
        """The counts the event log keeps per batch."""
        return {"upserted": self.upserted, "deleted": self.deleted,
                "history_rows": self.history_rows}


def state_path(target: str) -> str:
    return os.path.join(normalize_uri(target), CDC_STATE)


def apply_changes_batch(batch: DataFrame, batch_id: int, target: str, spec: CdcSpec,
                        app_id: str) -> CdcResult:
    """Apply ``batch`` (change events) to the Delta table at ``target`` as ``spec`` says.

    The target is created on first use (with ``delta.enableChangeDataFeed=true``) from the
    batch's selected columns. Raises HW_CDC_* errors for bad events; nothing is committed then.
    """
    uri = normalize_uri(target)
    where = f"AUTO CDC into {uri}"
    # Each table's log is read once per batch: its txn here, its schema in _ensure_table.
    opened, opened_state = targets.open_or_none(uri), targets.open_or_none(state_path(uri))
    done_target = _txn_version(opened, app_id)
    done_state = _txn_version(opened_state, app_id)
    if done_target is not None and done_target >= batch_id and done_state is not None \
            and done_state >= batch_id:
        return CdcResult(applied=False)
    # The driver collects the events as they are (no shuffle) and merges copies itself.
    raw, output = events_of(batch, spec, where, check=False, distinct=False)
    events = raw.dropDuplicates()
    keys = output[:len(spec.keys)]
    seq_column = spec.sequence_output_column(output) if spec.stored_as_scd_type == 1 else None
    job = _Job(uri, where, spec, app_id, batch_id, output, keys, seq_column,
               done_target, done_state, opened, opened_state)
    if driver.eligible(spec, events, output, seq_column):
        data = driver.collect(batch, raw)
        if data is not None:
            data = driver.prepare(data, spec, keys, where, events.toArrow)
        if data is not None:
            return _on_driver(job, events, data)
    return _in_spark(job, batch.sparkSession, events)


@dataclass
class _Job:
    uri: str
    where: str
    spec: CdcSpec
    app_id: str
    batch_id: int
    output: list[str]
    keys: list[str]
    seq_column: str | None  # set: the state holds tombstones only
    done_target: int | None
    done_state: int | None
    opened: Any = None  # the target's DeltaTable when it existed at the start, else None
    opened_state: Any = None

    def target_due(self) -> bool:
        return self.done_target is None or self.done_target < self.batch_id

    def state_due(self) -> bool:
        return self.done_state is None or self.done_state < self.batch_id


def _on_driver(job: _Job, events: DataFrame, data: Any) -> CdcResult:
    """On the driver (see :mod:`.driver`, :mod:`.history`): the events are in ``data``."""
    key, seq_type = job.keys[0], data.schema.field(SEQ).type
    scd2 = job.spec.stored_as_scd_type == 2
    target_schema = _target_schema(events, job.output, scd2)
    table = targets.ensure_table(job.uri, target_schema, CDC_TARGET_PROPERTIES, job.where,
                          job.opened)
    state_schema = _state_schema(events, job.keys)
    state_table = targets.ensure_table(state_path(job.uri), state_schema, {}, job.where,
                                job.opened_state)
    ops = data.column("__hw_op")
    changes = data.filter(pc.not_equal(ops, TRUNCATE))
    key_values = pc.unique(changes.column(key).combine_chunks())
    oldest = pc.min(changes.column(SEQ)).as_py()
    state = driver.read_state(state_table, key, key_values, oldest)
    if scd2:
        stored = driver.read_stored(table, [*job.output, START_AT, END_AT], key_values, None,
                                    ending_since=(END_AT, oldest))
        rows, new_state = history.scd2(
            data, stored, state.filter(pc.equal(state.column(tl.KIND), tl.KEY_ROW)),
            job.output, job.spec.tracked_columns(job.output, job.where),
            job.spec.ignore_null_updates)
        return _commit(job, table, target_schema, rows, False, state_table, state_schema,
                       new_state, None, "driver")
    kinds = state.column(tl.KIND)
    # as the Spark path: a truncate recorded under an earlier spec counts only while the
    # flow still applies truncates
    old_truncate = pc.max(state.filter(pc.equal(kinds, tl.TRUNCATE_ROW)).column(SEQ)
                          .cast(seq_type)).as_py() \
        if job.spec.apply_as_truncates is not None else None
    new_truncate = pc.max(data.filter(pc.equal(ops, TRUNCATE)).column(SEQ)).as_py() \
        if job.spec.apply_as_truncates is not None else None
    truncating = new_truncate is not None and (old_truncate is None
                                               or new_truncate > old_truncate)
    truncate_seq = new_truncate if truncating else old_truncate
    key_state = state.filter(pc.equal(kinds, tl.KEY_ROW))
    seqs = pa.table({key: key_state.column(key).cast(data.schema.field(key).type),
                     SEQ: key_state.column(SEQ).cast(seq_type)})
    if not truncating and not job.spec.ignore_null_updates:
        # No read of the stored rows: the state holds each key's applied sequence, or (the
        # sequence kept in the target) the MERGE compares each key's stored sequence itself.
        applied = seqs.group_by(key).aggregate([(SEQ, "max")]).rename_columns([key, SEQ])
        last = driver.last_of_batch(data, applied, truncate_seq, job.output)
        if job.seq_column is not None:
            last = driver.without_stale_deletes(last, table, job.output, job.seq_column)
        rows, state_rows = tl.split_scd1(last, job.output, job.keys, False)
        return _commit(job, table, target_schema, rows, False, state_table, state_schema,
                       state_rows, {"seq": truncate_seq} if truncate_seq is not None else None,
                       "driver", guard=job.seq_column)
    assert job.seq_column is not None  # driver.eligible: no stored sequence, no such batch
    stored = driver.read_stored(table, job.output, key_values, job.seq_column,
                                truncate_seq if truncating else None)
    seqs = pa.concat_tables([seqs, pa.table({
        key: stored.column(key).cast(seqs.schema.field(key).type),
        SEQ: stored.column(job.seq_column).cast(seq_type)})])
    applied = seqs.group_by(key).aggregate([(SEQ, "max")]).rename_columns([key, SEQ])
    last = driver.last_events(data, stored, applied, truncate_seq, job.output, job.seq_column,
                              job.spec.ignore_null_updates)
    rows, state_rows = tl.split_scd1(last, job.output, job.keys, truncating)
    return _commit(job, table, target_schema, rows, truncating, state_table, state_schema,
                   state_rows, {"seq": truncate_seq} if truncate_seq is not None else None,
                   "driver")


def _in_spark(job: _Job, spark: SparkSession, events: DataFrame) -> CdcResult:
    """The arithmetic in Spark (:mod:`.timeline`): SCD2, and batches the driver does not
    take. The events are cached first: the checks and the arithmetic read the batch once."""
    events = events.persist()
    try:
        spec, keys, output = job.spec, job.keys, job.output
        check_events(events, spec, output, job.where)
        scd2 = spec.stored_as_scd_type == 2
        target_schema = _target_schema(events, output, scd2)
        table = targets.ensure_table(job.uri, target_schema, CDC_TARGET_PROPERTIES, job.where,
                              job.opened)
        state_schema = _state_schema(events, keys)
        state_table = targets.ensure_table(state_path(job.uri), state_schema, {}, job.where,
                                    job.opened_state)
        stored = _read(spark, job.uri, target_schema)
        state_all = _read(spark, state_path(job.uri), state_schema)
        key_state = state_all.where(F.col(tl.KIND) == tl.KEY_ROW)
        keys_df = events.where(F.col("__hw_op") != TRUNCATE).select(*[tl.q(k) for k in keys]
                                                                     ).distinct()
        truncate_row, truncating = None, False
        if scd2:
            tracked = spec.tracked_columns(output, job.where)
            history, new_state = tl.scd2(spec, events, tl.of_keys(stored, keys_df, keys),
                                         tl.of_keys(key_state, keys_df, keys), output, tracked)
            rows = history.toArrow() if job.target_due() else None
            state_rows = new_state.toArrow() if job.state_due() else None
        else:
            if spec.apply_as_truncates is not None:
                truncate_row, truncating = _truncate(events, state_all)
            truncate_seq = F.lit(truncate_row["seq"]).cast(events.schema[SEQ].dataType) \
                if truncate_row is not None else None
            # Truncating concerns every row, not only the batch's keys.
            last = tl.scd1(spec, events,
                           stored if truncating else tl.of_keys(stored, keys_df, keys),
                           key_state if truncating else tl.of_keys(key_state, keys_df, keys),
                           output, truncate_seq, job.seq_column)
            rows, state_rows = tl.split_scd1(last.toArrow(), output, keys, truncating)
        return _commit(job, table, target_schema, rows, truncating, state_table, state_schema,
                       state_rows, truncate_row, "spark")
    finally:
        events.unpersist()


def _commit(job: _Job, table: Any, target_schema: StructType, rows: Any, truncating: bool,
            state_table: Any, state_schema: StructType, state_rows: Any,
            truncate_row: dict[str, Any] | None, engine: str, guard: str | None = None
            ) -> CdcResult:
    """The target's merge, then the state's commit, each unless its txn is there already.
    guard: the sequence column the MERGE compares (``rows`` may hold upserts older than
    their stored row; the MERGE's own counts say what was written)."""
    scd2 = job.spec.stored_as_scd_type == 2
    result = CdcResult(engine=engine)
    if job.target_due():
        result.target_version, metrics = targets.merge(
            table, rows, job.keys + ([START_AT] if scd2 else []), target_schema, truncating,
            job.app_id, job.batch_id, guard)
        # counted in Arrow: a batch writes up to a row per event
        upserts = pc.equal(rows.column(tl.ACTION), "upsert")
        written = pc.sum(upserts).as_py() or 0
        result.deleted = pc.sum(pc.equal(rows.column(tl.ACTION), "delete")).as_py() or 0
        if scd2:
            result.history_rows = written
            current = pc.and_(upserts, pc.is_null(rows.column(END_AT)))
            result.upserted = pc.sum(current).as_py() or 0
        elif guard is not None:
            result.upserted = metrics.get("num_target_rows_inserted", 0) + metrics.get(
                "num_target_rows_updated", 0)
        else:
            result.upserted = written
        result.truncated = truncating
        if result.target_version is not None:
            fault("cdc_between_commits", job.uri)  # crash tests: target committed, state not
    if job.state_due():
        if truncating:
            assert truncate_row is not None
            state_rows = state.with_truncate_row(state_rows, truncate_row["seq"], state_schema)
        if job.seq_column is not None or scd2:
            state.append_tombstones(state_table, state_rows, state_schema, job.spec,
                                    job.app_id, job.batch_id)
        else:
            state.merge_per_key(state_table, state_rows, job.keys, state_schema, job.spec,
                                job.app_id, job.batch_id)
    return result


def _txn_version(table: Any, app_id: str) -> int | None:
    return None if table is None else table.transaction_version(app_id)


def target_schema(spec: CdcSpec, source: DataFrame, where: str) -> StructType:
    """The target's schema for change events shaped like ``source`` (no Spark job)."""
    output = spec.output_columns(source.columns, where)
    shaped = source.select(*[tl.q(c) for c in output], spec.sequence_column().alias(SEQ),
                           F.lit(None).cast("string").alias("__hw_op"))
    return _target_schema(shaped, output, spec.stored_as_scd_type == 2)


def _target_schema(events: DataFrame, output: list[str], scd2: bool) -> StructType:
    fields = [events.schema[c] for c in output]
    if scd2:
        seq_type = events.schema[SEQ].dataType
        fields += [StructField(START_AT, seq_type, True), StructField(END_AT, seq_type, True)]
    return StructType(fields)


def _state_schema(events: DataFrame, keys: list[str]) -> StructType:
    return StructType([*[events.schema[k] for k in keys], events.schema[SEQ],
                       StructField(tl.DELETED, BooleanType(), True),
                       StructField(tl.DELETED_AT, TimestampType(), True),
                       StructField(tl.KIND, StringType(), True)])


def _read(spark: SparkSession, uri: str, schema: StructType) -> DataFrame:
    df = read_native(spark, uri, pinned=True)
    if df is None:
        df = spark.read.format("delta").load(uri)
    return df.select(*[tl.q(f.name) for f in schema.fields])


def _truncate(events: DataFrame, state_all: DataFrame) -> tuple[dict[str, Any] | None, bool]:
    """The truncate sequence in force ({'seq': ...} or None) and whether this batch brings a
    newer one (the target is emptied up to it)."""
    new = events.where(F.col("__hw_op") == TRUNCATE).agg(F.max(SEQ).alias("new"))
    old = state_all.where(F.col(tl.KIND) == tl.TRUNCATE_ROW).agg(F.max(SEQ).alias("old"))
    row = new.crossJoin(old).select(
        "new", "old", F.when(F.col("old").isNull() | (F.col("new") > F.col("old")),
                             F.col("new")).otherwise(F.col("old")).alias("seq")).first()
    assert row is not None
    if row["seq"] is None:
        return None, False
    truncating = row["new"] is not None and (row["old"] is None or row["new"] > row["old"])
    return {"seq": row["seq"]}, truncating
