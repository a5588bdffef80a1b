"""The "delta-spark compatibility" page, generated from a conformance run (never by hand).

``bash dev.sh conformance --json results.json`` runs delta-spark's own tests and examples;
this reads the results and the upstream material itself and writes
``docs/delta-spark-compatibility.md``:

- every public method of delta-spark's ``delta.tables`` classes (read from delta-spark's
  ``tables.py`` API list below, checked against headwater's classes by ``hasattr``), with the
  upstream tests and examples that call it (found in their source) and how those ran here;
- every Delta SQL statement, with the upstream tests and examples that run it.

A method or statement no upstream test exercises says so, and whether headwater has it.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

from headwater.lakehouse.delta_spark import delta_table  # the classes delta.tables re-exports

ROOT = Path(__file__).resolve().parent.parent
MATERIAL = ROOT.parent / "shared" / "conformance" / "delta-spark"

# delta-spark's public Python API (python/delta/tables.py at the pinned commit).
API: dict[str, list[str]] = {
    "DeltaTable": [
        "forPath", "forName", "isDeltaTable", "convertToDelta", "create", "createIfNotExists",
        "replace", "createOrReplace", "toDF", "alias", "generate", "delete", "update", "merge",
        "vacuum", "history", "detail", "upgradeTableProtocol", "addFeatureSupport",
        "dropFeatureSupport", "restoreToVersion", "restoreToTimestamp", "optimize", "clone",
        "cloneAtVersion", "cloneAtTimestamp"],
    "DeltaMergeBuilder": [
        "whenMatchedUpdate", "whenMatchedUpdateAll", "whenMatchedDelete", "whenNotMatchedInsert",
        "whenNotMatchedInsertAll", "whenNotMatchedBySourceUpdate",
        "whenNotMatchedBySourceDelete", "withSchemaEvolution", "execute"],
    "DeltaTableBuilder": [
        "tableName", "location", "comment", "addColumn", "addColumns", "partitionedBy",
        "clusterBy", "property", "execute"],
    "DeltaOptimizeBuilder": ["where", "executeCompaction", "executeZOrderBy"],
}

# Delta SQL statements: name -> regex over the SQL text in the upstream material.
STATEMENTS: dict[str, str] = {
    "CREATE TABLE ... USING DELTA": r"CREATE TABLE (?!.*USING parquet)",
    "CREATE TABLE ... LOCATION (external table)": r"LOCATION '",
    "CREATE TABLE delta.`path`": r"CREATE TABLE delta\.",
    "INSERT INTO / INSERT OVERWRITE": r"INSERT (INTO|OVERWRITE)",
    "MERGE INTO": r"MERGE INTO",
    "UPDATE": r"^\s*UPDATE |\"UPDATE ",
    "DELETE FROM": r"DELETE FROM",
    "ALTER TABLE ... SET / UNSET TBLPROPERTIES": r"(UN)?SET TBLPROPERTIES",
    "ALTER TABLE ... ADD COLUMNS": r"ADD COLUMNS",
    "ALTER TABLE ... CHANGE / ALTER COLUMN": r"(CHANGE|ALTER) COLUMN",
    "ALTER TABLE ... REPLACE COLUMNS": r"REPLACE COLUMNS",
    "ALTER TABLE ... RENAME TO": r"RENAME TO",
    "ALTER TABLE ... RENAME COLUMN": r"RENAME COLUMN",
    "ALTER TABLE ... DROP COLUMN(S)": r"DROP COLUMNS?\b",
    "ALTER TABLE ... SET LOCATION": r"SET LOCATION",
    "DESCRIBE TABLE": r"DESCRIBE TABLE",
    "DESCRIBE HISTORY": r"(?i)desc(ribe)? history",
    "DESCRIBE DETAIL": r"DESCRIBE DETAIL",
    "SHOW TBLPROPERTIES": r"SHOW TBLPROPERTIES",
    "VACUUM": r"VACUUM",
    "OPTIMIZE [ZORDER BY]": r"OPTIMIZE ",
    "RESTORE": r"RESTORE TABLE",
    "REORG TABLE ... APPLY (PURGE)": r"REORG TABLE",
    "ALTER TABLE ... DROP FEATURE": r"DROP FEATURE",
    "CONVERT TO DELTA": r"CONVERT TO DELTA",
    "GENERATE symlink_format_manifest": r"GENERATE ",
    "DROP TABLE": r"DROP TABLE",
    "SELECT ... VERSION AS OF / TIMESTAMP AS OF": r"AS OF",
    "table_changes()": r"table_changes",
}


def _walk(node: ast.AST) -> list[ast.AST]:
    """``ast.walk`` without entering nested functions (upstream keeps disabled tests as
    functions nested inside another test: they never run)."""
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(child for child in ast.iter_child_nodes(current)
                     if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))
    return out


def callers(results: list[dict[str, str]]) -> tuple[dict[str, set[str]], dict[str, str]]:
    """attribute name -> the upstream tests/examples calling it; test id -> its SQL text."""
    called: dict[str, set[str]] = {}
    sql: dict[str, str] = {}
    for row in results:
        source_file = MATERIAL / row["file"]
        tree = ast.parse(source_file.read_text())
        nodes: list[ast.AST] = [tree]
        if not row["file"].startswith("examples/"):
            nodes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                     and n.name == row["name"]]
            # the private helpers a test calls (self.__writeDeltaTable, ...) count too
            helpers = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            for node in list(nodes):
                for sub in _walk(node):
                    if isinstance(sub, ast.Attribute) and sub.attr.startswith("__") \
                            and sub.attr in helpers:
                        nodes.append(helpers[sub.attr])
        key = f"{row['file']}::{row['name']}"
        texts = []
        for node in nodes:
            for sub in _walk(node) if isinstance(node, ast.FunctionDef) else ast.walk(node):
                if isinstance(sub, ast.Attribute):
                    called.setdefault(sub.attr, set()).add(key)
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    texts.append(sub.value)
        sql[key] = "\n".join(texts)
    return called, sql


def status_of(keys: set[str], by_key: dict[str, dict[str, str]]) -> str:
    runs = [k for k in sorted(keys) if by_key[k]["status"] == "passed"]
    fails = [k for k in sorted(keys) if by_key[k]["status"] != "passed"]
    if not keys:
        return ""
    if not fails:
        return f"runs ({len(runs)} of {len(keys)})"
    return f"**{len(runs)} of {len(keys)} run**; fails: " + ", ".join(
        f"`{k.split('::')[1]}`" for k in fails)


def render(data: dict[str, list[dict[str, str]]]) -> str:
    rows = data["tests"] + data["examples"]
    by_key = {f"{r['file']}::{r['name']}": r for r in rows}
    called, sql = callers(rows)
    tests = data["tests"]
    examples = data["examples"]
    out = [
        "# delta-spark compatibility",
        "",
        "Generated by `bash dev.sh conformance --docs` from a run of delta-spark's own Python "
        "tests and examples (delta-io/delta, `python/delta/tests/test_deltatable.py`, "
        "`test_sql.py`, `examples/python/`, run unchanged; the examples with their "
        "SparkSession line wrapped in `configure_spark_with_delta_pip`). Do not edit by hand.",
        "",
        f"**Upstream tests: {sum(r['status'] == 'passed' for r in tests)} of {len(tests)} "
        f"pass. Examples: {sum(r['status'] == 'passed' for r in examples)} of "
        f"{len(examples)} run to the end.**",
        "",
        "## The Python API (`delta.tables`)",
        "",
        "| class | method | in headwater | upstream tests and examples calling it |",
        "|---|---|---|---|",
    ]
    for cls_name, methods in API.items():
        cls = getattr(delta_table, cls_name, None)
        for method in methods:
            present = cls is not None and hasattr(cls, method)
            keys = called.get(method, set())
            out.append(f"| {cls_name} | `{method}` | {'yes' if present else '**no**'} | "
                       f"{status_of(keys, by_key) or 'no upstream test calls it'} |")
    out += ["", "## Delta SQL", "", "| statement | upstream tests and examples running it |",
            "|---|---|"]
    for statement, pattern in STATEMENTS.items():
        keys = {k for k, text in sql.items() if re.search(pattern, text, re.M)}
        out.append(f"| {statement} | {status_of(keys, by_key) or 'no upstream test runs it'} |")
    out += ["", "## Every upstream test and example", "", "| file | test | result |",
            "|---|---|---|"]
    for row in rows:
        result = "passes" if row["status"] == "passed" else \
            f"fails: {row['detail'][:200].replace('|', '/')}"
        out.append(f"| {row['file']} | `{row['name']}` | {result} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="the JSON of a conformance run")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "delta-spark-compatibility.md")
    args = parser.parse_args(argv)
    args.out.write_text(render(json.loads(args.results.read_text())))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
