"""The dataflow graph, built from what the definitions read.

Definitions are resolved on demand: when a definition reads another dataset of the pipeline,
that dataset is resolved first (its table created from its DataFrame's schema, so the reader
gets a real DataFrame), and the read becomes an edge. A dataset met again while it is still
being resolved closes a cycle. Every error names the user's file and line.

``dry=True`` (``headwater validate``) never touches the lakehouse: tables that do not exist
yet are created empty in a scratch folder so downstream definitions still resolve.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError
from headwater.lakehouse import Lakehouse, parse_name
from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.definitions import (
    MATERIALIZED_VIEW, TABLE, VIEW, Dataset, Flow, Location, Registry, caller_location,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Read:
    name: str
    streaming: bool
    location: Location
    internal: bool  # a dataset of this pipeline (else an existing lakehouse table)
    options: tuple[tuple[str, str], ...] = ()


@dataclass
class ResolvedFlow:
    flow: Flow
    dataset: Dataset
    df: "DataFrame"
    reads: list[Read] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.dataset.name if self.flow.name == self.dataset.name else \
            f"{self.dataset.name}/{self.flow.name}"


_current: "Graph | None" = None


def current_graph() -> "Graph | None":
    return _current


class Graph:
    def __init__(self, registry: Registry, lakehouse: Lakehouse, dry: bool = False) -> None:
        self.registry = registry
        self.lakehouse = lakehouse
        self.dry = dry
        self.flows: dict[str, ResolvedFlow] = {}
        self.view_dfs: dict[str, "DataFrame"] = {}
        self._done: set[str] = set()
        self._stack: list[tuple[str, Location | None]] = []
        self._reads: list[list[Read]] = []
        self._scratch: Lakehouse | None = None
        self._substitutes: dict[str, "DataFrame"] = {}
        self._rebuild_lock = threading.RLock()

    # --- building ----------------------------------------------------------------------

    def build(self) -> "Graph":
        global _current
        previous, _current = _current, self
        try:
            for name in self.registry.datasets:
                self.resolve(name, None)
        finally:
            _current = previous
            if self._scratch is not None:
                self.lakehouse.attach()  # the scratch tables leave the catalog again
        return self

    def resolve(self, name: str, read_at: Location | None) -> None:
        if name in self._done:
            return
        names = [n for n, _ in self._stack]
        if name in names:
            cycle = self._stack[names.index(name):] + [(name, read_at)]
            steps = " -> ".join(f"{n} (read at {loc})" if loc else n for n, loc in cycle)
            raise HeadwaterError(
                "HW_PIPELINE_CYCLE", f"{read_at}: the pipeline's reads form a cycle: {steps}.",
                "Each dataset is computed from its inputs, so no dataset can depend on itself.",
                "Remove one of these reads, or split the logic into a separate table.")
        dataset = self.registry.datasets[name]
        self._stack.append((name, read_at))
        try:
            for flow in dataset.flows:
                self._resolve_flow(dataset, flow)
        finally:
            self._stack.pop()
        self._done.add(name)

    def _resolve_flow(self, dataset: Dataset, flow: Flow) -> None:
        self._reads.append([])
        try:
            df = flow.func()
        except HeadwaterError:
            raise
        except Exception as exc:  # the user's code failed while building its DataFrame
            raise HeadwaterError(
                "HW_PIPELINE_DEFINITION_FAILED",
                f"{flow.location}: defining {dataset.name!r} failed: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "The definition function raised while building its DataFrame.",
                "Fix the definition; `headwater validate` checks all definitions without "
                "running them.") from exc
        finally:
            reads = self._reads.pop()
        _check_kind(dataset, flow, df)
        rules = _rules_of(dataset, flow)
        if rules:
            expect_mod.validate_rules(rules, dataset.name, df)
            dataset.expectations = rules
        if dataset.kind == VIEW:
            self.view_dfs[dataset.name] = df
        else:
            self._ensure_table(dataset, df)
        resolved = ResolvedFlow(flow, dataset, df, reads)
        self.flows[resolved.key] = resolved

    def _ensure_table(self, dataset: Dataset, df: "DataFrame") -> None:
        lake = self.store_for(dataset.name)
        lake.create_table(dataset.name, df.schema, dataset.partition_by, dataset.comment,
                          dataset.properties)

    def store_for(self, name: str) -> Lakehouse:
        """Where a dataset's table lives: the lakehouse, or the scratch folder when dry."""
        if not self.dry or self.lakehouse.exists(name):
            return self.lakehouse
        if self._scratch is None:
            root = Path(tempfile.mkdtemp(prefix="headwater-validate-"))
            self._scratch = Lakehouse(root, self.lakehouse.spark, attach=False)
        return self._scratch

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch.root, ignore_errors=True)

    def rebuild(self, resolved: ResolvedFlow,
                substitutes: dict[str, "DataFrame"] | None = None) -> "DataFrame":
        """A fresh DataFrame from the flow's definition (materialized views re-plan each run).

        substitutes: DataFrames returned for ``read_stream`` of these names instead (one
        micro-batch's rows, for flows run natively)."""
        global _current
        self._rebuild_lock.acquire()  # foreachBatch calls of concurrent flows rebuild too
        previous, _current = _current, self
        self._substitutes = dict(substitutes or {})
        self._reads.append([])
        self._stack.append((resolved.dataset.name, None))  # who is reading, for read()
        try:
            return resolved.flow.func()
        finally:
            self._substitutes = {}
            self._stack.pop()
            self._reads.pop()
            _current = previous
            self._rebuild_lock.release()

    def reading_dataset(self) -> str | None:
        """The dataset whose definition is running now, if any."""
        return self._stack[-1][0] if self._stack else None

    # --- reads from definitions ----------------------------------------------------------

    def read(self, name: str, streaming: bool, options: dict[str, Any],
             location: Location) -> "DataFrame":
        qualified = parse_name(name).qualified
        internal = qualified in self.registry.datasets
        if self._reads:
            self._reads[-1].append(Read(qualified, streaming, location, internal,
                                        tuple(sorted((k, str(v)) for k, v in options.items()))))
        if streaming and qualified in self._substitutes:
            return self._substitutes[qualified]
        if internal:
            dataset = self.registry.datasets[qualified]
            if not streaming and dataset.kind == TABLE and self._stack:
                self._check_batch_read(self._stack[-1][0], qualified, location)
            self.resolve(qualified, location)
            if dataset.kind == VIEW:
                df = self.view_dfs[qualified]
                if streaming and not df.isStreaming:
                    raise HeadwaterError(
                        "HW_PIPELINE_READ_MISMATCH",
                        f"{location}: read_stream({name!r}) reads a view over batch data.",
                        f"View {qualified!r} (defined at {dataset.location}) returns a batch "
                        "DataFrame, which has no stream to follow.",
                        f"Use headwater.read({name!r}), or make the view read a stream.")
                return df
            lake = self.store_for(qualified)
        elif self.lakehouse.exists(qualified):
            lake = self.lakehouse
        else:
            known = sorted(set(self.registry.datasets) | set(self.lakehouse.tables()))
            raise HeadwaterError(
                "HW_PIPELINE_UNKNOWN_TABLE",
                f"{location}: {'read_stream' if streaming else 'read'}({name!r}) names a table "
                "that is neither defined in this pipeline nor in the lakehouse.",
                f"Known tables: {', '.join(known) or 'none'}.",
                "Fix the name, or define the table in one of the pipeline's files.")
        if streaming:
            return lake.read_stream(qualified, **options)
        if not options and not self.dry and self._stack and \
                self.registry.datasets[self._stack[-1][0]].kind == MATERIALIZED_VIEW:
            # A view recomputed now: the snapshot as of now, read by Spark's parquet reader.
            from headwater.delta.native import read_native

            native = read_native(lake.spark, lake.path(qualified))
            if native is not None:
                return native
        return lake.read(qualified, **options)

    # --- questions the runner asks -------------------------------------------------------

    def upstream(self, name: str) -> set[str]:
        """Pipeline datasets ``name`` reads, directly or through views."""
        result: set[str] = set()
        for resolved in self.flows_of(name):
            for read in resolved.reads:
                if not read.internal:
                    continue
                if self.registry.datasets[read.name].kind == VIEW:
                    result |= {read.name} | self.upstream(read.name)
                else:
                    result.add(read.name)
        return result

    def downstream(self, name: str) -> set[str]:
        """Stored datasets that read ``name``, transitively."""
        found: set[str] = set()
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for other in self.registry.datasets:
                if other not in found and current in self.upstream(other):
                    found.add(other)
                    frontier.append(other)
        return found

    def datasets_named(self, names: list[str], option: str) -> list[str]:
        """Qualified names of these pipeline datasets; an error naming ``option`` otherwise."""
        chosen = [parse_name(n).qualified for n in names]
        unknown = [n for n in chosen if n not in self.registry.datasets]
        if unknown:
            raise HeadwaterError(
                "HW_PIPELINE_UNKNOWN_TABLE", f"{option} names {unknown}, not datasets of this "
                "pipeline.", f"{option} chooses among the pipeline's own tables.",
                f"Choose among: {', '.join(self.stored())}.")
        return chosen

    def flows_of(self, name: str) -> list[ResolvedFlow]:
        return [f for f in self.flows.values() if f.dataset.name == name]

    def stored(self) -> list[str]:
        """Stored datasets in dependency order (inputs first)."""
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
        return [n for n in order if self.registry.datasets[n].stored]

    def _check_batch_read(self, reader: str, name: str, location: Location) -> None:
        if self.registry.datasets[reader].kind != TABLE:
            return  # materialized views read streaming tables in batch by design
        raise HeadwaterError(
            "HW_PIPELINE_BATCH_READ_OF_STREAM",
            f"{location}: streaming table {reader!r} makes a batch read of {name!r}, which a "
            "stream of this pipeline writes in the same run.",
            "The batch read would see whatever that stream happened to have committed when "
            "each micro-batch started: results would depend on timing.",
            f"Use headwater.read_stream({name!r}) (a stream-stream join needs watermarks), or "
            "read it from a materialized view, which runs after its inputs.")


