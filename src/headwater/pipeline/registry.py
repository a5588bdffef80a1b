"""The registry a pipeline's definition files fill: headwater's implementation of Spark
Declarative Pipelines' ``GraphElementRegistry``.

While the files load, :func:`collecting` makes a registry the active one twice over: in
headwater's own ContextVar, and through SDP's ``graph_element_registration_context``. So
``from pyspark import pipelines as dp; @dp.table`` and ``@headwater.table`` land in the same
registry, through the same :meth:`Registry.add_dataset` / :meth:`Registry.add_flow`. Nothing is
module-global: the previous registry (usually none) comes back when the context ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pyspark.pipelines import output as sdp
from pyspark.pipelines.graph_element_registry import (
    GraphElementRegistry,
    graph_element_registration_context,
)
from pyspark.sql.classic.column import Column as ClassicColumn

from headwater.errors import HeadwaterError
from headwater.lakehouse.names import in_schema, parse_name
from headwater.pipeline import model
from headwater.pipeline.cdc import cdc_flow
from headwater.pipeline.expectations import Expectation
from headwater.pipeline.fields import sink_fields, stored_fields
from headwater.pipeline.model import Kind, Location
from headwater.pipeline.sql_files import register_sql_text

if TYPE_CHECKING:
    from pyspark.pipelines.flow import AutoCdcFlow
    from pyspark.pipelines.flow import Flow as SdpFlow
    from pyspark.pipelines.output import Output
    from pyspark.pipelines.source_code_location import SourceCodeLocation


def classic_expression(value: Any, option: str) -> Any:
    """pyspark's ``dp.create_auto_cdc_flow`` turns SQL text into Spark Connect columns (SDP's
    session is a Connect one); headwater's session is classic, where a Connect column cannot
    be used: the SQL text (or column name) it was made from. Other values stay as they are."""
    if value is None or isinstance(value, ClassicColumn):
        return value
    expression = getattr(value, "_expr", None)  # a Connect Column's expression
    if expression is None:
        return value  # SQL text already
    text = getattr(expression, "_expr", None)  # SQLExpression: expr("...") / a str argument
    if isinstance(text, str):
        return text
    name = getattr(expression, "_unparsed_identifier", None)  # ColumnReference: col("...")
    if isinstance(name, str):  # already in SQL's identifier syntax
        return name
    raise HeadwaterError(
        "HW_CDC_INVALID", f"create_auto_cdc_flow: {option}={value!r} is a Spark Connect column "
        "built from more than SQL text or a column name.", "headwater runs the pipeline on a "
        "classic Spark session, which cannot use a Connect column's expression.",
        f"Pass {option} as SQL text (e.g. {option}=\"seq\") or as a column of "
        "pyspark.sql.functions made while the definitions load.")


class Registry(GraphElementRegistry):
    """The datasets and flows declared by a pipeline's files, in declaration order."""

    def __init__(self, database: str | None = None) -> None:
        """database: the schema unqualified names of stored datasets resolve in (the
        project's ``database``); default None, the lakehouse's top level."""
        self.database = database
        self.datasets: dict[str, model.Dataset] = {}
        self.flows: list[model.Flow] = []
        # what loading skipped and the user should know (a notebook's %sh cell, ...)
        self.warnings: list[str] = []
        self._finished = False
        # @expect* rules by the function they decorate (either side of the dataset
        # decorator), folded into its flows when the registry finishes
        self._expectations: dict[Callable[..., Any], list[Expectation]] = {}
        # modules the loader had Spark pickle by value (definition files, the project's own
        # modules): registered while the pipeline's graph lives, taken back when it closes
        self.pickled_by_value: list[ModuleType] = []

    # --- SDP's interface -----------------------------------------------------------------

    def register_output(self, output: Output) -> None:
        """A ``dp.table`` / ``materialized_view`` / ``temporary_view`` /
        ``create_streaming_table`` / ``create_sink`` declaration."""
        self.add_dataset(from_sdp_output(output))

    def register_flow(self, flow: SdpFlow) -> None:
        """A dataset's query function, or a ``dp.append_flow``."""
        self.add_flow(model.Flow(
            name=flow.name, target=flow.target, func=flow.func,
            location=location_of_sdp(flow.source_code_location),
            spark_conf=dict(flow.spark_conf or {}),
            once=bool(getattr(flow, "once", False))))

    def register_auto_cdc_flow(self, flow: AutoCdcFlow) -> None:
        """``dp.create_auto_cdc_flow``: headwater applies it with its own CDC engine."""
        self.add_flow(cdc_flow(
            target=flow.target, source=flow.source, name=flow.name,
            location=location_of_sdp(flow.source_code_location),
            spark_conf=dict(flow.spark_conf or {}), keys=flow.keys,
            sequence_by=classic_expression(flow.sequence_by, "sequence_by"),
            apply_as_deletes=classic_expression(flow.apply_as_deletes, "apply_as_deletes"),
            column_list=flow.column_list, except_column_list=flow.except_column_list,
            stored_as_scd_type=flow.stored_as_scd_type or 1,
            track_history_column_list=flow.track_history_column_list,
            track_history_except_column_list=flow.track_history_except_column_list))

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        """The CREATE statements of one SQL file (see :mod:`headwater.pipeline.sql_files`)."""
        register_sql_text(self, sql_text, Path(file_path))

    # --- the one path both spellings take -------------------------------------------------

    def qualify(self, name: str) -> str:
        """The dataset or table a name read or targeted in the pipeline means: a one-part name
        is a view or sink of the pipeline when one has it, else a table in the pipeline's
        database (as Spark resolves it in the current database)."""
        own = self.datasets.get(parse_name(name).qualified)
        if own is not None and own.kind in (Kind.VIEW, Kind.SINK):
            return own.name
        return in_schema(name, self.database).qualified

    def add_dataset(self, dataset: model.Dataset) -> None:
        # Views and sinks are no catalog tables: their names stay as written (as in SDP).
        name = parse_name(dataset.name).qualified if dataset.kind in (Kind.VIEW, Kind.SINK) \
            else in_schema(dataset.name, self.database).qualified
        dataset = dataclasses.replace(dataset, name=name)
        if name in self.datasets:
            first = self.datasets[name].location
            raise HeadwaterError(
                "HW_PIPELINE_DUPLICATE", f"{dataset.location}: dataset {name!r} is defined twice "
                f"(first at {first}).", "Each table or view has exactly one definition.",
                "Rename one of them, or add a second flow into the same table with "
                "@headwater.append_flow(target=...) / @dp.append_flow(target=...).")
        self.datasets[name] = dataset

    def expect(self, func: Callable[..., Any], rules: list[Expectation]) -> None:
        """``@expect*`` rules for the definition function ``func``; decorators apply bottom-up,
        so rules applied later go first (the order the user wrote them in)."""
        self._expectations[func] = rules + self._expectations.get(func, [])

    def add_flow(self, flow: model.Flow) -> None:
        self.flows.append(flow)

    def finish(self) -> Registry:
        """Match flows to their datasets once every file is loaded; fold the expectations
        written on definition functions into their datasets. Idempotent."""
        if self._finished:
            return self
        matched: list[model.Flow] = []
        for flow in self.flows:
            target = self.qualify(flow.target)
            dataset = self.datasets.get(target)
            if dataset is None or (not flow.is_default
                                   and dataset.kind not in (Kind.TABLE, Kind.SINK)):
                raise HeadwaterError(
                    "HW_PIPELINE_UNKNOWN_TABLE",
                    f"{flow.location}: flow {flow.name!r} targets {flow.target!r}, which is "
                    "not a streaming table or sink of this pipeline.",
                    "An append flow adds rows to a streaming table defined with "
                    "@headwater.table, dp.create_streaming_table or CREATE STREAMING TABLE.",
                    f"Define the table (e.g. dp.create_streaming_table({flow.target!r})), or fix "
                    "the target name.")
            flow = dataclasses.replace(
                flow, target=target, name=target if flow.is_default else flow.name,
                expectations=(*flow.expectations,
                              *self._expectations.get(flow.func, ())))
            if any(f.target == target and f.name.lower() == flow.name.lower() for f in matched):
                raise HeadwaterError(
                    "HW_PIPELINE_DUPLICATE", f"{flow.location}: {model.describe(dataset)} "
                    f"{target!r} already has a flow named {flow.name!r}.",
                    "Flow names identify their checkpoints.", "Give the flow another name.")
            matched.append(flow)
        self.flows = matched
        for name, dataset in list(self.datasets.items()):
            flows = self.flows_of(name)
            if not flows:
                raise HeadwaterError(
                    "HW_PIPELINE_NO_FLOW", f"{dataset.location}: {model.describe(dataset)} "
                    f"{name!r} has no flow writing it.",
                    "A table declared without a query (create_streaming_table, CREATE STREAMING "
                    "TABLE without AS) is filled by append flows.",
                    f"Add @dp.append_flow(target={name!r}) (or @headwater.append_flow), or give "
                    "the table a query.")
            if dataset.kind not in (Kind.TABLE, Kind.SINK) and (len(flows) > 1
                                                                or not flows[0].is_default):
                raise HeadwaterError(
                    "HW_PIPELINE_DUPLICATE", f"{flows[-1].location}: {model.describe(dataset)} "
                    f"{name!r} has more than its own query.",
                    "Only streaming tables take append flows.", "Remove the extra flow.")
            snapshot = next((f for f in flows if f.snapshot is not None), None)
            if snapshot is not None and (len(flows) > 1 or dataset.kind != Kind.TABLE):
                raise HeadwaterError(
                    "HW_CDC_INVALID", f"{snapshot.location}: AUTO CDC FROM SNAPSHOT flow "
                    f"{snapshot.name!r} targets {model.describe(dataset)} {name!r}"
                    + (f", which has other flows ({', '.join(f.name for f in flows if f is not snapshot)})"
                       if len(flows) > 1 else "") + ".",
                    "Each snapshot is the whole of the target's rows: rows another flow "
                    "writes would be deleted by the next snapshot (Databricks refuses it too).",
                    f"Give the snapshot flow a streaming table of its own "
                    f"(create_streaming_table({name!r}) with no other flow).")
            rules = _expectations_of(dataset, flows)
            if rules and dataset.kind == Kind.SINK:
                raise HeadwaterError(
                    "HW_EXPECTATION_INVALID", f"{dataset.location}: sink {name!r} has "
                    f"expectations ({', '.join(r.name for r in rules)}).",
                    "A sink is an external destination written as it is; its flows' rows are "
                    "checked where they are read, not where they are delivered.",
                    "Put the expectations on the streaming table or view the flow reads, or "
                    "filter the rows in the flow's query.")
            if rules != tuple(dataset.expectations):
                self.datasets[name] = dataclasses.replace(dataset, expectations=rules)
        self._finished = True
        return self

    def flows_of(self, name: str) -> list[model.Flow]:
        """The flows writing ``name``, its own query first."""
        flows = [f for f in self.flows if f.target == name]
        return sorted(flows, key=lambda f: not f.is_default)


