"""AUTO CDC FROM SNAPSHOT on Delta (Databricks' ``create_auto_cdc_from_snapshot_flow``, formerly
``apply_changes_from_snapshot``): a full snapshot of a source, diffed against the target's
current rows, becomes change events applied by AUTO CDC's own engine
(:func:`headwater.delta.cdc.apply_changes_batch`), sequenced by the snapshot's version.

The diff, by key: a key only in the snapshot is an insert; a key in both whose row differs in
any column is an update (SCD1: the row is replaced; SCD2: the current row is closed and a new
one opened, ``__START_AT`` / ``__END_AT`` being snapshot versions, or updated in place when
only columns outside ``track_history_*`` changed); a key only in the target (SCD2: only among
its current rows, ``__END_AT IS NULL``) is a delete (SCD1: removed; SCD2: its current row is
closed at the version). Identical rows produce no event. Reusing the CDC engine means one MERGE
per snapshot into the target, exactly once per (flow, snapshot number) through its txn, the
same state table and tombstones (a key deleted at version 3 and back at version 5 is simply
inserted again: 5 is newer than the tombstone).

A snapshot holding a key twice is refused (Databricks' DUPLICATE_KEY_VIOLATION), as is a
version that does not increase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from headwater.delta.cdc.apply import CdcResult, apply_changes_batch, target_schema
from headwater.delta.cdc.spec import END_AT, CdcSpec, column_names
from headwater.delta.cdc.targets import open_or_none
from headwater.delta.native_read import read_native
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

# The snapshot's version and the event's kind, as event columns the target never keeps.
VERSION, KIND = "__hw_snapshot_version", "__hw_snapshot_op"
ERROR_CLASS = "APPLY_CHANGES_FROM_SNAPSHOT_ERROR"


@dataclass(frozen=True)
class SnapshotSpec:
    """What an AUTO CDC FROM SNAPSHOT flow asks for.

    keys: columns identifying a row (names or Columns).
    stored_as_scd_type: 1 (default: the latest row per key) or 2 (history rows with
        ``__START_AT`` / ``__END_AT`` of the version's type; the current row's ``__END_AT`` is
        NULL).
    track_history_column_list / track_history_except_column_list (SCD2): the columns whose
        change opens a new history row; a change elsewhere updates the current row.
    """

    cdc: CdcSpec

    @classmethod
    def build(cls, keys: Any, stored_as_scd_type: Any = 1,
              track_history_column_list: Any = None,
              track_history_except_column_list: Any = None, column_list: Any = None,
              except_column_list: Any = None) -> SnapshotSpec:
        """Checked as AUTO CDC checks its arguments (HW_CDC_INVALID). column_list /
        except_column_list: the snapshot columns the target keeps (default all; SQL's
        COLUMNS clause)."""
        chosen = column_names(column_list, "column_list")
        dropped = column_names(except_column_list, "except_column_list")
        if chosen and dropped:
            raise HeadwaterError("HW_CDC_INVALID", "Both column_list and except_column_list "
                                 "were given.", "They say the same thing two ways.",
                                 "Pass one of them.")
        return cls(CdcSpec.build(
            keys, VERSION, apply_as_deletes=f"{KIND} = 'delete'", column_list=chosen,
            except_column_list=None if chosen else [VERSION, KIND, *(dropped or ())],
            stored_as_scd_type=stored_as_scd_type,
            track_history_column_list=column_names(track_history_column_list,
                                                   "track_history_column_list"),
            track_history_except_column_list=column_names(
                track_history_except_column_list, "track_history_except_column_list")))

    @property
    def keys(self) -> tuple[str, ...]:
        return self.cdc.keys

    @property
    def scd2(self) -> bool:
        return self.cdc.stored_as_scd_type == 2


def _shaped(snapshot: DataFrame, version: Any, version_type: DataType) -> DataFrame:
    """The snapshot as upsert events: its columns, the version, the kind."""
    return snapshot.select("*", F.lit(version).cast(version_type).alias(VERSION),
                           F.lit("upsert").alias(KIND))


def snapshot_target_schema(spec: SnapshotSpec, snapshot: DataFrame, version_type: DataType,
                           where: str) -> StructType:
    """The target's schema for snapshots shaped like ``snapshot`` (no Spark job): the keys
    first, then the other columns; SCD2 adds ``__START_AT`` / ``__END_AT`` of the version's
    type."""
    return target_schema(spec.cdc, _shaped(snapshot, None, version_type), where)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _side(df: DataFrame, alias: str, columns: list[str]) -> list[Column]:
    return [F.col(f"{alias}.{_q(c)}").alias(c) for c in columns]


def snapshot_events(snapshot: DataFrame, version: Any, version_type: DataType, target: str,
                    spec: SnapshotSpec, where: str) -> DataFrame:
    """The change events turning the target's current rows into ``snapshot`` (lazy: the
    diff runs when the events are applied); HW_CDC_SNAPSHOT_DUPLICATE_KEY first (one job)
    when a key appears twice in the snapshot."""
    output = spec.cdc.output_columns([*snapshot.columns, VERSION, KIND], where)
    keys = output[:len(spec.keys)]
    twice = (snapshot.groupBy(*[F.col(_q(k)) for k in keys]).count()
             .where(F.col("count") > 1).limit(3).collect())
    if twice:
        raise HeadwaterError(
            "HW_CDC_SNAPSHOT_DUPLICATE_KEY",
            f"{where}: the snapshot at version {version!r} holds keys "
            f"{[tuple(r[k] for k in keys) for r in twice]} more than once "
            f"({', '.join(str(r['count']) for r in twice)} rows). Nothing was applied.",
            "A snapshot is the source table's state: one row per key, which the target "
            "takes on.", "Deduplicate the snapshot (e.g. keep the latest row per key), or "
            "choose keys that identify a row.",
            error_class=f"{ERROR_CLASS}.DUPLICATE_KEY_VIOLATION")
    rows = snapshot.select(*[F.col(_q(c)) for c in output])
    table = open_or_none(target)
    if table is None:
        events = rows.withColumn(KIND, F.lit("upsert"))
    else:
        spark = snapshot.sparkSession
        stored = read_native(spark, target)
        if stored is None:
            stored = spark.read.format("delta").load(target)
        if spec.scd2:
            stored = stored.where(F.col(_q(END_AT)).isNull())
        missing = [c for c in output if c.lower() not in {s.lower() for s in stored.columns}]
        if missing:
            raise HeadwaterError(
                "HW_CDC_TARGET_MISMATCH", f"{where}: the snapshot has columns {missing} the "
                f"target lacks (it has {', '.join(stored.columns)}).",
                "AUTO CDC FROM SNAPSHOT keeps every column of the snapshot.",
                "Full-refresh the target to take the new columns, or select the old ones in "
                "the snapshot.")
        s = rows.withColumn("__hw_in", F.lit(True)).alias("s")
        t = stored.select(*[F.col(_q(c)) for c in output]).withColumn(
            "__hw_in", F.lit(True)).alias("t")
        on = None
        for k in keys:
            equal = F.col(f"s.{_q(k)}").eqNullSafe(F.col(f"t.{_q(k)}"))
            on = equal if on is None else on & equal
        joined = s.join(t, on, "full_outer")
        changed = F.lit(False)
        for c in output[len(keys):]:
            changed = changed | ~F.col(f"s.{_q(c)}").eqNullSafe(F.col(f"t.{_q(c)}"))
        in_s, in_t = F.col("s.__hw_in").isNotNull(), F.col("t.__hw_in").isNotNull()
        upserts = joined.where(in_s & (~in_t | changed)).select(
            *_side(joined, "s", output), F.lit("upsert").alias(KIND))
        deletes = joined.where(~in_s & in_t).select(
            *_side(joined, "t", output), F.lit("delete").alias(KIND))
        events = upserts.unionByName(deletes)
    return events.withColumn(VERSION, F.lit(version).cast(version_type))


def apply_snapshot(snapshot: DataFrame, version: Any, version_type: DataType, number: int,
                   target: str, spec: SnapshotSpec, app_id: str) -> CdcResult:
    """Apply ``snapshot`` (the source's full state at ``version``) to the Delta table at
    ``target``: snapshot ``number`` of the flow ``app_id``, committed exactly once (a replay
    of a committed number changes nothing: ``applied`` is False)."""
    where = f"AUTO CDC FROM SNAPSHOT into {target}"
    events = snapshot_events(snapshot, version, version_type, target, spec, where)
    return apply_changes_batch(events, number, target, spec.cdc, app_id)
