"""House rules checked on the source: imports at the top of headwater's modules (issue 24).

An import stays inside a function only with ``# noqa: PLC0415 - <why>: <reason>`` on its line,
``why`` one of ``worker`` (a heavy module kept out of the Spark Python workers that never use
it), ``optional`` (a dependency that may be missing) or ``cycle`` (an import cycle no move of
code breaks). These tests hold each reason to what it claims.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import headwater

SRC = Path(headwater.__file__).resolve().parent
ROOT = SRC.parents[1]
REASON = re.compile(r"#\s*noqa:\s*PLC0415\s+-\s+(worker|optional|cycle):\s*\S")
# The modules of the data sources, readers and writers Spark pickles to its Python workers:
# each worker imports one data source's module and one role's (and what they import) before
# it plans, reads or writes anything. delta.datasource imports each role's module only where
# that role is made (a stream's planner does not load the sink's stack).
WORKER_ENTRIES = ("headwater.delta.datasource", "headwater.delta.source",
                  "headwater.delta.batch", "headwater.delta.sink", "headwater.delta.cdf",
                  "headwater.delta.filelist", "headwater.ingest.source",
                  "headwater.kafka.source")


def _deferred_imports() -> list[tuple[str, int, str, str]]:
    """(module, line, imported module, the line's text) of each import inside a function."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = path.read_text()
        lines = text.splitlines()

        def visit(node: ast.AST, in_function: bool, module: str = module,
                  lines: list[str] = lines) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    visit(child, True)
                elif isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                    name = (child.names[0].name if isinstance(child, ast.Import)
                            else child.module or "")
                    found.append((module, child.lineno, name, lines[child.lineno - 1]))
                else:
                    visit(child, in_function)

        visit(ast.parse(text), False)
    return found


def test_ruff_finds_no_import_inside_a_function_without_its_noqa():
    """pyproject.toml selects PLC0415 for the package, and ruff finds nothing unmarked."""
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "PLC0415" in lint["select"]
    ignored_for_src = [pattern for pattern, codes in lint.get("per-file-ignores", {}).items()
                       if pattern.startswith(("src", "*")) and "PLC0415" in codes]
    assert ignored_for_src == []
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "--select", "PLC0415", "--output-format",
                           "json", str(SRC)], capture_output=True, text=True, cwd=ROOT)
    found = [f"{d['filename']}:{d['location']['row']}" for d in json.loads(proc.stdout or "[]")]
    assert proc.returncode == 0 and found == [], "\n".join(found) or proc.stderr


