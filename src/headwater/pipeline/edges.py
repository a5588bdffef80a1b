"""What a flow reads, from its DataFrame's analyzed plan, and how a dataset not yet created
becomes readable by name.

Every relation of the plan that resolves to a lakehouse table counts, however the user read
it: ``headwater.read*``, ``spark.table`` / ``spark.readStream.table``, SQL text (``FROM
STREAM(bronze)``), a temporary view, or ``format("delta").load(<path under the root>)``. A
lakehouse table is read through its own data source ``hw_<schema>__<table>`` (see
:class:`headwater.lakehouse.names.TableName`) or the generic ``delta`` source with a path.

A pipeline dataset whose Delta table does not exist yet is registered in Spark's catalog with
a *pending* data source: same name and path, whose ``schema()`` answers the dataset's schema
while no Delta log exists. Downstream definitions then resolve against it, and building the
graph writes nothing (the table is created when a run first needs it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import StructType

from headwater.conf.layout import DELTA_LOG
from headwater.conf.location import location
from headwater.errors import HeadwaterError
from headwater.lakehouse.catalog import per_table_source
from headwater.lakehouse.names import SOURCE_PREFIXES, TableName, parse_name
from headwater.pipeline.model import Location
from headwater.spark.catalog_ddl import columns_sql
from headwater.spark.plan import Relation, relations
from headwater.spark.raw_sql import raw_sql
from headwater.spark.session import session_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from headwater.lakehouse import Lakehouse


@dataclass(frozen=True)
class Read:
    """One input of a flow. internal: a dataset of this pipeline (else a lakehouse table)."""

    name: str
    streaming: bool
    location: Location
    internal: bool
    options: tuple[tuple[str, str], ...] = ()


class TableNames:
    """Maps plan relations to lakehouse table names."""

    def __init__(self, datasets: dict[str, Any], lakehouse: Lakehouse) -> None:
        self.datasets = datasets
        self.lakehouse = lakehouse
        self.root = lakehouse.root

    def name_of(self, relation: Relation) -> str | None:
        """The qualified table (or pipeline view) ``relation`` reads; None for other data."""
        if relation.view is not None:
            dataset = self.datasets.get(relation.view)
            return relation.view if dataset is not None and not dataset.stored else None
        if relation.source.startswith(SOURCE_PREFIXES):
            if relation.identifier:
                return _parsed(".".join(relation.identifier))
            return self._by_source(relation.source)
        if relation.source == "delta" and relation.path:
            return self._by_path(relation.path)
        return None

    def _by_source(self, source: str) -> str | None:
        for name in list(self.datasets) + self.lakehouse.tables():
            if parse_name(name).source_name == source:
                return parse_name(name).qualified
        return None

    def _by_path(self, path: str) -> str | None:
        text = path[len("file:"):] if path.startswith("file:") else path
        target = location(text)
        if isinstance(target, Path) != isinstance(self.root, Path):
            return None  # a URI and a local folder: outside the lakehouse
        try:
            relative = target.relative_to(self.root)  # type: ignore[arg-type]
        except ValueError:
            return None  # outside the lakehouse
        if not 1 <= len(relative.parts) <= 2:
            return None
        name = _parsed(".".join(relative.parts))
        if name is not None and (name in self.datasets or self.lakehouse.exists(name)):
            return name
        return None

    def reads(self, df: DataFrame, hints: list[Read], location: Location) -> list[Read]:
        """The flow's reads: those headwater.read* recorded (with their lines), then every
        other lakehouse relation of the plan (located at the definition)."""
        found = list(dict.fromkeys(hints))
        seen = {(r.name, r.streaming) for r in found}
        for relation in relations(df):
            name = self.name_of(relation)
            if name is None or (name, relation.streaming) in seen:
                continue
            seen.add((name, relation.streaming))
            options = relation.options if relation.streaming else ()
            found.append(Read(name, relation.streaming, location, name in self.datasets,
                              options))
        return found

    def matcher(self, name: str) -> Any:
        """A predicate on plan relations: does it read ``name``?"""
        return lambda relation: not relation.view and self.name_of(relation) == name


def _parsed(text: str) -> str | None:
    try:
        return parse_name(text).qualified
    except HeadwaterError:
        return None


# --- datasets readable before their table exists -------------------------------------------


def pending_source(name: TableName, path: str, schema: StructType, parallelism: int) -> type:
    """The table's own data source, answering ``schema`` while no Delta log exists at ``path``
    (then it behaves exactly like the table's source)."""
    base = per_table_source(name, path, parallelism)
    declared = schema.json()
    log = os.path.join(path, DELTA_LOG)

    def pending_schema(self: Any) -> StructType:
        if os.path.isdir(log):
            return base.schema(self)
        return StructType.fromJson(json.loads(declared))

    return type(name.source_name, (base,), {"schema": pending_schema,
                                            "__module__": __name__})


def register_pending(spark: SparkSession, name: str, path: str, schema: StructType) -> None:
    """Put ``name`` in Spark's catalog with ``schema``, writing nothing to the lakehouse."""
    tname = parse_name(name)
    spark.dataSource.register(pending_source(tname, path, schema, session_parallelism(spark)))
    # Spark's own sql: the lakehouse's DROP TABLE would delete the table's data.
    if tname.schema:
        raw_sql(spark, f"CREATE DATABASE IF NOT EXISTS `{tname.schema}`")
    raw_sql(spark, f"DROP TABLE IF EXISTS {tname.sql}")
    # the columns given: Spark need not ask the pending source (a Python worker) for them
    raw_sql(spark, f"CREATE TABLE {tname.sql} {columns_sql(spark, schema)}"
                   f"USING {tname.source_name}")


def unregister(spark: SparkSession, name: str) -> None:
    raw_sql(spark, f"DROP TABLE IF EXISTS {parse_name(name).sql}")


def missing_relation(exc: BaseException) -> str | None:
    """The name Spark could not find (TABLE_OR_VIEW_NOT_FOUND), qualified; else None."""
    condition = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        if condition is None or condition() != "TABLE_OR_VIEW_NOT_FOUND":
            return None
        relation = (exc.getMessageParameters() or {}).get("relationName", "")  # type: ignore
    except Exception:  # noqa: BLE001 - not a Spark error after all
        return None
    parts = [p.strip().strip("`") for p in relation.split("`.`")]
    return _parsed(".".join(parts))
