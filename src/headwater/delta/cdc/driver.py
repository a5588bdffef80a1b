"""AUTO CDC SCD type 1 on the driver: one Spark job per micro-batch.

The batch's deduplicated events leave Spark once (``toArrow()``); the rest runs on the driver
with pyarrow and delta-rs. Only the stored rows and the tombstones of the batch's keys are
read (a dataset filter ``key IN (...)``, so files whose key statistics miss are skipped); the
last event per key is computed with Arrow compute, with the same semantics as
:func:`headwater.delta.cdc.timeline.scd1`. A micro-batch is bounded by its source
(``maxFilesPerTrigger``, ``maxOffsetsPerTrigger``): the driver holds one batch's events and
its keys' rows, never the whole table. A batch of more than :data:`DRIVER_MAX_EVENTS` events
(by Spark's plan estimate: rows, else :data:`DRIVER_MAX_BYTES`; without one, by collecting at
most that many plus one) keeps the Spark path, as do the shapes this path does not cover
(:func:`eligible`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.delta.cdc import timeline as tl
from headwater.delta.cdc.spec import DELETE, OP, SEQ, TRUNCATE, UPSERT, CdcSpec, raise_bad_events

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

# Beyond these the batch's events stay in Spark (the driver's memory stays bounded).
DRIVER_MAX_EVENTS = 2_000_000
DRIVER_MAX_BYTES = 256 * 1024 * 1024
_I = "__hw_i"
_UNKNOWN_SIZE = 2**63 - 1  # Spark's sizeInBytes when it cannot estimate


def collect(batch: DataFrame, events: DataFrame) -> pa.Table | None:
    """The batch's events in Arrow (one Spark job), or None when they are too many for the
    driver. Spark's estimate from the batch's optimized plan decides (no job); when it knows
    nothing (an RDD, some sources), at most DRIVER_MAX_EVENTS + 1 events are collected."""
    stats = batch._jdf.queryExecution().optimizedPlan().stats()
    rows = stats.rowCount()
    if rows.isDefined():
        return events.toArrow() if int(str(rows.get())) <= DRIVER_MAX_EVENTS else None
    size = int(str(stats.sizeInBytes()))
    if size <= DRIVER_MAX_BYTES:
        return events.toArrow()
    if size < _UNKNOWN_SIZE:
        return None
    data = events.limit(DRIVER_MAX_EVENTS + 1).toArrow()
    return data if data.num_rows <= DRIVER_MAX_EVENTS else None


def _orderable(t: DataType) -> bool:
    """Types Arrow orders and compares exactly as Spark does."""
    from pyspark.sql import types as T

    return isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType,
                          T.DateType, T.TimestampType, T.TimestampNTZType))


def _flat(t: DataType) -> bool:
    from pyspark.sql import types as T

    return _orderable(t) or isinstance(t, (T.BooleanType, T.FloatType, T.DoubleType,
                                           T.DecimalType, T.BinaryType))


def eligible(spec: CdcSpec, events: DataFrame, output: list[str], seq_column: str | None
             ) -> bool:
    """One key column, key and sequence of types Arrow orders as Spark does; SCD1: the
    sequence kept in the target (``seq_column``) and, with ignore_null_updates, flat value
    columns; SCD2: flat columns (history rows are compared column by column)."""
    if len(spec.keys) != 1:
        return False
    schema = events.schema
    if not (_orderable(schema[output[0]].dataType) and _orderable(schema[SEQ].dataType)):
        return False
    flat = all(_flat(schema[c].dataType) for c in output[1:])
    if spec.stored_as_scd_type == 2:
        return flat
    return seq_column is not None and (flat or not spec.ignore_null_updates)


def check_events(events: pa.Table, spec: CdcSpec, keys: list[str], where: str) -> bool:
    """Raise HW_CDC_SEQUENCE_NULL / HW_CDC_DUPLICATE_SEQUENCE as the Spark check does. False
    when an event (not a truncate) has a NULL key: that case stays in Spark."""
    import pyarrow.compute as pc

    rows = events.filter(pc.not_equal(events.column(OP), TRUNCATE))
    counts = rows.group_by([*keys, SEQ]).aggregate([([], "count_all")])
    null_seq = pc.is_null(counts.column(SEQ))
    nulls = counts.filter(null_seq).slice(0, 3).to_pylist()
    dups = counts.filter(pc.and_(pc.invert(null_seq), pc.greater(counts.column("count_all"), 1))
                         ).slice(0, 3).to_pylist()
    raise_bad_events(spec, keys, nulls, dups, where)
    return all(rows.column(k).null_count == 0 for k in keys)


def _dataset(table: Any) -> tuple[Any, dict[str, str]]:
    ds = table.to_pyarrow_dataset()
    return ds, {n.lower(): n for n in ds.schema.names}


def read_state(state_table: Any, key: str, key_values: pa.Array) -> pa.Table:
    """The state rows of the batch's keys, and every truncate row."""
    import pyarrow.compute as pc

    ds, names = _dataset(state_table)
    values = key_values.cast(ds.schema.field(names[key.lower()]).type)
    flt = pc.field(names[key.lower()]).isin(values) | (pc.field(tl.KIND) == tl.TRUNCATE_ROW)
    return ds.to_table(columns=[names[key.lower()], SEQ, tl.DELETED, tl.KIND], filter=flt
                       ).rename_columns([key, SEQ, tl.DELETED, tl.KIND])


