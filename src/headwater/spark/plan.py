"""Facts read from a DataFrame's analyzed plan on the JVM (Spark exposes no Python API)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from headwater.errors import HeadwaterError
from headwater.spark.jvm import analyzed_plan, dataframe_of_plan, jvm_view, scala_seq


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


def group_keys(df: DataFrame) -> list[str]:
    """The output column names of the top aggregate's grouping keys (update-mode MERGE keys)."""
    for node in nodes(analyzed_plan(df)):
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


# --- relations a query reads, and swapping a stream for a batch ----------------------------


@dataclass(frozen=True)
class Relation:
    """A leaf of an analyzed plan that reads a data source (or a temporary view).

    source: the data source's name (``hw_bronze``, ``delta``, ...); "" for a view.
    identifier: the catalog name parts when read by name (``("default", "bronze")``).
    path: the ``path`` option, if any. options: the other options, lower-cased keys.
    view: the temporary view's name for a read through a view (its own relations follow).
    """

    source: str
    streaming: bool
    identifier: tuple[str, ...] | None = None
    path: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    view: str | None = None


_V2_RELATIONS = {"DataSourceV2Relation": False, "StreamingRelationV2": True}

# Python objects serving as a relation's JVM file index (headwater.delta.file_index), by the
# hash code they give the JVM: a plan's LogicalRelation names only the JVM proxy.
_file_indexes: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
FILE_INDEX_PREFIX = "DeltaFileIndex["


def register_file_index(index: Any) -> None:
    """Let :func:`relations` report reads through ``index`` (its ``hashCode()`` is its key,
    ``toString()`` starts with :data:`FILE_INDEX_PREFIX`, ``relation_facts()`` gives
    (source, identifier, path, options) as a data source relation has them)."""
    _file_indexes[index.hashCode()] = index


# Python objects serving as a query's v1 streaming source (headwater.delta.native_source), by
# the hash code they give the JVM: a plan's StreamingExecutionRelation names only the proxy.
_stream_sources: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def register_stream_source(source: Any) -> None:
    """Let :func:`relations` report streams of ``source`` (``hashCode()``, and
    ``relation_facts()`` as :func:`register_file_index` takes them)."""
    _stream_sources[source.hashCode()] = source


def live_stream_sources() -> list[Any]:
    """The Python stream sources of plans still alive (:func:`register_stream_source`)."""
    return list(_stream_sources.values())


def swap_stream_sources(df: DataFrame, replacement: Callable[[Any, Any], Any]) -> DataFrame:
    """``df`` with each ``StreamingExecutionRelation`` of a registered Python source replaced
    by ``replacement(source, node)``: a JVM plan leaf with the node's output attributes, or
    None to keep it. ``df`` itself when nothing is replaced."""
    def pick(node: Any) -> Any:
        if node_name(node) != "StreamingExecutionRelation":
            return None
        source = _stream_sources.get(node.source().hashCode())
        return None if source is None else replacement(source, node)

    return _swap_leaves(df, pick)


def relations(df: DataFrame) -> list[Relation]:
    """Every data-source relation and temporary view the analyzed plan reads (subqueries in
    expressions included), in plan order, without duplicates."""
    found: list[Relation] = []
    stack = [analyzed_plan(df)]
    while stack:
        node = stack.pop()
        name = node_name(node)
        relation = None
        if name in _V2_RELATIONS:
            relation = _v2_relation(node, _V2_RELATIONS[name])
        elif name == "LogicalRelation":
            relation = _file_relation(node)
        elif name == "StreamingExecutionRelation":
            source = _stream_sources.get(node.source().hashCode())
            if source is not None:
                kind, identifier, path, options = source.relation_facts()
                relation = Relation(kind, True, identifier, path, options)
        elif name == "View" and node.isTempView():
            relation = Relation("", bool(node.isStreaming()),
                                view=node.desc().identifier().table().lower())
        if relation is not None and relation not in found:
            found.append(relation)
        children = node.children()
        stack.extend(children.apply(i) for i in reversed(range(children.size())))
        subqueries = node.subqueries()
        stack.extend(subqueries.apply(i) for i in range(subqueries.size()))
    return found


def stream_leaf_options(df: DataFrame) -> list[dict[str, str] | None]:
    """Each stream the analyzed plan reads (its streaming leaves): the read's options,
    lower-cased (the path left out), for a data source stream; None for other streams
    (Spark's V1 sources, memory streams)."""
    found: list[dict[str, str] | None] = []
    for node in nodes(analyzed_plan(df)):
        if not node.isStreaming() or node.children().size() != 0:
            continue
        if node_name(node) == "StreamingRelationV2":
            found.append(dict(_v2_relation(node, True).options))
        else:
            found.append(None)
    return found


def _file_relation(node: Any) -> Relation | None:
    """A Delta read through Spark's parquet reader (a registered file index), else None."""
    relation = node.relation()
    if node_name(relation) != "HadoopFsRelation":
        return None
    location = relation.location()
    if not str(location.toString()).startswith(FILE_INDEX_PREFIX):
        return None
    index = _file_indexes.get(location.hashCode())
    if index is None:
        return None
    source, identifier, path, options = index.relation_facts()
    return Relation(source, False, identifier, path, options)


