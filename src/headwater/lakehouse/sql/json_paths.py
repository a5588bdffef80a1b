"""Databricks' ``:`` JSON path on STRING columns (``details:flow_progress.metrics.num_output_rows``).

Spark 4.3 parses ``col:path`` (a ``SemiStructuredExtract``) but applies it to VARIANT columns
only (COLUMN_IS_NOT_VARIANT_TYPE); Databricks also applies it to a string holding JSON and
returns a string, as pipeline event-log queries do on ``details``. When Spark refuses a
statement for that reason, each extraction is rewritten at its text span as
``get_json_object(CAST(col AS STRING), '$.path')`` (Spark's parser already wrote the path as
JSONPath) and the statement runs again; a select-list item keeps the name Spark gives it (the
last field, as on Databricks). Field names match case-sensitively (Databricks ignores case
outside brackets). A statement mixing ``:`` on VARIANT and on strings gets strings for both.
"""

from __future__ import annotations

from typing import Any

from headwater.lakehouse.sql.statements import option, seq, walk

NOT_VARIANT = "COLUMN_IS_NOT_VARIANT_TYPE"


def _expressions(node: Any) -> list[Any]:
    """Every expression of a plan node, children included, parents first."""
    found: list[Any] = []
    stack = seq(node.expressions())
    while stack:
        expr = stack.pop()
        found.append(expr)
        stack.extend(seq(expr.children()))
    return found


def _span(expr: Any) -> tuple[int, int] | None:
    start, stop = option(expr.origin().startIndex()), option(expr.origin().stopIndex())
    return None if start is None or stop is None else (int(start), int(stop))


def _base(expr: Any) -> tuple[tuple[int, int], str] | None:
    """(the span of the column an extraction starts from, the whole JSONPath): chained
    extractions (``details:flow_progress:metrics``) are one path."""
    child = expr.child()
    if child.getClass().getSimpleName() == "Alias":  # the parser names each step
        child = child.child()
    if child.getClass().getSimpleName() == "SemiStructuredExtract":
        inner = _base(child)
        return None if inner is None else (inner[0], inner[1] + str(expr.field())[1:])
    where = _span(child)
    return None if where is None else (where, str(expr.field()))


def on_strings(text: str, plan: Any) -> str:
    """``text`` with every ``col:path`` as ``get_json_object`` on the column's text; ``text``
    itself when it has none (or Spark's parser kept no positions)."""
    spans: dict[tuple[int, int], str] = {}
    named: dict[tuple[int, int], str] = {}  # select-list items named by the parser
    for node in walk(plan):
        if node.getClass().getSimpleName() == "Project":
            for item in seq(node.projectList()):
                if item.getClass().getSimpleName() == "Alias" and \
                        item.child().getClass().getSimpleName() == "SemiStructuredExtract":
                    where = _span(item)
                    if where is not None and where == _span(item.child()):
                        named[where] = str(item.name())
        for expr in _expressions(node):
            if expr.getClass().getSimpleName() != "SemiStructuredExtract":
                continue
            where, found = _span(expr), _base(expr)
            if where is None or found is None:
                return text
            base, path = found
            path = path.replace("\\", "\\\\").replace("'", "\\'")
            spans[where] = (f"get_json_object(CAST({text[base[0]:base[1] + 1]} AS STRING), "
                            f"'{path}')")
    outer = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1]
                                         for o in spans)]
    for start, stop in sorted(outer, reverse=True):
        replacement = spans[(start, stop)]
        if (start, stop) in named:
            replacement += " AS `" + named[(start, stop)].replace("`", "``") + "`"
        text = text[:start] + replacement + text[stop + 1:]
    return text
