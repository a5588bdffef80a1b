"""AUTO CDC's state table ``<target>/_hw_cdc_state``: its commits, in two layouts.

- Per key (SCD1 whose target does not keep the sequence column): one row per key holding the
  highest sequence applied and whether it was a delete; merged by key each batch.
- Tombstones only (SCD2, and SCD1 whose target keeps the sequence column): SCD1: a live
  key's applied sequence is its target row's; SCD2: the history shows every version; so the
  state holds only deletes (tombstones) and truncate rows, *appended* each batch. SCD2 keeps
  each delete until it expires, also when the key comes back (a late upsert older than the
  delete ends at it). SCD1 readers take the highest sequence per key, so a tombstone older
  than the key's live row (left by an upsert after the delete) changes nothing; SCD2 readers
  place every tombstone in the key's timeline, once per sequence; so an appended copy (a
  replay after a crash between the two commits) changes nothing either. Expired
  tombstones are deleted in a commit of their own before the append, only when the log's
  file statistics show one.

Both layouts' rows: the keys, ``__hw_seq``, ``__hw_deleted``, ``__hw_deleted_at`` and
``__hw_kind`` (``key`` or ``truncate``); every state commit but the expiry carries
txn(app_id, batch_id).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, Transaction, write_deltalake

from headwater.delta.cdc import timeline as tl
from headwater.delta.cdc.spec import SEQ, CdcSpec
from headwater.delta.log import add_actions
from headwater.delta.schema import arrow_schema, as_nullable
from headwater.delta.update_mode import as_table_arrow

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def with_truncate_row(rows: pa.Table, truncate_seq: Any, schema: StructType) -> pa.Table:
    """``rows`` plus the row recording the truncate in force."""
    target = arrow_schema(as_nullable(schema))
    values: dict[str, list[Any]] = {f.name: [None] for f in schema.fields}
    values[SEQ] = [truncate_seq]
    values[tl.KIND] = [tl.TRUNCATE_ROW]
    values[tl.DELETED] = [False]
    extra = pa.Table.from_pydict(values, schema=target)
    return pa.concat_tables([as_table_arrow(rows, schema), extra])


def _expiry_us(spec: CdcSpec) -> int:
    return int((time.time() - spec.tombstone_gc_seconds) * 1_000_000)


def _expired_sql(expiry_us: int, alias: str = "") -> str:
    return (f"{alias}{tl.DELETED} AND {alias}{tl.DELETED_AT} < "
            f"arrow_cast({expiry_us}, 'Timestamp(Microsecond, Some(\"UTC\"))')")


def merge_per_key(table: Any, rows: pa.Table, keys: list[str], schema: StructType,
                  spec: CdcSpec, app_id: str, batch_id: int) -> None:
    """Per-key layout, one commit: the batch's keys upserted, the truncate row replaced,
    expired tombstones deleted; txn(app_id, batch_id)."""
    source = as_table_arrow(rows, schema)
    # `=` lets delta-rs hash-join (`<=>` on several columns is a nested loop: minutes on a
    # large state); only the truncate row has NULL keys, and NULL never equals a source key.
    null_safe = any(source.column(k).null_count for k in keys)
    equals = "<=>" if null_safe else "="
    on = " AND ".join([f"t.{tl.q(k)} {equals} s.{tl.q(k)}" for k in keys]
                      + [f"t.{tl.KIND} = s.{tl.KIND}"])
    (table.merge(source, on, source_alias="s", target_alias="t",
                 commit_properties=CommitProperties(
                     app_transactions=[Transaction(app_id, batch_id)]))
     .when_matched_update_all()
     .when_not_matched_insert_all()
     .when_not_matched_by_source_delete(predicate=_expired_sql(_expiry_us(spec), "t."))
     .execute())


def append_tombstones(table: Any, rows: pa.Table, schema: StructType, spec: CdcSpec,
                      app_id: str, batch_id: int) -> None:
    """Tombstones-only layout: expired tombstones deleted (their own commit, when the file
    statistics show one), then the batch's tombstones (and truncate row) appended with
    txn(app_id, batch_id) -- an empty append when there are none, so the txn is recorded."""
    expiry_us = _expiry_us(spec)
    actions = add_actions(table, flatten=True)
    stat = f"min.{tl.DELETED_AT}"
    oldest = actions.column(stat) if stat in actions.schema.names else None
    if oldest is not None and oldest.null_count < len(oldest):
        if pc.min(oldest.cast("int64")).as_py() < expiry_us:
            table.delete(_expired_sql(expiry_us))
    keep = rows.filter(pc.or_(
        pc.fill_null(pc.equal(rows.column(tl.KIND), tl.TRUNCATE_ROW), False),
        pc.fill_null(rows.column(tl.DELETED), False)))
    write_deltalake(table, as_table_arrow(keep, schema), mode="append",
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(app_id, batch_id)]))
