"""``headwater status``, ``history`` and ``stop``: read from the lakehouse, no Spark.

They read the run files (``_runs/``), the event log and the Delta logs with deltalake and
pyarrow, so they answer in about a second while a pipeline runs in another terminal.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater.conf.layout import DELTA_LOG
from headwater.conf.location import AnyPath, known_state_folder, location, state_folder
from headwater.conf.project_file import CONFIG, Project
from headwater.conf.sdp_spec import find_spec
from headwater.delta.log import open_table
from headwater.errors import HeadwaterError
from headwater.lakehouse import list_tables, parse_name
from headwater.monitor.events import read_events
from headwater.monitor.run import _alive, live_runs
from headwater.monitor.text_table import text_table


def resolve_root(project_dir: str | None, root: str | None) -> AnyPath:
    """The lakehouse folder: ``--root``, else the project's (headwater.toml) root."""
    return resolve_lake(project_dir, root)[0]


def resolve_lake(project_dir: str | None, root: str | None,
                 state_dir: str | None = None) -> tuple[AnyPath, Path | None]:
    """(the lakehouse root, its local state folder or None when unknown): ``--root`` and
    ``--state-dir``, else the project's (headwater.toml) ``root`` and ``state_dir``.

    A root on an object store has its run files in the state folder: without one, status
    shows the event log only."""
    if root:
        path = location(root)
    else:
        folder = Path(project_dir or ".")
        if not (folder / CONFIG).is_file() and find_spec(folder.resolve()) is None:
            raise HeadwaterError(
                "HW_PROJECT_NOT_FOUND", f"No {CONFIG} or spark-pipeline.yml in "
                f"{folder.resolve()} and no --root.",
                "The command reads a lakehouse: a project's root or a folder of tables.",
                "Run it in the project folder, or pass --project DIR or --root LAKEHOUSE "
                "(the demo's is ./headwater-demo).")
        project = Project.load(folder)
        path = project.root
        state_dir = state_dir or (str(project.state_dir) if project.state_dir else None)
    if not path.is_dir():
        raise HeadwaterError("HW_LAKEHOUSE_MISSING", f"{path} does not exist.",
                             "The command reads the tables and run files of a lakehouse.",
                             "Pass --root with the folder holding the tables.")
    return path, known_state_folder(path, state_dir)


