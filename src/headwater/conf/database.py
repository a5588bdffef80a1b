"""A pipeline's database: the schema its unqualified table names live in (SDP's `database:`,
headwater.toml's ``[pipeline] database``)."""

from __future__ import annotations

import re

from headwater.conf.layout import NAME_PART, RESERVED_PREFIXES, SYSTEM_TABLES
from headwater.errors import HeadwaterError


def check_database(value: object, where: str) -> str | None:
    """A pipeline's database (schema) name, lower case; ``default`` is None, the lakehouse's
    top level, where Spark's ``default`` database lives. ``where`` names the setting."""
    if not isinstance(value, str) or not value.strip():
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{where} {value!r} is not a name.",
            "The pipeline's database is the schema its unqualified table names live in.",
            "Write a name such as `sales`.")
    text = value.strip().strip("`").lower()
    if text == "default":
        return None
    if not re.match(NAME_PART, text) or text.startswith(RESERVED_PREFIXES) \
            or text in SYSTEM_TABLES:
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{where} {value!r} is not a valid schema name.",
            "A schema is a folder under the lakehouse root: letters, digits and underscores, "
            "not starting with a digit or underscore.", "Use a name like `sales`.")
    return text
