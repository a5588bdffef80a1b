"""``headwater validate``: the graph, then every streaming query, before anything runs.

The graph is built dry (nothing is written; tables that do not exist yet are only registered
in Spark's catalog with their schema),
so definition errors, unknown tables, cycles and batch reads of streams surface with the
user's file and line. Each streaming table's query is then checked by Spark's own
UnsupportedOperationChecker for the output mode it writes in (see :mod:`headwater.pipeline.checks`;
an aggregation without a watermark writes in complete mode: :mod:`headwater.pipeline.output_mode`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.errors import HeadwaterError
from headwater.lakehouse import Lakehouse
from headwater.pipeline.checks import check_stream
from headwater.pipeline.graph import Graph
from headwater.pipeline.late import LateRows
from headwater.pipeline.model import TABLE
from headwater.pipeline.registry import Registry


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[HeadwaterError] = field(default_factory=list)
    summary: str = ""


def validate_project(registry: Registry, lakehouse: Lakehouse) -> Report:
    report = Report()
    graph = Graph(registry, lakehouse, dry=True)
    try:
        graph.build()
        for name in graph.stored() + [n for n, d in registry.datasets.items() if not d.stored]:
            dataset = registry.datasets[name]
            inputs = sorted(graph.upstream(name))
            report.lines.append(
                f"{dataset.kind:<17} {name:<24} <- {', '.join(inputs) or '(sources)'}"
                f"   [{dataset.location}]")
            if dataset.kind != TABLE:
                continue
            for flow in graph.flows_of(name):
                result = check_stream(flow.df, flow.output_mode, flow.key)
                report.errors.extend(result.errors)
                report.warnings.extend(result.warnings)
                if dataset.keep_late_rows:
                    try:
                        LateRows.prepare(flow.df, name, flow.output_mode)
                    except HeadwaterError as exc:
                        report.errors.append(exc)
    finally:
        graph.close()
    tables = sum(1 for d in registry.datasets.values() if d.stored)
    report.summary = (f"{len(registry.datasets)} datasets ({tables} stored), "
                      f"{len(graph.flows)} flows, {len(report.warnings)} warnings")
    return report
