"""One results-file format for every benchmark, and its writer and checker.

Every script of benchmarks/ writes its measurement with ``--json [PATH]`` (default
``benchmarks/results/<script>.json``) through :class:`Run`, so the docs' Benchmarks page
(tools/docs_site/benchmarks.py) draws tables and charts from what the script measured, with
no hand copying. The file records:

- ``machine``: cores, CPU model, memory, the load average before and after the run, Python's
  and the libraries' versions, the git commit (and whether the tree had other changes);
- ``command``: the command line that reproduces the file (``bash dev.sh bench-...``);
- ``tables``: per table its variants, each with its labels, its medians and every sample
  the medians come from (a median of a metric with samples must be their median);
- ``ratios``: the headline ratios, each with its label and, where one is set, its target
  (``goal`` "at least" or "at most").

``validate`` lists what a file lacks; the docs build fails on any problem (strict) and
tests/test_benchmark_results.py checks every committed file. Files converted from the old
hand-copied tables carry ``older_run`` (why their samples and machine facts are missing).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SCHEMA = 2
LIBRARIES = ("headwater", "pyspark", "deltalake", "pyarrow")
GOALS = ("at least", "at most")
CHART_KINDS = ("bar", "grouped", "line")
# `bench-x) exec .venv/bin/python benchmarks/x.py "$@" ;;` in dev.sh
DEV_SH_BENCH = re.compile(r"^\s*(bench[\w-]*)\)\s*exec \.venv/bin/python (benchmarks/\w+\.py)",
                          re.M)

Label = str | int | float
Json = dict[str, Any]


def bench_commands() -> dict[str, str]:
    """dev.sh's benchmark commands: command name -> script (``benchmarks/x.py``)."""
    return dict(DEV_SH_BENCH.findall((ROOT / "dev.sh").read_text()))


def add_json_argument(parser: argparse.ArgumentParser, script: str) -> None:
    """``--json [PATH]``: write the results file (default benchmarks/results/<script>.json)."""
    parser.add_argument("--json", metavar="PATH", nargs="?",
                        const=str(RESULTS / f"{Path(script).stem}.json"),
                        help="write the results file here (no PATH: "
                             f"benchmarks/results/{Path(script).stem}.json)")


