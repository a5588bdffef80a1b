"""AUTO CDC flows in a pipeline: ``create_auto_cdc_flow`` (headwater's and SDP's) as a
:class:`headwater.pipeline.model.Flow` whose ``cdc`` carries the semantics. The runner's
flow writer applies each micro-batch with :func:`headwater.delta.cdc.apply_changes_batch`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from headwater.delta.cdc import CdcSpec
from headwater.errors import HeadwaterError
from headwater.pipeline import model

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _source_reader(source: str):
    """The flow's function: the source dataset (a streaming table or a view) as a stream.
    Read through the session's catalog, so the graph sees the edge in the analyzed plan."""
    def read() -> DataFrame:
        from pyspark.sql import SparkSession

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
                      location=location, spark_conf=dict(spark_conf or {}), cdc=spec)
