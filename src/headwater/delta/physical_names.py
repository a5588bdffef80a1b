"""What column mapping (name mode) means for data files: each column stored under its
physical name (``delta.columnMapping.physicalName``; an id in ``delta.columnMapping.id``).
Pure schema functions, without deltalake (Spark's stream planner and workers import them):

* :func:`to_physical` / :func:`physical_partition_columns`: a DataFrame of the table's logical
  columns as a mapped table's files must hold it (every headwater writer of such a table).
* :func:`to_logical` / :func:`logical_keys`: the other way, for Spark's rewrites (OPTIMIZE,
  REORG, copy-on-write DML, replaceWhere), which read files by physical names.
* :func:`non_additive_change`: a rename or drop (by column id) a stream cannot read across.

The DDL that maps, renames and drops columns is :mod:`headwater.delta.column_mapping`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from headwater.delta.column_ddl import COLUMN_MAPPING_ID, PHYSICAL_NAME
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Json = dict[str, Any]

MODE = "delta.columnMapping.mode"
# Spark's parquet writer writes a field's id from this metadata key (field ids in the files,
# as delta-spark writes them for column-mapped tables)
PARQUET_FIELD_ID = "parquet.field.id"


def mode_of(configuration: dict[str, str] | None) -> str:
    """The table's column mapping mode (``none``, ``name`` or ``id``)."""
    for key, value in (configuration or {}).items():
        if key.lower() == MODE.lower():
            return str(value).strip().lower()
    return "none"


def is_mapped(table: Any) -> bool:
    """Whether the table (a deltalake snapshot) maps columns to physical names."""
    return mode_of(table.metadata().configuration) != "none"


# --- writing physical names -------------------------------------------------------------------

