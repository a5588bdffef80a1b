"""Loading a pipeline project's definition files: Python files run with the registry
collecting, SQL files parsed statement by statement."""

from __future__ import annotations

import re
import runpy
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.conf.project import Project
from headwater.errors import HeadwaterError
from headwater.pipeline import definitions as defs
from headwater.pipeline.expectations import Expectation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame



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
    from headwater.lakehouse.sql import unquoted

    for i, _, depth in unquoted(text):
        if depth == 0 and re.match(r"AS\s", text[i:i + 3], re.IGNORECASE) and \
                (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            return i
    return None


def load_sql_file(file: Path, registry: defs.Registry) -> None:
    from headwater.lakehouse.sql import balanced

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
    from headwater.spark.plan import node_name

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
