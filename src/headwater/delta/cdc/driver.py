"""AUTO CDC SCD type 1 on the driver: one Spark job per micro-batch.

The batch's deduplicated events leave Spark once (``toArrow()``); the rest runs on the driver
with pyarrow and delta-rs. Only the state rows of the batch's keys, and their stored rows
where the arithmetic needs them, are read (a dataset filter ``key IN (...)``, so files whose
key statistics miss are skipped); the
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt
from pyspark.sql import types as T

from headwater.delta.cdc import timeline as tl
from headwater.delta.cdc.spec import DELETE, OP, SEQ, TRUNCATE, UPSERT, CdcSpec, raise_bad_events
from headwater.delta.log import add_actions, arrow_dataset
from headwater.spark.jvm import optimized_plan_stats

if TYPE_CHECKING:
    from collections.abc import Callable

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
    stats = optimized_plan_stats(batch)
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
    return isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType,
                          T.DateType, T.TimestampType, T.TimestampNTZType))


def _flat(t: DataType) -> bool:
    return _orderable(t) or isinstance(t, (T.BooleanType, T.FloatType, T.DoubleType,
                                           T.DecimalType, T.BinaryType))


def eligible(spec: CdcSpec, events: DataFrame, output: list[str], seq_column: str | None
             ) -> bool:
    """One key column, key and sequence of types Arrow orders as Spark does; SCD1 keeping
    the sequence in the target (``seq_column``): with ignore_null_updates, flat value
    columns; SCD1 without it (the state holds every key's applied sequence): neither
    ignore_null_updates nor truncates (both need the stored rows with their sequence), and a
    sequence that is not a string; SCD2:
    flat columns (history rows are compared column by column)."""
    if len(spec.keys) != 1:
        return False
    schema = events.schema
    if not (_orderable(schema[output[0]].dataType) and _orderable(schema[SEQ].dataType)):
        return False
    flat = all(_flat(schema[c].dataType) for c in output[1:])
    if spec.stored_as_scd_type == 2:
        return flat
    if seq_column is None:
        # a string sequence stays in Spark: delta-rs reads the per-key state's strings as
        # string_view, which Arrow's comparisons do not take beside the events' strings
        return not spec.ignore_null_updates and spec.apply_as_truncates is None and \
            not isinstance(schema[SEQ].dataType, T.StringType)
    return flat or not spec.ignore_null_updates


def _exact(t: pa.DataType) -> bool:
    """Types whose Arrow equality (grouping) is Spark's: not floats (NaN, -0.0), not nested."""
    return not (pt.is_floating(t) or pt.is_nested(t) or pt.is_dictionary(t))


def prepare(events: pa.Table, spec: CdcSpec, keys: list[str], where: str,
            spark_distinct: Callable[[], pa.Table] | None) -> pa.Table | None:
    """The collected events, checked as Spark checks them (HW_CDC_SEQUENCE_NULL, then
    HW_CDC_DUPLICATE_SEQUENCE) and with identical copies merged as Spark's dropDuplicates
    merges them. Copies share a (key, sequence), so only such groups are looked at: they are
    merged in Arrow when every column's type compares as in Spark, else ``spark_distinct()``
    (the batch's events deduplicated by Spark; None: ``events`` are already distinct) gives
    the events. None when an event (not a truncate) has a NULL key: that batch stays in
    Spark (Arrow's joins never match NULL keys)."""
    rows = events.filter(pc.not_equal(events.column(OP), TRUNCATE))
    counts = rows.group_by([*keys, SEQ]).aggregate([([], "count_all")])
    null_seq = pc.is_null(counts.column(SEQ))
    raise_bad_events(spec, keys, counts.filter(null_seq).slice(0, 3).to_pylist(), [], where)
    if any(rows.column(k).null_count for k in keys):
        return None
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if repeated.num_rows == 0:
        return events
    if spark_distinct is None:
        raise_bad_events(spec, keys, [], repeated.slice(0, 3).to_pylist(), where)
    if not all(_exact(f.type) for f in events.schema):
        assert spark_distinct is not None
        return prepare(spark_distinct(), spec, keys, where, None)
    on = [*keys, SEQ]
    at = rows.select(on).append_column(_I, _positions(rows.num_rows))
    inside = rows.take(at.join(repeated.select(on), keys=on, join_type="left semi")
                       .column(_I))
    outside = rows.take(at.join(repeated.select(on), keys=on, join_type="left anti")
                        .column(_I))
    names = events.column_names
    merged = inside.group_by(names).aggregate([]).select(names).cast(events.schema)
    truncates = events.filter(pc.equal(events.column(OP), TRUNCATE))
    return prepare(pa.concat_tables([outside, merged, truncates]), spec, keys, where, None)


def _positions(n: int) -> Any:
    return pa.array(np.arange(n, dtype=np.int64))


def _dataset(table: Any) -> tuple[Any, dict[str, str]]:
    ds = arrow_dataset(table)
    return ds, {n.lower(): n for n in ds.schema.names}


def read_state(state_table: Any, key: str, key_values: pa.Array, since: Any = None
               ) -> pa.Table:
    """The state rows of the batch's keys, and every truncate row. since: the batch's
    oldest event sequence: a tombstone older than every event of the batch changes nothing
    (an event survives a tombstone by being newer; SCD2: an older tombstone either closed a
    stored row, which shows it, or followed another delete), so only rows at or after it
    are read, and files whose statistics end before it are skipped (events in order)."""
    ds, names = _dataset(state_table)
    values = key_values.cast(ds.schema.field(names[key.lower()]).type)
    of_keys = pc.field(names[key.lower()]).isin(values)
    if since is not None:
        of_keys = of_keys & (pc.field(SEQ) >= pa.scalar(since).cast(ds.schema.field(SEQ).type))
    flt = of_keys | (pc.field(tl.KIND) == tl.TRUNCATE_ROW)
    return ds.to_table(columns=[names[key.lower()], SEQ, tl.DELETED, tl.KIND], filter=flt
                       ).rename_columns([key, SEQ, tl.DELETED, tl.KIND])


def read_stored(table: Any, output: list[str], key_values: pa.Array, seq_column: str | None,
                survivors_after: Any = None, ending_since: tuple[str, Any] | None = None
                ) -> pa.Table:
    """Target rows (``output`` columns, the key first) of the batch's keys; with
    ``survivors_after`` (a truncate applies) every row whose ``seq_column`` is above it
    instead (the rows a truncate keeps). ending_since (column, value), SCD2: only rows whose
    ``column`` (``__END_AT``) is NULL or at least ``value``, the batch's oldest sequence: a
    version closed before every event of the batch is neither changed by it nor needed to
    place it (the version before the batch's events ends at or after the oldest of them, or
    ended with a delete, which starts a key's timeline afresh)."""
    ds, names = _dataset(table)
    if survivors_after is not None:
        assert seq_column is not None
        seq = names[seq_column.lower()]
        flt = pc.field(seq) > pa.scalar(survivors_after).cast(ds.schema.field(seq).type)
    else:
        key = names[output[0].lower()]
        flt = pc.field(key).isin(key_values.cast(ds.schema.field(key).type))
        if ending_since is not None:
            end = names[ending_since[0].lower()]
            flt = flt & (pc.field(end).is_null() | (pc.field(end) >= pa.scalar(
                ending_since[1]).cast(ds.schema.field(end).type)))
    return ds.to_table(columns=[names[c.lower()] for c in output], filter=flt
                       ).rename_columns(output)


def _lookup(keys: Any, table: pa.Table, key: str, column: str) -> Any:
    """``table[column]`` of each of ``keys`` (NULL where the key is absent)."""
    return table.column(column).take(pc.index_in(keys, value_set=table.column(key)
                                                 .combine_chunks()))


def last_of_batch(events: pa.Table, tombstones: pa.Table, truncate_seq: Any,
                  output: list[str]) -> pa.Table:
    """Per key, its last event of the batch (output columns, ACTION, SEQ, ``__hw_old``
    false) when newer than the key's state and the truncate in force. The target's rows
    are not read. tombstones: (key, SEQ), one row per key: the state's highest sequence.
    When the target keeps the sequence, the state holds only deletes: the MERGE then
    compares the stored sequences itself (``t.seq < s.seq``, see
    :func:`headwater.delta.cdc.targets.merge`), and :func:`without_stale_deletes` drops the
    deletes it would not apply. Otherwise the state holds every key's applied sequence, so
    each returned event is newer than what the target holds for its key."""
    key = output[0]
    new = events.filter(pc.not_equal(events.column(OP), TRUNCATE))
    if tombstones.num_rows:
        seen = _lookup(new.column(key), tombstones, key, SEQ)
        new = new.filter(pc.or_kleene(pc.is_null(seen), pc.greater(new.column(SEQ), seen)))
    if truncate_seq is not None:
        after = pa.scalar(truncate_seq).cast(new.schema.field(SEQ).type)
        new = new.filter(pc.greater(new.column(SEQ), after))
    # (key, sequence) is unique and keys are not NULL (prepare): sorted, a key's last row
    order = pc.sort_indices(new.select([key, SEQ]), sort_keys=[(key, "ascending"),
                                                                (SEQ, "ascending")])
    keys = new.column(key).combine_chunks().take(order)
    n = len(keys)
    ends = pa.concat_arrays([pc.not_equal(keys.slice(1), keys.slice(0, n - 1)),
                             pa.array([True])]) if n else pa.array([], pa.bool_())
    last = new.take(order.filter(ends))
    return last.select([*output, SEQ, OP]).rename_columns(
        [*output, SEQ, tl.ACTION]).append_column(
        tl._OLD, pa.repeat(pa.scalar(False), last.num_rows))


def without_stale_deletes(last: pa.Table, table: Any, output: list[str], seq_column: str
                          ) -> pa.Table:
    """``last`` without the deletes older than (or as old as) their key's stored row: no
    tombstone and no count for them, as when the stored rows take part in the timeline. Only
    the key and sequence of the deleted keys' rows are read, and nothing when the files'
    statistics show every stored sequence below the oldest delete (events arriving in
    order)."""
    key = output[0]
    is_delete = pc.equal(last.column(tl.ACTION), DELETE)
    deletes = last.filter(is_delete)
    if deletes.num_rows == 0 or _all_below(table, seq_column,
                                           pc.min(deletes.column(SEQ)).as_py()):
        return last
    stored = read_stored(table, [key, seq_column], deletes.column(key).combine_chunks(),
                         None)
    if stored.num_rows == 0:
        return last
    stored = stored.cast(stored.schema.set(0, stored.schema.field(0).with_type(
        last.schema.field(key).type)))
    stored_seq = _lookup(last.column(key), stored, key, seq_column).cast(
        last.schema.field(SEQ).type)
    stale = pc.and_(is_delete, pc.fill_null(pc.greater_equal(stored_seq, last.column(SEQ)),
                                            False))
    return last.filter(pc.invert(stale))


def _all_below(table: Any, column: str, value: Any) -> bool:
    """Whether the log's file statistics prove every stored ``column`` value below ``value``
    (NULLs count as below: a stored row of unknown sequence loses to any event)."""
    files = add_actions(table, flatten=True)
    names = {n.lower(): n for n in files.column_names}
    top, nulls = names.get(f"max.{column}".lower()), names.get(f"null_count.{column}".lower())
    if files.num_rows == 0:
        return True
    if top is None or nulls is None:
        return False
    maxima, all_null = files.column(top), pc.equal(files.column(nulls),
                                                   files.column("num_records"))
    # a file without statistics (max NULL, not every value NULL) proves nothing
    if not pc.all(pc.or_kleene(pc.is_valid(maxima), pc.fill_null(all_null, False))).as_py():
        return False
    newest = pc.max(maxima)
    if not newest.is_valid:
        return True
    try:
        bound = pa.scalar(value).cast(maxima.type)
        if pa.types.is_timestamp(maxima.type):
            # delta-rs writes timestamp statistics truncated to milliseconds: a stored
            # .123456 shows as .123, so only a value 1 ms past the statistic is above it
            return pc.less_equal(pc.add(newest, pa.scalar(1000, pa.duration("us"))),
                                 bound).as_py()
        return pc.less(newest, bound).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


def last_events(events: pa.Table, stored: pa.Table, applied: pa.Table, truncate_seq: Any,
                output: list[str], seq_column: str, ignore_null_updates: bool) -> pa.Table:
    """Per key, the last of its stored row and its new events (output columns, ACTION, SEQ,
    ``__hw_old``), as :func:`headwater.delta.cdc.timeline.scd1` computes it.

    applied: one row per key (key, SEQ): the highest sequence applied. truncate_seq: events
    (and stored rows) at or before it are void."""
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
