"""Creating an empty Delta table at a path: what CREATE TABLE (by name, by path, with a
LOCATION) and a stream's first ``toTable`` need before any row is written. deltalake creates
it; properties outside Delta's ``delta.*`` namespace follow in a second commit, since
deltalake validates only its own keys at creation."""

from __future__ import annotations

from deltalake import DeltaTable
from pyspark.sql.types import StructType

from headwater.conf.location import location
from headwater.conf.storage import options_for
from headwater.delta import definition
from headwater.delta.defaults import with_defaults
from headwater.delta.log import DeltaLog, open_table
from headwater.delta.schema import arrow_schema
from headwater.delta.table_protocol import invalid_property, split_properties


def create_delta_table(path: str, schema: StructType, partition_by: list[str],
                       name: str | None = None, comment: str | None = None,
                       properties: dict[str, str] | None = None) -> None:
    """Create an empty Delta table at ``path`` (unless one exists there) with ``schema`` as
    given (nullability and column comments kept), ``partition_by``, a description and
    properties (Delta's ``delta.*`` keys are validated by deltalake; others follow). A schema
    with generated or identity columns is created by :mod:`headwater.delta.definition`."""
    location(path).parent.mkdir(parents=True, exist_ok=True)
    properties = with_defaults(properties)  # the session's properties.defaults.*
    if definition.needs_definition(schema, properties):  # generated / identity / DEFAULT
        if not DeltaLog(path).exists():
            definition.create(None, path, definition.TableDefinition(
                schema, list(partition_by), None, comment, dict(properties or {}), name),
                name or path)
        return
    delta_keys, user_keys = split_properties(properties)
    try:
        DeltaTable.create(
            path, arrow_schema(schema), mode="ignore", partition_by=partition_by or None,
            name=name, description=comment, configuration=delta_keys or None,
            storage_options=options_for(path))
    except Exception as exc:
        raise invalid_property(exc, path) from exc
    if user_keys:  # deltalake's create validates delta.* keys only: these follow
        open_table(path).alter.set_table_properties(user_keys, raise_if_not_exists=False)
