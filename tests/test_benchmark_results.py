"""The benchmarks' results files: one schema, written by the scripts themselves (issue 27).

No Spark benchmark runs here: the committed files are checked against benchmarks/results.py's
schema (what the docs build also enforces), every ``bench-*`` command of dev.sh must have its
file, and the one benchmark that needs no JVM (auto compaction, a few seconds) writes a file
for real.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tools" / "docs_site")]

import benchmarks as docs_page  # noqa: E402 - tools/docs_site/benchmarks.py

import autocompact_files  # noqa: E402 - benchmarks/ on sys.path first
import pipeline_vs_sdp  # noqa: E402
import results  # noqa: E402

FILES = sorted(results.RESULTS.glob("*.json"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_results_file_matches_the_schema(path: Path) -> None:
    data = results.load(path)  # raises naming every problem
    assert data["script"] == f"benchmarks/{path.stem}.py", "a file is named after its script"
    assert data["command"].startswith(results.command_line(data["script"], [])), \
        "the command reproducing it is the script's dev.sh command"


def test_every_bench_command_has_its_results_file_and_every_file_its_command() -> None:
    commands = results.bench_commands()
    assert {"bench", "bench-pipeline", "bench-ingest", "bench-eventlog", "bench-freshness",
            "bench-cdc", "bench-dml", "bench-builder"} <= set(commands)
    for command, script in commands.items():
        assert (results.RESULTS / f"{Path(script).stem}.json").is_file(), \
            f"`bash dev.sh {command} --json` has not written its results file"
        source = (ROOT / script).read_text()
        assert "results_file.add_json_argument(parser, __file__)" in source, script
        assert ".write(args.json)" in source, script
    scripts = set(commands.values())
    for path in FILES:
        assert f"benchmarks/{path.stem}.py" in scripts, f"{path.name}: no dev.sh command runs it"
    dev = (ROOT / "dev.sh").read_text()
    assert "bench-all)" in dev and '--json "$@"' in dev


def test_the_checker_names_what_a_file_lacks(tmp_path: Path) -> None:
    good = json.loads((results.RESULTS / "delta_io.json").read_text())
    assert results.validate(good) == []
    for key in ("command", "machine", "tables", "measured"):
        broken = {k: v for k, v in good.items() if k != key}
        assert f"missing {key!r}" in results.validate(broken)
    path = tmp_path / "delta_io.json"
    path.write_text(json.dumps({**good, "ratios": [{"label": "x", "value": 1.0,
                                                   "target": 0.9, "goal": None}]}))
    with pytest.raises(ValueError, match="a target is a number with its goal"):
        results.load(path)


def test_a_new_run_needs_its_samples_machine_and_medians_of_its_samples() -> None:
    run = results.Run(str(ROOT / "benchmarks" / "table_builder.py"), "t", "s", 1,
                      argv=["--rows", "10", "--json", "/tmp/x.json", "--smoke"])
    assert run.command == "bash dev.sh bench-builder --rows 10 --smoke"
    run.table("c", ["variant", "wall s"], [results.variant({"variant": "a"},
                                                           {"wall s": [3.0, 1.0, 2.0]})])
    data = run.result()
    assert results.validate(data) == []
    assert data["tables"][0]["variants"][0]["median"]["wall s"] == 2.0
    machine = data["machine"]
    assert machine["cores"] and len(machine["loadavg_after"]) == 3
    assert set(results.LIBRARIES) <= set(machine["versions"])
    wrong = json.loads(json.dumps(data))
    wrong["tables"][0]["variants"][0]["median"]["wall s"] = 1.0
    assert any("samples' median 2.0" in p for p in results.validate(wrong))
    unsampled = json.loads(json.dumps(data))
    unsampled["tables"][0]["variants"][0]["samples"] = {}
    assert any("no samples" in p for p in results.validate(unsampled))
    unsampled["older_run"] = "hand-copied"  # converted files keep what they had
    assert results.validate(unsampled) == []
    del machine["git_commit"]
    assert "machine: missing 'git_commit'" in results.validate(data)


def test_the_autocompact_benchmark_writes_a_valid_results_file(tmp_path: Path) -> None:
    out = tmp_path / "autocompact_files.json"
    autocompact_files.main(["--smoke", "--json", str(out)])
    data = results.load(out)
    assert data["parameters"]["smoke"] is True
    assert data["command"] == "bash dev.sh bench-autocompact --smoke"
    files = {v["labels"]["table"]: v["median"]["files"] for v in data["tables"][0]["variants"]}
    assert files["without auto compaction"] == 50 and files["with auto compaction"] < 50
    assert data["ratios"][0]["value"] == files["with auto compaction"] / 50


def test_the_page_shows_each_files_command_machine_and_older_runs() -> None:
    page = docs_page.page()
    for name, data in docs_page.load():
        assert f"Reproduce: `{data['command']}`" in page, name
        assert f"benchmarks/results/{name}.json" in page
    older = [d for _, d in docs_page.load() if d.get("older_run")]
    assert page.count('!!! note "Older run"') == len(older)
    fresh = [d for _, d in docs_page.load() if not d.get("older_run")]
    for data in fresh:
        assert docs_page.machine_line(data) in page
        assert data["machine"]["git_commit"][:10] in page


def test_an_invalid_results_file_fails_the_page(tmp_path: Path, monkeypatch) -> None:
    """What `bash dev.sh docs` builds from: a file missing a required field is an error."""
    data = json.loads((results.RESULTS / "dml.json").read_text())
    del data["machine"]["git_commit"]
    (tmp_path / "dml.json").write_text(json.dumps(data))
    monkeypatch.setattr(docs_page, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match="machine: missing 'git_commit'"):
        docs_page.page()


def test_reaping_a_runs_leftovers_never_touches_the_callers_own_children():
    """The benchmark harness runs inside a test session (test_sdp_projects' 20-dataset
    smoke run): its clean-up kills what a run left behind, never the caller's children (the
    session's own JVM; CI once lost it this way, failing every later test of that worker)."""
    own = subprocess.Popen(["sleep", "60"])
    try:
        keep = pipeline_vs_sdp.children()
        assert own.pid in keep
        left = subprocess.Popen(["sleep", "60"])  # what a run would leave
        assert pipeline_vs_sdp.reap_orphans(0.2, keep) == [left.pid]
        assert left.poll() is not None or left.wait(timeout=5) is not None
        assert own.poll() is None  # still running
    finally:
        own.kill()
        own.wait()


def test_a_benchmark_run_in_a_callers_process_leaves_it_no_subreaper_nor_zombies():
    """The harness adopts its tools' orphans while it runs; after, the caller (a test session)
    adopts nothing and keeps no zombie of them: a zombie still belongs to its process group,
    and test_cli waits for a stopped run's group to vanish (CI failed on exactly that)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def subreaper() -> int:
        flag = ctypes.c_int(-1)
        assert libc.prctl(37, ctypes.byref(flag), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
        return flag.value

    def zombies() -> set[int]:
        return {p for p in pipeline_vs_sdp.children()
                if Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"}

    assert pipeline_vs_sdp.make_subreaper()
    subprocess.run(["sh", "-c", "sleep 0.3 & exit 0"], check=True)  # its sleep: an orphan
    time.sleep(1.0)
    assert zombies()  # adopted, exited, not reaped yet
    pipeline_vs_sdp.clear_subreaper()
    assert subreaper() == 0 and not zombies()
