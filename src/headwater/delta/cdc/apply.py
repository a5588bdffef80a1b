"""AUTO CDC on Delta: apply one micro-batch of change events to a target table, exactly once.

Where state lives: Databricks keeps AUTO CDC's per-key state hidden. headwater keeps it in a
Delta table of its own inside the target's folder, ``<target>/_hw_cdc_state`` (Delta readers,
VACUUM and delta-rs skip names starting with ``_``; dropping the table drops its state). One
row per key: the highest sequence applied, whether that event was a delete (a tombstone) and
when; plus one ``truncate`` row holding the latest truncate's sequence. The target itself
holds only the user's columns (SCD2: and ``__START_AT`` / ``__END_AT``), so any reader of the
path sees a plain table.

Exactly once: the changed rows are collected (only rows that change) and merged with delta-rs
in one commit carrying txn(app_id, batch_id); then the state table gets its rows in one commit
with the same txn. A replayed batch finds both txns and does nothing. A crash between the two
commits leaves the state behind; the replay skips the target and recomputes the state from the
old state and the same batch, which gives the same rows (SCD2: only the rows the stored
history cannot show, tombstones of deletes that closed no row; the others are derived from the
history, so that state commit may be empty and then records no txn). Tombstones older than
``tombstone_gc_seconds`` are deleted in the state commit: after that an older upsert for the
key is applied again (Databricks' documented behaviour).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.conf.layout import CDC_STATE
from headwater.conf.storage import options_for
from headwater.delta.cdc import timeline as tl
from headwater.delta.cdc.spec import END_AT, SEQ, START_AT, TRUNCATE, CdcSpec, events_of
from headwater.delta.log import normalize_uri, open_table
from headwater.delta.native import _fault
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

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
    from pyspark.sql import functions as F

    uri = normalize_uri(target)
    where = f"AUTO CDC into {uri}"
    done_target = _txn_version(uri, app_id)
    done_state = _txn_version(state_path(uri), app_id)
    if done_target is not None and done_target >= batch_id and done_state is not None \
            and done_state >= batch_id:
        return CdcResult(applied=False)
    events, output = events_of(batch, spec, where)
    events = events.persist()
    try:
        spark = batch.sparkSession
        keys = output[:len(spec.keys)]
        scd2 = spec.stored_as_scd_type == 2
        target_schema = _target_schema(events, output, scd2)
        table = _ensure_table(uri, target_schema, CDC_TARGET_PROPERTIES, where)
        state_schema = _state_schema(events, keys)
        state_table = _ensure_table(state_path(uri), state_schema, {}, where)
        stored = _read(spark, uri, target_schema)
        state_all = _read(spark, state_path(uri), state_schema)
        key_state = state_all.where(F.col(tl.KIND) == tl.KEY_ROW)
        keys_df = events.where(F.col("__hw_op") != TRUNCATE).select(*[tl.q(k) for k in keys]
                                                                     ).distinct()
        result = CdcResult()
        truncate_row, truncating = None, False
        if scd2:
            tracked = spec.tracked_columns(output, where)
            rows, new_state = tl.scd2(spec, events, tl.of_keys(stored, keys_df, keys),
                                      tl.of_keys(key_state, keys_df, keys), output, tracked)
        else:
            if spec.apply_as_truncates is not None:
                truncate_row, truncating = _truncate(events, state_all)
            truncate_seq = F.lit(truncate_row["seq"]).cast(events.schema[SEQ].dataType) \
                if truncate_row is not None else None
            # Truncating concerns every row, not only the batch's keys.
            last = tl.scd1(spec, events,
                           stored if truncating else tl.of_keys(stored, keys_df, keys),
                           key_state if truncating else tl.of_keys(key_state, keys_df, keys),
                           output, truncate_seq)
            data, state_rows = tl.split_scd1(last.toArrow(), output, keys, truncating)
        if done_target is None or done_target < batch_id:
            if scd2:
                data = rows.toArrow()
            result.target_version = _merge_target(
                table, data, keys + ([START_AT] if scd2 else []), target_schema, truncating,
                app_id, batch_id)
            actions = data.column(tl.ACTION).to_pylist()
            written = actions.count("upsert")
            result.deleted = actions.count("delete")
            if scd2:
                result.history_rows = written
                ends = data.column(END_AT).to_pylist()
                result.upserted = sum(1 for a, e in zip(actions, ends, strict=True)
                                      if a == "upsert" and e is None)
            else:
                result.upserted = written
            result.truncated = truncating
            if result.target_version is not None:
                _fault("cdc_between_commits", uri)  # crash tests: target committed, state not
        if done_state is None or done_state < batch_id:
            if scd2:
                state_rows = new_state.toArrow()
            if truncating:
                state_rows = _with_truncate_row(state_rows, truncate_row, keys, state_schema)
            _merge_state(state_table, state_rows, keys, state_schema, spec, app_id, batch_id)
        return result
    finally:
        events.unpersist()


def _txn_version(uri: str, app_id: str) -> int | None:
    from deltalake.exceptions import TableNotFoundError

    try:
        return open_table(uri).transaction_version(app_id)
    except TableNotFoundError:
        return None


def target_schema(spec: CdcSpec, source: DataFrame, where: str) -> StructType:
    """The target's schema for change events shaped like ``source`` (no Spark job)."""
    from pyspark.sql import functions as F

    output = spec.output_columns(source.columns, where)
    shaped = source.select(*[tl.q(c) for c in output], spec.sequence_column().alias(SEQ),
                           F.lit(None).cast("string").alias("__hw_op"))
    return _target_schema(shaped, output, spec.stored_as_scd_type == 2)


