"""A sink's flow: a streaming write in the sink's format, with its options, on a checkpoint
under the lakehouse.

Spark's own streaming writers give what their format allows: ``delta`` goes to headwater's
Delta writer, which tags each commit with (query id, batch id) and skips a repeated batch
(exactly once); file formats go through Spark's file sink, whose ``_spark_metadata`` log
lists each batch's files once (exactly once for readers that honour the log, as Spark's
file reader does); ``headwater.kafka`` delivers at least once. The sink is never created,
truncated or conformed by the pipeline: it belongs to the external system.

delta-spark's ``spark.databricks.delta.schema.autoMerge.enabled`` (the session's, or the flow's
``spark_conf``: the flow starts with it set) makes a ``delta`` sink add the query's new columns
to the table, as ``mergeSchema`` does, unless the sink's options say ``mergeSchema`` themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from headwater.conf.layout import DELTA_AUTO_MERGE_CONF, SINK_METRICS
from headwater.conf.options import parse_bool
from headwater.errors.spark import translate_sink_start
from headwater.pipeline.model import Sink

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from headwater.pipeline.graph import Graph, ResolvedFlow


def start_sink(graph: Graph, rf: ResolvedFlow, checkpoint: str,
               trigger: dict[str, Any]) -> StreamingQuery:
    """Start ``rf``'s query into its sink (append mode, the run's trigger); a format Spark
    cannot write as a stream is HW_PIPELINE_SINK_FORMAT, naming what to use instead."""
    sink = rf.dataset
    assert isinstance(sink, Sink)  # the scheduler sends only sinks' flows here
    # Spark's file sink reports no output count: the flow counts its rows itself.
    df = graph.rebuild(rf).observe(SINK_METRICS + rf.key, F.count(F.lit(1)).alias("rows"))
    options = dict(sink.options)
    if sink.format.lower() == "delta" and not any(k.lower() == "mergeschema" for k in options) \
            and parse_bool(DELTA_AUTO_MERGE_CONF, graph.lakehouse.spark.conf.get(
                DELTA_AUTO_MERGE_CONF, None), False):
        options["mergeSchema"] = "true"
    writer = (df.writeStream.queryName(rf.key).trigger(**trigger)
              .option("checkpointLocation", checkpoint).outputMode("append")
              .format(sink.format).options(**options))
    try:
        return writer.start()
    except Exception as exc:
        error = translate_sink_start(sink.name, sink.format, exc)
        if error is None:
            raise
        raise error from exc
