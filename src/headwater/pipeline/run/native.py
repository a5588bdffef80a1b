"""Stateless Delta-to-Delta flows at native speed.

Such a flow's output for a micro-batch is its definition applied to that batch's rows, so
the batch can be read by Spark's parquet reader (not through Python) and the definition
re-applied to it: the stream itself only lists each batch's files (``hw_delta_files``).
Expectations and late rows keep the streaming plan: their counts belong in the query's own
progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.delta.log import DeltaLog
from headwater.delta.native import natively_readable
from headwater.errors import HeadwaterError
from headwater.pipeline.run.flow_writer import write_table
from headwater.spark.plan import analyzed, node_name, nodes

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from headwater.pipeline.graph import Graph, Read, ResolvedFlow
    from headwater.pipeline.run.progress import FlowResult

# Plan nodes that keep state across batches or need all rows at once: a flow with one cannot
# be re-applied batch by batch.
STATEFUL_NODES = {
    "Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "Join", "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPySpark",
    "EventTimeWatermark", "GlobalLimit", "LocalLimit", "Sort", "Window", "Distinct",
    "CollectMetrics", "Sample",
}


def native_input(graph: Graph, rf: ResolvedFlow) -> Read | None:
    """The one Delta stream a stateless flow reads, when the flow can run natively."""
    dataset = rf.dataset
    if dataset.expectations or dataset.keep_late_rows or dataset.output_mode != "append" \
            or rf.flow.cdc is not None:  # AUTO CDC applies its batches through foreachBatch
        return None
    if rf.flow.sql is not None:
        return None  # spark.sql reads its tables itself: no batch can be substituted
    streams = [r for r in rf.reads if r.streaming]
    if len(streams) != 1:
        return None
    if any(k.lower() in ("readchangefeed", "readchangedata") for k, _ in streams[0].options):
        return None  # change rows are made by the Delta source, not read from data files
    source = graph.registry.datasets.get(streams[0].name)
    if source is not None and not source.stored:
        return None  # a view: its rows are a query, not files
    leaves = 0
    for node in nodes(analyzed(rf.df)):
        if not node.isStreaming():
            continue
        if node_name(node) in STATEFUL_NODES:
            return None
        if node.children().size() == 0:
            leaves += 1
    if leaves != 1:
        return None  # another stream (files, rate, ...) feeds this flow too
    store = graph.store_for(streams[0].name)
    table = DeltaLog(store.path(streams[0].name)).table()
    return streams[0] if natively_readable(table) else None


def start_native(graph: Graph, rf: ResolvedFlow, checkpoint: str, read: Read,
                 trigger: dict[str, Any], result: FlowResult,
                 auto_compact: bool = False) -> StreamingQuery:
    """Start ``rf`` reading ``read``'s files batch by batch; rows written go to ``result``.
    auto_compact: as for :func:`headwater.pipeline.run.flow_writer.start_stream`."""
    lake = graph.lakehouse
    spark = lake.spark
    source_path = graph.store_for(read.name).path(read.name)
    files = (spark.readStream.format("hw_delta_files").option("path", source_path)
             .options(**dict(read.options)).load())
    schema = lake.read_stream(read.name).schema
    name = rf.dataset.name
    app_id = f"headwater-{rf.key}"

    def write_batch(batch: Any, batch_id: int) -> None:
        files = batch.collect()
        if any(row.has_dv for row in files):
            raise HeadwaterError(
                "HW_NATIVE_READ_DV", f"Flow {rf.key}: {read.name} gained deletion vectors "
                "while the flow read it with Spark's parquet reader.",
                "Spark's reader cannot apply deletion vectors; the rows would come back.",
                f"Run the flow again: it then reads {read.name} through headwater's reader.")
        paths = [row.path for row in files]
        rows = spark.read.schema(schema).parquet(*paths) if paths else \
            spark.createDataFrame([], schema)
        df = graph.rebuild(rf, {read.name: rows})
        written = write_table(df, lake.path(name), "append", (app_id, batch_id),
                              auto_compact=auto_compact)
        result.rows_written += written
        result.report(batch_id, {"output_rows": written})

    return (files.writeStream.queryName(rf.key).trigger(**trigger)
            .option("checkpointLocation", checkpoint).foreachBatch(write_batch).start())
