"""What pipeline files declare: datasets, flows and expectations. Declaring only registers.

Decorators add to the registry that is collecting (the runner opens one per definition file);
the runner and the validator decide what runs and when.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from headwater.errors import HeadwaterError
from headwater.pipeline.expectations import Expectation

TABLE = "table"                 # a streaming table, fed by one or more streaming flows
MATERIALIZED_VIEW = "materialized_view"  # recomputed from batch reads, one overwrite commit
VIEW = "view"                   # not stored: other definitions read its DataFrame


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{os.path.relpath(self.file) if os.path.isabs(self.file) else self.file}:{self.line}"


@dataclass
class Flow:
    """One query writing into a dataset. A table's own function is its default flow."""

    name: str
    target: str
    func: Callable[[], Any]
    location: Location
    sql: str | None = None  # SQL definitions: the SELECT text


@dataclass
class Dataset:
    name: str
    kind: str
    location: Location
    flows: list[Flow] = field(default_factory=list)
    output_mode: str = "append"
    keys: list[str] | None = None
    partition_by: list[str] = field(default_factory=list)
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    expectations: list[Expectation] = field(default_factory=list)
    keep_late_rows: bool = False

    @property
    def stored(self) -> bool:
        return self.kind != VIEW


class Registry:
    """The datasets and flows declared by a pipeline's files, in declaration order."""

    def __init__(self) -> None:
        self.datasets: dict[str, Dataset] = {}
        self.pending_flows: list[Flow] = []

    def add(self, dataset: Dataset) -> None:
        from headwater.lakehouse import parse_name

        name = parse_name(dataset.name).qualified
        dataset.name = name
        if name in self.datasets:
            first = self.datasets[name].location
            raise HeadwaterError(
                "HW_PIPELINE_DUPLICATE", f"{dataset.location}: dataset {name!r} is defined twice "
                f"(first at {first}).", "Each table or view has exactly one definition.",
                "Rename one of them, or use @headwater.append_flow(target=...) to add a second "
                "flow into the same table.")
        self.datasets[name] = dataset

    def attach_flows(self) -> None:
        """Append flows name their target by string; match them once every file is loaded."""
        for flow in self.pending_flows:
            from headwater.lakehouse import parse_name

            target = parse_name(flow.target).qualified
            dataset = self.datasets.get(target)
            if dataset is None or dataset.kind != TABLE:
                raise HeadwaterError(
                    "HW_PIPELINE_UNKNOWN_TABLE",
                    f"{flow.location}: append_flow {flow.name!r} targets {flow.target!r}, which is "
                    "not a streaming table of this pipeline.",
                    "An append flow adds rows to a streaming table defined with @headwater.table "
                    "(or CREATE STREAMING TABLE).",
                    f"Define the table, e.g. @headwater.table(name={flow.target!r}) over a stream, "
                    "or fix the target name.")
            flow.target = target
            if any(f.name == flow.name for f in dataset.flows):
                raise HeadwaterError(
                    "HW_PIPELINE_DUPLICATE", f"{flow.location}: table {target!r} already has a "
                    f"flow named {flow.name!r}.", "Flow names identify their checkpoints.",
                    "Give the append flow another name.")
            dataset.flows.append(flow)
        self.pending_flows = []


_collecting: Registry | None = None


def collecting(registry: Registry | None) -> None:
    """Make ``registry`` the one decorators add to (None: decorators raise)."""
    global _collecting
    _collecting = registry


def _registry(what: str, location: Location) -> Registry:
    if _collecting is None:
        raise HeadwaterError(
            "HW_PIPELINE_NOT_LOADING",
            f"{location}: @headwater.{what} was used outside a pipeline run.",
            "Definitions only register datasets; `headwater run` / `headwater validate` load the "
            "files named in headwater.toml and run them.",
            "Put the definition in a pipeline file and run `headwater run`, or write the query "
            "directly with Lakehouse.write_stream for a one-off stream.")
    return _collecting


def location_of(func: Callable) -> Location:
    code = getattr(func, "__code__", None)
    if code is None:
        return Location("<unknown>", 0)
    return Location(code.co_filename, code.co_firstlineno)


def caller_location(depth: int = 2) -> Location:
    """The user's file and line that called into headwater (skipping headwater's frames)."""
    frame = inspect.currentframe()
    for _ in range(depth):
        frame = frame.f_back if frame else None
    here = os.path.dirname(os.path.dirname(__file__))
    while frame is not None and frame.f_code.co_filename.startswith(here):
        frame = frame.f_back
    if frame is None:
        return Location("<unknown>", 0)
    return Location(frame.f_code.co_filename, frame.f_lineno)


