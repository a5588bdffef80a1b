"""Materialized views: recomputed whole from batch reads of their inputs, in one overwrite.

A view's quarantine (rows its drop expectations reject) is recomputed with it. Each is replaced
by ``Lakehouse.replace``: the query runs first, then one Delta commit swaps data and schema.

Expectation counts: a refresh has no micro-batch progress to carry observed metrics, so the
counts of the view's own rules, and of the rules of the temporary views it reads (checked in
its query, as in every flow reading them), are computed by one aggregate each over the rows
before the check: one more pass over the inputs when there are rules, none otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.conf.layout import QUARANTINE_SUFFIX, expectations_metrics
from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.model import VIEW

if TYPE_CHECKING:
    from headwater.pipeline.graph import Graph, ResolvedFlow


def recompute(graph: Graph, rf: ResolvedFlow) -> tuple[int, dict[str, dict[str, int]]]:
    """Recompute the view ``rf`` writes (and its quarantine); returns the rows written and
    the expectation counts by metrics name (``expectations:<dataset>``, as progress has
    them)."""
    dataset = rf.dataset
    name = dataset.name
    df = graph.rebuild(rf)
    counts: dict[str, dict[str, int]] = {}
    for view in sorted(graph.upstream(name)):
        checked = graph.registry.datasets[view]
        if checked.kind == VIEW and checked.expectations and view in graph.view_inputs:
            counts[expectations_metrics(view)] = expect_mod.count_rules(
                graph.view_inputs[view], checked.expectations)
    bad = None
    if dataset.expectations:
        counts[expectations_metrics(name)] = expect_mod.count_rules(df, dataset.expectations)
        df, bad = expect_mod.split(df, dataset.expectations, name, 0)
    # Computed first, then one commit each: a failing query leaves the view as it was, and
    # the view keeps its history (time travel) across schema changes.
    lake = graph.lakehouse
    rows = lake.replace(name, df, dataset.partition_by, dataset.comment, dict(dataset.properties),
                        declared=dataset.schema or False,  # declared NOT NULL: kept, checked
                        cluster_by=dataset.cluster_by)
    if bad is not None and any(r.action == "drop" for r in dataset.expectations):
        lake.replace(name + QUARANTINE_SUFFIX, bad)
    return rows, counts
