"""Facts read from a DataFrame's analyzed plan on the JVM (Spark exposes no Python API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def analyzed(df: "DataFrame") -> Any:
    return df._jdf.queryExecution().analyzed()


def nodes(plan: Any) -> Iterator[Any]:
    """Every node of a JVM logical plan, parents before children."""
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node
        children = node.children()
        stack.extend(children.apply(i) for i in reversed(range(children.size())))


def node_name(node: Any) -> str:
    return node.getClass().getSimpleName()


def group_keys(df: "DataFrame") -> list[str]:
    """The output column names of the top aggregate's grouping keys (update-mode MERGE keys)."""
    from headwater.errors import HeadwaterError

    for node in nodes(analyzed(df)):
        if node_name(node) == "Aggregate":
            grouping = node.groupingExpressions()
            names = {grouping.apply(i).references().toSeq().apply(0).name()
                     for i in range(grouping.size()) if grouping.apply(i).references().size()}
            output = [c for c in df.columns]
            keys = [c for c in output if c in names]
            if keys:
                return keys
    raise HeadwaterError(
        "HW_MERGE_KEYS_INVALID", "Update mode needs keys, and this query has no aggregation "
        "to take them from.", "Update mode MERGEs each changed row into the table by key.",
        "Pass keys=[...] naming the columns that identify a row, or use append mode.")
