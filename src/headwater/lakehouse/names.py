"""Lakehouse table names: ``table`` or ``schema.table``, folders under the root, never a path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from headwater.conf.layout import DELTA_LOG, NAME_PART, RESERVED_PREFIXES, SYSTEM_TABLES
from headwater.conf.location import AnyPath, location
from headwater.errors import HeadwaterError

_PART = re.compile(NAME_PART)


class TableLocations(Protocol):
    """A lakehouse as far as finding a table by name goes (:class:`headwater.Lakehouse` is
    the one implementation): the readers and the location check take only this."""

    def path(self, name: str) -> str: ...
    def exists(self, name: str) -> bool: ...


@dataclass(frozen=True)
class TableName:
    """A validated table name: ``table`` or ``schema.table``, lower case."""

    schema: str | None
    table: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    @property
    def sql(self) -> str:
        return f"`{self.schema}`.`{self.table}`" if self.schema else f"`{self.table}`"

    @property
    def relative_path(self) -> Path:
        return Path(self.schema, self.table) if self.schema else Path(self.table)

    @property
    def source_name(self) -> str:
        """The per-table data source's name (an identifier Spark's parser accepts)."""
        return f"hw_{self.schema}__{self.table}" if self.schema else f"hw_{self.table}"


def parse_name(name: str) -> TableName:
    """``bronze``, ``sales.orders``, ``default.bronze`` or with backticks; never a path."""
    if not isinstance(name, str) or not name.strip():
        raise _bad_name(name, "a table name is a non-empty string")
    parts = [p.strip().strip("`").lower() for p in name.strip().split(".")]
    if parts[0] == "spark_catalog" and len(parts) == 3:
        parts = parts[1:]
    if parts[0] == "default" and len(parts) == 2:
        parts = parts[1:]
    if len(parts) > 2:
        raise _bad_name(name, "names have at most two parts, schema.table")
    if len(parts) == 1 and parts[0] in SYSTEM_TABLES:
        return TableName(None, parts[0])
    for part in parts:
        if not _PART.match(part) or part.startswith(RESERVED_PREFIXES):
            raise _bad_name(
                name, f"{part!r} must be letters, digits and underscores, not starting with a "
                "digit or underscore")
    return TableName(parts[0] if len(parts) == 2 else None, parts[-1])


def in_schema(name: str, schema: str | None) -> TableName:
    """``name`` with a one-part name placed in ``schema`` (a pipeline's default database, as
    Spark resolves unqualified names in its current database); qualified names, system
    tables and ``schema=None`` leave it as :func:`parse_name` reads it."""
    tname = parse_name(name)
    one_part = len([p for p in name.strip().split(".") if p.strip()]) == 1
    if schema is None or not one_part or tname.table in SYSTEM_TABLES:
        return tname
    return parse_name(f"{schema}.{tname.table}")


def _bad_name(name: Any, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_TABLE_NAME_INVALID", f"{name!r} is not a valid table name: {why}.",
        "Table names become folders under the lakehouse root and must not leave it.",
        "Use names like 'bronze' or 'sales.orders'.",
    )


def list_tables(root: AnyPath | str) -> list[str]:
    """Every Delta table under ``root`` (a local folder or an object-store URI; system tables
    first), as qualified names."""
    root = location(root)
    found = [n for n in SYSTEM_TABLES if (root / n / DELTA_LOG).is_dir()]
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.name.startswith(RESERVED_PREFIXES):
            continue
        if (entry / DELTA_LOG).is_dir():
            found.append(entry.name)
            continue
        for inner in sorted(entry.iterdir()):
            if inner.is_dir() and (inner / DELTA_LOG).is_dir() \
                    and not inner.name.startswith(RESERVED_PREFIXES):
                found.append(f"{entry.name}.{inner.name}")
    return [n for n in found if _PART.match(n.split(".")[-1])]

