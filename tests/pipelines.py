"""Pipeline projects for tests: a project folder from definition texts, its graph, a run."""

from __future__ import annotations

import textwrap
from pathlib import Path

from headwater import Lakehouse
from headwater.conf.project import Project
from headwater.conf.triggers import trigger_kwargs
from headwater.pipeline.graph import Graph
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.run import Runner

HEADER = """
import headwater
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.active()
"""


def project(tmp_path: Path, files: dict[str, str],
            globs: tuple[str, ...] = ("defs/*.py", "defs/*.sql")) -> Path:
    """A project folder: headwater.toml loading ``globs`` in that order, and these definition
    files (Python ones get HEADER)."""
    root = tmp_path / "proj"
    (root / "defs").mkdir(parents=True, exist_ok=True)
    definitions = ", ".join(f'"{g}"' for g in globs)
    (root / "headwater.toml").write_text(
        f'[pipeline]\nname = "t"\nroot = "lake"\ndefinitions = [{definitions}]\n')
    for name, text in files.items():
        body = textwrap.dedent(text)
        (root / "defs" / name).write_text(HEADER + body if name.endswith(".py") else body)
    if not any(n.endswith(".sql") for n in files):
        (root / "defs" / "empty.sql").write_text("-- nothing\n")
    return root


def build(spark, root: Path, dry: bool = False) -> Graph:
    proj = Project.load(root)
    lake = Lakehouse(proj.root, spark)
    return Graph(load_definitions(proj), lake, dry=dry).build()


def run(spark, root: Path, select=None):
    graph = build(spark, root)
    results = Runner(graph, trigger_kwargs("available-now"), False, select, echo=lambda _: None).run()
    return graph.lakehouse, {r.key: r for r in results}