def _time(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        value = dt.datetime.fromtimestamp(value / 1000, dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def flow_summary(root: Path, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Per flow: batches and input rows (of one run, or ever) and its latest status event."""
    events = read_events(root, ["ts", "run_id", "event", "flow", "status", "batch_id",
                                "input_rows", "message", "trigger_time",
                                "batch_duration_ms"]).to_pylist()
    flows: dict[str, dict[str, Any]] = {}
    for e in sorted(events, key=lambda e: e["ts"]):
        if not e["flow"] or (run_id and e["run_id"] != run_id):
            continue
        f = flows.setdefault(e["flow"], {"batches": 0, "rows": 0, "status": None, "at": None,
                                         "message": None, "last_batch": None})
        if e["event"] == "progress":
            f["batches"] += 1
            f["rows"] += e["input_rows"] or 0
            f["last_batch"] = e["trigger_time"]
        elif e["event"] == "flow_status":
            f.update(status=e["status"], at=e["ts"], message=e["message"])
    return flows


def status_lines(root: AnyPath, state_dir: Path | None = None) -> list[str]:
    """root: the lakehouse (its event log); state_dir: its run files' folder, default the
    root when local (a root on an object store without one: no live runs are shown)."""
    root = location(root)
    lines = []
    runs = live_runs(known_state_folder(root, state_dir))
    running = [r for r in runs if r["alive"]]
    for run in running:
        lines.append(f"RUNNING pipeline {run['pipeline']} ({run['mode']}), pid {run['pid']}, "
                     f"since {run['started']}, run {run['run_id']}")
        flows = flow_summary(root, run["run_id"])
        rows = [[key, status, str(flows.get(key, {}).get("batches", 0)),
                 f"{flows.get(key, {}).get('rows', 0):,}",
                 _time(flows.get(key, {}).get("last_batch"))]
                for key, status in run["flows"].items()]
        lines += ["  " + x for x in text_table(["flow", "status", "batches", "rows",
                                                    "last batch (UTC)"], rows)]
    for run in runs:
        if not run["alive"]:
            lines.append(f"ENDED ABRUPTLY pipeline {run['pipeline']} run {run['run_id']} "
                         f"(pid {run['pid']} is gone without a clean stop: killed?). Its "
                         "committed batches are recovered into the event log at the next run.")
    if not running:
        lines.append(f"nothing is running in {root}")
    ended = [e for e in read_events(root, ["ts", "pipeline", "run_id", "event", "status",
                                           "message", "details"]).to_pylist()
             if e["event"] == "run_ended"]
    if ended:
        lines.append("")
        lines.append("last runs:")
        for e in sorted(ended, key=lambda e: e["ts"])[-5:]:
            details = json.loads(e["details"] or "{}")
            lines.append(f"  {_time(e['ts'])}  {e['pipeline']}  run {e['run_id']}  "
                         f"{e['status']} after {details.get('seconds', 0):.1f} s"
                         + (f": {e['message']}" if e["message"] else ""))
    flows = flow_summary(root)
    if flows:
        lines.append("")
        lines.append("each flow's last result:")
        rows = [[key, f["status"] or "-", _time(f["at"]), str(f["batches"]), f"{f['rows']:,}",
                 (f["message"] or "")[:100]] for key, f in sorted(flows.items())]
        lines += ["  " + x for x in text_table(["flow", "status", "at (UTC)", "batches",
                                                    "rows", "message"], rows)]
    return lines


def table_history(root: AnyPath, name: str, limit: int = 20) -> list[dict[str, Any]]:
    """The table's Delta commits, newest first, with rows added from the add actions' stats."""
    root = location(root)
    path = root / parse_name(name).relative_path
    if not (path / DELTA_LOG).is_dir():
        raise HeadwaterError(
            "HW_TABLE_NOT_FOUND", f"Table {name!r} does not exist in {root}.",
            "history reads a Delta table's log.",
            f"Tables here: {', '.join(list_tables(root)) or 'none'}.")
    out = []
    for commit in open_table(str(path)).history(limit):
        version = commit["version"]
        info = {"version": version, "time": _time(commit.get("timestamp")),
                "operation": commit.get("operation", "?"),
                "mode": (commit.get("operationParameters") or {}).get("mode", ""),
                "rows_added": None, "files_added": 0, "files_removed": 0, "txn": ""}
        log_file = path / DELTA_LOG / f"{version:020d}.json"
        if log_file.exists():  # cleaned-up log entries keep only their commitInfo
            rows = 0
            known = True
            for line in log_file.read_text().splitlines():
                action = json.loads(line) if line.strip() else {}
                if "add" in action:
                    info["files_added"] += 1
                    stats = json.loads(action["add"].get("stats") or "{}")
                    if "numRecords" in stats:
                        rows += int(stats["numRecords"])
                    else:
                        known = False
                elif "remove" in action:
                    info["files_removed"] += 1
                elif "txn" in action:
                    info["txn"] = f"{action['txn']['appId']}:{action['txn']['version']}"
            info["rows_added"] = rows if known else None
        out.append(info)
    return out


def history_lines(root: AnyPath, name: str, limit: int = 20) -> list[str]:
    commits = table_history(root, name, limit)
    rows = [[str(c["version"]), c["time"], c["operation"], c["mode"],
             "-" if c["rows_added"] is None else f"{c['rows_added']:,}",
             str(c["files_added"]), str(c["files_removed"]), c["txn"]] for c in commits]
    return text_table(["version", "time (UTC)", "operation", "mode", "rows added",
                       "files +", "files -", "writer (app:batch)"], rows)


def stop_runs(root: AnyPath, echo: Callable[[str], None], timeout: float = 180,
              state_dir: Path | None = None) -> int:
    """SIGTERM to each running pipeline of the lakehouse, then wait for it to exit.

    The pipeline stops every flow after its current micro-batch, as on Ctrl-C. Returns how
    many runs were stopped. state_dir: where the run files are (default the root; required
    for a root on an object store).
    """
    runs = [r for r in live_runs(state_folder(root, state_dir)) if r["alive"]]
    if not runs:
        echo(f"nothing is running in {root}")
        return 0
    pids = {int(r["pid"]) for r in runs}
    for run in runs:
        echo(f"stopping pipeline {run['pipeline']} (pid {run['pid']}, run {run['run_id']}) "
             "after its current micro-batches...")
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise HeadwaterError(
                "HW_STOP_TIMEOUT", f"Pipeline process(es) {sorted(pids)} still run after "
                f"{timeout:.0f} s.", "A micro-batch is still running, or the process ignores "
                "SIGTERM.", "Wait, or stop it for good with `kill -9 PID`: the next run "
                "resumes from the checkpoints, exactly once.")
        time.sleep(0.5)
    echo(f"stopped {len(pids)} pipeline process(es)")
    return len(pids)
