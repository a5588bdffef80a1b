"""Materialized views: recomputed whole from batch reads of their inputs, in one overwrite.

A view's quarantine (rows its drop expectations reject) is recomputed with it. Each is replaced
by ``Lakehouse.replace``: the query runs first, then one Delta commit swaps data and schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.conf.layout import QUARANTINE_SUFFIX
from headwater.pipeline import expectations as expect_mod

if TYPE_CHECKING:
    from headwater.pipeline.graph import Graph, ResolvedFlow


def recompute(graph: Graph, rf: ResolvedFlow) -> int:
    """Recompute the view ``rf`` writes (and its quarantine); returns the rows written."""
    dataset = rf.dataset
    name = dataset.name
    df = graph.rebuild(rf)
    bad = None
    if dataset.expectations:
        df, bad = expect_mod.split(df, dataset.expectations, name, 0)
    # Computed first, then one commit each: a failing query leaves the view as it was, and
    # the view keeps its history (time travel) across schema changes.
    lake = graph.lakehouse
    rows = lake.replace(name, df, dataset.partition_by, dataset.comment, dict(dataset.properties))
    if bad is not None and any(r.action == "drop" for r in dataset.expectations):
        lake.replace(name + QUARANTINE_SUFFIX, bad)
    return rows
