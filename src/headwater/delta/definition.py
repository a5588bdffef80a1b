"""Creating or replacing a Delta table from a full definition, in one commit.

delta-spark's ``CREATE [OR REPLACE] TABLE`` and its table builder keep what deltalake 1.6.6's
``DeltaTable.create`` cannot write: NOT NULL columns, identity columns (writer version 6:
deltalake gives such a table writer version 2), liquid clustering (the ``delta.clustering``
domain, writer features clustering and domainMetadata) and properties of the user's own
(deltalake's create takes ``delta.*`` keys only). So the first commit is written here, through
:mod:`headwater.delta.commit`: protocol, metaData (schema with its column metadata,
partitioning, description, every property) and the clustering domain. A replace is one commit
too: every file removed, the new definition, history kept (time travel reads the old rows).

deltalake stays the judge of what it knows: the ``delta.*`` properties and the column types
are handed to its ``DeltaTable.create`` in a scratch folder first, which refuses a bad
property value and says which protocol they need; generated columns (writer 4), identity
columns (writer 6) and clustering are added to that, as delta-spark does. A replace never
lowers the table's protocol. Tables on object stores are created through deltalake itself
(its conditional puts), unless they need identity columns or clustering.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from typing import Any

from deltalake import DeltaTable, Schema
from deltalake.transaction import create_table_with_add_actions
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructType

from headwater.conf import storage
from headwater.conf.layout import DELTA_LOG
from headwater.delta import clustering, column_defaults, column_mapping
from headwater.delta.commit import Transaction, commit
from headwater.delta.defaults import with_defaults
from headwater.delta.generated import (
    GENERATION_EXPRESSION,
    Generation,
    check_expressions,
    declares_generation,
)
from headwater.delta.log import (
    FILE_COLUMNS,
    DeltaLog,
    add_actions,
    deletion_vector_paths,
    normalize_uri,
)
from headwater.delta.schema import format_partition_value
from headwater.delta.table_protocol import (
    CHECKED_HERE,
    as_action,
    deltalake_protocol,
    features,
    invalid_property,
    smallest,
    split_properties,
)
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError, DeltaUnsupportedOperationError


@dataclass(frozen=True)
class TableDefinition:
    """What CREATE TABLE says about a table.

    schema: the columns, with their nullability and metadata (``comment``, Delta's generation
    and identity keys). partition_by: partition columns. cluster_by: clustering columns (None:
    no CLUSTER BY; a replace of a clustered table then leaves it unclustered). description:
    the table comment. properties: table properties, Delta's and the user's. name: the
    table's name in the log's metadata.
    """

    schema: StructType
    partition_by: list[str] = field(default_factory=list)
    cluster_by: list[str] | None = None
    description: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    name: str | None = None


OWN_FEATURE_PROPERTIES = {"delta.enabledeletionvectors", "delta.enabletypewidening",
                          "delta.enablerowtracking"}


def needs_definition(schema: StructType, properties: dict[str, str] | None = None) -> bool:
    """True when a schema declares what only this module writes (generated, identity or
    DEFAULT columns), or the properties enable a feature deltalake cannot create
    (allowColumnDefaults, column mapping: ids and physical names in the schema), or set a
    property deltalake cannot parse (:data:`~headwater.delta.table_protocol.CHECKED_HERE`):
    callers that would create the table through deltalake come here instead."""
    return declares_generation(schema.json()) or any(
        k.lower() == column_defaults.FEATURE_PROPERTY.lower() for k in properties or {}) \
        or enables_deletion_vectors(properties) \
        or column_mapping.mode_of(properties) != "none" \
        or any(k.lower() in CHECKED_HERE for k in properties or {})


def enables_deletion_vectors(properties: dict[str, str] | None) -> bool:
    """``delta.enableDeletionVectors = true`` (deltalake would write the protocol with a
    variantType feature no column needs) or ``delta.enableTypeWidening = true`` (deltalake
    refuses it): the table's first commit is written here."""
    return any(k.lower() in OWN_FEATURE_PROPERTIES and str(v).strip().lower() == "true"
               for k, v in (properties or {}).items())


def _requested_features(definition: TableDefinition, existing: Any, table: str
                        ) -> tuple[TableDefinition, set[str]]:
    """``definition`` without the feature properties Delta records in the protocol only
    (``delta.feature.allowColumnDefaults``), and the writer features they add. A DEFAULT
    needs that feature, asked for here or already in the ``existing`` table's protocol."""
    properties, requested = column_defaults.feature_requested(definition.properties, table)
    had = existing is not None and \
        column_defaults.FEATURE in features(existing)[1]
    if column_defaults.defaults_of(definition.schema) and not (requested or had):
        raise column_defaults.not_enabled_error(table, "CREATE TABLE")
    wanted = {column_defaults.FEATURE} if requested else set()
    return dataclass_replace(definition, properties=properties), wanted


