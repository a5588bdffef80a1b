"""Checks on what a definition returned: a DataFrame of the right kind (a stream for a
streaming table, a batch for a materialized view), shaped to the dataset's declared schema."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from headwater.errors import HeadwaterError
from headwater.pipeline.model import MATERIALIZED_VIEW, SINK, TABLE, Dataset, Flow


def check_kind(dataset: Dataset, flow: Flow, df: DataFrame) -> None:
    if not isinstance(df, DataFrame):
        raise HeadwaterError(
            "HW_PIPELINE_NOT_A_DATAFRAME",
            f"{flow.location}: the definition of {dataset.name!r} returned "
            f"{type(df).__name__}, not a DataFrame.", "A definition returns the query that "
            "computes its dataset.", "Return the DataFrame (e.g. `return df`).")
    if dataset.kind == TABLE and not df.isStreaming:
        raise HeadwaterError(
            "HW_PIPELINE_NOT_A_STREAM",
            f"{flow.location}: streaming table {dataset.name!r} returns a batch DataFrame.",
            "A streaming table processes new input incrementally, so it needs a stream.",
            "Read inputs with headwater.read_stream(...) / spark.readStream, or declare it "
            "@headwater.materialized_view to recompute it from batch reads.")
    if dataset.kind == SINK and not df.isStreaming:
        raise HeadwaterError(
            "HW_PIPELINE_NOT_A_STREAM",
            f"{flow.location}: flow {flow.name!r} into sink {dataset.name!r} returns a batch "
            "DataFrame.", "A sink is written by streaming flows, each from its checkpoint.",
            "Read inputs with spark.readStream / headwater.read_stream(...).")
    if dataset.kind == MATERIALIZED_VIEW and df.isStreaming:
        raise HeadwaterError(
            "HW_PIPELINE_STREAM_IN_MATERIALIZED_VIEW",
            f"{flow.location}: materialized view {dataset.name!r} returns a streaming DataFrame.",
            "A materialized view is recomputed from batch reads each run.",
            "Read inputs with headwater.read(...) / spark.read, or declare it @headwater.table.")


def conform(dataset: Dataset, flow: Flow, df: DataFrame) -> DataFrame:
    """``df`` with the declared columns, in their order and types (a projection, so a
    stateless flow stays stateless); ``df`` itself when nothing is declared."""
    declared = dataset.schema
    if declared is None:
        return df
    have = {c.lower(): c for c in df.columns}
    missing = [f.name for f in declared.fields if f.name.lower() not in have]
    extra = sorted(set(have) - {f.name.lower() for f in declared.fields})
    if missing or extra:
        raise HeadwaterError(
            "HW_PIPELINE_SCHEMA_MISMATCH",
            f"{flow.location}: the query of {dataset.name!r} returns columns "
            f"{list(df.columns)}, but the declared schema has {declared.fieldNames()}"
            + (f" (missing: {missing})" if missing else "")
            + (f" (not declared: {extra})" if extra else "") + ".",
            "A declared schema fixes the table's columns; the query must produce them.",
            "Select the declared columns in the query, or change the declared schema.")
    columns = []
    for field in declared.fields:
        column = F.col(f"`{have[field.name.lower()]}`")
        if df.schema[have[field.name.lower()]].dataType != field.dataType:
            column = column.cast(field.dataType)
        columns.append(column.alias(field.name, metadata=field.metadata or {}))
    return df.select(*columns)