def read_stored(table: Any, output: list[str], key_values: pa.Array, seq_column: str | None,
                survivors_after: Any = None) -> pa.Table:
    """Target rows (``output`` columns, the key first) of the batch's keys; with
    ``survivors_after`` (a truncate applies) every row whose ``seq_column`` is above it
    instead (the rows a truncate keeps)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ds, names = _dataset(table)
    if survivors_after is not None:
        assert seq_column is not None
        seq = names[seq_column.lower()]
        flt = pc.field(seq) > pa.scalar(survivors_after).cast(ds.schema.field(seq).type)
    else:
        key = names[output[0].lower()]
        flt = pc.field(key).isin(key_values.cast(ds.schema.field(key).type))
    return ds.to_table(columns=[names[c.lower()] for c in output], filter=flt
                       ).rename_columns(output)


def _lookup(keys: Any, table: pa.Table, key: str, column: str) -> Any:
    """``table[column]`` of each of ``keys`` (NULL where the key is absent)."""
    import pyarrow.compute as pc

    return table.column(column).take(pc.index_in(keys, value_set=table.column(key)
                                                 .combine_chunks()))


def last_events(events: pa.Table, stored: pa.Table, applied: pa.Table, truncate_seq: Any,
                output: list[str], seq_column: str, ignore_null_updates: bool) -> pa.Table:
    """Per key, the last of its stored row and its new events (output columns, ACTION, SEQ,
    ``__hw_old``), as :func:`headwater.delta.cdc.timeline.scd1` computes it.

    applied: one row per key (key, SEQ): the highest sequence applied. truncate_seq: events
    (and stored rows) at or before it are void."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    key, values = output[0], output[1:]
    new = events.filter(pc.not_equal(events.column(OP), TRUNCATE))
    if applied.num_rows:
        seen = _lookup(new.column(key), applied, key, SEQ)
        new = new.filter(pc.or_kleene(pc.is_null(seen), pc.greater(new.column(SEQ), seen)))
    schema = pa.schema([f.with_nullable(True) for f in new.select([*output, SEQ, OP]).schema]
                       + [pa.field(tl._OLD, pa.bool_())])
    new = new.select([*output, SEQ, OP]).append_column(
        tl._OLD, pa.repeat(pa.scalar(False), new.num_rows)).cast(schema)
    n = stored.num_rows
    old = stored.append_column(SEQ, stored.column(seq_column)).append_column(
        OP, pa.repeat(pa.scalar(UPSERT), n)).append_column(
        tl._OLD, pa.repeat(pa.scalar(True), n)).cast(schema)
    if truncate_seq is not None:
        after = pa.scalar(truncate_seq).cast(schema.field(SEQ).type)
        new = new.filter(pc.greater(new.column(SEQ), after))
        old = old.filter(pc.greater(old.column(SEQ), after))
    timeline = pa.concat_tables([old, new])
    timeline = timeline.take(pc.sort_indices(timeline, sort_keys=[
        (key, "ascending", "at_start"), (SEQ, "ascending", "at_start"),
        (tl._OLD, "descending", "at_start")]))
    timeline = timeline.append_column(_I, pa.array(np.arange(timeline.num_rows)))
    last = timeline.take(timeline.group_by(key).aggregate([(_I, "max")]).column(f"{_I}_max"))
    if ignore_null_updates and values:
        last = _fill_nulls(timeline, last, key, values)
    return last.drop_columns([_I]).rename_columns(
        [tl.ACTION if c == OP else c for c in last.column_names if c != _I])


def _fill_nulls(timeline: pa.Table, last: pa.Table, key: str, values: list[str]) -> pa.Table:
    """ignore_null_updates: each value takes its key's last non-NULL value among the upserts
    after the key's last delete (timeline: sorted by key and sequence)."""
    import pyarrow.compute as pc

    is_delete = pc.equal(timeline.column(OP), DELETE)
    keep = pc.invert(is_delete)
    deletes = timeline.filter(is_delete)
    if deletes.num_rows:
        last_delete = deletes.group_by(key).aggregate([(SEQ, "max")])
        before = _lookup(timeline.column(key), last_delete, key, f"{SEQ}_max")
        after = pc.or_kleene(pc.is_null(before), pc.greater(timeline.column(SEQ), before))
        keep = pc.and_(keep, pc.fill_null(after, False))
    filled = timeline.filter(keep).group_by(key, use_threads=False).aggregate(
        [(c, "last") for c in values])
    for c in values:
        last = last.set_column(last.column_names.index(c), c,
                               _lookup(last.column(key), filled, key, f"{c}_last"))
    return last
