"""Hidden columns: left out of a DataFrame's columns and of ``SELECT *``, yet found by name.

Spark hides its file sources' ``_metadata`` column this way: the relation exposes it as a
metadata column, which the analyzer resolves when a query names it and never expands for
``*``. Python data sources cannot declare metadata columns, so :func:`hide` puts a projection
over the DataFrame that keeps the visible columns and lists the others as its hidden output
(Spark's ``Project.hiddenOutputTag``, the mechanism behind the hidden columns of a
``JOIN ... USING``). ``df.select("_metadata.file_name")``, ``F.col("_metadata")``, a filter
on it: all resolve as on Spark's own sources.

A Spark temporary view drops hidden columns (its ``View`` node exposes none, as for Spark's
file sources), so SQL text reaches them through :func:`sql_with_relations`, which parses the
query and puts each named DataFrame's plan where its name is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from headwater.spark.jvm import analyzed_plan, dataframe_of_plan, jvm_view, parse_plan, scala_list
from headwater.spark.plan import node_name


def _seq(spark: SparkSession, items: Sequence[Any]) -> Any:
    return scala_list(spark, items)


def _hidden_tag(spark: SparkSession) -> Any:
    logical = jvm_view(spark).org.apache.spark.sql.catalyst.plans.logical
    return getattr(logical, "Project$").__getattr__("MODULE$").hiddenOutputTag()


def _project(spark: SparkSession, visible: list[Any], hidden: list[Any], child: Any) -> Any:
    project = jvm_view(spark).org.apache.spark.sql.catalyst.plans.logical.Project(
        _seq(spark, visible), child)
    project.setTagValue(_hidden_tag(spark), _seq(spark, hidden))
    return project


def _dataframe(spark: SparkSession, plan: Any) -> DataFrame:
    return dataframe_of_plan(spark, plan)


def hide(df: DataFrame, names: Sequence[str]) -> DataFrame:
    """``df`` without the columns ``names`` (those it has), which stay resolvable by name."""
    spark = df.sparkSession
    plan = analyzed_plan(df)
    output = plan.output()
    attributes = [output.apply(i) for i in range(output.size())]
    wanted = {n.lower() for n in names}
    hidden = [a for a in attributes if a.name().lower() in wanted]
    if not hidden:
        return df
    visible = [a for a in attributes if a.name().lower() not in wanted]
    return _dataframe(spark, _project(spark, visible, hidden, plan))


def _hidden_of(spark: SparkSession, plan: Any) -> list[Any]:
    tag = plan.getTagValue(_hidden_tag(spark))
    if not tag.isDefined():
        return []
    found = tag.get()
    return [found.apply(i) for i in range(found.size())]


def _qualified(spark: SparkSession, plan: Any, alias: str) -> Any:
    """``plan`` (a :func:`hide` projection) as ``FROM ... AS alias`` reads it: every column,
    hidden ones too, qualified by ``alias``. (Spark's SubqueryAlias passes hidden columns on
    from a table only, not from a projection.)"""
    qualifier = _seq(spark, [alias])
    output = plan.output()
    visible = [output.apply(i).withQualifier(qualifier) for i in range(output.size())]
    hidden = [a.withQualifier(qualifier) for a in _hidden_of(spark, plan)]
    return _project(spark, visible, hidden, plan)


def aliased(df: DataFrame, alias: str) -> DataFrame:
    """``df`` (a :func:`hide` result) as ``df.alias(alias)`` would be, its hidden columns
    kept and qualified by ``alias`` too (an alias of a projection would drop them)."""
    spark = df.sparkSession
    return _dataframe(spark, _qualified(spark, analyzed_plan(df), alias))


def sql_with_relations(spark: SparkSession, query: str,
                       relations: Mapping[str, DataFrame]) -> DataFrame:
    """``query`` (one SELECT) analyzed with each one-part table name of ``relations`` read as
    that DataFrame, hidden columns included. A name read where the walk does not reach (inside
    a subquery expression or a CTE) resolves through Spark's catalog as usual."""
    plans = {name.lower(): analyzed_plan(df) for name, df in relations.items()}

    def named(node: Any) -> Any | None:
        if node_name(node) != "UnresolvedRelation":
            return None
        parts = node.multipartIdentifier()
        return plans.get(str(parts.apply(0)).lower()) if parts.size() == 1 else None

    def swap(node: Any) -> Any:
        if node_name(node) == "SubqueryAlias" and named(node.child()) is not None:
            return _qualified(spark, named(node.child()), str(node.alias()))
        found = named(node)
        if found is not None:  # FROM t: its columns qualified by t, as Spark's table's are
            return _qualified(spark, found, str(node.multipartIdentifier().apply(0)))
        children = node.children()
        if children.size() == 0:
            return node
        return node.withNewChildren(_seq(spark, [swap(children.apply(i))
                                                 for i in range(children.size())]))

    parsed = parse_plan(spark, query)
    return _dataframe(spark, swap(parsed))
