"""A pipeline project: ``headwater.toml`` plus the definition files it names.

```toml
[pipeline]
name = "orders"
root = "lakehouse"                          # the lakehouse: tables and checkpoints
definitions = ["transformations/*.py", "transformations/*.sql"]
trigger = "available-now"                   # default of `headwater run`
master = "local[*]"                         # optional
event_log = true                            # every batch's progress in _event_log

[spark]
"spark.sql.shuffle.partitions" = "8"
```
"""

from __future__ import annotations

import re
import runpy
import sys
import tomllib
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError
from headwater.pipeline import definitions as defs
from headwater.pipeline.expectations import Expectation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CONFIG = "headwater.toml"


@dataclass
class Project:
    dir: Path
    name: str
    root: Path
    definitions: list[str]
    trigger: str | None = None
    master: str | None = None
    event_log: bool = True
    spark_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, project_dir: str | Path = ".") -> "Project":
        path = Path(project_dir).resolve()
        config = path / CONFIG if path.is_dir() else path
        if not config.is_file():
            raise HeadwaterError(
                "HW_PROJECT_NOT_FOUND", f"No {CONFIG} in {path}.",
                "A pipeline project is a folder with a headwater.toml naming its definitions.",
                "Run the command in the project folder, pass --project DIR, or create one with "
                "`headwater init NAME`.")
        try:
            data = tomllib.loads(config.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise HeadwaterError(
                "HW_PROJECT_INVALID", f"{config} is not valid TOML: {exc}.",
                "headwater.toml is read with Python's TOML parser.",
                "Fix the syntax at the position given.") from exc
        section = data.get("pipeline")
        if not isinstance(section, dict):
            raise _invalid(config, "it has no [pipeline] table")
        unknown = set(section) - {"name", "root", "definitions", "trigger", "master",
                                 "event_log"}
        if unknown:
            raise _invalid(config, f"unknown [pipeline] keys {sorted(unknown)}")
        definitions = section.get("definitions")
        if isinstance(definitions, str):
            definitions = [definitions]
        if not definitions or not all(isinstance(d, str) for d in definitions):
            raise _invalid(config, "[pipeline] definitions must list file globs")
        if not isinstance(section.get("event_log", True), bool):
            raise _invalid(config, "[pipeline] event_log must be true or false")
        spark_conf = data.get("spark", {})
        if not isinstance(spark_conf, dict):
            raise _invalid(config, "[spark] must be a table of Spark settings")
        return cls(
            dir=config.parent,
            name=str(section.get("name") or config.parent.name),
            root=(config.parent / str(section.get("root", "lakehouse"))).resolve(),
            definitions=list(definitions),
            trigger=section.get("trigger"),
            master=section.get("master"),
            event_log=section.get("event_log", True),
            spark_conf={str(k): str(v) for k, v in spark_conf.items()},
        )

    def files(self) -> list[Path]:
        found: list[Path] = []
        for pattern in self.definitions:
            matches = sorted(p for p in self.dir.glob(pattern) if p.is_file())
            if not matches:
                raise HeadwaterError(
                    "HW_PROJECT_INVALID", f"definitions pattern {pattern!r} matches no file in "
                    f"{self.dir}.", "Every pattern in [pipeline] definitions should find files.",
                    "Fix the glob (relative to headwater.toml) or remove it.")
            found.extend(m for m in matches if m not in found)
        return found


def _invalid(config: Path, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_PROJECT_INVALID", f"{config}: {why}.",
        "headwater.toml names the pipeline, its lakehouse root and its definition files.",
        'Minimal form: [pipeline] name = "p", root = "lakehouse", definitions = ["*.py"].')


def load_definitions(project: Project) -> defs.Registry:
    """Run every definition file; the decorators fill the returned registry."""
    registry = defs.Registry()
    defs.collecting(registry)
    sys.path.insert(0, str(project.dir))
    try:
        for file in project.files():
            if file.suffix == ".sql":
                load_sql_file(file, registry)
            elif file.suffix == ".py":
                _run_python_file(file)
            else:
                raise HeadwaterError(
                    "HW_PROJECT_INVALID", f"{file}: definitions are .py or .sql files.",
                    "headwater reads Python decorators and SQL CREATE statements.",
                    "Rename the file or narrow the glob.")
        registry.attach_flows()
    finally:
        defs.collecting(None)
        sys.path.remove(str(project.dir))
    return registry


def _run_python_file(file: Path) -> None:
    try:
        runpy.run_path(str(file), run_name=f"headwater_pipeline.{file.stem}")
    except HeadwaterError:
        raise
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if Path(f.filename).resolve() == file.resolve()]
        where = f"{file}:{frames[-1].lineno}" if frames else str(file)
        raise HeadwaterError(
            "HW_PIPELINE_DEFINITION_FAILED",
            f"{where}: loading the definitions failed: {type(exc).__name__}: {exc}",
            "Definition files are run once to register their datasets.",
            "Fix the error at that line.") from exc


# --- SQL definitions ------------------------------------------------------------------------

_STATEMENT = re.compile(
    r"^\s*CREATE\s+(?:OR\s+(?:REFRESH|REPLACE)\s+)?"
    r"(STREAMING\s+TABLE|MATERIALIZED\s+VIEW|(?:TEMPORARY\s+)?VIEW)\s+"
    r"((?:`[^`]+`|\w+)(?:\.(?:`[^`]+`|\w+))?)\s*(.*)$", re.IGNORECASE | re.DOTALL)
