"""AUTO CDC's arithmetic, in Spark: what the target's affected keys become.

Per key, a *timeline* of events in sequence order is rebuilt from what is stored (the SCD1
row at its applied sequence; the SCD2 history, whose closed rows without a successor are
deletes) plus the batch's new events, and the result is read off it:

- SCD1: the last event wins: an upsert writes its row, a delete removes it.
- SCD2: every upsert that changes a tracked column opens a version (``__START_AT`` = its
  sequence), which ends (``__END_AT``) at the next event, upsert or delete; upserts that
  change only untracked columns update their version in place. Out-of-order events therefore
  land in the right place of the history.

``ignore_null_updates``: a NULL takes the last non-NULL value of the key since its last delete.
The result is diffed against the stored rows: only changed rows leave Spark, each with an
action (``upsert`` / ``delete``) for the merge.
"""

from __future__ import annotations

import datetime as dt
from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Window
from pyspark.sql import functions as F

from headwater.delta.cdc.spec import DELETE, END_AT, OP, SEQ, START_AT, TRUNCATE, UPSERT, CdcSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ACTION = "__hw_action"
# The state table's columns besides the keys.
DELETED, DELETED_AT, KIND = "__hw_deleted", "__hw_deleted_at", "__hw_kind"
KEY_ROW, TRUNCATE_ROW = "key", "truncate"
_OLD, _SEG, _NEXT, _VERSION, _NEW = "__hw_old", "__hw_seg", "__hw_next", "__hw_ver", "__hw_new"


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def keys_equal(left: DataFrame, right: DataFrame, keys: list[str]) -> Column:
    return reduce(lambda a, b: a & b, [left[q(k)].eqNullSafe(right[q(k)]) for k in keys])


def of_keys(df: DataFrame, keys_df: DataFrame, keys: list[str], how: str = "left_semi"
            ) -> DataFrame:
    return df.join(keys_df, keys_equal(df, keys_df, keys), how)


def _window(keys: list[str], *extra: str):
    return Window.partitionBy(*[q(k) for k in keys], *extra).orderBy(SEQ)


