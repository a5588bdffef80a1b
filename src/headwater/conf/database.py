"""A pipeline's database: the schema its unqualified table names live in (SDP's `database:`,
headwater.toml's ``[pipeline] database``), and how a catalog's schema is named in Spark.

A lakehouse has Unity-Catalog-like catalogs besides Spark's own ``spark_catalog``: a name
``main.sales.orders`` is table ``orders`` of schema ``sales`` of catalog ``main``. Spark's
session catalog has one level of databases, so in Spark that schema is the database
``main__sales`` (:func:`spark_database`); the ``__`` separator is why a catalog's or a
schema's name never holds ``__``. ``spark_catalog``'s schemas keep their own names.
"""

from __future__ import annotations

import re

from headwater.conf.layout import (
    CATALOG_SEPARATOR,
    DEFAULT_CATALOG,
    NAME_PART,
    RESERVED_PREFIXES,
    SYSTEM_TABLES,
)
from headwater.errors import HeadwaterError


def check_database(value: object, where: str, catalog: str | None = None) -> str | None:
    """A pipeline's database (schema) name, lower case; ``default`` is None, the lakehouse's
    top level, where Spark's ``default`` database lives. ``where`` names the setting. With a
    ``catalog`` (not ``spark_catalog``): the schema's database in Spark (``main__sales``;
    ``main__default`` for its ``default``)."""
    if not isinstance(value, str) or not value.strip():
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{where} {value!r} is not a name.",
            "The pipeline's database is the schema its unqualified table names live in.",
            "Write a name such as `sales`.")
    text = value.strip().strip("`").lower()
    if text == "default":
        return None if catalog is None else spark_database(catalog, text)
    if not re.match(NAME_PART, text) or text.startswith(RESERVED_PREFIXES) \
            or text in SYSTEM_TABLES or CATALOG_SEPARATOR in text:
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{where} {value!r} is not a valid schema name.",
            "A schema is a folder under the lakehouse root: letters, digits and underscores, "
            "not starting with a digit or underscore, without `__`.", "Use a name like `sales`.")
    return text if catalog is None else spark_database(catalog, text)


def check_catalog(value: object, where: str) -> str | None:
    """A catalog name, lower case; ``spark_catalog`` (Spark's own) is None."""
    text = value.strip().strip("`").lower() if isinstance(value, str) else ""
    if text == DEFAULT_CATALOG:
        return None
    if not re.match(NAME_PART, text) or text.startswith(RESERVED_PREFIXES) \
            or CATALOG_SEPARATOR in text or text in RESERVED_CATALOGS:
        raise HeadwaterError(
            "HW_CATALOG_NAME_INVALID", f"{where} {value!r} is not a valid catalog name.",
            "A catalog is a folder under the lakehouse root: letters, digits and underscores, "
            "not starting with a digit or underscore, without `__` (Spark names a catalog's "
            f"schema <catalog>{CATALOG_SEPARATOR}<schema>), and not `delta` (delta.`path` "
            "names a table by path).", "Use a name like `main`.")
    return text


# Names a catalog cannot take: ``delta.`path```'s prefix and Spark's global temp views'.
RESERVED_CATALOGS = ("delta", "global_temp")


def spark_database(catalog: str | None, schema: str | None) -> str:
    """The Spark database of ``catalog.schema`` (``main__sales``); ``spark_catalog``'s
    (``catalog=None``) is the schema itself (``default`` for None)."""
    schema = schema or "default"
    return schema if catalog is None else f"{catalog}{CATALOG_SEPARATOR}{schema}"


def split_database(database: str) -> tuple[str | None, str]:
    """(catalog or None, schema) of a Spark database name: ``main__sales`` -> (main, sales),
    ``sales`` -> (None, sales)."""
    catalog, sep, schema = database.lower().partition(CATALOG_SEPARATOR)
    return (catalog, schema) if sep and catalog and schema else (None, database.lower())