def _expectations_of(dataset: model.Dataset, flows: list[model.Flow]) -> tuple[Expectation, ...]:
    """Expectations of the dataset and of its flows."""
    rules = list(dataset.expectations)
    for flow in flows:
        for rule in flow.expectations:
            if rule not in rules:
                rules.append(rule)
    return tuple(rules)


# --- the active registry -------------------------------------------------------------------

_active: ContextVar[Registry | None] = ContextVar("headwater_registry", default=None)


@contextlib.contextmanager
def collecting(registry: Registry) -> Iterator[Registry]:
    """Make ``registry`` the active one (headwater's and SDP's) for the block; the previous
    one is restored on exit."""
    token = _active.set(registry)
    try:
        with graph_element_registration_context(registry):
            yield registry
    finally:
        _active.reset(token)


def active_registry(what: str, location: Location) -> Registry:
    """The registry collecting now; an error naming the user's line outside a pipeline load."""
    registry = _active.get()
    if registry is None:
        raise HeadwaterError(
            "HW_PIPELINE_NOT_LOADING",
            f"{location}: @headwater.{what} was used outside a pipeline run.",
            "Definitions only register datasets; `headwater run` / `headwater validate` load the "
            "files named in headwater.toml and run them.",
            "Put the definition in a pipeline file and run `headwater run`, or write the query "
            "directly with Lakehouse.write_stream for a one-off stream.")
    return registry