def _dataset_decorator(kind: str, func: Callable | None, options: dict[str, Any]):
    def register(f: Callable) -> Callable:
        location = location_of(f)
        registry = _registry(kind, location)
        name = options.get("name") or f.__name__
        output_mode = options.get("output_mode", "append")
        if kind == TABLE and output_mode not in ("append", "complete", "update"):
            raise HeadwaterError(
                "HW_OPTION_INVALID", f"{location}: output_mode={output_mode!r} for {name!r}.",
                "A streaming table writes appended rows, the complete result, or updated rows.",
                "Use 'append' (default), 'complete' or 'update'.")
        dataset = Dataset(
            name=name, kind=kind, location=location,
            output_mode=output_mode if kind == TABLE else "complete",
            keys=list(options["keys"]) if options.get("keys") else None,
            partition_by=list(options.get("partition_by") or []),
            comment=options.get("comment") or (inspect.getdoc(f) or None),
            properties=dict(options.get("table_properties") or {}),
            expectations=list(getattr(f, "_hw_expectations", [])),
            keep_late_rows=bool(options.get("keep_late_rows", False)),
        )
        registry.add(dataset)
        dataset.flows.append(Flow(name=dataset.name, target=dataset.name, func=f,
                                  location=location))
        return f

    return register(func) if func is not None else register


def table(func: Callable | None = None, *, name: str | None = None, output_mode: str = "append",
          keys: Iterable[str] | None = None, partition_by: Iterable[str] | None = None,
          comment: str | None = None, table_properties: dict[str, str] | None = None,
          keep_late_rows: bool = False):
    """A streaming table: the function returns a streaming DataFrame.

    name: default the function's name (``schema.table`` allowed).
    output_mode: "append" (default); "complete" rewrites the table each batch (aggregates);
        "update" MERGEs changed rows by ``keys`` (default: the aggregate's group keys).
    partition_by, comment (default the docstring), table_properties: set when created.
    keep_late_rows: on a windowed aggregate with a watermark, rows Spark drops as late go to
        ``<table>__late`` instead of vanishing.
    """
    return _dataset_decorator(TABLE, func, dict(
        name=name, output_mode=output_mode, keys=keys, partition_by=partition_by,
        comment=comment, table_properties=table_properties, keep_late_rows=keep_late_rows))


def materialized_view(func: Callable | None = None, *, name: str | None = None,
                      partition_by: Iterable[str] | None = None, comment: str | None = None,
                      table_properties: dict[str, str] | None = None):
    """A table recomputed from batch reads each run, committed as one overwrite."""
    return _dataset_decorator(MATERIALIZED_VIEW, func, dict(
        name=name, partition_by=partition_by, comment=comment,
        table_properties=table_properties))


def view(func: Callable | None = None, *, name: str | None = None, comment: str | None = None):
    """A named DataFrame other definitions read; not stored."""
    return _dataset_decorator(VIEW, func, dict(name=name, comment=comment))


def append_flow(func: Callable | None = None, *, target: str, name: str | None = None):
    """One more streaming flow into the streaming table ``target`` (its own checkpoint)."""
    def register(f: Callable) -> Callable:
        location = location_of(f)
        registry = _registry("append_flow", location)
        registry.pending_flows.append(Flow(name=name or f.__name__, target=target, func=f,
                                           location=location))
        return f

    return register(func) if func is not None else register


# --- expectations --------------------------------------------------------------------------


def _expect(rules: dict[str, str], action: str):
    def add(f: Callable) -> Callable:
        existing = list(getattr(f, "_hw_expectations", []))
        # Decorators apply bottom-up; keep the order the user wrote them in.
        f._hw_expectations = [Expectation(n, c, action) for n, c in rules.items()] + existing
        return f

    return add


def expect(name: str, condition: str):
    """Count rows failing ``condition`` (a SQL boolean); keep them."""
    return _expect({name: condition}, "warn")


def expect_or_drop(name: str, condition: str):
    """Drop rows failing ``condition`` into ``<table>__quarantine``, counted."""
    return _expect({name: condition}, "drop")


def expect_or_fail(name: str, condition: str):
    """Stop the flow when a row fails ``condition``, naming the rule, a row and the batch."""
    return _expect({name: condition}, "fail")


def expect_all(rules: dict[str, str]):
    return _expect(dict(rules), "warn")


def expect_all_or_drop(rules: dict[str, str]):
    return _expect(dict(rules), "drop")


def expect_all_or_fail(rules: dict[str, str]):
    return _expect(dict(rules), "fail")
