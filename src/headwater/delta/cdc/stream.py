"""AUTO CDC for plain PySpark: a foreachBatch function, or a started stream, with the same
semantics as a pipeline's ``create_auto_cdc_flow``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from headwater.delta.cdc.apply import CdcResult, apply_changes_batch
from headwater.delta.cdc.spec import CdcSpec
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery


def apply_changes_function(target: str, spec: CdcSpec, app_id: str,
                           on_batch: Callable[[int, CdcResult], None] | None = None
                           ) -> Callable[[DataFrame, int], None]:
    """``writeStream.foreachBatch(apply_changes_function(path, spec, app_id))``: each batch
    applied to the Delta table at ``target`` exactly once (txn(app_id, batch id)).
    on_batch: called with (batch id, what the batch did)."""
    def apply(batch: DataFrame, batch_id: int) -> None:
        result = apply_changes_batch(batch, batch_id, target, spec, app_id)
        if on_batch is not None:
            on_batch(batch_id, result)

    return apply


def apply_changes_stream(df: DataFrame, target: str, *, keys: Any, sequence_by: Any,
                         checkpoint_location: str, apply_as_deletes: Any = None,
                         apply_as_truncates: Any = None, column_list: Any = None,
                         except_column_list: Any = None, stored_as_scd_type: int = 1,
                         track_history_column_list: Any = None,
                         track_history_except_column_list: Any = None,
                         ignore_null_updates: bool = False,
                         tombstone_gc_seconds: int | None = None,
                         trigger: dict[str, Any] | None = None,
                         query_name: str | None = None) -> StreamingQuery:
    """Start a stream applying the change events of ``df`` to the Delta table at ``target``.

    The arguments are those of ``create_auto_cdc_flow`` (see
    :class:`headwater.delta.cdc.CdcSpec`); target is a path. checkpoint_location: the
    stream's checkpoint (required; its folder names the Delta txn app id, so a restarted
    stream resumes exactly once). trigger: ``writeStream.trigger`` keywords (default: Spark's
    default trigger). query_name: the stream's name.
    """
    if not df.isStreaming:
        raise HeadwaterError(
            "HW_CDC_INVALID", "apply_changes_stream was given a batch DataFrame.",
            "It starts a streaming query over change events.",
            "Pass spark.readStream...; for a batch, call "
            "headwater.delta.cdc.apply_changes_batch(df, 0, target, spec, app_id).")
    extra: dict[str, Any] = {} if tombstone_gc_seconds is None else {
        "tombstone_gc_seconds": int(tombstone_gc_seconds)}
    spec = CdcSpec.build(keys, sequence_by, stored_as_scd_type=stored_as_scd_type,
                         apply_as_deletes=apply_as_deletes,
                         apply_as_truncates=apply_as_truncates, column_list=column_list,
                         except_column_list=except_column_list,
                         track_history_column_list=track_history_column_list,
                         track_history_except_column_list=track_history_except_column_list,
                         ignore_null_updates=bool(ignore_null_updates), **extra)
    app_id = f"headwater-cdc-{checkpoint_location.rstrip('/')}"
    writer = (df.writeStream.option("checkpointLocation", checkpoint_location)
              .foreachBatch(apply_changes_function(target, spec, app_id)))
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()