def _worker_modules() -> dict[str, set[str]]:
    """Per data-source entry module, every module a fresh process has imported once it
    imported that entry (what Spark's planner and workers load to unpickle it)."""
    script = ("import json, subprocess, sys\n"
              "out = {}\n"
              "for entry in sys.argv[1:]:\n"
              "    code = f'import json, sys, {entry}; print(json.dumps(sorted(sys.modules)))'\n"
              "    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, "
              "text=True, check=True)\n"
              "    out[entry] = json.loads(proc.stdout)\n"
              "print(json.dumps(out))")
    proc = subprocess.run([sys.executable, "-c", script, *WORKER_ENTRIES], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    return {entry: set(modules) for entry, modules in json.loads(proc.stdout).items()}


def _kept_out(module: str, name: str, per_entry: dict[str, set[str]]) -> bool:
    """A third-party package: imported by no entry at all. One of headwater's own modules
    (a role's whole stack, e.g. the sink's): some entry that imports ``module`` does not
    import ``name``."""
    union = set().union(*per_entry.values())
    if module not in union:
        return False
    if name.split(".")[0] != "headwater":
        return name.split(".")[0] not in union
    return any(module in modules and name not in modules for modules in per_entry.values())


def test_every_import_left_inside_a_function_says_a_true_reason_on_its_line():
    """``worker``: the module is on a Spark worker's import path and the deferred package is
    not imported there; ``optional``: the package is no required dependency of headwater."""
    worker_modules = _worker_modules()
    required = {re.split(r"[\s<>=!~\[;]", dep, maxsplit=1)[0].lower()
                for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())
                ["project"]["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    wrong = []
    for module, line, name, text in _deferred_imports():
        where, top = f"{module}:{line}: {name}", name.split(".")[0]
        reason = REASON.search(text)
        if reason is None:
            wrong.append(f"{where}: no `# noqa: PLC0415 - worker|optional|cycle: <reason>` "
                         "(or move it to the top)")
        elif reason.group(1) == "worker" and not _kept_out(module, name, worker_modules):
            wrong.append(f"{where}: not kept out of Spark's workers by this import")
        elif reason.group(1) == "optional" and required & {
                d.lower() for d in distributions.get(top, [top])}:
            wrong.append(f"{where}: a required dependency, not an optional one")
    assert wrong == [], "\n".join(wrong)


def test_a_delta_streams_planner_imports_the_stream_reader_alone():
    """Spark starts a fresh Python process to plan every Delta stream, which unpickles the
    data source and its stream reader: the sink's, the batch's and the change feed's stacks and
    pyarrow.parquet/compute stay out of it (they cost ~60 ms per query start); delta-rs loads
    only when the reader opens the table."""
    script = ("import json, sys\n"
              "import headwater.delta.datasource, headwater.delta.source\n"
              "print(json.dumps(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert "headwater.delta.source" in loaded
    assert loaded & {"headwater.delta.sink", "headwater.delta.batch", "headwater.delta.cdf",
                     "headwater.delta.files", "pyarrow.parquet", "pyarrow.compute",
                     "deltalake"} == set()


def test_no_test_reads_the_shared_folder_without_the_skip_guard():
    """A fresh clone has no ../shared: a test reaches the golden tables only through
    tests.support.golden() (which skips, naming what is missing) or, in test_golden.py, a
    skipif on the same folder; no other test names ../shared or the machine's /work/shared."""
    tests = Path(__file__).resolve().parent
    offenders = []
    for path in sorted(tests.glob("*.py")):
        if path.name in ("support.py", "test_conventions.py"):
            continue
        text = path.read_text()
        if path.name != "test_golden.py" and \
                re.search(r"/work/shared|\.\./shared|/\s*[\"']shared[\"']", text):
            offenders.append(f"{path.name}: names the shared folder")
        if path.name != "test_golden.py" and re.search(r"\bGOLDEN\b", text):
            offenders.append(f"{path.name}: uses GOLDEN directly (use tests.support.golden)")
    assert not offenders, offenders


# One boundary to the JVM (issue 36): py4j's handles (pyspark's private attributes that hold
# JVM objects, the SQL parser's session state, private JVM fields, py4j itself) are reached
# in headwater/spark/jvm.py; other modules call its named functions and may walk the JVM
# objects it hands them (a parsed plan's nodes), never reach for a handle themselves.
JVM_BOUNDARY = "spark/jvm.py"
JVM_HANDLE = re.compile(
    r"(?<![A-Za-z0-9_])_(jvm|jsparkSession|jdf|jwrite|jreader|jsc|jconf|jseq|jc|gateway"
    r"|gateway_client)\b"
    r"|sessionState\(\)|\b(set_)?private_field\b|\bdeclared_field\b"
    r"|^\s*(from|import)\s+(py4j|pyspark\.java_gateway)\b", re.MULTILINE)
# Modules outside the boundary allowed to touch handles, each with its reason. Only ever
# shorter: a new entry needs a reason of this kind, not convenience.
JVM_ALLOWED = {
    "delta/file_index.py": "implements Spark's FileIndex in Python (py4j calls it back while "
                           "Spark plans): JVM arrays made on the gateway, classes looked up "
                           "once per gateway, the relation built around the index",
    "delta/native_source.py": "implements Spark's streaming Source in Python (py4j calls it "
                              "back from the query's micro-batch thread): offsets, the "
                              "stream's relation and each batch's DataFrame built in the JVM",
    "spark/micro_batch_sink.py": "implements Spark's streaming Sink in Python (py4j callbacks) "
                                 "and starts a query through DataStreamWriter's private "
                                 "startQuery by reflection, with the writer's own fields",
}


def _jvm_handle_files() -> dict[str, int]:
    """Module (relative to the package) -> how many lines touch a py4j handle."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == JVM_BOUNDARY:
            continue
        lines = {path.read_text()[:m.start()].count("\n")
                 for m in JVM_HANDLE.finditer(path.read_text())}
        if lines:
            found[rel] = len(lines)
    return found


def test_py4j_handles_are_reached_only_through_the_jvm_boundary():
    found = _jvm_handle_files()
    outside = sorted(set(found) - set(JVM_ALLOWED))
    assert not outside, ("py4j handles outside headwater/spark/jvm.py (add a named function "
                         f"there and call it): {[f'{f} ({found[f]} lines)' for f in outside]}")
    stale = sorted(set(JVM_ALLOWED) - set(found))
    assert not stale, f"allow-listed but no longer touching py4j handles (remove): {stale}"


def test_the_jvm_guard_sees_each_kind_of_handle():
    for line in ("x = spark._jvm.a", "spark._jsparkSession.sql(q)", "df._jdf.plan()",
                 'getattr(w, "_jwrite", None)', "r._jreader", "sc._gateway", "c._jc",
                 "p = s.sessionState().sqlParser()", "private_field(w, 'source')",
                 "from py4j.java_gateway import JavaObject",
                 "from pyspark.java_gateway import ensure_callback_server_started"):
        assert JVM_HANDLE.search(line), line
    for line in ("jvm = jvm_view(spark)", "from headwater.spark.jvm import JavaObject",
                 "node.getClass().getSimpleName()", "self._jvm_of = 1"):
        assert not JVM_HANDLE.search(line), line
