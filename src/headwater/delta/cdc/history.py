"""AUTO CDC SCD type 2 on the driver: :func:`headwater.delta.cdc.timeline.scd2` in Arrow.

Same arithmetic, for one key column and flat column types (see
:func:`headwater.delta.cdc.driver.eligible`): the stored history of the batch's keys and
their tombstones become events, the batch's new events join them, each key's timeline (sorted
by sequence) yields its versions, and the versions are diffed against the stored rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.delta.cdc import timeline as tl
from headwater.delta.cdc.spec import DELETE, END_AT, OP, SEQ, START_AT, UPSERT

_I, _J = "__hw_i", "__hw_j"


def _positions(n: int) -> Any:
    return pa.array(np.arange(n, dtype=np.int64))


def _rows_of(table: pa.Table, index: pa.Table, on: list[str], how: str) -> Any:
    """Positions of ``table``'s rows that ``how``-join ``index`` on ``on`` (ints, keyed)."""
    probe = table.select(on).append_column(_I, _positions(table.num_rows))
    return probe.join(index.select(on), keys=on, join_type=how).column(_I)


def _shift(column: Any, first: Any, fill: Any) -> Any:
    """``column`` one row down within each key (``first`` marks a key's first row)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    shifted = pa.concat_arrays([pa.array([fill], col.type), col.slice(0, len(col) - 1)]) \
        if len(col) else col
    return pc.if_else(first, pa.scalar(fill, col.type), shifted)


def _eq_null_safe(a: Any, b: Any) -> Any:
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.or_(pc.fill_null(pc.equal(a, b), False), both_null)


def _fill_nulls(timeline: pa.Table, first: Any, is_delete: Any, values: list[str]) -> pa.Table:
    """ignore_null_updates: every row's value is the last non-NULL one of the non-delete rows
    since the key's last delete (a delete or a new key starts a segment)."""
    n = timeline.num_rows
    at = np.arange(n, dtype=np.int64)
    starts = np.asarray(pc.or_(first, is_delete).to_numpy(zero_copy_only=False), dtype=bool)
    segment_start = np.maximum.accumulate(np.where(starts, at, 0)) if n else at
    not_delete = np.logical_not(np.asarray(is_delete.to_numpy(zero_copy_only=False), dtype=bool))
    for c in values:
        column = timeline.column(c)
        valid = np.logical_and(not_delete, np.asarray(
            pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool))
        last = np.maximum.accumulate(np.where(valid, at, -1)) if n else at
        pick = pa.array(np.where(last >= segment_start, last, 0),
                        mask=last < segment_start)
        timeline = timeline.set_column(timeline.column_names.index(c), c, column.take(pick))
    return timeline


def scd2(events: pa.Table, history: pa.Table, state: pa.Table, output: list[str],
         tracked: list[str], ignore_null_updates: bool) -> tuple[pa.Table, pa.Table]:
    """(changed history rows with ACTION, new tombstones), as timeline.scd2 gives them.

    events: the batch's (output columns, SEQ, OP). history: the stored rows of the batch's
    keys (output columns, START_AT, END_AT). state: their state rows (key, SEQ, DELETED)."""

    key, values = output[0], output[1:]
    fields = [f.with_nullable(True) for f in events.select([*output, SEQ]).schema]
    schema = pa.schema([*fields, pa.field(OP, pa.string()), pa.field(tl._NEW, pa.bool_())])
    seq_type = schema.field(SEQ).type
    history = history.cast(pa.schema([*fields[:-1], pa.field(START_AT, seq_type),
                                      pa.field(END_AT, seq_type)]))

    def shaped(table: pa.Table, seq: Any, op: Any, new: bool) -> pa.Table:
        n = table.num_rows
        cols = {c: table.column(c) if c in table.column_names
                else pa.nulls(n, schema.field(c).type) for c in output}
        ops = op if not isinstance(op, str) else pa.repeat(pa.scalar(op), n)
        return pa.table({**cols, SEQ: seq, OP: ops, tl._NEW: pa.repeat(pa.scalar(new), n)}
                        ).cast(schema)

    # Closed rows no other row starts at are deletes.
    closed = history.filter(pc.is_valid(history.column(END_AT)))
    starts = history.select([key, START_AT]).rename_columns([key, END_AT])
    closed = closed.take(_rows_of(closed, starts, [key, END_AT], "left anti"))
    tombs = state.filter(pc.fill_null(state.column(tl.DELETED), False))
    stored = pa.concat_tables([
        shaped(history, history.column(START_AT), UPSERT, False),
        shaped(closed.select([key]), closed.column(END_AT), DELETE, False),
        shaped(tombs.select([key]), tombs.column(SEQ).cast(seq_type), DELETE, False)])
    unique = stored.append_column(_I, _positions(stored.num_rows)).group_by(
        [key, SEQ]).aggregate([(_I, "min")]).column(f"{_I}_min")
    stored = stored.take(unique)
    fresh = shaped(events, events.column(SEQ), events.column(OP), True)
    fresh = fresh.take(_rows_of(fresh, stored, [key, SEQ], "left anti"))
    timeline = pa.concat_tables([stored, fresh])
    timeline = timeline.take(pc.sort_indices(timeline, sort_keys=[
        (key, "ascending", "at_start"), (SEQ, "ascending", "at_start")]))
    first = _firsts(timeline.column(key).combine_chunks())
    is_delete = pc.equal(timeline.column(OP), DELETE)
    if ignore_null_updates and values:
        timeline = _fill_nulls(timeline, first, is_delete, values)
    is_upsert = pc.invert(is_delete)
    opens = pc.and_(is_upsert, pc.fill_null(pc.equal(_shift(timeline.column(OP), first, None),
                                                     DELETE), True))
    for c in tracked:
        changed = pc.invert(_eq_null_safe(timeline.column(c),
                                          _shift(timeline.column(c), first, None)))
        opens = pc.or_(opens, pc.and_(is_upsert, changed))
    is_last = _next_first(first)
    following = pc.if_else(is_last, pa.scalar(None, seq_type), _lead(timeline.column(SEQ)))
    # A version: an opening upsert and the upserts after it up to the next opening one.
    marked = pa.table({"v": pc.cumulative_sum(pc.cast(opens, pa.int64())),
                       _I: _positions(timeline.num_rows)}).filter(is_upsert)
    bounds = marked.group_by("v").aggregate([(_I, "min"), (_I, "max")])
    last = bounds.column(f"{_I}_max")
    versions = timeline.select(output).take(last).append_column(
        START_AT, timeline.column(SEQ).take(bounds.column(f"{_I}_min"))).append_column(
        END_AT, following.take(last))
    rows = _diff(versions, history, [key, START_AT], [*output, START_AT, END_AT])
    return rows, _tombstones(events, tombs, key, seq_type)


