"""What the dashboard shows, computed from the lakehouse alone (deltalake and pyarrow).

Everything comes from files under the lakehouse root: the event log, the tables' Delta logs
and the run files. Table and event-log reads are cached by Delta version, so a page polling
every two seconds costs a log listing per table when nothing changed.

Nothing here leaves the lakehouse: table names, never their paths; messages have absolute
paths outside the root replaced and anything that looks like a credential masked.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from pathlib import Path
from typing import Any

from headwater.conf.layout import LATE_SUFFIX, QUARANTINE_SUFFIX, SIDE_SUFFIXES
from headwater.conf.location import AnyPath, known_state_folder, location
from headwater.delta.log import arrow_dataset, open_table
from headwater.lakehouse import list_tables, parse_name
from headwater.monitor.events import EVENT_LOG, expectation_counts, read_events
from headwater.monitor.lag import local_version
from headwater.monitor.run import live_runs

SERIES_POINTS = 120  # per flow, for the charts
RECENT_ERRORS = 20
# what the page needs; the offsets, durations and observed metrics (the bulk) stay on disk
STATE_COLUMNS = ["ts", "pipeline", "run_id", "event", "flow", "table_name", "status",
                 "batch_id", "trigger_time", "input_rows", "input_rows_per_second",
                 "processed_rows_per_second", "batch_duration_ms", "watermark", "state_rows",
                 "late_rows_dropped", "expectations", "recovered", "message", "details"]

# key=value, key: value and 'key': 'value' (a dict's repr, JSON); the value runs to the next
# space, comma, semicolon or ampersand, or is quoted
_SECRET = re.compile(
    r"(?i)((?:secret|password|passwd|token|credential|access[._-]?key|secret[._-]?key|"
    r"sas|signature)[\w.-]*[\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)")
# a Scala Map's dotted conf key -> value (Map(fs.s3a.secret.key -> ...)): only dotted keys,
# so ordinary arrows ("bronze_tokens -> silver") stay as they are
_SECRET_CONF = re.compile(
    r"(?i)(\b(?:[\w-]+\.)+[\w.-]*(?:secret|password|token|credential|access[._-]?key)"
    r"[\w.-]*\s*->\s*)([^\s,)]+)")
# an object-store URI (s3://bucket/key, az://..., gs://...; not file:) or a local path
_PATH = re.compile(r"\b(?!file:)([a-z][a-z0-9+.-]*://[^\s'\"<>,;)\]]+)"
                   r"|(?:file:)?(/[^\s'\"<>:,;)\]]+)")


def redact(text: str | None, root: AnyPath | str) -> str | None:
    """``text`` without credentials or paths outside ``root`` (paths inside become relative).

    root: a local folder or an object-store URI; object-store URIs in ``text`` are paths
    like any other (inside the root: relative; elsewhere: replaced)."""
    if text is None:
        return None
    text = _SECRET.sub(lambda m: m.group(1) + "****", text)
    text = _SECRET_CONF.sub(lambda m: m.group(1) + "****", text)
    root_text = str(root).rstrip("/")

    def path(match: re.Match) -> str:
        found = match.group(1) or match.group(2)
        if found == root_text or found.startswith(root_text + "/"):
            return found[len(root_text) + 1:] or "."
        return "<path outside the lakehouse>"

    return _PATH.sub(path, text)


class DashboardState:
    def __init__(self, root: str | Path | AnyPath, state_dir: str | Path | None = None) -> None:
        self.root: AnyPath = location(root)
        self.state_dir = known_state_folder(self.root, state_dir)  # None: no run files
        self._tables: dict[str, tuple[int, dict[str, Any]]] = {}
        self._events: tuple[int, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            events = self._event_part()
            runs = [{"pipeline": r.get("pipeline"), "run_id": r.get("run_id"),
                     "mode": r.get("mode"), "started": r.get("started"), "alive": r["alive"],
                     "flows": r.get("flows", {})} for r in live_runs(self.state_dir)]
            tables = self._table_part()
        running = [r for r in runs if r["alive"]]
        graph = events["graph"]
        for table in tables:
            table["kind"] = _kind(table["name"], graph)
        return {
            "generated_at": _iso(dt.datetime.now(dt.UTC)),
            "lakehouse": self.root.name,
            "pipeline": events["pipeline"],
            "running": running,
            "abrupt_ends": [r["run_id"] for r in runs if not r["alive"]],
            "last_run": events["last_run"],
            "graph": graph,
            "tables": tables,
            "flows": events["flows"],
            "series": events["series"],
            "expectations": events["expectations"],
            "late": {"dropped_by_watermark": events["late_dropped"],
                     "kept": {t["name"][:-len(LATE_SUFFIX)]: t["rows"] for t in tables
                              if t["name"].endswith(LATE_SUFFIX)}},
            "quarantined": {t["name"][:-len(QUARANTINE_SUFFIX)]: t["rows"] for t in tables
                            if t["name"].endswith(QUARANTINE_SUFFIX)},
            "errors": events["errors"],
        }

    # --- tables --------------------------------------------------------------------------

    def _table_part(self) -> list[dict[str, Any]]:
        out = []
        for name in list_tables(self.root):
            if name == EVENT_LOG:
                continue
            path = self.root / parse_name(name).relative_path
            try:
                version = local_version(path)
                cached = self._tables.get(name)
                if cached is None or cached[0] != version:
                    table = open_table(str(path))
                    version = table.version()
                    history = table.history(1)
                    committed = history[0].get("timestamp") if history else None
                    info = {"name": name, "version": version,
                            "rows": arrow_dataset(table).count_rows(),
                            "last_commit": _iso(_ms(committed)),
                            "operation": history[0].get("operation") if history else None}
                    self._tables[name] = (version, info)
                info = dict(self._tables[name][1])
            except Exception:  # noqa: BLE001 - a table being created or dropped right now
                continue
            last = _parse(info["last_commit"])
            info["freshness_seconds"] = None if last is None else round(
                (dt.datetime.now(dt.UTC) - last).total_seconds(), 1)
            out.append(info)
        return out

    # --- the event log -------------------------------------------------------------------

    def _event_part(self) -> dict[str, Any]:
        version = local_version(self.root / EVENT_LOG)
        if self._events is not None and self._events[0] == version:
            return self._events[1]
        part = self._summarize(read_events(self.root, STATE_COLUMNS).to_pylist()
                               if version >= 0 else [])
        self._events = (version, part)
        return part

    def _summarize(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        rows.sort(key=lambda e: e["ts"])
        starts = [e for e in rows if e["event"] == "run_started"]
        graph: dict[str, Any] = {}
        pipeline = None
        if starts:
            pipeline = starts[-1]["pipeline"]
            graph = json.loads(starts[-1]["details"] or "{}").get("graph", {})
        ended = [e for e in rows if e["event"] == "run_ended"]
        last_run = None
        if ended:
            e = ended[-1]
            last_run = {"run_id": e["run_id"], "status": e["status"], "ended": _iso(e["ts"]),
                        "seconds": json.loads(e["details"] or "{}").get("seconds"),
                        "message": redact(e["message"], self.root)}
        flows: dict[str, dict[str, Any]] = {}
        series: dict[str, list[dict[str, Any]]] = {}
        expectations: dict[str, dict[str, dict[str, int]]] = {}
        late: dict[str, int] = {}
        errors = []
        for e in rows:
            key = e["flow"]
            if key:
                f = flows.setdefault(key, {"flow": key, "table": e["table_name"],
                                           "status": None, "batches": 0, "input_rows": 0,
                                           "rows_per_second": None, "last_batch_ms": None,
                                           "watermark": None, "last_batch_at": None,
                                           "state_rows": None, "recovered_batches": 0,
                                           "cdc": None})
            if e["event"] == "progress":
                f["batches"] += 1
                f["input_rows"] += e["input_rows"] or 0
                f["recovered_batches"] += 1 if e["recovered"] else 0
                if e["recovered"]:
                    continue
                f.update(rows_per_second=e["processed_rows_per_second"],
                         last_batch_ms=e["batch_duration_ms"],
                         last_batch_at=_iso(e["trigger_time"]),
                         watermark=_iso(e["watermark"]) or f["watermark"],
                         state_rows=e["state_rows"])
                series.setdefault(key, []).append({
                    "t": _iso(e["trigger_time"]), "batch": e["batch_id"],
                    "rows": e["input_rows"], "input_rate": e["input_rows_per_second"],
                    "processing_rate": e["processed_rows_per_second"],
                    "duration_ms": e["batch_duration_ms"]})
                cdc = json.loads(e["details"] or "{}").get("cdc")
                if cdc:  # AUTO CDC flows: what the batches did to the target
                    totals = f["cdc"] = f["cdc"] or {}
                    for name, n in cdc.items():
                        totals[name] = totals.get(name, 0) + int(n or 0)
                if e["late_rows_dropped"]:
                    late[key] = late.get(key, 0) + e["late_rows_dropped"]
                _add_counts(expectations, json.loads(e["expectations"] or "{}"),
                            e["table_name"])
            elif e["event"] == "flow_status":
                f["status"] = e["status"]
                details = json.loads(e["details"] or "{}")
                refreshed = details.get("expectations")
                if refreshed:  # a materialized view's refresh: its counts, in one event
                    _add_counts(expectations, expectation_counts(refreshed, e["table_name"]),
                                e["table_name"])
                if details.get("cdc"):  # AUTO CDC FROM SNAPSHOT: the snapshots applied
                    totals = f["cdc"] = f["cdc"] or {}
                    for name, n in details["cdc"].items():
                        totals[name] = totals.get(name, 0) + int(n or 0)
                if e["status"] == "failed":
                    errors.append({"at": _iso(e["ts"]), "flow": key, "run_id": e["run_id"],
                                   "message": redact(e["message"], self.root)})
            elif e["event"] == "run_ended" and e["status"] == "failed":
                errors.append({"at": _iso(e["ts"]), "flow": None, "run_id": e["run_id"],
                               "message": redact(e["message"], self.root)})
        return {"pipeline": pipeline, "graph": graph, "last_run": last_run,
                "flows": sorted(flows.values(), key=lambda f: f["flow"]),
                "series": {k: v[-SERIES_POINTS:] for k, v in series.items()},
                "expectations": expectations, "late_dropped": late,
                "errors": errors[-RECENT_ERRORS:][::-1]}


def _add_counts(totals: dict[str, dict[str, dict[str, int]]], counts: dict[str, Any],
                table: str) -> None:
    """One event's expectation counts added to ``totals`` (dataset -> rule -> passed/failed);
    a view's rules come in the events of the flows reading it, named by their dataset."""
    for rule, c in counts.items():
        entry = totals.setdefault(c.get("dataset", table), {}).setdefault(
            c.get("rule", rule), {"passed": 0, "failed": 0})
        entry["passed"] += c["passed"]
        entry["failed"] += c["failed"]


def _kind(name: str, graph: dict[str, Any]) -> str:
    for suffix, kind in SIDE_SUFFIXES.items():
        if name.endswith(suffix):
            return kind
    if name in graph:
        return str(graph[name]["kind"]).replace("_", " ")
    return "table"


def _ms(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    return dt.datetime.fromtimestamp(value / 1000, dt.UTC)


def _iso(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds")


def _parse(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None