def validate(spark: SparkSession | None, definition: TableDefinition, table: str) -> None:
    """delta-spark's checks of a new definition, before anything is written (``spark``: the
    session whose SQL reads generation expressions; None for the active one)."""
    schema = definition.schema
    names = [f.name.lower() for f in schema.fields]
    if not names:
        raise HeadwaterError(
            "HW_TABLE_DEFINITION_INVALID", f"Table {table} has no columns.",
            "A Delta table needs a schema (the column definitions).",
            "Add columns (addColumn / addColumns, or CREATE TABLE t (col TYPE, ...)).",
            error_class="DELTA_SCHEMA_NOT_PROVIDED")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise HeadwaterError(
            "HW_TABLE_SCHEMA_INVALID", f"Table {table} would have duplicate columns {dupes}.",
            "Delta column names are unique, ignoring case.", "Rename or drop the duplicates.")
    geo = [f.name for f in schema.fields if _geospatial(f.dataType.jsonValue())]
    if geo:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Table {table} has geometry / geography columns ({', '.join(geo)}): Delta's "
            "geospatial table feature, which headwater cannot write.",
            "Geospatial types need Delta's geospatial table feature; delta-rs (deltalake "
            "1.6.6), headwater's Delta writer, has neither the types nor the feature.",
            "Store the shapes as WKB (binary) or WKT (string) columns; nothing was created.",
            error_class="DELTA_GEOSPATIAL_NOT_SUPPORTED")
    if definition.partition_by and definition.cluster_by:
        raise cluster_and_partition_error()
    if any(k.lower() == clustering.FEATURE_PROPERTY for k in definition.properties):
        raise clustering.feature_property_error(table, "CREATE TABLE")
    if definition.cluster_by:
        clustering.check_columns(schema, definition.cluster_by, definition.properties, table)
    generation = Generation.of(schema)
    for kind, columns in (("partition", definition.partition_by),
                          ("clustering", definition.cluster_by or [])):
        missing = [c for c in columns if c.lower() not in names]
        if missing:
            raise HeadwaterError(
                "HW_TABLE_DEFINITION_INVALID",
                f"The {kind} columns {missing} are not columns of table {table}.",
                f"A table's {kind} columns are some of its columns.",
                f"Use some of: {', '.join(schema.fieldNames())}.")
    for spec in generation.identities:
        column = schema[spec.name]
        if (column.metadata or {}).get(GENERATION_EXPRESSION) is not None:
            raise HeadwaterError(
                "HW_IDENTITY_COLUMN_INVALID", f"IDENTITY column {spec.name} of {table} cannot "
                "be specified with a generated column expression.",
                "An identity column's values come from its generator.",
                "Keep either the expression or the identity.",
                error_class="DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION")
        if column.dataType != LongType():
            raise identity_type_error(spec.name, column.dataType.simpleString())
        if spec.step == 0:
            raise HeadwaterError(
                "HW_IDENTITY_COLUMN_INVALID", f"IDENTITY column {spec.name} of {table}: step "
                "cannot be 0.", "Every generated value must differ from the last.",
                "Use a positive or negative step.",
                error_class="DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP")
        if spec.name.lower() in [c.lower() for c in definition.partition_by]:
            raise HeadwaterError(
                "HW_IDENTITY_COLUMN_INVALID",
                f"PARTITIONED BY IDENTITY column {spec.name} is not supported (table {table}).",
                "Every identity value is unique: each row would get its own partition.",
                "Partition by another column.",
                error_class="DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED")
    check_expressions(spark or SparkSession.active(), schema, table)


def identity_type_error(column: str, type_name: str) -> HeadwaterError:
    return DeltaUnsupportedOperationError(
        "HW_IDENTITY_COLUMN_INVALID",
        f"DataType {type_name} is not supported for IDENTITY columns (column {column}).",
        "Delta generates identity values as BIGINT.", f"Declare {column} as BIGINT (LONG).",
        error_class="DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE")


def cluster_and_partition_error() -> HeadwaterError:
    return DeltaAnalysisError(
        "HW_TABLE_DEFINITION_INVALID", "Clustering and partitioning cannot both be specified.",
        "A Delta table is either partitioned or clustered.",
        "Remove partitionedBy if you want to create a Delta table with clustering.",
        error_class="DELTA_CLUSTER_BY_WITH_PARTITIONED_BY")


