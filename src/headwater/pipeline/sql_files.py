"""SQL definition files: each statement goes to Spark's own parser.

Spark 4.3 parses CREATE STREAMING TABLE, CREATE MATERIALIZED VIEW, CREATE [TEMPORARY] VIEW and
CREATE FLOW ... AS INSERT INTO into plans that carry the name, columns, partitioning, COMMENT,
TBLPROPERTIES and the query text; headwater uses those fields. Two things Spark's grammar does
not have are handled first, at the token level (quotes and comments respected, line numbers
kept):

- ``CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]`` elements of the
  column list (of a table, materialized view or temporary view) become expectations and are
  removed; a CONSTRAINT element of any other shape is
  an error (a typo never disappears silently).
- ``CREATE OR REFRESH`` (Databricks' spelling) means CREATE here: each run refreshes anyway.
- ``APPLY CHANGES INTO target ...`` (DLT's older spelling of AUTO CDC) and the AUTO CDC
  clauses Spark's grammar lacks (IGNORE NULL UPDATES, APPLY AS TRUNCATE WHEN): see sql_cdc.py;
  ``AUTO CDC INTO ... FROM SNAPSHOT``: see sql_snapshot.py.
- DLT's spellings (``${key}``, ``SET``, ``LIVE.x``, ``CREATE LIVE TABLE`` and its kin,
  ``TEMPORARY`` tables, ``cloud_files(...)`` / ``STREAM read_files(...)``): see sql_dlt.py.

Whatever Spark's parser rejects is an error with the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType, _parse_datatype_json_string

from headwater.errors import HeadwaterError
from headwater.pipeline import model
from headwater.pipeline.cdc import cdc_flow_from_sql
from headwater.pipeline.expectations import Expectation
from headwater.pipeline.fields import stored_fields
from headwater.pipeline.model import Location
from headwater.pipeline.sql_cdc import apply_changes_as_flow, strip_cdc_clauses
from headwater.pipeline.sql_dlt import (
    FileRead,
    apply_set,
    drop_live,
    file_reads,
    legacy_create,
    query_reading_files,
    substitute,
)
from headwater.pipeline.sql_snapshot import cut_snapshot_source, snapshot_flow_from_sql
from headwater.spark.jvm import parse_plan
from headwater.spark.sql_text import Token, statements, tokens

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Registry(Protocol):
    """Where a SQL file's definitions go (:class:`headwater.pipeline.registry.Registry`)."""

    def add_dataset(self, dataset: model.Dataset) -> None: ...

    def add_flow(self, flow: model.Flow) -> None: ...


# --- the parts Spark's grammar lacks ---------------------------------------------------------

_KINDS = (("STREAMING", "TABLE"), ("MATERIALIZED", "VIEW"), ("TEMPORARY", "VIEW"), ("TEMP", "VIEW"),
          ("VIEW",), ("FLOW",))


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + "".join(c if c == "\n" else " " for c in text[start:end]) + text[end:]


def _column_list(toks: list[Token]) -> int | None:
    """Index of the ``(`` opening the column list right after the dataset's name, if any."""
    i = 1
    if len(toks) > 2 and toks[1].upper == "OR" and toks[2].upper in ("REFRESH", "REPLACE"):
        i = 3
    for kind in _KINDS:
        if [t.upper for t in toks[i:i + len(kind)]] == list(kind):
            i += len(kind)
            break
    else:
        return None
    if [t.upper for t in toks[i:i + 3]] == ["IF", "NOT", "EXISTS"]:
        i += 3
    i += 1  # the name's first part
    while i + 1 < len(toks) and toks[i].text == ".":
        i += 2
    return i if i < len(toks) and toks[i].text == "(" else None


def _elements(toks: list[Token], open_at: int, file: Path) -> tuple[list[list[Token]], int]:
    """The comma-separated elements inside the parentheses opened at ``open_at``, and the
    index of the closing parenthesis."""
    elements: list[list[Token]] = [[]]
    depth = 0
    for i in range(open_at + 1, len(toks)):
        tok = toks[i]
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            if depth == 0:
                return [e for e in elements if e], i
            depth -= 1
        if tok.text == "," and depth == 0:
            elements.append([])
        else:
            elements[-1].append(tok)
    raise _invalid(Location(str(file), toks[open_at].line), "the column list's '(' is never closed")


