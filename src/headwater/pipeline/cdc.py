"""AUTO CDC flows in a pipeline: ``create_auto_cdc_flow`` (headwater's and SDP's) as a
:class:`headwater.pipeline.model.Flow` whose ``cdc`` carries the semantics. The runner's
flow writer applies each micro-batch with :func:`headwater.delta.cdc.apply_changes_batch`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from headwater.delta.cdc import CdcSpec
from headwater.errors import HeadwaterError
from headwater.pipeline import model

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _source_reader(source: str):
    """The flow's function: the source dataset (a streaming table or a view) as a stream.
    Read through the session's catalog, so the graph sees the edge in the analyzed plan."""
    def read() -> DataFrame:
        spark = SparkSession.getActiveSession()
        assert spark is not None
        return spark.readStream.table(source)

    read.__name__ = f"auto_cdc_from_{source}"
    return read


def cdc_flow(*, target: str, source: str, name: str | None, location: model.Location,
             spark_conf: Mapping[str, str] | None = None, **arguments: Any) -> model.Flow:
    """A CDC flow from ``source`` into ``target``; ``arguments`` are CdcSpec.build's."""
    if not isinstance(source, str) or not source:
        raise HeadwaterError(
            "HW_CDC_INVALID", f"{location}: create_auto_cdc_flow into {target!r} needs the "
            f"source's name, got {source!r}.", "The source is a dataset of the pipeline (a "
            "streaming table or a view over a stream).", "Pass source='customers_cdc'.")
    try:
        spec = CdcSpec.build(arguments.pop("keys"), arguments.pop("sequence_by"), **arguments)
    except HeadwaterError as exc:
        raise HeadwaterError(exc.code, f"{location}: {exc.what}", exc.why, exc.fix) from None
    return model.Flow(name=name or target, target=target, func=_source_reader(source),
                      location=location, spark_conf=dict(spark_conf or {}), cdc=spec,
                      cdc_source=source)


def cdc_flow_from_sql(plan: Any, sql: str, name: str, target: str,
                      location: model.Location, **clauses: Any) -> model.Flow:
    """``CREATE FLOW name AS AUTO CDC INTO target FROM STREAM(src) KEYS (...) ...`` as Spark's
    parser gives it (an ``AutoCdcInto`` plan) -> a CDC flow. clauses: what Spark's grammar
    lacks, read before parsing (ignore_null_updates, apply_as_truncates)."""
    def names(option: Any) -> list[str] | None:
        if not option.isDefined():
            return None
        return _attributes(option.get())

    source = plan.source()
    origin = source.origin()
    if not (origin.startIndex().isDefined() and origin.stopIndex().isDefined()):
        raise HeadwaterError(
            "HW_PIPELINE_SQL_INVALID", f"{location}: the source of AUTO CDC INTO {target} "
            "could not be located in the statement.", "The source is read as written.",
            "Write the source as FROM STREAM(name).")
    source_sql = sql[origin.startIndex().get():origin.stopIndex().get() + 1]
    delete = plan.deleteCondition()
    try:
        spec = CdcSpec.build(
            _attributes(plan.keys()), plan.sequenceByExpr().sql(),
            apply_as_deletes=delete.get().sql() if delete.isDefined() else None,
            column_list=names(plan.includeColumns()),
            except_column_list=names(plan.excludeColumns()),
            stored_as_scd_type=int(plan.storedAsScdType()),
            track_history_column_list=names(plan.trackHistoryColumns()),
            track_history_except_column_list=names(plan.trackHistoryExceptColumns()),
            **clauses)
    except HeadwaterError as exc:
        raise HeadwaterError(exc.code, f"{location}: {exc.what}", exc.why, exc.fix) from None

    def read() -> DataFrame:
        return SparkSession.active().sql(f"SELECT * FROM {source_sql}")

    read.__name__ = f"auto_cdc_{name}"
    # FROM STREAM(name): the graph reads the dataset itself (the lakehouse's session)
    stream_of = re.fullmatch(r"STREAM\s*\(?\s*([A-Za-z_][\w.]*)\s*\)?", source_sql.strip(),
                             re.IGNORECASE)
    return model.Flow(name=name, target=target, func=read, location=location,
                      sql=f"SELECT * FROM {source_sql}", cdc=spec,
                      cdc_source=stream_of.group(1) if stream_of else None)


def _attributes(seq: Any) -> list[str]:
    """A Scala Seq of UnresolvedAttribute -> their (dotted) names."""
    return [str(seq.apply(i).name()) for i in range(seq.size())]
