"""A case as a Spark Declarative Pipelines project folder, run by ``headwater run`` in a
process of its own (as a user runs it), once per round.

    <work>/<case>/spark-pipeline.yml   name, storage, configuration, database, libraries
    <work>/<case>/notebooks/<name>      the notebooks, edited (dltcorpus.edits), names kept
    <work>/<case>/storage/              the lakehouse (tables, checkpoints, event log)
    <work>/<case>/data/                 the generated inputs, standing for DBFS & co.
    <work>/<case>/run<n>.log            what ``headwater run`` printed
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dltcorpus.cases.base import Case, Env
from dltcorpus.edits import edit_notebook


@dataclass
class RunResult:
    round: int
    ok: bool
    seconds: float
    error: str = ""
    checks: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "ok": self.ok, "seconds": round(self.seconds, 1),
                "error": self.error, "checks": self.checks}


def build(case: Case, repo: Path, folder: Path, env: Env) -> dict[str, list[str]]:
    """Write the project folder; return each notebook's edits."""
    (folder / "notebooks").mkdir(parents=True, exist_ok=True)
    edits: dict[str, list[str]] = {}
    libraries = []
    for rel in case.notebooks:
        source = (repo / rel).read_text(encoding="utf-8")
        text, made = edit_notebook(source, env.data, env.kafka)
        name = rel.rsplit("/", 1)[-1]
        (folder / "notebooks" / name).write_text(text, encoding="utf-8")
        edits[rel] = [str(e) for e in made]
        libraries.append({"glob": {"include": f"notebooks/{name}"}})
    spec: dict[str, Any] = {"name": case.name, "storage": "storage", "libraries": libraries}
    configuration = case.settings(env)
    if configuration:
        spec["configuration"] = configuration
    if case.database:
        spec["database"] = case.database
    (folder / "spark-pipeline.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return edits


def run(folder: Path, round_: int, timeout: float) -> RunResult:
    """``headwater run`` in the project folder; the first error it printed when it failed."""
    log = folder / f"run{round_}.log"
    started = time.monotonic()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "headwater.cli", "run", "--project", str(folder)]
    try:
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        output = proc.stdout + proc.stderr
        ok = proc.returncode == 0
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr) + f"\ntimed out after {timeout:.0f} s"
        ok = False
    log.write_text(output)
    seconds = time.monotonic() - started
    error = "" if ok else first_error(output).replace(f"{folder}/", "")
    return RunResult(round_, ok, seconds, error)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def first_error(output: str) -> str:
    """The first line that says what went wrong (an ``error:`` line, a flow reported FAILED,
    an HW_ error, else the last exception line), without its Why:/Fix: advice."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for test in (lambda ln: ln.startswith("error: "),
                 lambda ln: re.match(r"^\[\s*[\d.]+s\] FAILED\s", ln) is not None,
                 lambda ln: "[HW_" in ln):
        for line in lines:
            if test(line):
                return _short(line)
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception)\b", line) or "timed out after" in line:
            return _short(line)
    return _short(lines[-1]) if lines else "exited with an error and printed nothing"


def _short(line: str) -> str:
    line = re.sub(r"^error: |^\[\s*[\d.]+s\] FAILED\s+", "", line)
    line = line.split(" Why: ")[0]
    return line if len(line) <= 400 else line[:397] + "..."