def _constraint(text: str, element: list[Token], file: Path) -> Expectation:
    """``CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]``."""
    where = Location(str(file), element[0].line)
    shape = ("Write CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | ON VIOLATION "
             "FAIL UPDATE].")
    if len(element) < 5 or element[2].upper != "EXPECT" or element[3].text != "(":
        found = element[2].text if len(element) > 2 else "nothing"
        raise _invalid(where, f"malformed constraint: expected EXPECT (condition) after "
                       f"CONSTRAINT {element[1].text if len(element) > 1 else ''}, found "
                       f"{found!r}", shape)
    depth, close = 0, None
    for i in range(3, len(element)):
        depth += {"(": 1, ")": -1}.get(element[i].text, 0)
        if depth == 0:
            close = i
            break
    if close is None or close == 4:
        raise _invalid(where, "malformed constraint: the EXPECT condition is empty or "
                       "unclosed", shape)
    condition = text[element[4].start:element[close - 1].end].strip()
    rest = [t.upper for t in element[close + 1:]]
    actions = {(): "warn", ("ON", "VIOLATION", "DROP", "ROW"): "drop",
               ("ON", "VIOLATION", "FAIL", "UPDATE"): "fail"}
    if tuple(rest) not in actions:
        raise _invalid(Location(str(file), element[close + 1].line),
                       f"malformed constraint {element[1].text}: {' '.join(rest)!r} after the "
                       "condition", shape)
    return Expectation(element[1].text.strip("`"), condition, actions[tuple(rest)])


def strip_constraints(text: str, first_line: int, file: Path) -> tuple[str, list[Expectation]]:
    """The statement for Spark's parser (constraints and OR REFRESH blanked) and the
    expectations its constraints declare."""
    toks = tokens(text, first_line)
    if not toks or toks[0].upper != "CREATE":
        return text, []
    rules: list[Expectation] = []
    open_at = _column_list(toks)
    if open_at is not None:
        elements, close_at = _elements(toks, open_at, file)
        kept = [e for e in elements if e[0].upper != "CONSTRAINT"]
        rules = [_constraint(text, e, file) for e in elements if e[0].upper == "CONSTRAINT"]
        if rules:
            inner = ", ".join(text[e[0].start:e[-1].end] for e in kept)
            start, end = toks[open_at].start, toks[close_at].end
            lines = text[start:end].count("\n")
            replacement = f"({inner})" if kept else ""
            # keep the line count, so Spark's line numbers still point into the file
            text = text[:start] + replacement + "\n" * max(
                0, lines - replacement.count("\n")) + text[end:]
    if len(toks) > 2 and toks[1].upper == "OR" and toks[2].upper == "REFRESH":
        text = _blank(text, toks[1].start, toks[2].end)
    return text, rules


# --- statements to model elements ------------------------------------------------------------


def register_sql_text(registry: Registry, text: str, file: Path) -> None:
    spark = SparkSession.active()
    for statement, line in statements(text):
        where = Location(str(file), line)
        statement = substitute(statement, line, file, spark)
        if [t.upper for t in tokens(statement, line)[:1]] == ["SET"]:
            apply_set(spark, _parse(spark, statement, where), where)
            continue
        statement = drop_live(statement, tokens(statement, line))
        statement, temporary = legacy_create(statement, tokens(statement, line))
        statement, reads = file_reads(statement, tokens(statement, line), file, spark)
        statement = apply_changes_as_flow(statement, tokens(statement, line), file)
        statement, snapshot = cut_snapshot_source(statement, tokens(statement, line), file)
        statement, cdc_clauses = strip_cdc_clauses(statement, tokens(statement, line))
        if snapshot is not None:
            cdc_clauses["snapshot"] = snapshot
        sql, rules = strip_constraints(statement, line, file)
        plan = _parse(spark, sql, where)
        _register(registry, plan, sql, rules, where, cdc_clauses, temporary, tuple(reads))


def _parse(spark: Any, sql: str, where: Location) -> Any:
    try:
        return parse_plan(spark, sql)
    except Exception as exc:  # noqa: BLE001 - ParseException
        message = str(exc).strip()
        at = re.search(r"line (\d+)", message)
        line = where.line + int(at.group(1)) - 1 if at else where.line
        first = next((ln.strip() for ln in message.splitlines() if ln.strip()), message)
        raise _invalid(Location(where.file, line), f"Spark's SQL parser rejected the "
                       f"statement: {first[:300]}") from exc