def _target_schema(events: DataFrame, output: list[str], scd2: bool) -> StructType:
    from pyspark.sql.types import StructField, StructType

    fields = [events.schema[c] for c in output]
    if scd2:
        seq_type = events.schema[SEQ].dataType
        fields += [StructField(START_AT, seq_type, True), StructField(END_AT, seq_type, True)]
    return StructType(fields)


def _state_schema(events: DataFrame, keys: list[str]) -> StructType:
    from pyspark.sql.types import BooleanType, StringType, StructField, StructType, TimestampType

    return StructType([*[events.schema[k] for k in keys], events.schema[SEQ],
                       StructField(tl.DELETED, BooleanType(), True),
                       StructField(tl.DELETED_AT, TimestampType(), True),
                       StructField(tl.KIND, StringType(), True)])


def _ensure_table(uri: str, schema: StructType, configuration: dict[str, str], where: str):
    """The Delta table at ``uri``, created empty with ``schema`` when missing; an existing
    table must have the columns the flow writes."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from headwater.delta.schema import arrow_schema, as_nullable, spark_schema
    from headwater.delta.sink import check_schema

    try:
        table = open_table(uri)
    except TableNotFoundError:
        return DeltaTable.create(uri, arrow_schema(as_nullable(schema)), mode="ignore",
                                 configuration=configuration or None,
                                 storage_options=options_for(uri))
    existing = spark_schema(table.schema().to_json())
    missing = {f.name.lower() for f in schema.fields} - {f.name.lower() for f in existing.fields}
    if missing:
        raise HeadwaterError(
            "HW_CDC_TARGET_MISMATCH", f"{where}: the table lacks the columns "
            f"{sorted(missing)} the flow writes (it has {', '.join(existing.fieldNames())}).",
            "AUTO CDC writes the selected source columns (SCD2: and __START_AT/__END_AT).",
            "Fix column_list / stored_as_scd_type, or full-refresh the table.")
    check_schema(uri, existing, as_nullable(schema), merge_schema=False)
    return table


def _read(spark: SparkSession, uri: str, schema: StructType) -> DataFrame:
    from headwater.delta.native import read_native

    df = read_native(spark, uri)
    if df is None:
        df = spark.read.format("delta").load(uri)
    return df.select(*[tl.q(f.name) for f in schema.fields])


def _truncate(events: DataFrame, state_all: DataFrame) -> tuple[dict[str, Any] | None, bool]:
    """The truncate sequence in force ({'seq': ...} or None) and whether this batch brings a
    newer one (the target is emptied up to it)."""
    from pyspark.sql import functions as F

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


def _merge_target(table, data, on: list[str], schema: StructType, truncating: bool,
                  app_id: str, batch_id: int) -> int | None:
    from deltalake import CommitProperties, Transaction

    from headwater.delta.merge import as_table_arrow

    if data.num_rows == 0 and not truncating:
        return None
    action = data.column(tl.ACTION)
    body = as_table_arrow(data.drop_columns([tl.ACTION]), schema)
    source = body.append_column(tl.ACTION, action)
    columns = {tl.q(f.name): f"s.{tl.q(f.name)}" for f in schema.fields}
    merger = (table.merge(source, " AND ".join(f"t.{tl.q(k)} <=> s.{tl.q(k)}" for k in on),
                          source_alias="s", target_alias="t",
                          commit_properties=CommitProperties(
                              app_transactions=[Transaction(app_id, batch_id)]))
              .when_matched_update(columns, predicate=f"s.{tl.ACTION} = 'upsert'")
              .when_matched_delete(predicate=f"s.{tl.ACTION} = 'delete'")
              .when_not_matched_insert(columns, predicate=f"s.{tl.ACTION} = 'upsert'"))
    if truncating:
        merger = merger.when_not_matched_by_source_delete()
    merger.execute()
    return table.version()


def _with_truncate_row(rows, truncate_row, keys: list[str], schema: StructType):
    import pyarrow as pa

    from headwater.delta.merge import as_table_arrow
    from headwater.delta.schema import arrow_schema, as_nullable

    target = arrow_schema(as_nullable(schema))
    values = {f.name: [None] for f in schema.fields}
    values[SEQ] = [truncate_row["seq"]]
    values[tl.KIND] = [tl.TRUNCATE_ROW]
    values[tl.DELETED] = [False]
    extra = pa.Table.from_pydict(values, schema=target)
    return pa.concat_tables([as_table_arrow(rows, schema), extra])


def _merge_state(table, rows, keys: list[str], schema: StructType, spec: CdcSpec,
                 app_id: str, batch_id: int) -> None:
    """One commit: the batch's keys upserted, the truncate row replaced, expired tombstones
    deleted; txn(app_id, batch_id)."""
    import time

    from deltalake import CommitProperties, Transaction

    from headwater.delta.merge import as_table_arrow

    source = as_table_arrow(rows, schema)
    on = " AND ".join([f"t.{tl.q(k)} <=> s.{tl.q(k)}" for k in keys]
                      + [f"t.{tl.KIND} = s.{tl.KIND}"])
    expiry_us = int((time.time() - spec.tombstone_gc_seconds) * 1_000_000)
    expired = (f"t.{tl.DELETED} AND t.{tl.DELETED_AT} < "
               f"arrow_cast({expiry_us}, 'Timestamp(Microsecond, Some(\"UTC\"))')")
    (table.merge(source, on, source_alias="s", target_alias="t",
                 commit_properties=CommitProperties(
                     app_transactions=[Transaction(app_id, batch_id)]))
     .when_matched_update_all()
     .when_not_matched_insert_all()
     .when_not_matched_by_source_delete(predicate=expired)
     .execute())