def create(spark: SparkSession | None, path: str, definition: TableDefinition, table: str) -> int:
    """Create the table at ``path`` (none may exist there); return its version (0)."""
    uri = normalize_uri(path)
    definition = dataclass_replace(definition,
                                   properties=with_defaults(definition.properties, spark))
    definition, wanted = _requested_features(definition, None, table)
    mapping = column_mapping.mode_of(definition.properties)
    if mapping != "none":  # the mode and its ids are set below, not computed by deltalake
        column_mapping.check_new_mode(mapping, table, storage.bucket_of(uri) is not None)
        definition = dataclass_replace(definition, properties=column_mapping.without_mode(
            definition.properties))
    validate(spark, definition, table)
    protocol = _protocol(definition, None, wanted)
    if storage.bucket_of(uri) is not None:
        return _create_through_deltalake(uri, definition, protocol, table)
    os.makedirs(os.path.join(uri, DELTA_LOG), exist_ok=True)
    meta = _metadata(definition, str(uuid.uuid4()))
    parameters = _parameters(definition, uri)
    if mapping != "none":  # every column gets an id and a col-<uuid> physical name
        protocol = column_mapping.protocol_with_mapping(protocol)
        column_mapping.map_new_table(meta["metaData"])
        parameters["properties"] = {**parameters["properties"], column_mapping.MODE: mapping}
    actions: list[dict[str, Any]] = [{"protocol": protocol}, meta]
    if definition.cluster_by is not None:
        actions.append(clustering.domain_action(definition.cluster_by))
    return commit(Transaction(
        uri=uri, read_version=-1, operation="CREATE TABLE",
        parameters=parameters, metrics={}, actions=actions,
        conflict_code="HW_DELTA_COMMIT_CONFLICT"))


