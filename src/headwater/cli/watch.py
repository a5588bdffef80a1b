"""Watching commands: status, stop and dashboard, from any terminal, without Spark."""

from __future__ import annotations

import signal
import threading

import click

from headwater.cli.app import fail, main, root_options
from headwater.errors import HeadwaterError
from headwater.monitor.commands import resolve_lake, status_lines, stop_runs
from headwater.monitor.dashboard import DashboardServer


@main.command()
@root_options
def status(project_dir: str | None, root: str | None, state_dir: str | None) -> None:
    """What is running now, each flow's batches and rows, and every flow's last result."""
    try:
        for line in status_lines(*resolve_lake(project_dir, root, state_dir)):
            click.echo(line)
    except HeadwaterError as exc:
        fail(exc)


@main.command()
@root_options
@click.option("--timeout", default=180.0, show_default=True,
              help="Seconds to wait for the pipeline to exit.")
def stop(project_dir: str | None, root: str | None,
        state_dir: str | None, timeout: float) -> None:
    """Stop the pipeline running on this lakehouse, cleanly, from another terminal: every
    flow stops after its current micro-batch (as Ctrl-C in its own terminal)."""
    try:
        lake, state = resolve_lake(project_dir, root, state_dir)
        stop_runs(lake, click.echo, timeout, state_dir=state)
    except HeadwaterError as exc:
        fail(exc)


@main.command()
@root_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback shows the pipeline to your "
                   "network (read-only, no login): do it only on a network you trust.")
@click.option("--port", default=8765, show_default=True, help="Port (0: any free one).")
def dashboard(project_dir: str | None, root: str | None,
        state_dir: str | None, host: str, port: int) -> None:
    """A read-only web page over the lakehouse: the pipeline graph, tables, rates, batch
    durations, expectations, late rows and errors, updated every 2 s while pipelines run."""
    try:
        lake, state = resolve_lake(project_dir, root, state_dir)
        server = DashboardServer(lake, host, port, state_dir=state).start()
    except HeadwaterError as exc:
        fail(exc)
    click.echo(f"dashboard: {server.url}  (Ctrl-C to stop)")
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop()
