"""Lakehouse table names: ``table``, ``schema.table`` or ``catalog.schema.table``, folders under
the root, never a path.

:func:`parse_name` reads a name by itself (a two-part name is a schema of ``spark_catalog``,
Spark's session catalog); :func:`resolve` reads what a user wrote in a session, as Spark and
Unity Catalog resolve it: one- and two-part names in the current catalog and schema (after
``USE CATALOG main``, ``sales.orders`` is ``main.sales.orders``). The current catalog and
schema are Spark's current database (``main__sales``, see :mod:`headwater.conf.database`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import SparkSession

from headwater.conf.database import RESERVED_CATALOGS, spark_database, split_database
from headwater.conf.layout import (
    CATALOG_MARKER,
    CATALOG_SEPARATOR,
    DEFAULT_CATALOG,
    DELTA_LOG,
    NAME_PART,
    RESERVED_PREFIXES,
    SYSTEM_TABLES,
)
from headwater.conf.location import AnyPath, location
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.spark.jvm import current_database

_PART = re.compile(NAME_PART)
# How the per-table data sources' names start (TableName.source_name).
SOURCE_PREFIXES = ("hw_", "hwc_")


class TableLocations(Protocol):
    """A lakehouse as far as finding a table by name goes (:class:`headwater.Lakehouse` is
    the one implementation): the readers and the location check take only this."""

    def path(self, name: str) -> str: ...
    def exists(self, name: str) -> bool: ...


@dataclass(frozen=True)
class TableName:
    """A validated table name, lower case: ``table``, ``schema.table`` (both in
    ``spark_catalog``, ``catalog=None``) or ``catalog.schema.table``."""

    schema: str | None
    table: str
    catalog: str | None = None

    @property
    def qualified(self) -> str:
        """The name as users write it (and as :func:`parse_name` reads it back)."""
        if self.catalog:
            return f"{self.catalog}.{self.schema or 'default'}.{self.table}"
        return f"{self.schema}.{self.table}" if self.schema else self.table

    @property
    def database(self) -> str | None:
        """The table's database in Spark's session catalog (``main__sales`` for a catalog's
        schema), None for the current one of a one-part name."""
        if self.catalog:
            return spark_database(self.catalog, self.schema)
        return self.schema

    @property
    def sql(self) -> str:
        """The name Spark's session catalog knows the table by, quoted, with its database
        (``default`` for the root's own tables: never the session's current one)."""
        return f"`{self.database or 'default'}`.`{self.table}`"

    @property
    def relative_path(self) -> Path:
        if self.catalog:
            return Path(self.catalog, self.schema or "default", self.table)
        return Path(self.schema, self.table) if self.schema else Path(self.table)

    @property
    def source_name(self) -> str:
        """The per-table data source's name (an identifier Spark's parser accepts): ``hwc_``
        for a catalog's table, so ``main.sales.x`` and a root table named ``main__sales__x``
        never share one (catalog and schema names hold no ``__``)."""
        if self.catalog:
            return f"hwc_{self.catalog}__{self.schema or 'default'}__{self.table}"
        return f"hw_{self.database}__{self.table}" if self.database else f"hw_{self.table}"


def name_parts(name: str) -> list[str]:
    """The parts of a written name, lower case, backticks removed (dots inside backticks
    are not separators)."""
    parts, current, quoted = [], [], False
    for ch in name.strip():
        if ch == "`":
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return [p.lower() for p in parts]


def parse_name(name: str | list[str]) -> TableName:
    """``bronze``, ``sales.orders``, ``default.bronze``, ``main.sales.orders`` or with
    backticks (or their parts); never a path. A two-part name is in ``spark_catalog``
    unless its schema is a catalog's database in Spark (``main__sales.orders``)."""
    if isinstance(name, list):
        parts = [p.lower() for p in name]
    elif not isinstance(name, str) or not name.strip():
        raise _bad_name(name, "a table name is a non-empty string")
    else:
        parts = name_parts(name)
    if len(parts) == 3 and parts[0] == DEFAULT_CATALOG:
        parts = parts[1:]
    if len(parts) == 2 and CATALOG_SEPARATOR in parts[0]:
        catalog, schema = split_database(parts[0])
        if catalog is not None:
            parts = [catalog, schema, parts[1]]
    if parts[0] == "default" and len(parts) == 2:
        parts = parts[1:]
    if len(parts) > 3:
        raise _bad_name(name, "names have at most three parts, catalog.schema.table")
    if len(parts) == 1 and parts[0] in SYSTEM_TABLES:
        return TableName(None, parts[0])
    for i, part in enumerate(parts):
        if not _PART.match(part) or part.startswith(RESERVED_PREFIXES):
            raise _bad_name(
                name, f"{part!r} must be letters, digits and underscores, not starting with a "
                "digit or underscore (Spark's session catalog, delta-spark's too, takes only "
                "letters, digits and underscores in a table or schema name, even between "
                "backticks)", error_class="INVALID_SCHEMA_OR_RELATION_NAME")
        if i < len(parts) - 1 and CATALOG_SEPARATOR in part:
            raise _bad_name(name, f"{part!r}: a catalog or schema name never holds "
                            f"{CATALOG_SEPARATOR!r} (Spark names a catalog's schema "
                            f"<catalog>{CATALOG_SEPARATOR}<schema>)")
    if len(parts) == 3:
        if parts[0] in RESERVED_CATALOGS:
            raise _bad_name(name, f"{parts[0]!r} is not a catalog")
        return TableName(parts[1], parts[2], parts[0])
    return TableName(parts[0] if len(parts) == 2 else None, parts[-1])