def replace(spark: SparkSession | None, path: str, definition: TableDefinition, table: str,
            or_create: bool = False) -> int:
    """Replace the table at ``path`` by an empty one of ``definition`` in one commit (every
    file removed; the protocol never lowered; history kept); return the new version."""
    uri = normalize_uri(path)
    validate(spark, definition, table)
    log = DeltaLog(uri)
    current = log.table()
    config = current.metadata().configuration or {}
    if column_mapping.mode_of(definition.properties) != "none" or \
            column_mapping.mode_of(config) != "none":
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Replacing table {table} with column mapping (CREATE OR REPLACE TABLE, a "
            "materialized view's refresh) is not supported yet.",
            "The replace commit would need new physical names for the new schema and "
            "headwater writes them only for appends and overwrites of the same schema.",
            "Keep column mapping for tables written by appends, overwrites, streams and DML "
            "(a materialized view without delta.columnMapping.mode), or drop the table and "
            "create it again.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    if deletion_vector_paths(current):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Table {table} uses column mapping or deletion vectors; headwater cannot replace "
            "it in one commit yet.", "The replace commit must remove files exactly as the "
            "log names them and keep the table's physical column names.",
            "Drop the table and create it again.")
    old_clustering = clustering.clustering_columns(uri, current)
    if old_clustering and definition.partition_by:
        raise DeltaAnalysisError(
            "HW_TABLE_DEFINITION_INVALID", f"Replacing the clustered Delta table {table} with "
            "a partitioned table is not allowed.",
            "A clustered table stays clustered (its clustering may change).",
            "Use clusterBy / CLUSTER BY instead of partitioning, or drop the table first.",
            error_class="DELTA_CLUSTERING_REPLACE_TABLE_WITH_PARTITIONED_TABLE")
    old = current.protocol()
    definition, wanted = _requested_features(definition, old, table)
    protocol = _protocol(definition, old, wanted)
    if storage.bucket_of(uri) is not None:
        return _replace_through_deltalake(uri, definition, protocol, table)
    actions: list[dict[str, Any]] = []
    if protocol != as_action(old):
        actions.append({"protocol": protocol})
    actions.append(_metadata(definition, current.metadata().id))
    if definition.cluster_by is not None:
        actions.append(clustering.domain_action(definition.cluster_by))
    elif old_clustering:
        actions.append(clustering.domain_action([]))
    removes, read = _removes(current)
    actions += removes
    return commit(Transaction(
        uri=uri, read_version=current.version(),
        operation="CREATE OR REPLACE TABLE" if or_create else "REPLACE TABLE",
        parameters=_parameters(definition, uri), metrics={"numRemovedFiles": len(removes)},
        actions=actions, read_paths=read, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


def _removes(table: Any) -> tuple[list[dict[str, Any]], list[str]]:
    partition_columns = list(table.metadata().partition_columns)
    now = int(time.time() * 1000)
    removes, paths = [], []
    for row in add_actions(table, columns=FILE_COLUMNS).to_pylist():
        values = row.get("partition") or {}
        removes.append({"remove": {
            "path": row["path"], "dataChange": True, "deletionTimestamp": now,
            "extendedFileMetadata": True, "size": int(row["size_bytes"]),
            "partitionValues": {c: format_partition_value(values.get(c))
                                for c in partition_columns}}})
        paths.append(row["path"])
    return removes, paths


def _metadata(definition: TableDefinition, table_id: str) -> dict[str, Any]:
    return {"metaData": {
        "id": table_id, "name": definition.name, "description": definition.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(definition.schema.jsonValue(), separators=(",", ":")),
        "partitionColumns": list(definition.partition_by),
        "configuration": dict(definition.properties),
        "createdTime": int(time.time() * 1000)}}


def _parameters(definition: TableDefinition, uri: str) -> dict[str, Any]:
    return {"partitionBy": list(definition.partition_by),
            "clusterBy": list(definition.cluster_by or []),
            "description": definition.description or "",
            "properties": dict(definition.properties), "location": uri}


# --- the protocol ---------------------------------------------------------------------------

def _protocol(definition: TableDefinition, existing: Any, wanted: set[str] | None = None
              ) -> dict[str, Any]:
    """The protocol action a table of ``definition`` needs (at least ``existing``'s), with the
    ``wanted`` writer features its properties asked for."""
    reader, writer = features(_deltalake_protocol(definition))
    writer |= wanted or set()
    if existing is not None:
        old_reader, old_writer = features(existing)
        reader, writer = reader | old_reader, writer | old_writer
    generation = Generation.of(definition.schema)
    if generation.expressions:
        writer.add("generatedColumns")
    if generation.identities:
        writer.add("identityColumns")
    if generation.defaults:
        writer.add(column_defaults.FEATURE)
    if definition.cluster_by is not None:
        writer.update(clustering.FEATURES)
    return smallest(reader, writer)


def _deltalake_protocol(definition: TableDefinition) -> Any:
    """The protocol deltalake gives a table of these column types and ``delta.*``
    properties (:func:`headwater.delta.table_protocol.deltalake_protocol`)."""
    return deltalake_protocol(definition.schema, list(definition.partition_by),
                              definition.properties, definition.name or "the new table")


def _geospatial(node: Any) -> bool:
    if isinstance(node, str):
        return node.startswith(("geometry", "geography"))
    if isinstance(node, dict):
        return any(_geospatial(v) for k, v in node.items() if k != "metadata")
    if isinstance(node, list):
        return any(_geospatial(v) for v in node)
    return False


# --- object stores: deltalake's own commits ---------------------------------------------------

def _refuse_on_object_store(definition: TableDefinition, protocol: dict[str, Any],
                            table: str) -> None:
    features = set(protocol.get("writerFeatures") or [])
    if protocol["minWriterVersion"] == 6 or features & {
            "identityColumns", column_defaults.FEATURE, *clustering.FEATURES, "typeWidening",
            "rowTracking"}:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Table {table} on an object store would need identity columns, column defaults "
            "(allowColumnDefaults), clustering, typeWidening or rowTracking, which headwater "
            "commits only "
            "on local or mounted storage.",
            "deltalake writes none of them; headwater's own commit needs the local "
            "filesystem's atomic put-if-absent.", "Create the table on a local or mounted "
            "path, or leave out the identity columns / DEFAULT values / CLUSTER BY.")


def _create_through_deltalake(uri: str, definition: TableDefinition,
                              protocol: dict[str, Any], table: str) -> int:
    _refuse_on_object_store(definition, protocol, table)
    delta_keys, user_keys = split_properties(definition.properties)
    try:
        made = DeltaTable.create(
            uri, Schema.from_json(definition.schema.json()), mode="error",
            partition_by=list(definition.partition_by) or None, name=definition.name,
            description=definition.description, configuration=delta_keys or None,
            storage_options=storage.options_for(uri))
    except Exception as exc:  # noqa: BLE001
        raise invalid_property(exc, table) from exc
    if user_keys:
        made.alter.set_table_properties(user_keys, raise_if_not_exists=False)
    return int(made.version())


def _replace_through_deltalake(uri: str, definition: TableDefinition,
                               protocol: dict[str, Any], table: str) -> int:
    _refuse_on_object_store(definition, protocol, table)
    delta_keys, user_keys = split_properties(definition.properties)
    try:
        create_table_with_add_actions(
            uri, Schema.from_json(definition.schema.json()), [], mode="overwrite",
            partition_by=list(definition.partition_by) or None, name=definition.name,
            description=definition.description, configuration=delta_keys or None,
            storage_options=storage.options_for(uri))
    except Exception as exc:  # noqa: BLE001
        raise invalid_property(exc, table) from exc
    made = DeltaLog(uri).table()
    if user_keys:
        made.alter.set_table_properties(user_keys, raise_if_not_exists=False)
        made = DeltaLog(uri).table()
    return int(made.version())

