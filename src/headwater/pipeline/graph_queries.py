"""The questions the runner asks a built graph: what a dataset reads and what reads it,
the order of stored datasets, and cycles among existing tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError
from headwater.pipeline.model import SINK, VIEW, Location

if TYPE_CHECKING:
    from headwater.pipeline.resolved_flow import ResolvedFlow


class GraphQueries:
    """Mixed into :class:`headwater.pipeline.graph.Graph` (its ``registry`` and ``flows``)."""

    registry: Any
    flows: dict[str, ResolvedFlow]

    def upstream(self, name: str, streams_only: bool = False) -> set[str]:
        """Pipeline datasets ``name`` reads, directly or through views; streams_only: only
        those it reads as a stream (a streamed view: everything the view reads)."""
        result: set[str] = set()
        for resolved in self.flows_of(name):
            for read in resolved.reads:
                if not read.internal or read.name == name or (streams_only and not read.streaming):
                    continue
                if self.registry.datasets[read.name].kind == VIEW:
                    result |= {read.name} | self.upstream(read.name)
                else:
                    result.add(read.name)
        return result

    def downstream(self, name: str, streams_only: bool = False) -> set[str]:
        """Stored datasets that read ``name``, transitively. streams_only: those that read it
        as a stream, the ones whose checkpoints hold offsets into it (a full refresh of
        ``name`` must reset them); a batch read (a stream-static join, a materialized view)
        keeps none."""
        found: set[str] = set()
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for other in self.registry.datasets:
                if other not in found and current in self.upstream(other, streams_only):
                    found.add(other)
                    frontier.append(other)
        return found

    def datasets_named(self, names: list[str], option: str) -> list[str]:
        """Qualified names of these pipeline datasets; an error naming ``option`` otherwise."""
        chosen = [self.registry.qualify(n) for n in names]
        unknown = [n for n in chosen if n not in self.registry.datasets]
        if unknown:
            raise HeadwaterError(
                "HW_PIPELINE_UNKNOWN_TABLE", f"{option} names {unknown}, not datasets of this "
                "pipeline.", f"{option} chooses among the pipeline's own tables.",
                f"Choose among: {', '.join(self.written())}.")
        return chosen

    def flows_of(self, name: str) -> list[ResolvedFlow]:
        return [f for f in self.flows.values() if f.dataset.name == name]

    def stored(self) -> list[str]:
        """Stored datasets in dependency order (inputs first)."""
        return [n for n in self._ordered() if self.registry.datasets[n].stored]

    def written(self) -> list[str]:
        """What a run writes, in dependency order: stored datasets and sinks."""
        return [n for n in self._ordered()
                if self.registry.datasets[n].stored or self.registry.datasets[n].kind == SINK]

    def _ordered(self) -> list[str]:
        order: list[str] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            for up in sorted(self.upstream(name)):
                visit(up)
            order.append(name)

        for name in self.registry.datasets:
            visit(name)
        return order


    def _check_cycles(self) -> None:
        """Tables that already exist resolve without waiting for each other: check the edges."""
        state: dict[str, int] = {}
        path: list[tuple[str, Location | None]] = []

        def visit(name: str, at: Location | None) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                names = [n for n, _ in path]
                self._cycle(path[names.index(name):] + [(name, at)], at)
            state[name] = 1
            path.append((name, at))
            for rf in self.flows_of(name):
                for read in rf.reads:
                    if read.internal:
                        visit(read.name, read.location)
            path.pop()
            state[name] = 2

        for name in self.registry.datasets:
            visit(name, None)

    def _cycle(self, cycle: list[tuple[str, Location | None]], at: Location | None) -> None:
        steps = " -> ".join(f"{n} (read at {loc})" if loc else n for n, loc in cycle)
        raise HeadwaterError(
            "HW_PIPELINE_CYCLE", f"{at}: the pipeline's reads form a cycle: {steps}.",
            "Each dataset is computed from its inputs, so no dataset can depend on itself.",
            "Remove one of these reads, or split the logic into a separate table.")
