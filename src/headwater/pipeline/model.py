"""What a pipeline declares, as frozen values: streaming tables, materialized views, views,
sinks and the flows that write them. Each element carries only the fields that apply to it, and the
user's file and line.

The registry (:mod:`headwater.pipeline.registry`) builds these from SDP's own elements
(``pyspark.pipelines.output`` / ``flow``) and from headwater's decorators; the graph resolves
them into DataFrames. Flow statuses belong to the runner, not here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Union

from headwater.pipeline.expectations import Expectation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from headwater.delta.cdc.snapshot import SnapshotSpec
    from headwater.delta.cdc.spec import CdcSpec

OutputMode = Literal["append", "complete", "update"]

# A snapshot function: the (snapshot, version) after the given version, or None at the end.
NextSnapshot = Callable[[Any], "tuple[DataFrame, Any] | None"]


class Kind(str, Enum):
    """What a dataset is; compares equal to its string value (``Kind.TABLE == "table"``)."""

    TABLE = "table"                          # a streaming table, fed by streaming flows
    MATERIALIZED_VIEW = "materialized_view"  # recomputed from batch reads, one overwrite commit
    VIEW = "view"                            # not stored: other definitions read its DataFrame
    SINK = "sink"                            # an external destination append flows write to

    def __str__(self) -> str:
        return self.value


TABLE = Kind.TABLE
MATERIALIZED_VIEW = Kind.MATERIALIZED_VIEW
VIEW = Kind.VIEW
SINK = Kind.SINK


@dataclass(frozen=True)
class Location:
    """The user's file and line a definition came from."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{os.path.relpath(self.file) if os.path.isabs(self.file) else self.file}:{self.line}"


@dataclass(frozen=True)
class SnapshotSource:
    """Where an AUTO CDC FROM SNAPSHOT flow's snapshots come from: ``table`` (a name) or
    ``query`` (SQL text), both read once per run and versioned by the run's time, or
    ``function`` (asked for each next snapshot, :mod:`headwater.pipeline.snapshot`)."""

    table: str | None = None
    function: NextSnapshot | None = None
    query: str | None = None

    @property
    def periodic(self) -> bool:
        """One snapshot per run, its version the run's time (a table or a query)."""
        return self.function is None


@dataclass(frozen=True)
class SnapshotFlow:
    """An AUTO CDC FROM SNAPSHOT flow's source and semantics (``Flow.snapshot``)."""

    source: SnapshotSource
    spec: SnapshotSpec