def fill_nulls(timeline: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    """ignore_null_updates: each column takes its last non-NULL value since the last delete."""
    running = _window(keys).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    df = timeline.withColumn(_SEG, F.sum(F.when(F.col(OP) == DELETE, 1).otherwise(0))
                             .over(running))
    within = _window(keys, _SEG).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # a delete's own values never fill the upserts after it
    return df.select(*[F.last(F.when(F.col(OP) != DELETE, F.col(q(c))), ignorenulls=True)
                       .over(within).alias(c) if c in columns else F.col(q(c))
                       for c in timeline.columns])


def scd1(spec: CdcSpec, events: DataFrame, stored: DataFrame, state: DataFrame,
         output: list[str], truncate_seq: Column | None, seq_column: str | None = None
         ) -> DataFrame:
    """The last event of every key considered (ACTION, SEQ, and whether it was stored
    before); :func:`split_scd1` turns the collected rows into target and state changes.

    stored: target rows to consider (the batch's keys; every row when a truncate applies).
    state: key rows of the state table. truncate_seq: events at or before it are void.
    seq_column: the target column holding the sequence (the state then holds tombstones
    only): a key's applied sequence is the highest of its stored row's and its tombstones'.
    """
    keys = output[:len(spec.keys)]
    applied = state.select(*[q(k) for k in keys], SEQ)
    if seq_column is not None:
        applied = applied.unionByName(stored.select(
            *[q(k) for k in keys], F.col(q(seq_column)).cast(events.schema[SEQ].dataType)
            .alias(SEQ))).groupBy(*[q(k) for k in keys]).agg(F.max(SEQ).alias(SEQ))
    s = applied.select(*[F.col(q(k)).alias(f"__hw_s{i}") for i, k in enumerate(keys)],
                       F.col(SEQ).alias("__hw_applied"))
    s_keys = [f"__hw_s{i}" for i in range(len(keys))]
    on = reduce(lambda a, b: a & b, [F.col(q(k)).eqNullSafe(F.col(sk))
                                     for k, sk in zip(keys, s_keys)])
    old = (stored.select(*[q(c) for c in output]).join(s, on, "left")
           .select(*[q(c) for c in output], F.col("__hw_applied").alias(SEQ),
                   F.lit(UPSERT).alias(OP), F.lit(True).alias(_OLD)))
    new = events.where(F.col(OP) != TRUNCATE).join(s, on, "left")
    new = new.where(F.col("__hw_applied").isNull() | (F.col(SEQ) > F.col("__hw_applied")))
    if truncate_seq is not None:
        new = new.where(truncate_seq.isNull() | (F.col(SEQ) > truncate_seq))
        # a stored row of unknown sequence (no state) was there before the truncate
        old = old.where(truncate_seq.isNull() | (F.col(SEQ) > truncate_seq))
    new = new.select(*[q(c) for c in output], SEQ, OP, F.lit(False).alias(_OLD))
    timeline = old.unionByName(new)
    if spec.ignore_null_updates:
        timeline = fill_nulls(timeline, keys, output[len(keys):])
    last = (timeline.withColumn("__hw_rn", F.row_number().over(
        _window(keys).orderBy(F.col(SEQ).desc_nulls_last(), F.col(_OLD).asc())))
        .where("__hw_rn = 1"))
    # One collect for the target and the state: rows with OLD false are this batch's news.
    return last.select(*[q(c) for c in output], F.col(OP).alias(ACTION), SEQ, _OLD)


def split_scd1(data: pa.Table, output: list[str], keys: list[str], truncating: bool
               ) -> tuple[pa.Table, pa.Table]:
    """:func:`scd1`'s collected rows -> (changed rows with ACTION, new state rows).
    Truncating, every surviving row is re-stated (rows missing from the merge are deleted)."""
    fresh = data.filter(pc.invert(data.column(_OLD)))
    rows = (data if truncating else fresh).select([*output, ACTION])
    deleted = pc.equal(fresh.column(ACTION), DELETE)
    now = pa.scalar(dt.datetime.now(dt.UTC), pa.timestamp("us", tz="UTC"))
    deleted_at = pc.if_else(deleted, now, pa.scalar(None, pa.timestamp("us", tz="UTC")))
    state = fresh.select([*keys, SEQ]).append_column(DELETED, deleted).append_column(
        DELETED_AT, deleted_at).append_column(KIND, pa.array([KEY_ROW] * fresh.num_rows,
                                                             pa.string()))
    return rows, state


def scd2(spec: CdcSpec, events: DataFrame, history: DataFrame, state: DataFrame,
         output: list[str], tracked: list[str]) -> tuple[DataFrame, DataFrame]:
    """(changed history rows with ACTION, new tombstones). history: the stored rows of the
    batch's keys; state: their state rows (the tombstones of their deletes)."""
    keys = output[:len(spec.keys)]
    values = output[len(keys):]
    h = history.alias("h")
    # Closed rows no other row starts at are deletes (renamed columns: a self-join).
    starts = history.select(*[F.col(q(k)).alias(f"__hw_s{i}") for i, k in enumerate(keys)],
                            F.col(START_AT).alias("__hw_start"))
    ends = history.where(F.col(END_AT).isNotNull()).select(*[q(k) for k in keys], END_AT)
    succ = reduce(lambda a, b: a & b, [F.col(q(k)).eqNullSafe(F.col(f"__hw_s{i}"))
                                       for i, k in enumerate(keys)]) \
        & (F.col(END_AT) == F.col("__hw_start"))
    nulls = [F.lit(None).cast(events.schema[c].dataType).alias(c) for c in values]
    stored = h.select(*[q(c) for c in output], F.col(START_AT).alias(SEQ),
                      F.lit(UPSERT).alias(OP)).unionByName(
        ends.join(starts, succ, "left_anti").select(
            *[q(k) for k in keys], *nulls, F.col(END_AT).alias(SEQ), F.lit(DELETE).alias(OP)))
    tombs = state.where(F.col(DELETED)).select(*[q(k) for k in keys], *nulls, SEQ,
                                               F.lit(DELETE).alias(OP))
    stored = stored.unionByName(tombs).dropDuplicates([*keys, SEQ])
    seen = stored.select(*[q(k) for k in keys], SEQ)
    fresh = events.join(seen, keys_equal(events, seen, keys) & (events[SEQ] == seen[SEQ]),
                        "left_anti")
    timeline = (stored.withColumn(_NEW, F.lit(False))
                .unionByName(fresh.select(*[q(c) for c in output], SEQ, OP)
                             .withColumn(_NEW, F.lit(True))))
    if spec.ignore_null_updates:
        timeline = fill_nulls(timeline, keys, values)
    w = _window(keys)
    opens = (F.col(OP) == UPSERT) & (F.lag(OP).over(w).isNull()
                                     | (F.lag(OP).over(w) == DELETE))
    for c in tracked:
        opens = opens | ((F.col(OP) == UPSERT) & ~F.col(q(c)).eqNullSafe(F.lag(q(c)).over(w)))
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    marked = (timeline.withColumn(_NEXT, F.lead(SEQ).over(w))
              .withColumn(_VERSION, F.sum(F.when(opens, 1).otherwise(0)).over(running))
              .where(F.col(OP) == UPSERT))
    per_version = _window(keys, _VERSION)
    versions = (marked.withColumn(START_AT, F.min(SEQ).over(per_version.rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing)))
        .withColumn("__hw_rn", F.row_number().over(per_version.orderBy(F.col(SEQ).desc())))
        .where("__hw_rn = 1")
        .select(*[q(c) for c in output], START_AT, F.col(_NEXT).alias(END_AT)))
    rows = _diff(versions, history, [*keys, START_AT], output + [START_AT, END_AT])
    # Every delete of the batch not yet a tombstone stays one (until it expires), even when
    # its key comes back: a late upsert older than it must still end at it.
    deletes = events.where(F.col(OP) == DELETE).select(*[q(k) for k in keys], SEQ)
    known = tombs.select(*[q(k) for k in keys], SEQ)
    new_state = deletes.join(known, keys_equal(deletes, known, keys)
                             & (deletes[SEQ] == known[SEQ]), "left_anti").select(
        *[q(k) for k in keys], SEQ, F.lit(True).alias(DELETED),
        F.current_timestamp().alias(DELETED_AT), F.lit(KEY_ROW).alias(KIND))
    return rows, new_state


def _diff(new: DataFrame, old: DataFrame, on: list[str], columns: list[str]) -> DataFrame:
    """Rows of ``new`` that differ from ``old`` (ACTION upsert) and rows of ``old`` that
    ``new`` no longer has (ACTION delete), matched on ``on``."""
    n, o = new.alias("n"), old.select(*[q(c) for c in columns]).alias("o")
    match = reduce(lambda a, b: a & b, [F.col(f"n.{q(c)}").eqNullSafe(F.col(f"o.{q(c)}"))
                                        for c in on])
    same = reduce(lambda a, b: a & b, [F.col(f"n.{q(c)}").eqNullSafe(F.col(f"o.{q(c)}"))
                                       for c in columns])
    joined = n.join(o, match, "full")
    n_here = F.col(f"n.{q(on[-1])}").isNotNull()  # the sequence is never NULL
    action = F.when(~n_here, F.lit(DELETE)).when(~same, F.lit(UPSERT))
    return joined.select(*[F.when(n_here, F.col(f"n.{q(c)}")).otherwise(F.col(f"o.{q(c)}"))
                           .alias(c) for c in columns], action.alias(ACTION)
                         ).where(F.col(ACTION).isNotNull())
