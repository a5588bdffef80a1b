"""Materialized views: recomputed whole from batch reads of their inputs, in one overwrite.

A view's quarantine (rows its drop expectations reject) is recomputed with it. Nothing reads
a view incrementally, so a changed schema simply replaces the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.run.flow_writer import QUARANTINE_SUFFIX, write_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse import Lakehouse
    from headwater.pipeline.definitions import Dataset
    from headwater.pipeline.graph import Graph, ResolvedFlow


def recompute(graph: "Graph", rf: "ResolvedFlow") -> int:
    """Recompute the view ``rf`` writes (and its quarantine); returns the rows written."""
    dataset = rf.dataset
    name = dataset.name
    df = graph.rebuild(rf)
    bad = None
    if dataset.expectations:
        df, bad = expect_mod.split(df, dataset.expectations, name, 0)
    rows = replace_table(graph.lakehouse, dataset, df)
    if bad is not None and any(r.action == "drop" for r in dataset.expectations):
        graph.lakehouse.write(bad, name + QUARANTINE_SUFFIX, mode="overwrite")
    return rows


def replace_table(lakehouse: "Lakehouse", dataset: "Dataset", df: "DataFrame") -> int:
    """Replace the table's rows (and schema) with ``df``'s; returns the rows written.

    Today: one overwrite commit, but a changed schema drops and recreates the table first
    (the view's quarantine too). To become ``Lakehouse.replace`` (compute first, one commit
    replacing data and schema, history kept) when the lakehouse room provides it.
    """
    from headwater.delta.schema import as_nullable

    name = dataset.name
    current = lakehouse.read(name).schema
    if as_nullable(current).simpleString() != as_nullable(df.schema).simpleString():
        lakehouse.drop(name)
        lakehouse.drop(name + QUARANTINE_SUFFIX)
        lakehouse.create_table(name, df.schema, dataset.partition_by,
                               dataset.comment, dataset.properties)
    return write_table(df, lakehouse.path(name), "overwrite")