def _v2_relation(node: Any, streaming: bool) -> Relation:
    if streaming:
        source, options = node.sourceName(), node.extraOptions()
    else:
        source, options = node.table().name(), node.options()
    ident = node.identifier()
    identifier = None
    if ident.isDefined():
        value = ident.get()
        namespace = value.namespace()
        identifier = tuple(str(p).lower() for p in list(namespace) + [value.name()])
    pairs = {}
    entries = options.asCaseSensitiveMap().entrySet().iterator()
    while entries.hasNext():
        entry = entries.next()
        pairs[str(entry.getKey()).lower()] = str(entry.getValue())
    path = pairs.pop("path", None)
    return Relation(str(source), streaming, identifier, path, tuple(sorted(pairs.items())))


def swap_streams(df: DataFrame, replacement: Callable[[Relation, Any], Any]) -> DataFrame:
    """``df`` with each Python data source stream (``StreamingRelationV2``) replaced by
    ``replacement(relation, its output attributes)``: a JVM plan leaf with those very
    attributes, or None to keep the stream. ``df`` itself when nothing is replaced."""
    return _swap_leaves(df, lambda node: replacement(_v2_relation(node, True), node.output())
                        if node_name(node) == "StreamingRelationV2" else None)


def _swap_leaves(df: DataFrame, pick: Callable[[Any], Any]) -> DataFrame:
    """``df`` with each plan node for which ``pick`` gives a JVM leaf replaced by it."""
    spark = df.sparkSession
    plan = analyzed_plan(df)
    jvm = jvm_view(spark)
    swaps = getattr(getattr(jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
    found = False
    for node in nodes(plan):
        leaf = pick(node)
        if leaf is not None:
            swaps = swaps.updated(node, leaf)
            found = True
    if not found:
        return df
    # a Scala Map is a PartialFunction: exactly the swapped leaves are replaced
    return dataframe_of_plan(spark, plan.transformUpWithSubqueries(swaps))


def substitute_streams(df: DataFrame, matches: Callable[[Relation], bool],
                       batch: DataFrame) -> DataFrame:
    """``df`` with every streaming relation for which ``matches`` holds replaced by
    ``batch``'s plan (same column names and order): one micro-batch's rows run through the
    query the user wrote, whichever way it read its input. The stream's attribute ids are kept
    (an alias per column), so the operators above resolve unchanged."""
    return _substitute(df, "StreamingRelationV2",
                       lambda relation: batch if matches(relation) else None, strict=True)


def substitute_reads(df: DataFrame,
                     replacement: Callable[[Relation], DataFrame | None]) -> DataFrame:
    """``df`` with each batch data-source relation replaced by ``replacement(relation)``'s
    plan where it gives one (None: the relation stays). A replacement must have the
    relation's columns with the same types (metadata and nullability aside); one that does
    not leaves the relation as it was. Attribute ids are kept as in
    :func:`substitute_streams`; call ``replacement`` anew for each relation (a table read
    twice needs two plans, not one plan twice)."""
    return _substitute(df, "DataSourceV2Relation", replacement, strict=False)


def _substitute(df: DataFrame, node_type: str,
                replacement: Callable[[Relation], DataFrame | None], strict: bool) -> DataFrame:
    spark = df.sparkSession
    jvm = jvm_view(spark)
    expressions = jvm.org.apache.spark.sql.catalyst.expressions
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    changed = False

    def seq(items: list) -> Any:
        return scala_seq(spark, items)

    def aliased(node: Any, new: Any) -> Any | None:
        wanted, output = node.output(), new.output()
        given = {output.apply(i).name().lower(): output.apply(i) for i in range(output.size())}
        aliases = []
        for i in range(wanted.size()):
            column = wanted.apply(i)
            found = given.get(column.name().lower())
            if found is None:
                if strict:
                    raise ValueError(f"the batch has no column {column.name()!r}")
                return None
            if not strict and found.dataType().simpleString() != \
                    column.dataType().simpleString():
                return None
            aliases.append(expressions.Alias(
                found, column.name(), column.exprId(), column.qualifier(),
                jvm.scala.Option.apply(None), seq([])))
        return logical.Project(seq(aliases), new)

    def swap(node: Any) -> Any:
        nonlocal changed
        if node_name(node) == node_type:
            new = replacement(_v2_relation(node, node_type == "StreamingRelationV2"))
            project = aliased(node, analyzed_plan(new)) if new is not None else None
            if project is not None:
                changed = True
                return project
            return node
        children = node.children()
        if children.size() == 0:
            return node
        return node.withNewChildren(seq([swap(children.apply(i))
                                         for i in range(children.size())]))

    plan = swap(analyzed_plan(df))
    if not changed:
        return df
    return dataframe_of_plan(spark, plan)