_CONSTRAINT = re.compile(
    r"CONSTRAINT\s+(\w+)\s+EXPECT\s*\((.*?)\)\s*(?:ON\s+VIOLATION\s+(DROP\s+ROW|FAIL\s+UPDATE))?"
    r"\s*(?:,|$)", re.IGNORECASE | re.DOTALL)


def _split_statements(text: str) -> list[tuple[str, int]]:
    """Statements split on ';' outside quotes and comments, with their first line number."""
    statements, current, line, start_line, quote = [], [], 1, None, None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is None and text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if quote is None and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = len(text) if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
            continue
        if quote:
            if ch == "\\" and i + 1 < len(text):
                current.append(ch + text[i + 1])
                line += text[i + 1] == "\n"
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        if ch == ";" and quote is None:
            statements.append(("".join(current), start_line or line))
            current, start_line = [], None
        else:
            if start_line is None and not ch.isspace():
                start_line = line
            current.append(ch)
        if ch == "\n":
            line += 1
        i += 1
    if "".join(current).strip():
        statements.append(("".join(current), start_line or line))
    return [(s, n) for s, n in statements if s.strip()]


def _top_level_as(text: str) -> int | None:
    """Where the defining ``AS`` starts: outside quotes and parentheses."""
    from headwater.sql_statements import unquoted

    for i, _, depth in unquoted(text):
        if depth == 0 and re.match(r"AS\s", text[i:i + 3], re.IGNORECASE) and \
                (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            return i
    return None


def load_sql_file(file: Path, registry: defs.Registry) -> None:
    from headwater.sql_statements import balanced

    for statement, line in _split_statements(file.read_text()):
        location = defs.Location(str(file), line)
        match = _STATEMENT.match(statement)
        if not match:
            raise HeadwaterError(
                "HW_PIPELINE_SQL_INVALID", f"{location}: not a pipeline statement: "
                f"{' '.join(statement.split())[:80]!r}.",
                "Pipeline SQL files hold CREATE STREAMING TABLE, CREATE MATERIALIZED VIEW and "
                "CREATE TEMPORARY VIEW statements.",
                "Write e.g. CREATE STREAMING TABLE silver AS SELECT * FROM STREAM(bronze).")
        kind_text, name, rest = match.groups()
        kind = {"streaming": defs.TABLE, "materialized": defs.MATERIALIZED_VIEW}.get(
            kind_text.split()[0].lower(), defs.VIEW)
        rules: list[Expectation] = []
        if rest.startswith("("):
            inner, rest = balanced(rest)
            rules = [Expectation(m.group(1), m.group(2).strip(),
                                 {"drop": "drop", "fail": "fail"}.get(
                                     (m.group(3) or "warn").split()[0].lower(), "warn"))
                     for m in _CONSTRAINT.finditer(inner)]
        at = _top_level_as(rest)
        head = rest[:at] if at is not None else rest
        comment = re.search(r"COMMENT\s+'((?:[^'\\]|\\.)*)'", head, re.I)
        partition = re.search(r"PARTITIONED\s+BY\s*\(([^)]*)\)", head, re.I)
        if at is None:
            raise HeadwaterError(
                "HW_PIPELINE_SQL_INVALID", f"{location}: {name} has no AS SELECT ... query.",
                "A pipeline dataset is defined by its query.", "Add AS SELECT ... at the end.")
        dataset = defs.Dataset(
            name=name.replace("`", ""), kind=kind, location=location,
            output_mode="append" if kind == defs.TABLE else "complete",
            comment=comment.group(1) if comment else None,
            partition_by=[c.strip().strip("`") for c in partition.group(1).split(",")]
            if partition else [],
            expectations=rules)
        registry.add(dataset)
        query = rest[at:].strip()[2:].strip()
        dataset.flows.append(defs.Flow(dataset.name, dataset.name,
                                       _sql_function(query, location), location, sql=query))


def _sql_function(query: str, location: defs.Location):
    def define() -> "DataFrame":
        from pyspark.sql import SparkSession

        from headwater.pipeline.graph import current_graph

        spark = SparkSession.getActiveSession()
        graph = current_graph()
        for name, streaming in _relations(spark, query, location):
            df = graph.read(name, streaming, {}, location)
            if graph.registry.datasets.get(name) is not None and \
                    graph.registry.datasets[name].kind == defs.VIEW:
                df.createOrReplaceTempView(name.replace(".", "_"))
        return spark.sql(query)

    return define


def _relations(spark: Any, query: str, location: defs.Location) -> list[tuple[str, bool]]:
    """(table name, read as a stream) for every table the query reads, via Spark's parser."""
    from headwater.pipeline.plan import node_name

    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(query)
    except Exception as exc:  # noqa: BLE001
        raise HeadwaterError(
            "HW_PIPELINE_SQL_INVALID", f"{location}: the query does not parse: "
            f"{str(exc).splitlines()[0]}", "Spark's SQL parser rejected it.",
            "Fix the SQL syntax.") from exc
    ctes: set[str] = set()
    found: list[tuple[str, bool]] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        if node_name(node) == "UnresolvedWith":
            relations = node.cteRelations()
            for i in range(relations.size()):
                ctes.add(relations.apply(i)._1().lower())
        if node_name(node) == "UnresolvedRelation":
            parts = [p for p in node.multipartIdentifier().mkString("\u0001").split("\u0001")]
            entry = (".".join(parts).lower(), bool(node.isStreaming()))
            if entry not in found:
                found.append(entry)
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
        subqueries = node.subqueries()
        stack.extend(subqueries.apply(i) for i in range(subqueries.size()))
    return [(n, s) for n, s in found if n not in ctes]
