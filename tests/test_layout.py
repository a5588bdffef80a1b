"""Reserved names live in conf/layout.py only; no configuration through environment variables
or attributes set on SparkSession (issue 12)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import headwater
from headwater.conf import layout

SRC = Path(headwater.__file__).resolve().parent

RESERVED = {
    layout.CHECKPOINTS, layout.INGEST, layout.RUNS, layout.EVENT_LOG, layout.WAREHOUSE,
    layout.SCHEMAS, layout.QUARANTINE_SUFFIX, layout.LATE_SUFFIX, layout.EXPECTATIONS_METRICS,
    layout.INGEST_METRICS, layout.FLOW_STATE, layout.FILE_INDEX, layout.DELTA_LOG,
    layout.LAKEHOUSE_ROOT_CONF, layout.LOG_LEVEL_CONF, layout.FAULT_ENV, layout.FAULT_TABLE_ENV,
    layout.EVENT_FLUSH_SECONDS_ENV,
}
# Text written for users (generated pipeline files, demo checks) may name tables as users see
# them; and ingest/api.py's _default_location belongs to the pipeline-model work (HOUSE.md
# contract 3) and moves to layout.INGEST when it lands.
ALLOWED: set[tuple[str, str]] = set()
USER_TEXT = ("demo/", "pipeline/scaffold.py")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants in code that name things (no spaces: messages may mention a name)."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and " " not in node.value]


def _pattern(name: str) -> re.Pattern[str]:
    # "_ingest" must not match "_ingest_x" or "hw_ingest"; "ingest:" must not match "_ingest"
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")


def test_reserved_names_are_spelled_only_in_conf_layout():
    patterns = {name: _pattern(name) for name in RESERVED}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "conf/layout.py" or rel.startswith(USER_TEXT):
            continue
        for line, text in _code_strings(path):
            for name, pattern in patterns.items():
                if pattern.search(text) and (rel, name) not in ALLOWED:
                    found.append(f"{rel}:{line} {name!r} in {text!r}")
    assert not found, "use headwater.conf.layout instead:\n" + "\n".join(found)


def test_no_configuration_through_environment_or_session_attributes():
    """Env vars read by headwater are test hooks documented in conf/layout.py, and the one
    setting read before the JVM starts (the class archive); nothing is set on SparkSession
    (spark._headwater_...)."""
    hooks = {layout.FAULT_ENV, layout.FAULT_TABLE_ENV, layout.EVENT_FLUSH_SECONDS_ENV,
             layout.KAFKA_FLUSH_TIMEOUT_ENV, layout.LEASE_ALWAYS_ENV, layout.LEASE_TTL_ENV,
             layout.CLASS_ARCHIVE_ENV}
    spark_env = {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "JAVA_HOME",  # Spark's own
                 "XDG_CACHE_HOME"}  # where the class archive goes by default
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text()
        for match in re.finditer(r"\bspark\w*\._headwater\w*", text):
            problems.append(f"{rel}: {match.group(0)}")
        for match in re.finditer(r"os\.environ(?:\.get|\.setdefault)?[\[(]\s*([^\s,)\]]+)", text):
            name = match.group(1).strip("\"'")
            value = getattr(layout, name, name)
            if rel == "spark/class_archive.py" and name == "name":
                continue  # class_archive.JVM_ENV: what shapes the JVM (its archive's key)
            if value not in hooks | spark_env:
                problems.append(f"{rel}: environment variable {name}")
    assert not problems, problems
    for hook in hooks:
        assert "HEADWATER_" in hook
    doc = Path(layout.__file__).read_text()
    assert "test hooks, not configuration" in doc


def test_sources_are_registered_without_env_vars_or_session_attributes(spark):
    """On a696c0f the session set HEADWATER_PARALLELISM and spark._headwater_sources."""
    import os

    assert "HEADWATER_PARALLELISM" not in os.environ
    assert [name for name in vars(spark) if "headwater" in name.lower()] == []


def test_scan_splits_follow_the_registered_parallelism(tmp):
    """The session's parallelism travels with the registered source class (no env var)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from headwater.delta.datasource import DeltaDataSource
    from headwater.ingest.registration import with_parallelism

    for i in range(4):  # four small files
        write_deltalake(str(tmp / "t"), pa.table({"id": [i]}), mode="append")
    source_4 = with_parallelism(DeltaDataSource, 4)({"path": str(tmp / "t")})
    source_1 = with_parallelism(DeltaDataSource, 1)({"path": str(tmp / "t")})
    assert source_4.name() == "delta" and source_4.parallelism == 4
    assert len(source_4.reader(source_4.schema()).partitions()) == 4
    assert len(source_1.reader(source_1.schema()).partitions()) == 1


def test_spark_workers_import_only_the_rooms_headwaters_data_sources_need():
    """Every streaming query's source and every planning step starts a Python process that
    imports headwater's data source: the package's public names load lazily, so that process
    imports delta/, conf/ and errors/ only (every room: 0.23 s of CPU more per process)."""
    import subprocess
    import sys

    script = ("import sys, headwater.delta.datasource, headwater.ingest.source, "
              "headwater.kafka.source\n"
              "print(sorted({m.split('.')[1] for m in sys.modules "
              "if m.startswith('headwater.')}))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rooms = set(ast.literal_eval(proc.stdout))
    assert "delta" in rooms and not {"pipeline", "lakehouse", "monitor", "cli", "demo",
                                     "factory"} & rooms, rooms


def test_the_lazy_public_names_are_the_ones_type_checkers_see():
    """headwater/__init__.py names each public name twice: in the imports type checkers read
    and in the table ``__getattr__`` loads from. Both must agree, and with ``__all__``."""
    import importlib

    tree = ast.parse((SRC / "__init__.py").read_text())
    typed = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                typed.update({a.asname or a.name: (imp.module, a.name) for a in imp.names})
    assert typed == headwater._EXPORTS
    assert set(typed) == set(headwater.__all__) <= set(dir(headwater))
    for name, (module, attribute) in typed.items():
        assert getattr(headwater, name) is getattr(importlib.import_module(module), attribute)
