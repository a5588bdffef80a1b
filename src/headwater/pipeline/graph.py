"""The dataflow graph: every definition resolved to a DataFrame, with edges from what its
analyzed plan reads (see :mod:`headwater.pipeline.edges`).

Definitions resolve on demand. A definition that reads a dataset of the pipeline not resolved
yet (``headwater.read*`` asks directly; ``spark.table`` / SQL fail with TABLE_OR_VIEW_NOT_FOUND)
gets that dataset resolved first, then runs again. Once resolved, a stored dataset not yet in
the lakehouse is registered in Spark's catalog with its schema and no data, and a view becomes
a Spark temporary view. A dataset met again while it is still being resolved closes a cycle.
Every error names the user's file and line.

Building creates no table: :meth:`Graph.rebuild` and :meth:`Graph.store_for` create a
dataset's table (and its inputs') when a run first needs it. ``dry=True`` (``headwater
validate``) never writes the lakehouse.

Why one module: resolving on demand, detecting cycles, reading a dataset for a
definition and creating its table all act on one piece of state (what is resolved, what is
being resolved, which tables exist yet); the edges, queries and model live in their own
modules already.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import traceback
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from pyspark.sql import DataFrame

from headwater.conf.context import (
    DefinitionContext,
    adding_stream_read_options,
    defining,
    recording_path_reads,
    stream_read_options,
)
from headwater.conf.layout import INGEST, late_table, quarantine_table
from headwater.delta.cdc import CDC_TARGET_PROPERTIES
from headwater.delta.cdc import target_schema as cdc_target_schema
from headwater.delta.cdc.snapshot import snapshot_target_schema
from headwater.delta.log import normalize_uri
from headwater.delta.native_read import read_native
from headwater.errors import HeadwaterError, find_code
from headwater.lakehouse import Lakehouse, parse_name
from headwater.lakehouse.database import using_database
from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.databricks_only import (
    databricks_only_error,
    is_databricks_only,
    unresolved_function,
)
from headwater.pipeline.edges import (
    Read,
    TableNames,
    missing_relation,
    register_pending,
    unregister,
)
from headwater.pipeline.graph_queries import GraphQueries
from headwater.pipeline.live_schema import live_schema
from headwater.pipeline.model import (
    MATERIALIZED_VIEW,
    SINK,
    VIEW,
    Dataset,
    Flow,
    Location,
    StreamingTable,
    as_materialized_view,
    flow_settings,
)
from headwater.pipeline.output_mode import check_alone, flow_output_mode
from headwater.pipeline.registry import Registry
from headwater.pipeline.resolved_flow import ResolvedFlow
from headwater.pipeline.shape import check_kind, conform
from headwater.pipeline.snapshot import snapshot_preview
from headwater.spark.plan import Relation, substitute_reads, substitute_streams
from headwater.spark.scoped_conf import scoped_conf
from headwater.spark.session import activated

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = ["Graph", "Read", "ResolvedFlow", "current_graph"]


@dataclass
class _Evaluation:
    """One definition function running: what it read through headwater.read*."""

    dataset: str
    hints: list[Read] = field(default_factory=list)
    substitutes: dict[str, DataFrame] = field(default_factory=dict)


_current: ContextVar[Graph | None] = ContextVar("headwater_graph", default=None)


def current_graph() -> Graph | None:
    """The graph whose definitions run now (headwater.read* resolves names through it)."""
    return _current.get()


class Graph(GraphQueries):
    """Graph(registry, lakehouse, dry=False).build(): see the module docstring."""

    def __init__(self, registry: Registry, lakehouse: Lakehouse, dry: bool = False) -> None:
        self.registry = registry.finish()
        self.lakehouse = lakehouse
        self.dry = dry
        self.flows: dict[str, ResolvedFlow] = {}
        self.view_dfs: dict[str, DataFrame] = {}
        # views with expectations: their rows before the check (batch readers count on them)
        self.view_inputs: dict[str, DataFrame] = {}
        self.names = TableNames(self.registry.datasets, lakehouse)
        self._schemas: dict[str, StructType] = {}  # stored datasets: the schema to create
        self._snapshot_types: dict[str, DataType] = {}  # snapshot flows' version types
        # (target, flow) -> (latest, answer): a snapshot function's answer got while the graph
        # was built, handed to the run's first call with the same latest version
        self.snapshot_answers: dict[tuple[str, str], tuple[Any, tuple[DataFrame, Any] | None]] = {}
        self._pending: set[str] = set()
        self._done: set[str] = set()
        self._stack: list[tuple[str, Location | None]] = []
        self._evaluations: list[_Evaluation] = []
        self._scratch: Lakehouse | None = None
        self._lock = threading.RLock()  # foreachBatch calls of concurrent flows rebuild too
        # spark_conf of flows: does any flow have settings; the keys a flow_conf block of this
        # thread set, with the session's value before it (see flow_conf)
        self._with_settings = any(
            flow_settings(self.registry.datasets[f.target], f) for f in self.registry.flows
            if f.target in self.registry.datasets)
        self._overlaid: dict[str, str | None] = {}
        # The pipeline's database is the session's current one from build() to close().
        self._database: contextlib.ExitStack | None = None
        self._keep_temporary_private()

    def _keep_temporary_private(self) -> None:
        """TEMPORARY tables (and their side tables) live in the lakehouse's ``_temporary/``
        folder, out of its catalog; this pipeline's session knows them by name."""
        for name, dataset in self.registry.datasets.items():
            if not getattr(dataset, "temporary", False):
                continue
            for table in (name, quarantine_table(name), late_table(name)):
                self.lakehouse.keep_private(table)
                if self.lakehouse.exists(table):
                    self.lakehouse.register(table)

    # --- building ----------------------------------------------------------------------

    def build(self) -> Graph:
        if self._database is None:
            self._database = contextlib.ExitStack()
            self._database.enter_context(
                using_database(self.lakehouse.spark, self.registry.database))
        try:
            with self._lock, self._active():
                for name in self.registry.datasets:
                    self._resolve(name, None)
            self._check_cycles()
        except BaseException:
            # a graph that failed to build is never closed: give the session its database back
            self._database.close()
            self._database = None
            raise
        return self

    @contextlib.contextmanager
    def definitions_active(self) -> Iterator[None]:
        """Run definition code now (a snapshot function, a source read by name): the graph
        current for headwater.read*, its session active, its lock held."""
        with self._lock, self._active():
            yield

    @contextlib.contextmanager
    def flow_conf(self, dataset: Dataset, flow: Flow) -> Iterator[None]:
        """The flow's own Spark settings (``spark_conf``) on the session while the block runs
        (its definition, its query's start, a materialized view's recompute, a native flow's
        batch), put back after. In a pipeline where some flow has settings, every such block
        holds the graph's lock, so no flow's code runs on the session with another flow's
        settings (a native flow's micro-batch waits meanwhile); a block inside another (a
        definition reading a dataset not resolved yet) sees the session's own values of the
        outer flow's keys. A pipeline without settings sets nothing and takes no lock.
        A run's refresh threads recompute views inside this block too: in a pipeline with
        settings they hold the lock for the whole recompute (run/refresh.py)."""
        settings = flow_settings(dataset, flow)
        if not settings and not self._with_settings:
            yield
            return
        with self._lock:
            conf = self.lakehouse.spark.conf
            outer = dict(self._overlaid)  # only this thread's enclosing blocks (the lock)
            added = {k: conf.get(k, None) for k in settings if k not in outer}
            self._overlaid.update(added)
            try:
                with scoped_conf(self.lakehouse.spark,
                                 {**{k: v for k, v in outer.items() if k not in settings},
                                  **settings}, f"{flow.location}: flow {flow.name!r}"):
                    yield
            finally:
                for key in added:
                    self._overlaid.pop(key, None)

    @contextlib.contextmanager
    def _active(self) -> Iterator[None]:
        token = _current.set(self)
        try:
            # definitions may ask SparkSession.active(): the pipeline's session while they run
            # (the one active before, after); spark.table("LIVE.x") is the pipeline's x, as in DLT
            with activated(self.lakehouse.spark), live_schema():
                yield
        finally:
            _current.reset(token)

    def _resolve(self, name: str, read_at: Location | None) -> None:
        if name in self._done:
            return
        names = [n for n, _ in self._stack]
        if name in names:
            self._cycle(self._stack[names.index(name):] + [(name, read_at)], read_at)
        self._stack.append((name, read_at))
        try:
            resolved = [self._resolve_flow(self.registry.datasets[name], flow)
                        for flow in self.registry.flows_of(name)]
        finally:
            self._stack.pop()
        check_alone(resolved)
        self._done.add(name)

    def _resolve_flow(self, dataset: Dataset, flow: Flow) -> ResolvedFlow:
        if flow.once:
            raise HeadwaterError(
                "HW_PIPELINE_UNSUPPORTED", f"{flow.location}: flow {flow.name!r} is a once flow.",
                "Once flows (a one-time backfill) are part of the model, but the runner does "
                "not run them yet.", "Use a regular append flow for now.")
        for _ in range(len(self.registry.datasets) + 1):
            try:
                df, hints = self._evaluate(dataset, flow, {})
                break
            except _NeedsDataset as need:
                self._resolve(need.name, need.location)
                if need.create:  # read by path: only a Delta table answers that
                    self.ensure_table(need.name)
        else:  # pragma: no cover - each retry resolves one more dataset
            raise HeadwaterError("HW_PIPELINE_DEFINITION_FAILED",
                                 f"{flow.location}: {dataset.name!r} never resolved.")
        dataset = self.registry.datasets[dataset.name]  # its kind may follow the query
        # A streaming table's batch read of another dataset of the pipeline is a stream-static
        # join, as in Databricks' pipelines: the read is an edge of the graph, so a triggered
        # run starts the flow once that dataset is done, and each micro-batch reads the
        # dataset's current version (https://docs.databricks.com/transform/join.html). A
        # dataset that reads itself, or a loop of reads, is a cycle (_check_cycles).
        reads = self.names.reads(df, hints, flow.location)
        if dataset.expectations:
            expect_mod.validate_rules(dataset.expectations, dataset.name, df)
        if dataset.kind == SINK:
            pass  # an external destination: nothing to create, register or conform
        elif dataset.kind == VIEW:
            if dataset.expectations:  # checked by each flow that reads the view
                self.view_inputs[dataset.name] = df
                df = expect_mod.guard(df, dataset.expectations, dataset.name)
            self.view_dfs[dataset.name] = df
            if "." not in dataset.name:  # Spark's temporary views have one-part names
                df.createOrReplaceTempView(dataset.name)
        elif dataset.name not in self._schemas:
            if flow.snapshot is not None:
                schema = snapshot_target_schema(
                    flow.snapshot.spec, df, self._snapshot_types.pop(dataset.name),
                    f"{flow.location}: AUTO CDC FROM SNAPSHOT into {dataset.name!r}")
            elif flow.cdc is not None:
                schema = cdc_target_schema(flow.cdc, df,
                                           f"{flow.location}: AUTO CDC into {dataset.name!r}")
            else:
                schema = df.schema
            self._schemas[dataset.name] = dataset.schema or schema
            if not self.lakehouse.exists(dataset.name):
                register_pending(self.lakehouse.spark, dataset.name,
                                 self.lakehouse.path(dataset.name), self._schemas[dataset.name])
                self._pending.add(dataset.name)
        resolved = ResolvedFlow(flow, dataset, df, reads, flow_output_mode(dataset, flow, df))
        self.flows[resolved.key] = resolved
        return resolved

    def _evaluate(self, dataset: Dataset, flow: Flow,
                  substitutes: dict[str, DataFrame]) -> tuple[DataFrame, list[Read]]:
        """Run the definition function; its DataFrame shaped to the dataset, and its hints."""
        evaluation = _Evaluation(dataset.name, substitutes=substitutes)
        self._evaluations.append(evaluation)
        path_reads: list[str] = []
        try:
            with self.flow_conf(dataset, flow), \
                    defining(DefinitionContext(dataset.name, self._ingest_root(dataset.name))), \
                    recording_path_reads() as path_reads:
                # An AUTO CDC flow reads its source as headwater.read_stream would (the
                # lakehouse's session, not whichever session is active).
                source = flow.cdc_source
                if flow.snapshot is not None:  # the next snapshot makes the columns
                    df, self._snapshot_types[dataset.name] = snapshot_preview(
                        self, dataset.name, flow)
                else:
                    df = flow.func() if source is None else \
                        self.read(source, True, {}, flow.location)
        except (HeadwaterError, _NeedsDataset):
            raise
        except Exception as exc:  # the user's code failed while building its DataFrame
            raise self._definition_failed(dataset, flow, exc, path_reads) from exc
        finally:
            self._evaluations.pop()
        if flow.snapshot is not None:  # a snapshot of the source, not the table's rows
            return df, evaluation.hints
        if not substitutes:  # a substituted stream is a batch by design
            dataset = self._kind_from_query(dataset, flow, df)
            check_kind(dataset, flow, df)
        # AUTO CDC: the flow returns change events, not the table's rows.
        return (df if flow.cdc is not None else conform(dataset, flow, df)), evaluation.hints

    def _kind_from_query(self, dataset: Dataset, flow: Flow, df: DataFrame) -> Dataset:
        """A DLT-style table returning a batch DataFrame is a materialized view."""
        if isinstance(dataset, StreamingTable) and dataset.kind_from_query \
                and isinstance(df, DataFrame) and not df.isStreaming:
            dataset = as_materialized_view(dataset)
            self.registry.datasets[dataset.name] = dataset
        return dataset

    def _definition_failed(self, dataset: Dataset, flow: Flow, exc: Exception,
                           path_reads: list[str]) -> Exception:
        where = _user_line(exc, flow.location)
        function = unresolved_function(exc)
        if function is not None and is_databricks_only(function):
            return databricks_only_error(function, dataset.name, where)
        missing = missing_relation(exc)
        if missing is not None:
            missing = self.registry.qualify(missing)
        if missing is not None and missing in self.registry.datasets \
                and missing not in self._done:
            return _NeedsDataset(missing, where)
        if missing is not None and missing not in self.registry.datasets:
            return self._unknown(missing, where, "reads")
        by_path = self._uncreated_path_read(exc, path_reads)
        if by_path is not None:
            if self.dry:
                return HeadwaterError(
                    "HW_PIPELINE_UNSUPPORTED", f"{where}: {dataset.name!r} reads dataset "
                    f"{by_path!r} by its path, and that table does not exist yet.",
                    "`headwater validate` writes nothing, and a read by path needs the Delta "
                    "table itself (a read by name works before the table exists).",
                    f"Read it by name: spark.table({by_path!r}) / spark.readStream.table("
                    f"{by_path!r}), or run the pipeline once before validating.")
            return _NeedsDataset(by_path, where, create=True)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return HeadwaterError(
            "HW_PIPELINE_DEFINITION_FAILED",
            f"{where}: defining {dataset.name!r} failed: {type(exc).__name__}: {first}",
            "The definition function raised while building its DataFrame.",
            "Fix the definition; `headwater validate` checks all definitions without "
            "running them.")

    def _uncreated_path_read(self, exc: BaseException, path_reads: list[str]) -> str | None:
        """The stored dataset a failed ``format("delta").load(path)`` read, if its table
        does not exist yet: found among the paths the definition read (recorded by the
        readers), never in the error's text."""
        found = find_code(exc)
        if found is None or found[0] != "HW_DELTA_TABLE_NOT_FOUND":
            return None
        read = {normalize_uri(path) for path in path_reads}
        for name, dataset in self.registry.datasets.items():
            if dataset.stored and not self.lakehouse.exists(name) \
                    and normalize_uri(self.lakehouse.path(name)) in read:
                return name
        return None

    def _ingest_root(self, name: str) -> str:
        store = self.lakehouse
        if self.dry and not self.lakehouse.exists(name):
            store = self._scratch_store()
        return str(Path(store.checkpoint(name)) / INGEST)

    def _scratch_store(self) -> Lakehouse:
        if self._scratch is None:
            root = Path(tempfile.mkdtemp(prefix="headwater-validate-"))
            self._scratch = Lakehouse(root, self.lakehouse.spark, attach=False)
        return self._scratch

    # --- tables, created when first needed -------------------------------------------------

    def ensure_table(self, name: str) -> None:
        """Create the Delta table of stored dataset ``name`` if it does not exist (never dry)."""
        dataset = self.registry.datasets.get(name)
        if self.dry or dataset is None or not dataset.stored or name not in self._schemas:
            return
        if not self.lakehouse.exists(name):
            properties = dict(dataset.properties)
            if any(f.cdc is not None or f.snapshot is not None
                   for f in self.registry.flows_of(name)):
                # AUTO CDC targets keep a change data feed unless the table says otherwise
                properties = {**CDC_TARGET_PROPERTIES, **properties}
            self.lakehouse.create_table(name, self._schemas[name], dataset.partition_by,
                                        dataset.comment, properties,
                                        declared=dataset.schema is not None,
                                        cluster_by=dataset.cluster_by)
        self._pending.discard(name)

    def store_for(self, name: str) -> Lakehouse:
        """Where a dataset's table lives (created now if a run needs it); when dry, a
        scratch folder for tables that do not exist."""
        if not self.dry:
            self.ensure_table(name)
            return self.lakehouse
        return self.lakehouse if self.lakehouse.exists(name) else self._scratch_store()

    def close(self) -> None:
        """Remove the scratch folder and the catalog entries of tables never created."""
        for name in list(self._pending):
            if not self.lakehouse.exists(name):
                unregister(self.lakehouse.spark, name)
        self._pending.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch.root, ignore_errors=True)
        if self._database is not None:
            self._database.close()
            self._database = None
        for module in self.registry.pickled_by_value:  # the host process as it was
            with contextlib.suppress(ValueError):
                cloudpickle.unregister_pickle_by_value(module)
        self.registry.pickled_by_value.clear()

    def rebuild(self, resolved: ResolvedFlow,
                substitutes: dict[str, DataFrame] | None = None,
                stream_options: dict[str, str] | None = None) -> DataFrame:
        """A fresh DataFrame from the flow's definition (materialized views re-plan each run);
        the flow's table and its inputs' tables are created first when missing.

        substitutes: batch DataFrames that stand for the streams of these datasets (one
        micro-batch's rows, for flows run natively), however the definition reads them.
        stream_options: read options added to the definition's stream reads of lakehouse
        tables (``headwater.read_stream``, ``spark.readStream.table``) and of local folders'
        files (``read_files``, ``format("cloudFiles")``): a continuous run's commit wait."""
        with self._lock, self._active():
            for name in [resolved.dataset.name] + [r.name for r in resolved.reads if r.internal]:
                self.ensure_table(name)
            with adding_stream_read_options(stream_options or {}):
                df, _ = self._evaluate(resolved.dataset, resolved.flow, dict(substitutes or {}))
        for name, batch in (substitutes or {}).items():
            if df.isStreaming:
                df = substitute_streams(df, self.names.matcher(name), batch)
        if resolved.dataset.kind == MATERIALIZED_VIEW and not self.dry:
            df = substitute_reads(df, self._native_snapshot)
        return df

    def _native_snapshot(self, relation: Relation) -> DataFrame | None:
        """A materialized view's batch read of a lakehouse table (``spark.table``, SQL,
        ``format("delta").load``), read by Spark's parquet reader as ``headwater.read`` is
        (see :meth:`_read_table`): column pruning and no rows through Python. None for reads
        with options (time travel, ...) and tables only the Python reader can read."""
        if relation.streaming or relation.options:
            return None
        name = self.names.name_of(relation)
        lake = self.lakehouse
        if name is None or not lake.exists(name):
            return None
        try:
            return read_native(lake.spark, lake.path(name))
        except Exception:  # noqa: BLE001 - not readable natively: the Python reader reads it
            return None

    def reading_dataset(self) -> str | None:
        """The dataset whose definition is running now, if any."""
        return self._evaluations[-1].dataset if self._evaluations else None

    # --- reads from definitions (headwater.read / read_stream) ---------------------------

    def read(self, name: str, streaming: bool, options: dict[str, Any],
             location: Location) -> DataFrame:
        qualified = self.registry.qualify(name)
        internal = qualified in self.registry.datasets
        evaluation = self._evaluations[-1] if self._evaluations else None
        if evaluation is not None:
            evaluation.hints.append(Read(qualified, streaming, location, internal,
                                         tuple(sorted((k, str(v)) for k, v in options.items()))))
            if streaming and qualified in evaluation.substitutes:
                return evaluation.substitutes[qualified]
        if internal:
            dataset = self.registry.datasets[qualified]
            self._resolve(qualified, location)
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
        elif not self.lakehouse.exists(qualified):
            raise self._unknown(qualified, location, "read_stream" if streaming else "read")
        return self._read_table(qualified, streaming, options)

    def _read_table(self, name: str, streaming: bool, options: dict[str, Any]) -> DataFrame:
        lake = self.lakehouse
        if streaming:
            options = {**options, **stream_read_options()}
        if not lake.exists(name):  # a dataset not created yet: its pending catalog source
            spark = lake.spark
            reader = spark.readStream if streaming else spark.read
            return reader.format(parse_name(name).source_name).options(
                **{k: str(v) for k, v in options.items()}).load()
        if streaming:
            return lake.read_stream(name, **options)
        reader = self.reading_dataset()
        if not options and not self.dry and reader is not None and \
                self.registry.datasets[reader].kind == MATERIALIZED_VIEW:
            # A view recomputed now: the snapshot as of now, read by Spark's parquet reader.
            native = read_native(lake.spark, lake.path(name), pinned=True)
            if native is not None:
                return native
        return lake.read(name, **options)

    def _unknown(self, name: str, location: Location, how: str) -> HeadwaterError:
        known = sorted(set(self.registry.datasets) | set(self.lakehouse.tables()))
        return HeadwaterError(
            "HW_PIPELINE_UNKNOWN_TABLE",
            f"{location}: {how}({name!r}) names a table that is neither defined in this "
            "pipeline nor in the lakehouse.", f"Known tables: {', '.join(known) or 'none'}.",
            "Fix the name, or define the table in one of the pipeline's files."
            + (f" Unqualified names are in the pipeline's database {self.registry.database!r}"
               "; a table at the lakehouse's top level is default.<table>."
               if self.registry.database else ""))

class _NeedsDataset(Exception):
    """A definition read a dataset of the pipeline that is not resolved yet."""

    def __init__(self, name: str, location: Location, create: bool = False) -> None:
        super().__init__(name)
        self.name = name
        self.location = location
        self.create = create


def _user_line(exc: BaseException, fallback: Location) -> Location:
    """The line of the definition's file where ``exc`` was raised, if it passed through it."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename == fallback.file and f.lineno]
    return Location(fallback.file, frames[-1].lineno) if frames else fallback