def _tombstones(events: pa.Table, tombs: pa.Table, key: str, seq_type: Any) -> pa.Table:
    """State rows: every delete of the batch not yet a tombstone. Each is kept (until its
    expiry) even when the key comes back: a late upsert older than the delete must still
    end at it, and a later late delete can leave it closing no row."""
    deletes = events.filter(pc.equal(events.column(OP), DELETE)).select([key, SEQ])
    deletes = deletes.cast(pa.schema([deletes.schema.field(key),
                                      pa.field(SEQ, seq_type)]))
    if tombs.num_rows:
        known = pa.table({key: tombs.column(key).cast(deletes.schema.field(key).type),
                          SEQ: tombs.column(SEQ).cast(seq_type)})
        deletes = deletes.take(_rows_of(deletes, known, [key, SEQ], "left anti"))
    n = deletes.num_rows
    now = pa.scalar(dt.datetime.now(dt.UTC), pa.timestamp("us", tz="UTC"))
    return pa.table({key: deletes.column(key), SEQ: deletes.column(SEQ),
                     tl.DELETED: pa.repeat(pa.scalar(True), n),
                     tl.DELETED_AT: pa.repeat(now, n),
                     tl.KIND: pa.repeat(pa.scalar(tl.KEY_ROW), n)})


def _firsts(keys: Any) -> Any:
    """Whether each row of a key-sorted column starts its key."""
    n = len(keys)
    if n == 0:
        return pa.array([], pa.bool_())
    return pa.concat_arrays([pa.array([True]), pc.fill_null(
        pc.not_equal(keys.slice(1), keys.slice(0, n - 1)), True)])


def _lead(column: Any) -> Any:
    """``column`` one row up (the last row NULL)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return pa.concat_arrays([col.slice(1), pa.nulls(1, col.type)]) if len(col) else col


def _next_first(first: Any) -> Any:
    """Whether the next row starts another key (True for the last row)."""
    return pc.fill_null(_lead(first), True)


def _diff(new: pa.Table, old: pa.Table, on: list[str], columns: list[str]) -> pa.Table:
    """Rows of ``new`` that differ from ``old`` (ACTION upsert) and rows of ``old`` that
    ``new`` no longer has (ACTION delete), matched on ``on``."""
    n = new.select(on).append_column(_I, _positions(new.num_rows))
    o = old.select(on).append_column(_J, _positions(old.num_rows))
    pairs = n.join(o, keys=on, join_type="full outer")
    ni, oi = pairs.column(_I), pairs.column(_J)
    both = pairs.filter(pc.and_(pc.is_valid(ni), pc.is_valid(oi)))
    a, b = new.take(both.column(_I)), old.select(columns).take(both.column(_J))
    same = pa.repeat(pa.scalar(True), both.num_rows)
    for c in columns:
        same = pc.and_(same, _eq_null_safe(a.column(c), b.column(c)))
    changed = a.filter(pc.invert(same)).select(columns)
    added = new.take(pairs.filter(pc.is_null(oi)).column(_I)).select(columns)
    gone = old.take(pairs.filter(pc.is_null(ni)).column(_J)).select(columns)
    upserts = pa.concat_tables([changed, added])
    return pa.concat_tables([
        upserts.append_column(tl.ACTION, pa.repeat(pa.scalar("upsert"), upserts.num_rows)),
        gone.append_column(tl.ACTION, pa.repeat(pa.scalar("delete"), gone.num_rows))])
