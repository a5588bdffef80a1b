"""The output mode a streaming table's flow writes in, when its definition does not say.

Databricks' DLT (Lakeflow Declarative Pipelines) runs a streaming table whose query is an
aggregation without a watermark: "To ensure queries that perform aggregations are processed
incrementally and not fully recomputed with each update, you must use watermarks"
(https://docs.databricks.com/aws/en/ldp/stateful-processing). Without one, the table holds the
whole aggregate, brought up to date by each update. Spark's append mode refuses such a query
(STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION: no group is ever final without a watermark), so
headwater writes it in complete mode: Spark keeps the groups in the flow's checkpoint, and each
micro-batch replaces the table with the full aggregate in one commit.

Which queries: those Spark itself refuses in append mode and accepts in complete mode, asked of
Spark's own ``UnsupportedOperationChecker`` on the analyzed plan (the check
``writeStream.start()`` runs), not a walk of our own over the plan. Complete mode needs a
streaming aggregation, so only aggregations get there (a watermarked one whose groups the
watermark never closes too: it is not incremental on Databricks either).

A declared mode (``@headwater.table(output_mode=...)``) is never changed. A table rewritten
whole cannot share itself with other flows: :func:`check_alone` refuses that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.errors import HeadwaterError
from headwater.pipeline.checks import spark_refusal
from headwater.pipeline.model import TABLE
from headwater.spark.jvm import has_jvm_plan

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame

    from headwater.pipeline.model import Dataset, Flow, OutputMode
    from headwater.pipeline.resolved_flow import ResolvedFlow

DOCS_PAGE = "https://docs.databricks.com/aws/en/ldp/stateful-processing"


def flow_output_mode(dataset: Dataset, flow: Flow, df: DataFrame) -> OutputMode:
    """The declared mode; else "complete" for a streaming table's aggregation that Spark runs
    only in complete mode (see the module docstring); else "append"."""
    if dataset.output_mode is not None:
        return dataset.output_mode
    if dataset.kind != TABLE or flow.cdc is not None or flow.snapshot is not None \
            or not df.isStreaming or not has_jvm_plan(df):
        return "append"  # (Spark Connect: no plan to ask; Spark checks at start)
    if spark_refusal(df, "append") is not None and spark_refusal(df, "complete") is None:
        return "complete"
    return "append"


def check_alone(flows: Sequence[ResolvedFlow]) -> None:
    """Refuse a streaming table rewritten whole each batch (complete mode) that more than
    one flow writes: each flow's batch would replace the others' rows."""
    if len(flows) < 2:
        return
    whole = [rf for rf in flows if rf.output_mode == "complete"]
    if not whole:
        return
    table = flows[0].dataset.name
    first = whole[0]
    implied = first.dataset.output_mode is None
    others = ", ".join(f"{rf.flow.name} ({rf.flow.location})" for rf in flows if rf is not first)
    raise HeadwaterError(
        "HW_PIPELINE_COMPLETE_FLOW_SHARED",
        f"{first.flow.location}: flow {first.flow.name!r} rewrites streaming table {table!r} "
        f"whole each micro-batch, and other flows write into it too: {others}.",
        ("Its query is an aggregation without a watermark: Spark cannot append its rows (no "
         "group is ever final), so the table holds the whole aggregate, replaced at each "
         f"batch, as Databricks recomputes it ({DOCS_PAGE}). "
         if implied else "Complete mode replaces the table with the query's result at each "
         "batch. ")
        + "Another flow's rows would be replaced at the next batch.",
        "Give the aggregate its own streaming table (or a materialized view over the union "
        "of the inputs), or add .withWatermark('<event-time column>', '<delay>') and group "
        "by a window() over it so the flow appends closed groups.")