def command_line(script: str, argv: Sequence[str]) -> str:
    """The command that reproduces a run: dev.sh's command for the script when it has one,
    with the run's arguments except where its results went (``--json``)."""
    args, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--json":
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("-")
            continue
        if arg.startswith("--json="):
            continue
        args.append(arg)
    rel = Path(script).resolve().relative_to(ROOT).as_posix()
    named = {s: c for c, s in bench_commands().items()}
    lead = ["bash", "dev.sh", named[rel]] if rel in named else [".venv/bin/python", rel]
    return shlex.join(lead + args)


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _first_line(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_facts(load_before: Sequence[float]) -> Json:
    """What the machine was, and how busy, when the run ended (``load_before``: at its start)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            versions[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            versions[lib] = None
    memory = _first_line("/proc/meminfo", "MemTotal")
    # benchmarks/results is what bench-all rewrites: changes there do not make a run dirty
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                 ":(exclude)benchmarks/results")
    return {
        "cores": os.cpu_count(),
        "cpu": _first_line("/proc/cpuinfo", "model name") or platform.processor() or None,
        "memory_gb": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
        "platform": platform.platform(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "versions": versions,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(dirty) if dirty is not None else None,
    }


def _round(x: float) -> float:
    if isinstance(x, int):
        return x
    return round(float(x), 6) if math.isfinite(x) else x


def variant(labels: Mapping[str, Label], samples: Mapping[str, Sequence[float]],
            values: Mapping[str, float | None] | None = None) -> Json:
    """One row of a table: its labels, every sample per metric and their medians, plus
    ``values`` derived from the medians (rows/s of the median wall time, a ratio)."""
    kept = {k: [_round(x) for x in v] for k, v in samples.items() if len(v)}
    median: dict[str, float | None] = {k: _round(statistics.median(v)) for k, v in kept.items()}
    for k, v in (values or {}).items():
        median[k] = None if v is None else _round(v)
    return {"labels": dict(labels), "median": median, "samples": kept}


def ratio(label: str, value: float | None, target: float | None = None,
          goal: str | None = None, basis: str = "") -> Json:
    """A headline ratio; ``goal`` says whether the target is a floor or a ceiling."""
    if (target is None) != (goal is None):
        raise ValueError(f"{label}: a target needs its goal ({GOALS}) and a goal its target")
    return {"label": label, "value": None if value is None else round(value, 4),
            "target": target, "goal": goal, "basis": basis}


class Run:
    """One benchmark invocation: made at its start (the load average before, the command
    line), filled with tables and ratios, written at its end."""

    def __init__(self, script: str, title: str, setup: str, order: int,
                 parameters: Mapping[str, Any] | None = None,
                 argv: Sequence[str] | None = None) -> None:
        self.script = Path(script).resolve().relative_to(ROOT).as_posix()
        self.started = time.time()
        self.load_before = os.getloadavg()
        self.command = command_line(script, sys.argv[1:] if argv is None else argv)
        self.data: Json = {"schema": SCHEMA, "title": title, "order": order,
                           "script": self.script, "command": self.command, "setup": setup,
                           "parameters": dict(parameters or {}), "tables": [],
                           "ratios": []}

    def table(self, caption: str, columns: Sequence[str], variants: Sequence[Json],
              chart: Mapping[str, Any] | None = None,
              formats: Mapping[str, str] | None = None) -> None:
        table: Json = {"caption": caption, "columns": list(columns),
                       "variants": list(variants)}
        if chart:
            table["chart"] = dict(chart)
        if formats:
            table["formats"] = dict(formats)
        self.data["tables"].append(table)

    def ratio(self, label: str, value: float | None, target: float | None = None,
              goal: str | None = None, basis: str = "") -> None:
        self.data["ratios"].append(ratio(label, value, target, goal, basis))

    def note(self, text: str) -> None:
        """A line the run adds below its tables (a status, a failed variant)."""
        self.data["notes"] = [*self.data.get("notes", []), text]

    def result(self) -> Json:
        out = dict(self.data)
        out["measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started))
        out["duration_s"] = round(time.time() - self.started, 1)
        out["machine"] = machine_facts(self.load_before)
        return out

    def write(self, path: str | Path | None) -> Json:
        """Check the result and write it to ``path`` (nothing when None); returns it."""
        out = self.result()
        problems = validate(out)
        if problems:
            raise ValueError("benchmark result does not match benchmarks/results.py: "
                             + "; ".join(problems))
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
            print(f"results written to {path}")
        return out


# --- the checker ---------------------------------------------------------------------------

REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": int, "title": str, "order": int, "script": str, "command": str,
    "measured": str, "setup": str, "parameters": dict, "machine": dict, "tables": list,
    "ratios": list}
MACHINE = ("cores", "loadavg_before", "loadavg_after", "versions", "git_commit")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?$")


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def validate(data: Any) -> list[str]:
    """What ``data`` lacks to be a results file (empty: it is one)."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    problems = [f"missing {k!r}" for k in REQUIRED if k not in data]
    problems += [f"{k!r} must be {t}" for k, t in REQUIRED.items()
                 if k in data and not isinstance(data[k], t)]
    if problems:
        return problems
    older = data.get("older_run")
    if older is not None and not (isinstance(older, str) and older):
        problems.append("'older_run' must say why (a string)")
    if data["schema"] != SCHEMA:
        problems.append(f"schema {data['schema']}, expected {SCHEMA}")
    if not DATE.match(data["measured"]):
        problems.append(f"'measured' {data['measured']!r} is not YYYY-MM-DD[THH:MM:SSZ]")
    if not (ROOT / data["script"]).is_file():
        problems.append(f"script {data['script']} does not exist")
    problems += _validate_machine(data["machine"], older is not None)
    if not data["tables"]:
        problems.append("no tables")
    for i, table in enumerate(data["tables"]):
        problems += [f"table {i}: {p}" for p in _validate_table(table, older is not None)]
    for i, r in enumerate(data["ratios"]):
        problems += [f"ratio {i}: {p}" for p in _validate_ratio(r)]
    return problems


def _validate_machine(machine: Json, older: bool) -> list[str]:
    problems = [f"machine: missing {k!r}" for k in MACHINE if k not in machine]
    if problems or older:  # an older run keeps the keys, its values may be unknown (null)
        return problems
    if not isinstance(machine["cores"], int):
        problems.append("machine: 'cores' must be a number")
    for key in ("loadavg_before", "loadavg_after"):
        value = machine[key]
        if not (isinstance(value, list) and len(value) == 3 and all(map(_number, value))):
            problems.append(f"machine: {key!r} must be the 3 load averages")
    versions = machine["versions"]
    if not (isinstance(versions, dict) and {"python", *LIBRARIES} <= set(versions)):
        problems.append(f"machine: 'versions' must name python and {', '.join(LIBRARIES)}")
    if not isinstance(machine["git_commit"], str):
        problems.append("machine: 'git_commit' missing (not run from a git checkout?)")
    return problems


def _validate_table(table: Any, older: bool) -> list[str]:
    if not isinstance(table, dict):
        return ["not an object"]
    missing = [k for k in ("caption", "columns", "variants") if k not in table]
    if missing:
        return [f"missing {missing}"]
    columns, problems = table["columns"], []
    if not table["variants"]:
        problems.append("no variants")
    for j, v in enumerate(table["variants"]):
        where = f"variant {j}"
        if not (isinstance(v, dict) and {"labels", "median", "samples"} <= set(v)):
            problems.append(f"{where}: needs labels, median and samples")
            continue
        absent = [c for c in columns if c not in v["labels"] and c not in v["median"]]
        if absent:
            problems.append(f"{where}: no value for columns {absent}")
        if not older and not v["samples"]:
            problems.append(f"{where}: no samples")
        for metric, samples in v["samples"].items():
            if not (isinstance(samples, list) and samples and all(map(_number, samples))):
                problems.append(f"{where}: samples of {metric!r} must be numbers")
                continue
            med = v["median"].get(metric)
            if not _number(med) or not math.isclose(med, statistics.median(samples),
                                                    rel_tol=1e-6, abs_tol=1e-9):
                problems.append(f"{where}: median of {metric!r} is {med}, its samples' "
                                f"median {statistics.median(samples)}")
    chart = table.get("chart")
    if chart is not None:
        problems += _validate_chart(chart, columns)
    return problems


def _validate_chart(chart: Any, columns: list[str]) -> list[str]:
    if not isinstance(chart, dict) or chart.get("kind") not in CHART_KINDS:
        return [f"chart kind must be one of {CHART_KINDS}"]
    kind = chart["kind"]
    needs = {"bar": ("label", "value"), "grouped": ("label", "series"),
             "line": ("x", "y", "series")}[kind]
    missing = [k for k in needs if k not in chart]
    if missing:
        return [f"{kind} chart needs {missing}"]
    named = [n for k in needs for n in (chart[k] if isinstance(chart[k], list) else [chart[k]])]
    unknown = [n for n in named if n not in columns]
    return [f"chart names columns the table lacks: {unknown}"] if unknown else []


def _validate_ratio(r: Any) -> list[str]:
    if not isinstance(r, dict) or not isinstance(r.get("label"), str):
        return ["needs a label"]
    problems = []
    if "value" not in r or not (r["value"] is None or _number(r["value"])):
        problems.append(f"{r['label']}: value must be a number or null")
    target, goal = r.get("target"), r.get("goal")
    if (target is None) != (goal is None) or (goal is not None and goal not in GOALS) or \
            (target is not None and not _number(target)):
        problems.append(f"{r['label']}: a target is a number with its goal, one of {GOALS}")
    return problems


def met(r: Json) -> bool | None:
    """Whether a ratio meets its target (None: no target or no value)."""
    if r.get("target") is None or r.get("value") is None:
        return None
    return r["value"] >= r["target"] if r["goal"] == "at least" else r["value"] <= r["target"]


def load(path: Path) -> Json:
    """A results file, checked: raises ValueError naming every problem."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from exc
    problems = validate(data)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems) + " (format: benchmarks/results.py)")
    return data
