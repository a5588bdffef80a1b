"""Static checks of a streaming query, before any stream runs.

Errors come from Spark itself: :func:`check_stream` hands the DataFrame's analyzed logical plan
and the output mode to ``UnsupportedOperationChecker.checkForStreaming`` on the JVM. That is the
check Spark runs when ``writeStream.start()`` resolves the query, so ``headwater validate``
refuses exactly what Spark would refuse at start, never more or less, and stays right when
Spark's rules change between versions. Spark stops at the first problem it finds, so there is at
most one error. We keep Spark's message and add the table's name and a plain-words fix.

Warnings are ours: queries Spark accepts but whose state never shrinks (dropDuplicates without
an event-time key, aggregations whose groups a watermark never closes, stream-stream joins
without a time bound, ``*GroupsWithState`` without a timeout). We walk the analyzed JVM plan
through Py4J and read the watermark marker Spark puts in attribute metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException

from headwater.errors import HeadwaterError
from headwater.errors.spark import fix_for, spark_message
from headwater.spark.jvm import analyzed_plan, has_jvm_plan, is_jvm_instance, jvm_view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# EventTimeWatermark.delayKey: withWatermark marks the event-time attribute with this metadata
# key, and every operator below passes it on; Spark decides state eviction from it.
_WATERMARK_KEY = "spark.watermarkDelayMs"
_ATTRIBUTE = "org.apache.spark.sql.catalyst.expressions.Attribute"
_MODES = ("append", "complete", "update")

@dataclass
class CheckResult:
    errors: list[HeadwaterError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # each names the table and the fix


def check_stream(df: DataFrame, output_mode: str, table: str) -> CheckResult:
    """What Spark will refuse (errors) and what will grow forever (warnings) for this query."""
    mode = output_mode.strip().lower() if isinstance(output_mode, str) else ""
    if mode not in _MODES:
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"Table {table}: output mode {output_mode!r} is not known.",
            "Spark streams write in append, complete or update mode.",
            "Use 'append', 'complete' or 'update'.",
        )
    result = CheckResult()
    if not df.isStreaming:
        return result
    if not has_jvm_plan(df):  # Spark Connect: the plan lives on the server, out of Py4J's reach
        result.warnings.append(
            f"Table {table}: streaming checks skipped (no JVM plan under Spark Connect); "
            "Spark checks the query when it starts. Fix: validate with a classic SparkSession.")
        return result
    session = df.sparkSession
    jvm = jvm_view(session)
    plan = analyzed_plan(df)

    # Spark skips its own check when this (internal) flag is off; so do we, to agree with it.
    check_on = session.conf.get("spark.sql.streaming.unsupportedOperationCheck", "true")
    if check_on.strip().lower() != "false":
        refusal = spark_refusal(df, mode)
        if refusal is not None:
            message = spark_message(refusal)
            result.errors.append(HeadwaterError(
                "HW_STREAM_UNSUPPORTED",
                f"Table {table}: Spark cannot run this query as a stream in {mode} mode.",
                message, fix_for(message),
            ))

    result.warnings.extend(_state_warnings(plan, mode, table, jvm))
    return result


def spark_refusal(df: DataFrame, mode: str) -> AnalysisException | None:
    """Spark's own answer to "can this streaming query run in ``mode``": the error
    ``UnsupportedOperationChecker.checkForStreaming`` raises on its analyzed plan (the check
    ``writeStream.start()`` runs), or None when Spark accepts it. Classic sessions only (the
    caller checks :func:`~headwater.spark.jvm.has_jvm_plan`)."""
    jvm = jvm_view(df.sparkSession)
    jmode = getattr(jvm.org.apache.spark.sql.streaming.OutputMode, mode.capitalize())()
    try:
        jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker \
            .checkForStreaming(analyzed_plan(df), jmode)
    except AnalysisException as exc:
        return exc
    return None


# -- state-growth warnings -------------------------------------------------------------------

def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _nodes(plan: Any) -> list[Any]:
    """Streaming nodes of the plan, pre-order; batch subtrees hold no state, so we skip them."""
    out, stack = [], [plan]
    while stack:
        node = stack.pop()
        if node.isStreaming():
            out.append(node)
            stack.extend(reversed(_seq(node.children())))
    return out


def _has_watermark(exprs: list[Any]) -> bool:
    # Like Spark, only a bare attribute carrying the marker counts: group by date_trunc(ts)
    # loses it, and then no watermark ever closes a group.
    return any(is_jvm_instance(e, _ATTRIBUTE) and e.metadata().contains(_WATERMARK_KEY)
               for e in exprs)


def _state_warnings(plan: Any, mode: str, table: str, jvm: Any) -> list[str]:
    warnings: list[str] = []
    helper = jvm.org.apache.spark.sql.catalyst.analysis.StreamingJoinHelper
    for node in _nodes(plan):
        kind = node.nodeName()
        if kind == "Deduplicate" and not _has_watermark(_seq(node.keys())):
            warnings.append(
                f"Table {table}: dropDuplicates/distinct keeps every key it has seen, forever "
                "(no event-time column among its keys). Fix: add .withWatermark('ts', '<delay>') "
                "and include 'ts' in dropDuplicates, or use dropDuplicatesWithinWatermark.")
        elif kind in ("Aggregate", "Distinct"):
            keys = _seq(node.child().output() if kind == "Distinct" else node.groupingExpressions())
            if not keys:
                continue  # a global aggregate keeps one state row
            if mode == "complete":
                warnings.append(
                    f"Table {table}: complete mode keeps one state row per group forever and "
                    "rewrites the whole table each batch (watermarks never drop state here). "
                    "Fix: fine for a small, bounded number of groups; otherwise group by "
                    "window() over a watermarked column and use 'append' or 'update' mode.")
            elif not _has_watermark(keys):
                warnings.append(
                    f"Table {table}: the aggregation keeps every group forever (no watermarked "
                    "event-time column or window() among its GROUP BY keys). Fix: add "
                    ".withWatermark('ts', '<delay>') and group by window('ts', ...) or 'ts'.")
        elif kind == "Join" and node.left().isStreaming() and node.right().isStreaming():
            if helper.isWatermarkInJoinKeys(node):
                continue
            # Same test Spark's join uses to evict a side: is a watermark implied for its rows?
            # The watermark value only needs to be defined; 1 << 40 makes Py4J send a Long.
            some = jvm.scala.Some(1 << 40)
            left, right = node.left().outputSet(), node.right().outputSet()
            grows = [name for name, mine, other in (("left", left, right), ("right", right, left))
                     if not helper.getStateValueWatermark(mine, other, node.condition(), some)
                     .isDefined()]
            if grows:
                warnings.append(
                    f"Table {table}: the stream-stream join keeps every row of its "
                    f"{' and '.join(grows)} input forever. Fix: add .withWatermark(...) on both "
                    "inputs and a time-range condition, e.g. b.ts BETWEEN a.ts AND a.ts + "
                    "INTERVAL 1 HOUR.")
        elif kind in ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState") \
                and node.timeout().toString() == "NoTimeout":
            warnings.append(
                f"Table {table}: *GroupsWithState without a timeout keeps a key's state until "
                "your function calls state.remove(). Fix: pass a GroupStateTimeout and remove "
                "state when it times out.")
    return warnings