def _register(registry: Registry, plan: Any, sql: str, rules: list[Expectation],
              where: Location, cdc_clauses: dict[str, Any], temporary: bool = False,
              reads: tuple[FileRead, ...] = ()) -> None:
    kind = plan.getClass().getSimpleName()
    if kind in ("CreateStreamingTableAsSelect", "CreateStreamingTable",
                "CreateMaterializedViewAsSelect"):
        name = ".".join(plan.name().nameParts().mkString("\u0001").split("\u0001"))
        fields = _stored(plan, name, where)
        element: model.Dataset = (model.MaterializedView if "Materialized" in kind
                                  else model.StreamingTable)(**fields,
                                                             expectations=tuple(rules),
                                                             temporary=temporary)
        registry.add_dataset(element)
        if kind != "CreateStreamingTable":
            _add_query(registry, name, name, str(plan.originalText()), where, reads)
        return
    if kind in ("CreateViewCommand", "CreateView"):
        name = plan.name().table() if kind == "CreateViewCommand" else \
            ".".join(plan.child().nameParts().mkString("\u0001").split("\u0001"))
        comment = plan.comment()
        registry.add_dataset(model.View(name=name, location=where,
                                        comment=comment.get() if comment.isDefined() else None,
                                        expectations=tuple(rules)))
        _add_query(registry, name, name, plan.originalText().get(), where, reads)
        return
    if rules:
        raise _invalid(where, "constraints belong on a streaming table, materialized view or "
                       "temporary view", "Put the CONSTRAINT ... EXPECT clauses on the dataset "
                       "the flow writes or reads.")
    if kind == "CreateFlowCommand":
        insert = plan.flowOperation()
        name = ".".join(plan.name().nameParts().mkString("\u0001").split("\u0001"))
        if insert.getClass().getSimpleName() == "AutoCdcInto":
            if reads:
                raise _invalid(where, "AUTO CDC reads a dataset of the pipeline, not "
                               "cloud_files / read_files", "Read the files in a streaming "
                               "table or view, and apply the changes FROM STREAM(that_name).")
            relation = insert.targetTable()
            table = ".".join((relation.multipartIdentifier() if relation.getClass().getSimpleName()
                              == "UnresolvedRelation" else relation.nameParts()
                              ).mkString("\u0001").split("\u0001"))
            snapshot = cdc_clauses.pop("snapshot", None)
            if snapshot is not None:  # FROM SNAPSHOT (see sql_snapshot.py)
                registry.add_flow(snapshot_flow_from_sql(insert, name, table, where, snapshot))
                return
            registry.add_flow(cdc_flow_from_sql(insert, sql, name, table, where, **cdc_clauses))
            return
        target = ".".join(insert.table().multipartIdentifier().mkString("\u0001").split("\u0001"))
        origin = insert.query().origin()
        query = sql[origin.startIndex().get():origin.stopIndex().get() + 1]
        _add_query(registry, name, target, query, where, reads)
        return
    raise _invalid(where, f"not a pipeline statement ({kind})")


def _stored(plan: Any, name: str, where: Location) -> dict[str, Any]:
    spec = plan.tableSpec()
    provider = spec.provider().get() if spec.provider().isDefined() else None
    partition_by, cluster_by = [], []
    transforms = plan.partitioning() if hasattr(plan, "partitioning") else None
    for i in range(transforms.size() if transforms is not None else 0):
        transform = transforms.apply(i)
        columns = [".".join(r.fieldNames()) for r in transform.references()]
        if transform.name() == "identity":
            partition_by.extend(columns)
        elif transform.name() == "cluster_by":
            cluster_by.extend(columns)
        else:
            raise _invalid(where, f"PARTITIONED BY {transform.name()}(...) is not supported",
                           "Partition by plain columns.")
    properties = {}
    entries = spec.properties().iterator()
    while entries.hasNext():
        pair = entries.next()
        properties[str(pair._1())] = str(pair._2())
    comment = spec.comment().get() if spec.comment().isDefined() else None
    return stored_fields(name, where, comment, properties, partition_by, cluster_by,
                         _columns(plan), provider)


def _columns(plan: Any) -> Any:
    """The declared column list as a StructType (comments kept), or None."""
    if not hasattr(plan, "columns") or plan.columns().size() == 0:
        return None
    fields = []
    columns = plan.columns()
    for i in range(columns.size()):
        column = columns.apply(i)
        comment = column.comment()
        fields.append(StructField(
            column.name(), _parse_datatype_json_string(column.dataType().json()),
            bool(column.nullable()),
            {"comment": comment.get()} if comment.isDefined() else None))
    return StructType(fields)


def _add_query(registry: Registry, name: str, target: str, query: str,
               where: Location, reads: tuple[FileRead, ...] = ()) -> None:
    registry.add_flow(model.Flow(name=name, target=target, func=_sql_function(query, reads),
                                 location=where, sql=query))


def _sql_function(query: str, reads: tuple[FileRead, ...] = ()) -> Callable[[], DataFrame]:
    def define() -> DataFrame:
        spark = SparkSession.active()
        # cloud_files(...) / STREAM read_files(...): named Auto Loader reads
        streams = {read.view: read.register(spark) for read in reads}
        return query_reading_files(spark, query, streams) if streams else spark.sql(query)

    return define


def _invalid(where: Location, what: str, fix: str = "") -> HeadwaterError:
    return HeadwaterError(
        "HW_PIPELINE_SQL_INVALID", f"{where}: {what}.",
        "Pipeline SQL files hold CREATE STREAMING TABLE, CREATE MATERIALIZED VIEW, CREATE "
        "TEMPORARY VIEW, CREATE FLOW and APPLY CHANGES INTO statements, parsed by Spark's SQL "
        "parser.",
        fix or "Fix the statement at that line, e.g. CREATE STREAMING TABLE silver AS SELECT * "
        "FROM STREAM(bronze).")
