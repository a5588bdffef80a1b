"""Project commands: init, validate, run, demo, sql and factory."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

import headwater
from headwater.cli.app import fail, main, names
from headwater.conf.location import location
from headwater.conf.project_file import Project
from headwater.demo.run import run_demo
from headwater.errors import HeadwaterError
from headwater.factory import DataFactory
from headwater.factory.debezium import CustomerDatabase
from headwater.monitor.display import Display
from headwater.monitor.text_table import text_table
from headwater.pipeline.run import load_project, run_project
from headwater.pipeline.scaffold import scaffold
from headwater.pipeline.validate import validate_project
from headwater.spark.sql_text import statements


@main.command()
@click.argument("name")
@click.option("--dir", "parent", default=".", type=click.Path(file_okay=False),
              help="Folder to create the project in (default: here).")
@click.option("--format", "format_", type=click.Choice(["headwater", "sdp"]),
              default="headwater", show_default=True,
              help="headwater.toml + headwater's decorators, or sdp: spark-pipeline.yml + "
                   "`from pyspark import pipelines as dp` + a SQL file.")
def init(name: str, parent: str, format_: str) -> None:
    """Scaffold a working pipeline project NAME: JSON landing zone -> bronze -> silver -> gold."""
    try:
        path = scaffold(Path(parent) / name, name, format_)
    except HeadwaterError as exc:
        fail(exc)
    click.echo(f"created {path}\n  cd {path}\n  headwater validate\n  headwater run")


def _with_conf(project_dir: str, conf: tuple[str, ...]) -> Project | str:
    """The project with ``--conf KEY=VALUE`` settings over its configuration (as
    spark-pipelines' --conf); the folder itself when there are none."""
    if not conf:
        return project_dir
    project = Project.load(Path(project_dir))
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HeadwaterError(
                "HW_OPTION_INVALID", f"--conf {item!r} is not KEY=VALUE.",
                "--conf sets one setting of the pipeline's configuration.",
                "Write e.g. --conf mypipeline.source_path=/data/in.")
        project.spark_conf[key.strip()] = value
    return project


_CONF_HELP = ("KEY=VALUE: a setting of the pipeline's configuration (repeatable), over the "
              "spec's `configuration:` / headwater.toml's [spark].")


@main.command()
@click.option("--project", "project_dir", default=".",
              help="Project folder (headwater.toml or spark-pipeline.yml).")
@click.option("--conf", "conf", multiple=True, help=_CONF_HELP)
def validate(project_dir: str, conf: tuple[str, ...]) -> None:
    """Check the graph and every streaming query before anything runs."""
    try:
        loaded = load_project(_with_conf(project_dir, conf))
        with loaded.session_scope():
            report = validate_project(loaded.registry, loaded.lakehouse)
    except HeadwaterError as exc:
        fail(exc)
    for note in loaded.defaults.notes:
        click.echo(note)
    for line in report.lines:
        click.echo(line)
    for warning in loaded.registry.warnings + report.warnings:
        click.echo(f"warning: {warning}")
    for error in report.errors:
        click.echo(f"error: {error}", err=True)
    if report.errors:
        sys.exit(1)
    click.echo(f"valid: {report.summary}")


@main.command()
@click.option("--project", "project_dir", default=".",
              help="Project folder (headwater.toml or spark-pipeline.yml).")
@click.option("--trigger", default=None,
              help='available-now (default) or once: process what is there and stop. '
                   'An interval ("30 seconds") or "continuous" (every 500 ms): run until '
                   'stopped with Ctrl-C / SIGTERM.')
@click.option("--full-refresh", "full_refresh", default=None,
              help="Comma-separated tables to rebuild from scratch (data and checkpoints); "
                   "streaming tables downstream of them are rebuilt too.")
@click.option("--full-refresh-all", is_flag=True, help="Rebuild every table of the pipeline.")
@click.option("--select", default=None, help="Comma-separated datasets to run (the rest of "
                                             "the graph is left alone).")
@click.option("--no-event-log", "no_event_log", is_flag=True,
              help="Do not write this run's progress to the _event_log table.")
@click.option("--plain", is_flag=True, help="Log lines instead of the live table, even on a "
              "terminal (the default in pipes and CI).")
@click.option("--conf", "conf", multiple=True, help=_CONF_HELP)
def run(project_dir: str, trigger: str | None, full_refresh: str | None,
        full_refresh_all: bool, select: str | None, no_event_log: bool, plain: bool,
        conf: tuple[str, ...]) -> None:
    """Run the pipeline: triggered (default) or continuous."""
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        if not stop.is_set():
            click.echo(f"{signal.Signals(signum).name}: stopping every flow after its "
                       "current micro-batch...")
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        outcome = run_project(
            _with_conf(project_dir, conf), trigger=trigger,
            full_refresh="all" if full_refresh_all else names(full_refresh),
            select=names(select), event_log=False if no_event_log else None,
            display=Display(click.echo, live=False if plain else None),
            echo=click.echo, stop_event=stop)
    except HeadwaterError as exc:
        fail(exc)
    click.echo(outcome.summary())
    sys.exit(0 if outcome.ok else 1)


@main.command()
@click.option("--root", default="./headwater-demo", show_default=True,
              type=click.Path(file_okay=False), help="Where the demo lakehouse is created.")
@click.option("--once", is_flag=True, help="Land --batches batches, run triggered to the end, "
              "check gold against the ground truth, exit.")
@click.option("--batches", default=3, show_default=True, type=click.IntRange(min=1),
              help="Batches landed with --once.")
@click.option("--interval", default=5.0, show_default=True, type=click.FloatRange(min=0.5),
              help="Seconds between landed batches (continuous).")
@click.option("--duration", default=None, type=click.FloatRange(min=1),
              help="Stop after this many seconds (default: run until Ctrl-C).")
@click.option("--seed", default=0, show_default=True, help="The factory's seed.")
@click.option("--dashboard-port", default=8765, show_default=True,
              help="Port of the dashboard on 127.0.0.1 (0: any free one; -1: no dashboard).")
@click.option("--plain", is_flag=True, help="Log lines instead of the live table.")
def demo(root: str, once: bool, batches: int, interval: float, duration: float | None,
         seed: int, dashboard_port: int, plain: bool) -> None:
    """The whole system alive: the data factory lands orders and device readings, a
    medallion pipeline streams them bronze -> silver -> gold, and the results are checked
    against what was landed."""
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        if not stop.is_set():
            click.echo("stopping after the current micro-batches...")
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        code = run_demo(root, once, batches, interval, duration, seed, click.echo, stop,
                        live=False if plain else None,
                        dashboard_port=None if dashboard_port < 0 else dashboard_port)
    except HeadwaterError as exc:
        fail(exc)
    click.echo(f"\nquery the tables: headwater sql 'SELECT * FROM revenue_by_country' "
               f"--root {root}")
    sys.exit(code)


@main.command()
@click.argument("query", required=False)
@click.option("--file", "-f", "script_file", default=None, type=click.File("r", encoding="utf-8"),
              help="Read the SQL script from this file ('-': standard input) instead of QUERY.")
@click.option("--root", default="./headwater-demo", show_default=True,
              type=click.Path(file_okay=False),
              help="The lakehouse folder or object-store URI (s3://bucket/lake).")
@click.option("--state-dir", default=None, type=click.Path(file_okay=False),
              help="The lakehouse's local state folder when --root is on an object store.")
@click.option("--limit", default=50, show_default=True, help="Rows to print.")
def sql(query: str | None, script_file: Any, root: str, state_dir: str | None,
        limit: int) -> None:
    """Run a SQL QUERY over the lakehouse's tables, e.g. "SELECT * FROM gold LIMIT 10".
    QUERY may be a script: statements separated by ';', with -- and /* */ comments; each
    runs in order and the rows of the last one are printed. A script in a file:
    --file script.sql, or --file - (or QUERY -) to read standard input. (A QUERY that starts
    with '--' reads as an option: put `--` before it, or use --file.)"""
    query = _script_text(query, script_file)
    try:
        exists = location(root).is_dir()
    except OSError:  # an object store that cannot be reached
        exists = False
    if not exists:
        fail(HeadwaterError("HW_LAKEHOUSE_MISSING", f"{root} does not exist.",
                             "headwater sql queries the tables of an existing lakehouse.",
                             "Pass --root with the folder holding the tables."))
    try:
        spark = headwater.spark_session(conf={"spark.sql.shuffle.partitions": "2"},
                                        lakehouse=root, lakehouse_state_dir=state_dir)
    except HeadwaterError as exc:
        fail(exc)
    lake = headwater.Lakehouse.of(spark)  # spark_session attached it
    assert lake is not None
    script = [text for text, _ in statements(query)]
    if not script:
        fail(HeadwaterError("HW_SQL_FAILED", "The query has no statement (only comments).",
                             "headwater sql runs the statements it is given.",
                             "Pass a statement, e.g. \"SELECT * FROM gold LIMIT 10\"."))
    try:
        with headwater.translated():
            for text in script[:-1]:
                lake.sql(text)
            df = lake.sql(script[-1])
            rows = df.limit(limit + 1).collect()
    except HeadwaterError as exc:
        fail(exc)
    except Exception as exc:  # noqa: BLE001 - Spark's own SQL errors: say them plainly
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fail(HeadwaterError("HW_SQL_FAILED", first, "Spark could not run the query.",
                             f"Tables here: {', '.join(lake.tables()) or 'none'}."))
    shown = [[_cell(r[c]) for c in df.columns] for r in rows[:limit]]
    for line in text_table(df.columns, shown):
        click.echo(line)
    more = " (more not shown)" if len(rows) > limit else ""
    click.echo(f"({len(shown)} rows{more})")


def _script_text(query: str | None, script_file: Any) -> str:
    """The SQL text to run: QUERY, or the --file's (QUERY ``-``: standard input)."""
    if query is not None and script_file is not None:
        fail(HeadwaterError("HW_OPTION_INVALID", "Both QUERY and --file were given.",
                             "headwater sql runs one script.",
                             "Pass the SQL text as QUERY, or the script's path as --file."))
    if script_file is not None:
        return str(script_file.read())
    if query == "-":
        return sys.stdin.read()
    if query is None:
        fail(HeadwaterError("HW_OPTION_INVALID", "No SQL to run.",
                             "headwater sql runs a QUERY or the script of --file.",
                             "Pass e.g. \"SELECT * FROM gold LIMIT 10\", or --file script.sql."))
    return str(query)


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(value)


@main.command()
@click.option("--root", default="./headwater-demo", show_default=True,
              type=click.Path(file_okay=False), help="Folder the feeds land in.")
@click.option("--batches", default=1, show_default=True, type=click.IntRange(min=1),
              help="Batches to land.")
@click.option("--interval", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds between batches.")
@click.option("--seed", default=0, show_default=True, help="Same seed, same data.")
@click.option("--cdc", is_flag=True, help="Also change the customers table of the factory's "
              "SQLite database and land its Debezium change events in landing/customers_cdc.")
def factory(root: str, batches: int, interval: float, seed: int, cdc: bool) -> None:
    """Land the next batches of demo data: order JSON files, device readings and colour
    events, with late, duplicate, malformed and mistyped records mixed in."""
    data = DataFactory(root, seed=seed)
    database = CustomerDatabase(root, seed=seed) if cdc else None
    for i in range(batches):
        if i and interval:
            time.sleep(interval)
        number = data.load()[0]
        click.echo(f"landed batch {number} in {data.root}")
        if database is not None:
            changes = database.load()[0]
            click.echo(f"landed change batch {changes} in {database.landing} "
                       f"({len(database.current())} customers in {database.db_path})")
    truth = data.truth()
    kinds = sorted({e["kind"] for e in truth.entries})
    for feed in ("orders", "devices", "colors"):
        counts = ", ".join(f"{k} {truth.count(feed, k)}" for k in kinds if truth.count(feed, k))
        click.echo(f"  {feed}: {counts}")
