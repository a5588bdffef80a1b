"""Live progress in the terminal: a rich table on a TTY, plain log lines in CI and pipes.

On a terminal, one row per flow (status, batches, rows, rows/s, last batch duration,
watermark, lag behind its sources) is redrawn twice a second, with a progress bar while a
triggered run works through a known backlog (table versions or listed files); the runner's
messages scroll above it. Anywhere else every micro-batch is one line::

    [   12.3s] batch     silver_orders/silver_orders #3: 120 rows in 0.42s (285 rows/s), lag 0 versions
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from headwater.monitor.lag import Lag, LagProbe
from headwater.monitor.run import FlowStats, RunMonitor

LAG_SECONDS = 2.0  # lag reads a table version or the file index: not on every redraw


class Display:
    def __init__(self, echo: Callable[[str], None] | None = None, live: bool | None = None,
                 triggered: bool = False, console: Any = None) -> None:
        self.console = console or Console()
        self.live_mode = self.console.is_terminal if live is None else live
        self.triggered = triggered
        self._echo = echo or (lambda text: print(text, flush=True))
        self._t0 = time.monotonic()
        self._live: Any = None
        self._monitor: RunMonitor | None = None
        self._probe: LagProbe | None = None
        self._lags: dict[str, tuple[float, Lag | None]] = {}
        self._lock = threading.Lock()

    # --- what the run calls (echo: the runner; watch, close: its RunMonitor) -------------

    def echo(self, text: str) -> None:
        line = f"[{time.monotonic() - self._t0:7.1f}s] {text}"
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            self._echo(line)

    def watch(self, monitor: RunMonitor) -> Display:
        self._monitor = monitor
        self._probe = LagProbe(monitor.root)
        monitor.on_batch = self.on_batch
        if self.live_mode:
            self._live = Live(get_renderable=self._render, console=self.console,
                              refresh_per_second=2, transient=False)
            self._live.start()
        return self

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.refresh()
            live.stop()

    def on_batch(self, stats: FlowStats, row: dict) -> None:
        if self.live_mode:
            return
        seconds = (row["batch_duration_ms"] or 0) / 1000
        rate = row["processed_rows_per_second"]
        parts = [f"{row['input_rows'] or 0} rows in {seconds:.2f}s"
                 + (f" ({rate:,.0f} rows/s)" if rate else "")]
        if row["watermark"] is not None:
            parts.append(f"watermark {row['watermark']:%Y-%m-%d %H:%M:%S}")
        lag = self._lag(stats, fresh=True)
        if lag is not None:
            parts.append(f"lag {lag}")
        self.echo(f"batch     {stats.key} #{row['batch_id']}: " + ", ".join(parts))

    # --- the live table ------------------------------------------------------------------

    def _lag(self, stats: FlowStats, fresh: bool = False) -> Lag | None:
        if self._probe is None or not stats.sources:
            return None
        at, lag = self._lags.get(stats.key, (0.0, None))
        if fresh or time.monotonic() - at > LAG_SECONDS:
            try:
                lag = self._probe.of(stats.sources)
            except Exception:  # noqa: BLE001 - a view must never break the run
                lag = None
            self._lags[stats.key] = (time.monotonic(), lag)
        return lag

    def _render(self) -> Any:
        table = Table(title=f"pipeline {self._monitor.pipeline} ({self._monitor.mode})"
                      if self._monitor else None, expand=False, title_justify="left")
        for column in ("flow", "status", "batches", "rows", "rows/s", "last batch",
                       "watermark", "lag"):
            table.add_column(column, justify="right" if column not in ("flow", "status")
                             else "left", no_wrap=True)
        if self.triggered:
            table.add_column("backlog", no_wrap=True)
        stats_list = list(self._monitor.stats.values()) if self._monitor else []
        for stats in stats_list:
            lag = self._lag(stats)
            cells = [stats.key, _status(stats.status), str(stats.batches),
                     f"{stats.input_rows:,}",
                     f"{stats.rows_per_second:,.0f}" if stats.rows_per_second else "-",
                     f"{stats.last_batch_ms / 1000:.2f}s" if stats.last_batch_ms else "-",
                     f"{stats.watermark:%H:%M:%S}" if stats.watermark else "-",
                     str(lag) if lag is not None else "-"]
            row: list[Any] = cells
            if self.triggered:
                done = backlog_done(stats)
                if done is None or lag is None:
                    row.append("")
                else:
                    bar = ProgressBar(total=max(done + lag.pending, 1),
                                      completed=done, width=20)
                    row.append(bar)
            table.add_row(*row)
        return table


def backlog_done(stats: FlowStats) -> int | None:
    """Units (versions or files) this run has read so far, from its first batch's start."""
    done = 0
    found = False
    for first, last in zip(stats.first_sources, stats.sources):
        start, end = first.get("startOffset"), last.get("endOffset")
        if not isinstance(end, dict):
            continue
        if "reservoirVersion" in end:
            begin = start.get("reservoirVersion", 0) if isinstance(start, dict) else 0
            done += max(0, int(end["reservoirVersion"]) - int(begin))
            found = True
        elif "seq" in end:
            begin = start.get("seq", 0) if isinstance(start, dict) else 0
            done += max(0, int(end["seq"]) - int(begin))
            found = True
    return done if found else None


def _status(status: str) -> str:
    colors = {"running": "green", "completed": "blue", "failed": "bold red",
              "stopped": "yellow", "skipped": "red", "queued": "dim"}
    color = colors.get(status)
    return f"[{color}]{status}[/{color}]" if color else status
