"""Run delta-spark's own Python tests and examples against headwater (``bash dev.sh conformance``).

The material in ``../shared/conformance/delta-spark/`` (delta-io/delta's
``python/delta/tests/test_deltatable.py``, ``test_sql.py`` and ``examples/python/*.py``) is
copied unchanged to a temporary folder and run there:

- the tests with pytest, as their authors wrote them: ``from delta.tables import DeltaTable``
  and ``from delta.testing.utils import DeltaTestCase`` come from headwater-delta-spark
  (``compat/delta-spark``), whose DeltaTestCase gives each class a headwater session with a
  lakehouse in a temporary folder;
- the examples as scripts: ``using_with_pip.py`` unchanged, the others with one edit a user
  makes, their ``SparkSession.builder ... .getOrCreate()`` wrapped in
  ``configure_spark_with_delta_pip(...)`` (and its import), as delta-spark's pip instructions
  say.

Prints a table of pass counts and every failure's first line; ``--json FILE`` writes the
results (the docs' compatibility table is built from it); ``--min-tests N`` / ``--min-examples
N`` make the command fail below those counts (CI's floor).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import delta_compat_page  # tools/, beside this file

ROOT = Path(__file__).resolve().parent.parent
MATERIAL = ROOT.parent / "shared" / "conformance" / "delta-spark"
TEST_FILES = ("test_deltatable.py", "test_sql.py")
SESSION_START = re.compile(r"^(?P<indent>[ \t]*)(?P<var>\w+) = (?P<builder>SparkSession\.builder)",
                           re.M)


def with_pip_session(source: str) -> str:
    """The example with its session built through ``configure_spark_with_delta_pip`` (the
    session lines are the only edit; an example that already does so is unchanged)."""
    if "configure_spark_with_delta_pip" in source:
        return source
    match = SESSION_START.search(source)
    if match is None:
        return source
    end = source.index(".getOrCreate()", match.end())
    builder = source[match.start("builder"):end]
    lines = (f"{match.group('indent')}from delta import configure_spark_with_delta_pip\n"
             f"{match.group('indent')}{match.group('var')} = "
             f"configure_spark_with_delta_pip({builder}).getOrCreate()")
    return source[:match.start()] + lines + source[end + len(".getOrCreate()"):]


def run_tests(work: Path, timeout: float, keyword: str | None = None) -> list[dict[str, str]]:
    report = work / "tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o",
           "junit_family=xunit2", f"--junitxml={report}", "--rootdir", str(work), *TEST_FILES]
    if keyword:
        cmd += ["-k", keyword]
    log = work / "tests.log"
    with open(log, "wb") as out:
        subprocess.run(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                       env=_env(work), check=False)
    if not report.is_file():
        print(log.read_text(errors="replace")[-4000:])
        raise SystemExit("the upstream tests did not run (see the log above)")
    results = []
    for case in ET.parse(report).getroot().iter("testcase"):
        status, detail = "passed", ""
        for kind in ("failure", "error"):
            node = case.find(kind)
            if node is not None:
                status = "failed"
                detail = _first_line(node.get("message") or node.text or "")
        if case.find("skipped") is not None:
            status, detail = "skipped", _first_line(case.find("skipped").get("message") or "")
        results.append({"file": case.get("classname", "").split(".")[0] + ".py",
                        "name": case.get("name", ""), "status": status, "detail": detail,
                        "seconds": case.get("time", "")})
    return results


def run_examples(work: Path, timeout: float) -> list[dict[str, str]]:
    results = []
    for example in sorted((MATERIAL / "examples").glob("*.py")):
        target = work / "examples" / example.name
        target.parent.mkdir(exist_ok=True)
        target.write_text(with_pip_session(example.read_text()))
        started = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, str(target)], cwd=target.parent,
                                  capture_output=True, text=True, timeout=timeout,
                                  env=_env(work), check=False)
            ok, output = proc.returncode == 0, proc.stderr or proc.stdout
        except subprocess.TimeoutExpired as exc:
            ok, output = False, f"timed out after {timeout:.0f} s {exc.stderr or ''}"
        (work / "examples" / f"{example.stem}.log").write_text(output or "")
        results.append({"file": f"examples/{example.name}", "name": example.stem,
                        "status": "passed" if ok else "failed",
                        "detail": "" if ok else _last_error(output or ""),
                        "edited": "no" if target.read_text() == example.read_text() else
                        "session line", "seconds": f"{time.monotonic() - started:.1f}"})
    return results


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["HOME"] = env.get("HOME", str(work))
    return env


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _last_error(output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception)\b", line.strip()) or line.startswith("["):
            return line.strip()[:300]
    return (lines[-1] if lines else "")[:300]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--docs", action="store_true",
                        help="write docs/delta-spark-compatibility.md from this run")
    parser.add_argument("--min-tests", type=int, default=0)
    parser.add_argument("--min-examples", type=int, default=0)
    parser.add_argument("--only", choices=("tests", "examples"))
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (tests only)")
    parser.add_argument("--timeout", type=float, default=1500)
    args = parser.parse_args(argv)
    if not MATERIAL.is_dir():
        raise SystemExit(f"no conformance material at {MATERIAL}")
    work = Path(tempfile.mkdtemp(prefix="hw-conformance-"))
    for name in (*TEST_FILES, "LICENSE.txt", "NOTICE.txt"):
        shutil.copy(MATERIAL / name, work / name)
    tests: list[dict[str, str]] = []
    examples: list[dict[str, str]] = []
    try:
        if args.only != "examples":
            tests = run_tests(work, args.timeout, args.keyword)
        if args.only != "tests":
            examples = run_examples(work, min(args.timeout, 300))
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(tests, examples)
    results = {"tests": tests, "examples": examples}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.docs:
        page = ROOT / "docs" / "delta-spark-compatibility.md"
        page.write_text(delta_compat_page.render(results))
        print(f"wrote {page}")
    passed_tests = sum(r["status"] == "passed" for r in tests)
    passed_examples = sum(r["status"] == "passed" for r in examples)
    if passed_tests < args.min_tests or passed_examples < args.min_examples:
        print(f"below the floor: tests {passed_tests} < {args.min_tests} or examples "
              f"{passed_examples} < {args.min_examples}")
        return 1
    return 0


def report(tests: list[dict[str, str]], examples: list[dict[str, str]]) -> None:
    for title, rows in (("delta-spark's tests", tests), ("delta-spark's examples", examples)):
        if not rows:
            continue
        print(f"\n{title}")
        for row in rows:
            mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}[row["status"]]
            line = f"  {mark} {row['file']}::{row['name']}"
            if row["detail"]:
                line += f"  -- {row['detail'][:160]}"
            print(line)
    counts = []
    for title, rows in (("tests", tests), ("examples", examples)):
        if rows:
            passed = sum(r["status"] == "passed" for r in rows)
            counts.append(f"{title} {passed} of {len(rows)}")
    print("\ndelta-spark conformance: " + ", ".join(counts))


if __name__ == "__main__":
    sys.exit(main())
