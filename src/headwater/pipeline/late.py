"""Late data: keep the rows a windowed streaming aggregate drops behind its watermark.

Spark silently drops input that arrives behind the watermark. With ``keep_late_rows=True``
headwater writes those rows to a side table ``<table>__late`` instead of losing them.

How it works (verified on Spark 4.3):

* :meth:`LateRows.prepare` finds the one streaming ``Aggregate`` in the analyzed JVM plan and
  takes its child: the rows that enter the aggregate, after ``withWatermark`` and after Spark's
  time-window rewrite (for ``window(...)`` they carry the ``window`` struct column). It returns
  ONE streaming DataFrame, ``stream_df``: the union of the aggregate's output, packed into a
  nullable struct column ``_hw_agg``, and those raw rows, packed into ``_hw_raw``. Both
  branches are in one query, so they read the same micro-batch (one source instance, the same
  offsets) and the watermark is unchanged. Spark accepts the union in append, update and
  complete modes.
* In ``foreachBatch``, :meth:`LateRows.split` unpacks a batch into the aggregate rows (the
  user's schema) and the late raw rows, classified with Spark's own rule and watermark:

  - the event-time key is the first grouping key carrying ``spark.watermarkDelayMs``; a row is
    late when ``key.end <= watermark`` for a window struct (Spark compares the struct's second
    field), or ``key <= watermark`` for a plain timestamp key (``WatermarkSupport``);
  - the watermark is the one Spark filters late rows with in batch N: the ``batchWatermarkMs``
    of the PREVIOUS batch, from ``<checkpoint>/offsets/<N-1>`` (Spark 3.5+, with
    ``spark.sql.streaming.statefulOperator.allowMultiple=true``, the default). Batch 0, a
    missing previous entry, or ``allowMultiple=false`` use batch N's own entry, as Spark does.
    Eviction uses batch N's watermark, so rows between the two watermarks are aggregated (and
    emitted), not dropped.

Caveats:

* ``numRowsDroppedByWatermark`` is not a count of raw rows. For streaming aggregation Spark
  filters late rows in ``StateStoreSaveExec``, after partial aggregation and the shuffle, so it
  counts one row per late group (grouping key + window). Late raw rows equal it only when the
  late rows of a batch fall in distinct groups; ``__late`` always holds every raw row.
* With sliding windows Spark expands each input row into one row per window; a late row is a
  (row, window) pair and the ``window`` column says which.
* Complete mode never drops rows (state is never evicted), so it is refused; session windows
  and queries with more than one stateful operator are refused too.
* Both branches scan the source, so the source is read twice per batch and the progress's
  ``numInputRows`` counts every input row twice.

The caller persists ``batch_df``, writes the aggregate rows to the target and the late rows to
``late_table`` (both with ``txnAppId``/``txnVersion = batch_id``: the split is deterministic per
batch, so replays are exactly-once).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from headwater.conf.layout import late_table
from headwater.errors import HeadwaterError
from headwater.spark.jvm import (
    analyzed_plan,
    dataframe_of_plan,
    hadoop_conf,
    has_jvm_plan,
    is_jvm_instance,
    jvm_view,
)
from headwater.spark.plan import node_name, nodes

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

AGG = "_hw_agg"
RAW = "_hw_raw"
BATCH_ID = "_batch_id"
WATERMARK = "_watermark"

_DELAY_KEY = "spark.watermarkDelayMs"  # EventTimeWatermark.delayKey
_SESSION_KEY = "spark.sessionWindow"  # SessionWindow.marker
_ALLOW_MULTIPLE = "spark.sql.streaming.statefulOperator.allowMultiple"
_ATTRIBUTE = "org.apache.spark.sql.catalyst.expressions.Attribute"
_OTHER_STATEFUL = {
    "Deduplicate", "DeduplicateWithinWatermark", "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPySpark",
    "TransformWithStateInPandas", "GlobalLimit",
}
_FIX = ("Use keep_late_rows=True only on a windowed streaming aggregate in append or update "
        "mode, e.g. events.withWatermark('ts', '10 minutes').groupBy(window('ts', '5 minutes'), "
        "'k').count().")


def _unsupported(what: str, why: str, fix: str = _FIX) -> HeadwaterError:
    return HeadwaterError("HW_LATE_ROWS_UNSUPPORTED", what, why, fix)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _pack(df: DataFrame) -> Column:
    return F.struct(*[F.col(_quote(c)) for c in df.columns])


class LateRows:
    """Keep late rows of one streaming aggregate; see the module docstring for the rules.

    ``stream_df`` is what to start with ``writeStream.foreachBatch``; ``late_table`` is
    ``<table>__late``; :meth:`split` unpacks each batch.
    """

    def __init__(self, stream_df: DataFrame, table: str, event_time: str,
                 window_end: str | None) -> None:
        self.stream_df = stream_df
        self.table = table
        self.late_table = late_table(table)
        self.event_time = event_time  # the raw column Spark judges lateness by
        self.window_end = window_end  # its end field when it is a window struct

    @classmethod
    def prepare(cls, agg_df: DataFrame, table: str, output_mode: str = "append") -> LateRows:
        """Pack ``agg_df`` (a streaming aggregate with a watermark) and its input rows together.

        Raises ``HeadwaterError`` ``HW_LATE_ROWS_UNSUPPORTED`` when ``agg_df`` is not such an
        aggregate, or when ``output_mode`` is ``complete`` (Spark drops nothing there).
        """
        mode = output_mode.lower()
        if mode not in ("append", "update", "complete"):
            raise _unsupported(f"Unknown output mode {output_mode!r} for table {table}.",
                               "Streaming output modes are append, update and complete.")
        if mode == "complete":
            raise _unsupported(
                f"keep_late_rows was asked for table {table} in complete mode.",
                "Complete mode keeps every group forever and never drops a row behind the "
                "watermark, so there are no late rows to keep.",
                "Drop keep_late_rows, or use append or update mode.")
        if not has_jvm_plan(agg_df):
            raise _unsupported(
                f"keep_late_rows for table {table} needs a classic (non-Connect) SparkSession.",
                "headwater reads the query plan on the JVM to find the rows entering the "
                "aggregate.", "Run the pipeline with headwater.spark_session().")
        if not agg_df.isStreaming:
            raise _unsupported(f"Table {table} is not a streaming query.",
                               "Only streaming aggregates drop rows behind a watermark.")
        spark = agg_df.sparkSession
        agg, child = _streaming_aggregate(agg_df, table)
        key = _event_time_key(agg, table)
        raw = _dataframe(spark, child)
        outputs = child.output()
        names = [outputs.apply(i).name() for i in range(outputs.size())]
        event_time = next((names[i] for i in range(len(names))
                           if outputs.apply(i).exprId().equals(key.exprId())), None)
        if event_time is None:
            raise _unsupported(
                f"The event-time key {key.name()!r} of table {table} is not an input column of "
                "its aggregate.", "Late rows are judged by that column of the input rows.")
        for what, columns in (("aggregate output", agg_df.columns), ("aggregate input", names)):
            dupes = sorted({c for c in columns if columns.count(c) > 1})
            if dupes:
                raise _unsupported(
                    f"The {what} of table {table} has duplicate column names {dupes}.",
                    "Rows are packed into a struct by column name.",
                    "Rename the columns so each name appears once.")
        clash = {BATCH_ID, WATERMARK} & set(names)
        if clash:
            raise _unsupported(
                f"The aggregate input of table {table} already has columns {sorted(clash)}.",
                f"headwater adds {BATCH_ID} and {WATERMARK} to each late row.",
                "Rename those columns before the aggregation.")
        key_type = raw.schema[event_time].dataType
        window_end = None
        if isinstance(key_type, StructType):
            # Spark's rule: for a struct key it compares the struct's second field (the end).
            if len(key_type.fields) < 2 or not isinstance(key_type.fields[1].dataType,
                                                          TimestampType):
                raise _unsupported(
                    f"The event-time key {event_time!r} of table {table} is a struct without a "
                    "timestamp end field.", "Spark judges lateness by the window's end.")
            window_end = key_type.fields[1].name
        packed_agg = agg_df.select(_pack(agg_df).alias(AGG),
                                   F.lit(None).cast(raw.schema).alias(RAW))
        packed_raw = raw.select(F.lit(None).cast(agg_df.schema).alias(AGG), _pack(raw).alias(RAW))
        return cls(packed_agg.union(packed_raw), table, event_time, window_end)

    def split(self, batch_df: DataFrame, batch_id: int,
              checkpoint: str) -> tuple[DataFrame, DataFrame]:
        """(aggregate rows, late raw rows) of one ``foreachBatch`` call on ``stream_df``.

        The aggregate rows have ``agg_df``'s columns. The late rows have the aggregate's input
        columns plus ``_batch_id`` (long) and ``_watermark`` (the timestamp they were judged
        against). ``checkpoint`` is the query's checkpointLocation.
        """
        watermark_ms = late_watermark_ms(batch_df.sparkSession, checkpoint, batch_id)
        watermark = F.timestamp_millis(F.lit(watermark_ms))
        agg_rows = batch_df.where(F.col(AGG).isNotNull()).select(f"{AGG}.*")
        raw = batch_df.where(F.col(RAW).isNotNull()).select(f"{RAW}.*")
        key = F.col(_quote(self.event_time))
        if self.window_end is not None:
            key = key.getField(self.window_end)
        late = (raw.where(key <= watermark)
                .withColumn(BATCH_ID, F.lit(batch_id).cast("long"))
                .withColumn(WATERMARK, watermark))
        return agg_rows, late


def _streaming_aggregate(agg_df: DataFrame, table: str) -> tuple[Any, Any]:
    found = []
    for node in nodes(analyzed_plan(agg_df)):
        if not node.isStreaming():
            continue
        name = node_name(node)
        if name == "Aggregate":
            found.append(node)
        elif name in _OTHER_STATEFUL or (
                name == "Join" and node.left().isStreaming() and node.right().isStreaming()):
            raise _unsupported(
                f"Table {table} has a stateful {name} besides its aggregate.",
                "Late rows are kept for exactly one stateful operator: the aggregate.")
    if len(found) != 1:
        raise _unsupported(
            f"Table {table} has {len(found)} streaming aggregations; keep_late_rows needs "
            "exactly one.", "Late rows are the rows one aggregate drops behind its watermark.")
    return found[0], found[0].child()


def _event_time_key(agg: Any, table: str) -> Any:
    keys = agg.groupingExpressions()
    for i in range(keys.size()):
        key = keys.apply(i)
        if not is_jvm_instance(key, _ATTRIBUTE) or not key.metadata().contains(_DELAY_KEY):
            continue
        if key.metadata().contains(_SESSION_KEY):
            raise _unsupported(
                f"Table {table} aggregates over session windows.",
                "Session windows merge across batches, so Spark's late-row rule differs.",
                "Use window(...) (tumbling or sliding) for keep_late_rows.")
        return key  # Spark takes the first event-time key too
    raise _unsupported(
        f"Table {table} does not group by an event-time column with a watermark.",
        "Spark drops late rows only when a grouping key (the column or window(...) of "
        "withWatermark) carries the watermark.")


def _dataframe(spark: SparkSession, plan: Any) -> DataFrame:
    return dataframe_of_plan(spark, plan)


def late_watermark_ms(spark: SparkSession, checkpoint: str, batch_id: int) -> int:
    """The watermark (ms) Spark drops late rows by in ``batch_id``, from the offset log."""
    allow_multiple = (spark.conf.get(_ALLOW_MULTIPLE, "true") or "true").lower() == "true"
    if allow_multiple and batch_id > 0:
        previous = _batch_watermark_ms(spark, checkpoint, batch_id - 1)
        if previous is not None:
            return previous
    current = _batch_watermark_ms(spark, checkpoint, batch_id)
    if current is None:
        raise HeadwaterError(
            "HW_LATE_ROWS_CHECKPOINT",
            f"The offset log has no batch {batch_id} under checkpoint {checkpoint}.",
            "Late rows are judged against the watermark Spark wrote to the offset log.",
            "Pass the query's own checkpointLocation to split().")
    return current


def _batch_watermark_ms(spark: SparkSession, checkpoint: str, batch_id: int) -> int | None:
    text = _read_text(spark, f"{checkpoint.rstrip('/')}/offsets/{batch_id}")
    if text is None:
        return None
    for line in text.splitlines()[1:]:  # line 0 is the log version, e.g. "v1"
        line = line.strip()
        if line.startswith("{"):
            meta = json.loads(line)
            if "batchWatermarkMs" in meta:
                return int(meta["batchWatermarkMs"])
    return 0  # OffsetSeqMetadata's default


def _read_text(spark: SparkSession, path: str) -> str | None:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        local = parsed.path if parsed.scheme == "file" else path
        if not os.path.exists(local):
            return None
        with open(local, encoding="utf-8") as handle:
            return handle.read()
    jvm = jvm_view(spark)
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = jpath.getFileSystem(hadoop_conf(spark))
    if not fs.exists(jpath):
        return None
    stream = fs.open(jpath)
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