def in_schema(name: str, schema: str | None) -> TableName:
    """``name`` with a one-part name placed in ``schema`` (a pipeline's default database as
    Spark names it, ``sales`` or ``main__sales``, as Spark resolves unqualified names in its
    current database) and a two-part name in that database's catalog; three-part names,
    system tables and ``schema=None`` leave it as :func:`parse_name` reads it."""
    tname = parse_name(name)
    parts = len(name_parts(name))
    if schema is None or tname.table in SYSTEM_TABLES:
        return tname
    catalog, own = split_database(schema)
    if parts == 1:
        return TableName(own if catalog or own != "default" else None, tname.table, catalog)
    if parts == 2 and catalog is not None and tname.catalog is None:
        return TableName(tname.schema or "default", tname.table, catalog)
    return tname


def resolve(name: str | list[str], spark: SparkSession | None) -> TableName:
    """What ``name``, written by a user in ``spark``, names: one- and two-part names in the
    session's current catalog and schema, as Spark (and Unity Catalog) resolve them."""
    if spark is None:
        return parse_name(name)
    text = name if isinstance(name, str) else ".".join(f"`{p}`" for p in name)
    parts = name_parts(text) if isinstance(name, str) else [p.lower() for p in name]
    if len(parts) >= 3 or (len(parts) == 2 and CATALOG_SEPARATOR in parts[0]):
        return parse_name(parts)
    if len(parts) == 1 and parts[0] in SYSTEM_TABLES:
        return parse_name(parts)
    database = current_database(spark)
    if database == "default":
        return parse_name(parts)
    return in_schema(text, database)


def spark_name(name: str, spark: SparkSession) -> str:
    """The name Spark's catalog knows ``name`` (written in ``spark``) by: a table of one of the
    lakehouse's catalogs by its Spark database (```main__sales`.`orders```); any other name
    as written (one part stays: Spark resolves temporary views and the current database)."""
    try:
        if len(name_parts(name)) < 2:
            return name
        tname = resolve(name, spark)
    except HeadwaterError:
        return name
    return tname.sql if tname.catalog else name


def _bad_name(name: Any, why: str, error_class: str | None = None) -> HeadwaterError:
    return HeadwaterError(
        "HW_TABLE_NAME_INVALID", f"{name!r} is not a valid table name: {why}.",
        "Table names become folders under the lakehouse root and must not leave it.",
        "Use names like 'bronze', 'sales.orders' or 'main.sales.orders'.",
        error_class=error_class,
    )


def list_tables(root: AnyPath | str) -> list[str]:
    """Every Delta table under ``root`` (a local folder or an object-store URI; system tables
    first, then ``spark_catalog``'s, then each catalog's), as qualified names."""
    root = location(root)
    found = [n for n in SYSTEM_TABLES if (root / n / DELTA_LOG).is_dir()]
    in_catalogs = []
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.name.startswith(RESERVED_PREFIXES):
            continue
        catalog = (entry / CATALOG_MARKER).is_file()
        if not catalog and (entry / DELTA_LOG).is_dir():
            found.append(entry.name)
            continue
        for inner in _folders(entry):
            if catalog:
                in_catalogs.extend(f"{entry.name}.{inner.name}.{table.name}"
                                   for table in _folders(inner)
                                   if (table / DELTA_LOG).is_dir())
            elif (inner / DELTA_LOG).is_dir():
                found.append(f"{entry.name}.{inner.name}")
    return [n for n in found + in_catalogs if _PART.match(n.split(".")[-1])]


def list_catalogs(root: AnyPath | str) -> list[str]:
    """The catalogs of the lakehouse at ``root`` (folders holding a catalog marker)."""
    root = location(root)
    return [entry.name for entry in _folders(root) if (entry / CATALOG_MARKER).is_file()]


def catalog_schemas(root: AnyPath | str, catalog: str) -> list[str]:
    """The schemas of ``catalog`` (its folders; ``default`` always)."""
    folder = location(root) / catalog
    names = {entry.name for entry in _folders(folder)} if folder.is_dir() else set()
    return sorted(names | {"default"})


def _folders(folder: AnyPath) -> list[AnyPath]:
    return [entry for entry in sorted(folder.iterdir())
            if entry.is_dir() and not entry.name.startswith(RESERVED_PREFIXES)]


def name_taken_error(name: str, holder: str, statement: str) -> DeltaAnalysisError:
    """delta-spark's TABLE_OR_VIEW_ALREADY_EXISTS for a name Spark's catalog gives to a table
    of another provider or a view (``holder``, as :meth:`Lakehouse.catalog_holder` says it):
    headwater never replaces it. statement: what was refused (``CREATE TABLE``...)."""
    what = "a view" if holder == "view" else f"a {holder} table"
    return DeltaAnalysisError(
        "HW_TABLE_EXISTS", f"{statement} {name}: the name is taken by {what} of Spark's "
        "catalog.", "A Delta table cannot take the name of an existing table or view; "
        "headwater never replaces what it did not create.",
        f"Drop or rename that {'view' if holder == 'view' else 'table'} first, or use "
        "another name.", error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
