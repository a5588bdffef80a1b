"""From a project folder to a finished run: the one path ``headwater run``, ``headwater
validate`` and the demo share.

project (headwater.toml) -> SparkSession with the lakehouse attached -> definitions loaded ->
graph -> full refresh (if asked, with its cascade printed) -> runner.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from headwater.conf import storage
from headwater.conf.location import AnyPath
from headwater.conf.project_file import Project
from headwater.conf.triggers import is_triggered, trigger_kwargs
from headwater.errors import HeadwaterError
from headwater.lakehouse import Lakehouse
from headwater.lakehouse.session import spark_session
from headwater.monitor.observer import FlowStatus
from headwater.pipeline.dialect import SessionDefaults, session_defaults
from headwater.pipeline.graph import Graph
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.run.full_refresh import full_refresh as refresh_tables
from headwater.pipeline.run.progress import FlowResult
from headwater.pipeline.run.scheduler import Runner
from headwater.spark.scoped_conf import scoped_conf

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pyspark.sql import SparkSession

    from headwater.monitor.display import Display
    from headwater.pipeline.registry import Registry

CONTINUOUS = "continuous"  # the trigger spelling of a continuous run at Spark's 500 ms default


@dataclass
class LoadedProject:
    """A project with its session started, lakehouse attached and definitions loaded.

    defaults: settings the session gets while the definitions load and the pipeline runs
    (ANSI mode off for DLT code, see :mod:`headwater.pipeline.dialect`), with the lines
    saying so."""

    project: Project
    spark: SparkSession
    lakehouse: Lakehouse
    registry: Registry
    defaults: SessionDefaults = field(default_factory=SessionDefaults)

    def session_scope(self) -> AbstractContextManager[None]:
        """The pipeline's session defaults in force for a block (put back after it)."""
        return scoped_conf(self.spark, self.defaults.settings, "the pipeline's defaults")


@dataclass
class RunOutcome:
    """What a run did: every flow's result, and whether a stop was requested."""

    pipeline: str
    mode: str            # as announced: "available-now", "continuous, 2 seconds", ...
    root: AnyPath        # the lakehouse
    results: list[FlowResult] = field(default_factory=list)
    stopped: bool = False

    @property
    def failed(self) -> list[FlowResult]:
        """Flows that failed or were skipped because an upstream flow failed."""
        return [r for r in self.results if FlowStatus(r.status).failed_or_skipped]

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        done = sum(1 for r in self.results if r.ok)
        return (f"{done} flows ok, {len(self.failed)} failed or skipped"
                + (" (stopped on request)" if self.stopped else ""))


def load_project(project: Project | str | os.PathLike[str] = ".",
                 app_name: str | None = None) -> LoadedProject:
    """Read headwater.toml, start the session with the project's lakehouse attached, and run
    the definition files.

    project: a Project or its folder (default: here).
    app_name: the Spark application name; default ``headwater:<pipeline name>``.
    """
    if not isinstance(project, Project):
        project = Project.load(Path(project))
    # before any table is opened (readers carry them to the workers); a project without
    # [storage] clears an earlier project's, leaving the environment's credentials
    storage.set_defaults(project.storage)
    spark = spark_session(project.master, app_name=app_name or f"headwater:{project.name}",
                          conf=project.spark_conf, lakehouse=str(project.root),
                          lakehouse_state_dir=project.state_dir)
    lakehouse = _attached_lakehouse(spark)
    defaults = session_defaults(project.files(), project.spark_conf)
    with scoped_conf(spark, defaults.settings, "the pipeline's defaults"):
        registry = load_definitions(project, spark)
    return LoadedProject(project, spark, lakehouse, registry, defaults)


def _attached_lakehouse(spark: SparkSession) -> Lakehouse:
    """The lakehouse spark_session attached to ``spark``."""
    lakehouse = Lakehouse.of(spark)
    assert lakehouse is not None, "spark_session(lakehouse=...) attaches one"
    return lakehouse


