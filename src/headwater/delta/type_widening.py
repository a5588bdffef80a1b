"""Type widening's traces in a table, as delta-spark finds them when DROP FEATURE typeWidening
removes them: the ``delta.typeChanges`` metadata of a schema's fields
(TypeWideningMetadata), and the data files whose parquet columns still have a type older
than the table's, which every reader widens (ReorgTableHelper.fileHasDifferentTypes).

A file's types come from its parquet footer (pyarrow reads only the footer), compared column
by column with the table's data columns by physical name (column mapping), nested struct
fields, array elements and map keys / values too. Only the types a widening produces are
compared (integers, floating point, decimals, dates, timestamp_ntz): those are the ones whose
files can lag behind the schema.
"""

from __future__ import annotations

import copy
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructType,
    TimestampNTZType,
)

from headwater.delta import physical_names
from headwater.delta.column_ddl import TYPE_CHANGES, dotted
from headwater.delta.dml.target import Snapshot, TargetFile
from headwater.delta.log import DeltaLog

Json = dict[str, Any]

# The arrow type pyarrow reads from the parquet column Spark (or delta-rs) writes for a type.
_ARROW_TYPES: dict[type, pa.DataType] = {
    ByteType: pa.int8(), ShortType: pa.int16(), IntegerType: pa.int32(),
    LongType: pa.int64(), FloatType: pa.float32(), DoubleType: pa.float64(),
    DateType: pa.date32(),
}


def has_type_changes(schema: Json) -> bool:
    """Whether a field of ``schema`` (Delta's schema JSON), nested ones included, records
    type changes (delta-spark's TypeWideningMetadata.containsTypeWideningMetadata)."""
    return bool(_changed_fields(schema, []))


def without_type_changes(schema: Json) -> tuple[Json, list[Json]]:
    """``schema`` without its fields' ``delta.typeChanges``, and the fields it was removed
    from as delta-spark's UpdateColumnMetadata operation lists them (``name``: the field's
    path, ``type``, ``nullable``, ``metadata``: the field's metadata before)."""
    cleaned = copy.deepcopy(schema)
    changes = []
    for path, field in _changed_fields(cleaned, []):
        kind = field["type"]
        changes.append({"name": dotted(path), "type": kind if isinstance(kind, str)
                        else kind.get("type"), "nullable": field.get("nullable", True),
                        "metadata": dict(field["metadata"])})
        del field["metadata"][TYPE_CHANGES]
    return cleaned, changes


def _changed_fields(data_type: Any, path: list[str]) -> list[tuple[list[str], Json]]:
    """(path, field) of every struct field in ``data_type`` with type changes, nested ones
    too; arrays and maps add ``element`` / ``key`` / ``value`` to the path, as delta-spark's
    SchemaMergingUtils.transformColumns names them."""
    found: list[tuple[list[str], Json]] = []
    if not isinstance(data_type, dict):
        return found
    kind = data_type.get("type")
    if kind == "struct":
        for f in data_type["fields"]:
            at = [*path, f["name"]]
            if TYPE_CHANGES in (f.get("metadata") or {}):
                found.append((at, f))
            found.extend(_changed_fields(f["type"], at))
    elif kind == "array":
        found.extend(_changed_fields(data_type["elementType"], [*path, "element"]))
    elif kind == "map":
        found.extend(_changed_fields(data_type["keyType"], [*path, "key"]))
        found.extend(_changed_fields(data_type["valueType"], [*path, "value"]))
    return found


def files_with_other_types(snapshot: Snapshot) -> list[TargetFile]:
    """The snapshot's files with a column or nested field whose parquet type is not the
    table's (written before a type change): the files DROP FEATURE typeWidening rewrites."""
    data = StructType([f for f in snapshot.full_schema.fields
                       if f.name not in snapshot.partition_columns])
    table = physical_names.physical_type(data, ids=False) if snapshot.mapped else data
    fs = DeltaLog(snapshot.uri).fs
    stale = []
    for f in snapshot.files:
        with fs.open_input_file(f.path) as handle:
            schema = pq.read_schema(handle)
        if _differs(table, pa.struct(list(schema))):
            stale.append(f)
    return stale


def _differs(table: DataType, file: pa.DataType) -> bool:
    """Whether the file's type (arrow's reading of its parquet type) is not the table's,
    for the types a widening produces; columns and fields the file lacks are no difference
    (a column added later reads as null)."""
    if isinstance(table, StructType):
        if not pa.types.is_struct(file):
            return False
        fields = {file.field(i).name.lower(): file.field(i).type
                  for i in range(file.num_fields)}
        return any(_differs(f.dataType, fields[f.name.lower()]) for f in table.fields
                   if f.name.lower() in fields)
    if isinstance(table, ArrayType):
        return (pa.types.is_list(file) or pa.types.is_large_list(file)) and \
            _differs(table.elementType, file.value_type)
    if isinstance(table, MapType):
        return pa.types.is_map(file) and (_differs(table.keyType, file.key_type)
                                          or _differs(table.valueType, file.item_type))
    if isinstance(table, DecimalType):
        return not (pa.types.is_decimal(file) and
                    (file.precision, file.scale) == (table.precision, table.scale))
    if isinstance(table, TimestampNTZType):
        return not (pa.types.is_timestamp(file) and file.tz is None)
    expected = _ARROW_TYPES.get(type(table))
    return expected is not None and file != expected