def _check_kind(dataset: Dataset, flow: Flow, df: Any) -> None:
    from pyspark.sql import DataFrame

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
    if dataset.kind == MATERIALIZED_VIEW and df.isStreaming:
        raise HeadwaterError(
            "HW_PIPELINE_STREAM_IN_MATERIALIZED_VIEW",
            f"{flow.location}: materialized view {dataset.name!r} returns a streaming DataFrame.",
            "A materialized view is recomputed from batch reads each run.",
            "Read inputs with headwater.read(...), or declare it @headwater.table.")


def _rules_of(dataset: Dataset, flow: Flow) -> list:
    """Expectations, whichever side of the dataset decorator they were written on."""
    rules = list(dataset.expectations)
    for rule in getattr(flow.func, "_hw_expectations", []):
        if rule not in rules:
            rules.append(rule)
    return rules


# --- the functions definitions call --------------------------------------------------------


def read_stream(name: str, **options: Any) -> "DataFrame":
    """A stream over a pipeline dataset or lakehouse table (inside or outside a pipeline)."""
    return _read(name, True, options)


def read(name: str, **options: Any) -> "DataFrame":
    """A batch read of a pipeline dataset or lakehouse table."""
    return _read(name, False, options)


def _read(name: str, streaming: bool, options: dict[str, Any]) -> "DataFrame":
    graph = current_graph()
    if graph is not None:
        return graph.read(name, streaming, options, caller_location(3))
    from headwater.lakehouse import active_lakehouse

    lake = active_lakehouse()
    if lake is None:
        raise HeadwaterError(
            "HW_LAKEHOUSE_NOT_ATTACHED", f"headwater.{'read_stream' if streaming else 'read'}({name!r}) "
            "was called with no lakehouse.", "Names are looked up in a lakehouse.",
            "Start the session with headwater.spark_session(lakehouse='path'), or create "
            "headwater.Lakehouse('path').")
    return lake.read_stream(name, **options) if streaming else lake.read(name, **options)