def run_project(project: LoadedProject | Project | str | os.PathLike[str] = ".", *,
                trigger: str | None = None,
                full_refresh: list[str] | Literal["all"] | None = None,
                select: list[str] | None = None,
                continuous: bool | None = None,
                event_log: bool | None = None,
                display: Display | None = None,
                echo: Callable[[str], None] = print,
                stop_event: threading.Event | None = None,
                app_name: str | None = None) -> RunOutcome:
    """Run a pipeline project once, triggered or continuously.

    project: a LoadedProject (runs again without reloading), a Project, or its folder.
    trigger: "available-now", "once", an interval ("30 seconds": continuous at that pace) or
        "continuous" (every 500 ms); default the project's trigger, else "available-now"
        (or "continuous" when ``continuous`` is True).
    full_refresh: tables to rebuild from scratch first (data and checkpoints), or "all";
        streaming tables downstream of them are rebuilt too. Default none.
    select: datasets to run; default all (the rest of the graph is left alone).
    continuous: None (default) decides from the trigger; True/False asks for that mode, and
        a trigger of the other mode is refused (HW_TRIGGER_INVALID).
    event_log: write the run's events to _event_log; default the project's setting.
    display: the live terminal view; default none (timestamped lines through ``echo``).
    echo: where messages go (the run's lines go through the display when there is one).
    stop_event: set it to stop every flow after its current micro-batch (signal handlers,
        timers); default: the run stops only by itself.
    app_name: the Spark application name when the session is started here.
    """
    loaded = project if isinstance(project, LoadedProject) else load_project(project, app_name)
    conf = loaded.project
    for warning in loaded.registry.warnings:
        echo(f"warning: {warning}")
    for note in loaded.defaults.notes:
        echo(note)
    choice, kwargs, continuous = _choose_trigger(trigger, conf.trigger, continuous)
    with loaded.session_scope():
        return _run_loaded(loaded, choice, kwargs, continuous, full_refresh, select,
                           event_log, display, echo, stop_event)


def _run_loaded(loaded: LoadedProject, choice: str, kwargs: dict[str, Any], continuous: bool,
                full_refresh: list[str] | Literal["all"] | None, select: list[str] | None,
                event_log: bool | None, display: Display | None,
                echo: Callable[[str], None], stop_event: threading.Event | None) -> RunOutcome:
    conf = loaded.project
    graph = Graph(loaded.registry, loaded.lakehouse).build()
    try:
        if full_refresh:
            targets = graph.written() if full_refresh == "all" else list(full_refresh)
            graph = refresh_tables(graph, targets, echo)
        if display is not None:
            display.triggered = not continuous
        runner = Runner(graph, kwargs, continuous, select, echo=echo, pipeline=conf.name,
                        event_log=conf.event_log if event_log is None else event_log,
                        auto_compact=conf.auto_compact,
                        display=display, stop_event=stop_event)
        mode = f"continuous, {kwargs['processingTime']}" if continuous else choice
        echo(f"running pipeline {conf.name} ({mode}) in {loaded.lakehouse.root}")
        results = runner.run()
    finally:
        graph.close()
    return RunOutcome(conf.name, mode, loaded.lakehouse.root, results,
                      runner.stop_requested.is_set())


def _choose_trigger(trigger: str | None, project_trigger: str | None,
                    continuous: bool | None) -> tuple[str, dict[str, Any], bool]:
    """(the trigger as spelled, DataStreamWriter.trigger keywords, continuous?)."""
    default = CONTINUOUS if continuous else "available-now"
    choice = trigger or project_trigger or default
    if trigger is None and continuous is not None \
            and _runs_until_stopped(choice) != continuous:
        choice = default  # the project's trigger is for the other mode
    choice = choice.strip().lower()
    kwargs = trigger_kwargs(None if choice == CONTINUOUS else choice)
    # Decide from the parsed trigger, not the spelling ("available_now" is triggered too).
    runs_until_stopped = not is_triggered(kwargs)
    if continuous is not None and continuous != runs_until_stopped:
        raise HeadwaterError(
            "HW_TRIGGER_INVALID",
            f"Trigger {choice!r} does not fit a {'continuous' if continuous else 'triggered'} "
            "run.",
            "A triggered run needs a trigger that stops by itself (available-now, once); a "
            "continuous one an interval.",
            "Pass a trigger of that mode, or leave the mode to the trigger.")
    return choice, kwargs, runs_until_stopped


def _runs_until_stopped(choice: str) -> bool:
    text = choice.strip().lower()
    return text == CONTINUOUS or not is_triggered(trigger_kwargs(text))