def physical_type(data_type: DataType, ids: bool = True) -> DataType:
    """``data_type`` with every struct field named by its physical name (ids kept as parquet
    field ids; ``ids=False``: no field metadata at all, the schema a reader asks for)."""
    if isinstance(data_type, StructType):
        return StructType([_physical_field(f, ids) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(physical_type(data_type.elementType, ids), data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(physical_type(data_type.keyType, ids),
                       physical_type(data_type.valueType, ids), data_type.valueContainsNull)
    return data_type


def _physical_field(f: StructField, ids: bool = True) -> StructField:
    metadata = f.metadata or {}
    extra = {PARQUET_FIELD_ID: int(metadata[COLUMN_MAPPING_ID])} \
        if ids and COLUMN_MAPPING_ID in metadata else {}
    return StructField(physical_name(f), physical_type(f.dataType, ids), f.nullable, extra)


def _is_plain(data_type: DataType) -> bool:
    return not isinstance(data_type, (StructType, ArrayType, MapType))


def to_physical(df: DataFrame, table_schema: StructType,
                keep: tuple[str, ...] = ()) -> DataFrame:
    """``df`` (columns of the table, by logical name, any case) as a mapped table's files
    hold it: each column under its physical name, nested struct fields too (a cast to the
    same type with physical names). ``keep``: extra columns written as they are
    (``_change_type``)."""
    by_name = {f.name.lower(): f for f in table_schema.fields}
    columns: list[Column] = []
    for f in df.schema.fields:
        if f.name in keep:
            columns.append(F.col(f"`{f.name}`"))
            continue
        field = by_name.get(f.name.lower())
        if field is None:
            raise HeadwaterError(
                "HW_SINK_SCHEMA_MISMATCH",
                f"The data has a column {f.name} the column-mapped table does not have.",
                "Every column of a column-mapped table has a physical name in the table's "
                "schema; a new column needs one before files can hold it.",
                "Add the column first (ALTER TABLE ... ADD COLUMNS), then write.")
        target = _physical_field(field)
        column = F.col(f"`{f.name}`")
        if not _is_plain(f.dataType):
            column = column.cast(target.dataType)
        columns.append(column.alias(target.name, metadata=target.metadata))
    return df.select(*columns)


def to_logical(df: DataFrame, table_schema: StructType,
               keep: tuple[str, ...] = ()) -> DataFrame:
    """``df`` (a mapped table's file columns, by physical name, as
    ``spark.read.schema(physical_type(table_schema))`` reads them) with the table's logical
    names, nested struct fields too (a cast to the same type with logical names, Delta's
    field metadata removed). ``keep``: other columns passed on as they are."""
    by_physical = {physical_name(f).lower(): f for f in table_schema.fields}
    columns: list[Column] = []
    for f in df.schema.fields:
        column = F.col(f"`{f.name}`")
        if f.name in keep:
            columns.append(column)
            continue
        field = by_physical[f.name.lower()]
        if not _is_plain(f.dataType):
            column = column.cast(_logical_type(field.dataType))
        columns.append(column.alias(field.name, metadata={
            k: v for k, v in (field.metadata or {}).items() if not k.startswith("delta.")}))
    return df.select(*columns)


def _logical_type(data_type: DataType) -> DataType:
    """``data_type`` without Delta's field metadata (Spark's view of the type)."""
    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, _logical_type(f.dataType), f.nullable, {
            k: v for k, v in (f.metadata or {}).items() if not k.startswith("delta.")})
            for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_logical_type(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(_logical_type(data_type.keyType), _logical_type(data_type.valueType),
                       data_type.valueContainsNull)
    return data_type


def physical_name(field: StructField) -> str:
    """The name ``field``'s values have in the files (its own name without column mapping)."""
    return str((field.metadata or {}).get(PHYSICAL_NAME, field.name))


def logical_keys(values: dict[str, Any], table_schema: StructType) -> dict[str, Any]:
    """``values`` keyed by the physical names of top-level columns (a file's stats, its
    partition values in the log) keyed by their logical names instead; keys of no current
    column (a dropped one) left out."""
    by_physical = {physical_name(f): f.name for f in table_schema.fields}
    return {by_physical[k]: v for k, v in values.items() if k in by_physical}


def physical_partition_columns(table_schema: StructType, partition_columns: list[str]
                               ) -> list[str]:
    """The partition columns by physical name (the folders' and partitionValues' keys)."""
    by_name = {f.name.lower(): f for f in table_schema.fields}
    return [physical_name(by_name[c.lower()]) if c.lower() in by_name else c
            for c in partition_columns]


def unsupported_write(path: str, what: str) -> HeadwaterError:
    """A write to a column-mapped table that headwater cannot do yet, by name."""
    return HeadwaterError(
        "HW_DELTA_UNSUPPORTED_FEATURE",
        f"{what} on the column-mapped table at {path} is not supported yet.",
        "The table uses column mapping (delta.columnMapping.mode = 'name'): data files "
        "must name columns by their physical names, which this write path cannot do.",
        "Write with a plain append or overwrite (df.write / INSERT / a stream) to a local "
        "table, or use delta-spark for this operation.",
        error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


# --- streams across a rename or drop ---------------------------------------------------------

def has_ids(schema: StructType) -> bool:
    """Whether a (Spark) schema carries column mapping ids."""
    return any(COLUMN_MAPPING_ID in (f.metadata or {}) for f in schema.fields)


def non_additive_change(stream_schema: StructType, schema_json: str, later: bool = True
                        ) -> str | None:
    """How the schema of a commit a stream reads renames or drops one of the stream's
    columns under column mapping, or None: what delta-spark's streaming source refuses
    without a schema tracking location. later: ``schema_json`` is newer than the stream's
    schema (a commit it reads), else older (the version a resumed stream starts at; a
    column added since is no change).

    Columns are matched by physical name: turning the mode on keeps each column's name as
    its physical name, so a schema from before column mapping compares with one after it
    (delta-spark's ``hasNoColumnMappingSchemaChanges`` upgrades the old schema the same way;
    in name mode ids and physical names go together)."""
    stream, other = stream_schema.jsonValue(), json.loads(schema_json)
    if not (_mapped(stream) or _mapped(other)):
        return None  # names are names: the read-compatibility check decides
    older, newer = (stream, other) if later else (other, stream)
    after = _paths(newer, PHYSICAL_NAME)
    since = "" if later else " since"
    changes = []
    for physical, path in sorted(_paths(older, PHYSICAL_NAME).items()):
        now = after.get(physical)
        if now is None:
            changes.append(f"{'.'.join(path)} dropped{since}")
        elif [p.lower() for p in now] != [p.lower() for p in path]:
            changes.append(f"{'.'.join(path)} renamed to {'.'.join(now)}{since}")
    return ", ".join(changes) or None


def _mapped(schema: Any) -> bool:
    return any(PHYSICAL_NAME in (f.get("metadata") or {}) for f in schema.get("fields", []))


def _paths(data_type: Any, key: str | None) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Each nested field's path by ``key`` (a field metadata key, the physical name; None:
    its name), lower-cased -> its logical path."""
    found: dict[tuple[str, ...], tuple[str, ...]] = {}
    if not isinstance(data_type, dict):
        return found
    kind = data_type.get("type")
    if kind == "struct":
        for f in data_type["fields"]:
            name = str((f.get("metadata") or {}).get(key, f["name"])) if key else f["name"]
            at, logical = (name.lower(),), (str(f["name"]),)
            found[at] = logical
            for k, v in _paths(f["type"], key).items():
                found[at + k] = logical + v
    elif kind == "array":
        for k, v in _paths(data_type["elementType"], key).items():
            found[("element", *k)] = ("element", *v)
    elif kind == "map":
        for part in ("key", "value"):
            for k, v in _paths(data_type[f"{part}Type"], key).items():
                found[(part, *k)] = (part, *v)
    return found


def stream_change_error(uri: str, version: int, change: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_SOURCE_SCHEMA_CHANGED",
        f"Streaming read of the column-mapped table {uri}: version {version} changes the "
        f"schema in a non-additive way ({change}).",
        "A rename or drop of a column under column mapping cannot be streamed through with "
        "one schema: delta-spark needs a schema tracking location to evolve the stream, "
        "which headwater's Delta source does not keep yet.",
        "Start the stream again from a new checkpoint (the new schema, with startingVersion "
        "after the change), or read the change with a batch query.",
        error_class="DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG")