# --- SDP's elements as headwater's ---------------------------------------------------------


_HEADWATER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
_PYSPARK_PIPELINES = os.path.join(os.path.dirname(os.path.abspath(sdp.__file__)), "")


def location_of_sdp(location: SourceCodeLocation | None) -> Location:
    """The user's file and line SDP recorded. A call through headwater's wrapper of a
    ``pyspark.pipelines`` function (Databricks' ``dp``, :mod:`headwater.dlt.databricks_dp`)
    records the wrapper's frame: the user's is the first one outside both packages."""
    if location is None:
        return Location("<unknown>", 0)
    if os.path.abspath(location.filename).startswith(_HEADWATER):
        frame = inspect.currentframe()
        while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
                (_HEADWATER, _PYSPARK_PIPELINES)):
            frame = frame.f_back
        if frame is not None:
            return Location(frame.f_code.co_filename, frame.f_lineno)
    return Location(location.filename, location.line_number or 0)


def from_sdp_output(output: Output) -> model.Dataset:
    """SDP's output dataclass as headwater's model element; unsupported fields are refused."""
    where = location_of_sdp(output.source_code_location)
    if isinstance(output, sdp.TemporaryView):
        return model.View(name=output.name, location=where, comment=output.comment)
    if isinstance(output, sdp.Sink):
        return model.Sink(**sink_fields(output.name, where, output.format, output.options,
                                        output.comment))
    if not isinstance(output, sdp.Table):
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{where}: {type(output).__name__} {output.name!r} is not "
            "a kind of dataset headwater knows.", "headwater stores streaming tables and "
            "materialized views, and keeps temporary views in memory.",
            "Use dp.table, dp.materialized_view or dp.temporary_view.")
    fields = stored_fields(output.name, where, output.comment, output.table_properties,
                           output.partition_cols, output.cluster_by, output.schema, output.format)
    if isinstance(output, sdp.MaterializedView):
        return model.MaterializedView(**fields)
    return model.StreamingTable(**fields)