@dataclass(frozen=True)
class Flow:
    """One query writing into a dataset. A dataset's own function is its default flow
    (``name == target``); append flows add more into a streaming table.

    sql: the SELECT text for flows defined in SQL files (None for Python functions).
    once: a flow that runs one time (a backfill) instead of following its input.
    spark_conf: Spark SQL settings for this flow's query only (SDP's and DLT's ``spark_conf``):
        on the session while it is defined and while it starts (its micro-batches keep them),
        put back after (see :meth:`headwater.pipeline.graph.Graph.flow_conf`).
    cdc: an AUTO CDC flow's semantics (a ``headwater.delta.cdc.CdcSpec``): its function
        returns the change events, which are applied to the target instead of appended.
    snapshot: an AUTO CDC FROM SNAPSHOT flow's source and semantics
        (:class:`SnapshotFlow`): no stream; the runner applies each new snapshot of the
        source (:mod:`headwater.pipeline.snapshot`).
    cdc_source: the dataset an AUTO CDC flow reads as a stream (``source=`` / ``FROM
        STREAM(name)``): the graph reads it itself, with the lakehouse's session, instead of
        calling ``func``.
    expectations: the rules ``@expect*`` decorators put on the flow's function (folded into
        its dataset's when the registry finishes).
    """

    name: str
    target: str
    func: Callable[[], DataFrame]
    location: Location
    sql: str | None = None
    once: bool = False
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    cdc: CdcSpec | None = None
    snapshot: SnapshotFlow | None = None
    cdc_source: str | None = None
    expectations: tuple[Expectation, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.name == self.target


@dataclass(frozen=True)
class _Stored:
    """Fields every stored dataset (a Delta table) has."""

    name: str
    location: Location
    comment: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    partition_by: tuple[str, ...] = ()
    schema: StructType | None = None  # declared columns; None: the query's own schema
    cluster_by: tuple[str, ...] | None = None  # liquid clustering columns; None: none
    expectations: tuple[Expectation, ...] = ()
    # DLT's TEMPORARY (PRIVATE) table: stored in the lakehouse's own folder for the pipeline
    # (``_temporary/``), not published to its catalog: only the pipeline reads it by name.
    temporary: bool = False
    # Spark settings for every flow into the table (DLT's create_streaming_table(spark_conf=));
    # a flow's own spark_conf wins over them (see :func:`flow_settings`)
    spark_conf: Mapping[str, str] = field(default_factory=dict)

    @property
    def stored(self) -> bool:
        return True


@dataclass(frozen=True)
class StreamingTable(_Stored):
    """A table written incrementally by streaming flows.

    output_mode: "append", "complete" (rewritten each batch) or "update" (changed rows MERGEd
        by ``keys``, default the aggregate's group keys); None (not declared): each flow
        appends, except an aggregation Spark can only run in complete mode (no watermark),
        which rewrites the table, as DLT does (see :mod:`headwater.pipeline.output_mode`).
    keep_late_rows: rows a windowed aggregate drops as late go to ``<table>__late``.
    kind_from_query: Databricks' ``@dlt.table``: a materialized view when its query returns
        a batch DataFrame (:func:`as_materialized_view`).
    """

    output_mode: OutputMode | None = None
    keys: tuple[str, ...] | None = None
    keep_late_rows: bool = False
    kind_from_query: bool = False

    @property
    def kind(self) -> Kind:
        return Kind.TABLE


@dataclass(frozen=True)
class MaterializedView(_Stored):
    """A table recomputed from batch reads at each run, committed as one overwrite."""

    @property
    def kind(self) -> Kind:
        return Kind.MATERIALIZED_VIEW

    # Read by the runner for every stored dataset; fixed for a recomputed table.
    @property
    def output_mode(self) -> OutputMode:
        return "complete"

    @property
    def keys(self) -> None:
        return None

    @property
    def keep_late_rows(self) -> bool:
        return False


@dataclass(frozen=True)
class View:
    """A named DataFrame other definitions read (a temporary view); never stored.

    expectations: checked where the view is read, in each flow that reads it (see
        :func:`headwater.pipeline.expectations.guard`).
    """

    name: str
    location: Location
    comment: str | None = None
    expectations: tuple[Expectation, ...] = ()

    @property
    def kind(self) -> Kind:
        return Kind.VIEW

    @property
    def stored(self) -> bool:
        return False

    @property
    def partition_by(self) -> tuple[str, ...]:
        return ()

    @property
    def properties(self) -> Mapping[str, str]:
        return {}

    @property
    def schema(self) -> None:
        return None

    @property
    def cluster_by(self) -> None:
        return None

    @property
    def output_mode(self) -> OutputMode:
        return "append"

    @property
    def keys(self) -> None:
        return None

    @property
    def keep_late_rows(self) -> bool:
        return False


@dataclass(frozen=True)
class Sink(View):
    """An external destination (SDP's ``create_sink``): append flows write to it as a streaming
    write in ``format`` with ``options`` (e.g. ``{"path": ...}``). Not a lakehouse table: it is
    never created, conformed or read by other definitions; the pipeline keeps only its flows'
    checkpoints. Shares View's fixed answers (not stored, append); expectations are refused
    (the registry says so)."""

    format: str = ""
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> Kind:
        return Kind.SINK


Dataset = Union[StreamingTable, MaterializedView, View, Sink]

def as_materialized_view(table: StreamingTable) -> MaterializedView:
    """The same stored fields, recomputed from batch reads instead."""
    return MaterializedView(name=table.name, location=table.location, comment=table.comment,
                            properties=table.properties, partition_by=table.partition_by,
                            schema=table.schema, cluster_by=table.cluster_by,
                            expectations=table.expectations,
                            temporary=table.temporary, spark_conf=table.spark_conf)


def flow_settings(dataset: Dataset, flow: Flow) -> dict[str, str]:
    """The Spark settings ``flow`` runs with: its dataset's (a streaming table declared with
    spark_conf), then its own (``@dlt.table(spark_conf=...)``, ``@dp.append_flow(spark_conf=...)``)."""
    return {**dict(getattr(dataset, "spark_conf", None) or {}), **dict(flow.spark_conf)}


def describe(dataset: Dataset) -> str:
    """'streaming table', 'materialized view', 'view' or 'sink', for messages."""
    return {Kind.TABLE: "streaming table", Kind.MATERIALIZED_VIEW: "materialized view",
            Kind.VIEW: "view", Kind.SINK: "sink"}[dataset.kind]
