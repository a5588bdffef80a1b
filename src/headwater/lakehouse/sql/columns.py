"""Column DDL on lakehouse tables and ``delta.`path``` (handlers of the SQL router), as
delta-spark runs it: ``ADD COLUMNS`` with FIRST / AFTER and nested fields, ``ALTER | CHANGE
COLUMN`` (type, comment, position, SET / DROP NOT NULL, SET / DROP DEFAULT; nested fields),
``REPLACE COLUMNS``, and on column-mapped tables ``RENAME COLUMN`` and ``DROP COLUMN(S)``
(:mod:`headwater.delta.column_mapping`). Each statement is one metadata commit of the new schema
(:func:`headwater.delta.metadata.change_metadata`, the operation and parameters delta-spark
records); data files are never rewritten: every reader matches file columns by name, so a
new order, a comment or a new nested field reads the same files. The schema rules are
:mod:`headwater.delta.column_ddl`'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from deltalake.schema import Field
from pyspark.sql.types import StructField, StructType, _parse_datatype_json_string

from headwater.delta import column_ddl, column_defaults, column_mapping
from headwater.delta.column_ddl import ColumnChange, NewColumn
from headwater.delta.log import open_table
from headwater.delta.metadata import change_metadata, metadata_action
from headwater.delta.protocol import Protocol, add_feature, feature
from headwater.delta.schema import arrow_schema
from headwater.delta.write.checks import deltalake_writes
from headwater.errors import HeadwaterError
from headwater.lakehouse.sql.ddl import altered_table
from headwater.lakehouse.sql.statements import Statement, option, seq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse.sql.statements import SqlLakehouse

_COMPACT = (",", ":")


def _position(value: Any) -> str | None:
    """A parsed FieldPosition as delta-spark logs it: ``FIRST`` or ``AFTER x``."""
    if value is None:
        return None
    where = value.position()
    if where.getClass().getSimpleName().startswith("After"):
        return f"AFTER {where.column()}"
    return "FIRST"


def _delta_type(data_type: Any) -> tuple[Any, dict[str, str]]:
    """A parsed type's JSON as Delta stores it: CHAR / VARCHAR are strings with Spark's
    metadata naming the declared type."""
    as_json = json.loads(data_type.json())
    if isinstance(as_json, str) and as_json.startswith(("char(", "varchar(")):
        return "string", {column_ddl.CHAR_VARCHAR: as_json}
    return as_json, {}


def _type_name(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else str(data_type.get("type"))


def _logged(path: list[str], field: dict[str, Any]) -> dict[str, Any]:
    """delta-spark's structFieldToMap: how a column appears in the commit's parameters."""
    return {"name": ".".join(path), "type": _type_name(field["type"]),
            "nullable": field.get("nullable", True), "metadata": field.get("metadata") or {}}


def _mapped(meta: dict[str, Any]) -> bool:
    return str((meta.get("configuration") or {}).get(
        "delta.columnMapping.mode", "none")).lower() != "none"


def _commit_schema(path: str, operation: str, parameters: dict[str, str], table: Any,
                   schema: dict[str, Any], label: str, reads_data: bool = False) -> None:
    """One metaData commit of ``schema`` on top of ``table`` (the snapshot it was computed
    from): field names checked, column mapping ids given to new fields."""
    def change(meta: dict[str, Any]) -> dict[str, Any]:
        mapped = _mapped(meta)
        column_ddl.check_field_names(schema, label, mapped)
        if mapped:
            meta["configuration"] = column_ddl.assign_column_mapping(
                schema, dict(meta["configuration"]))
        meta["schemaString"] = json.dumps(schema, separators=_COMPACT)
        return meta

    change_metadata(path, operation, parameters, change, table=table, reads_data=reads_data,
                    protocol=_protocol_for(table, schema))


def _protocol_for(table: Any, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The protocol action a schema needs beyond the table's (a column widened to
    timestamp_ntz needs the timestampNtz feature, as delta-spark adds it), or None."""
    current = Protocol.of_table(table)
    if '"timestamp_ntz"' not in json.dumps(schema) or current.supports("timestampNtz"):
        return None
    ntz = feature("timestampNtz")
    assert ntz is not None
    return Protocol.of(3, 7).with_feature(ntz).merge(current).action()


def _current(table: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = metadata_action(table)["metaData"]
    return meta, json.loads(meta["schemaString"])


# --- ADD COLUMNS ----------------------------------------------------------------------------

def add_columns(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t ADD COLUMN(S) (c T [COMMENT '..'] [FIRST | AFTER x], s.f T ..., ...):
    nullable columns (old rows read NULL) at their positions, nested fields in their
    struct; one ADD COLUMNS commit."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    label = altered.label
    columns = []
    for col in seq(st.plan.columnsToAdd()):
        parts = [str(p) for p in seq(col.name())]
        if option(col.default()) is not None:
            raise column_defaults.add_column_default_error(label, ".".join(parts))
        data_type, metadata = _delta_type(col.dataType())
        comment = option(col.comment())
        if comment is not None:
            metadata["comment"] = str(comment)
        columns.append(NewColumn(parts, {"name": parts[-1], "type": data_type,
                                         "nullable": bool(col.nullable()),
                                         "metadata": metadata},
                                 _position(option(col.position()))))
    table = open_table(altered.path)
    meta, schema = _current(table)
    new_schema = column_ddl.add_columns(schema, columns, label)
    column_ddl.check_field_names(new_schema, label, _mapped(meta))
    plain = all(len(c.path) == 1 and c.position is None and not c.field["metadata"]
                for c in columns)
    if plain and deltalake_writes(table) and not _mapped(meta):
        # delta-rs' own ADD COLUMNS: object stores too, and the protocol upgrades new types need
        fields = [StructField(c.path[0], _parse_datatype_json_string(json.dumps(c.field["type"])))
                  for c in columns]
        arrow = arrow_schema(StructType(fields))
        table.alter.add_columns([Field.from_arrow(arrow.field(f.name)) for f in fields])
        return altered.done(lake, st)
    if column_ddl.has_type(new_schema, "timestamp_ntz") and \
            "timestampNtz" not in Protocol.of_table(table).names():
        add_feature(altered.path, "timestampNtz")  # as delta-spark upgrades for the new type
        table = open_table(altered.path)
        meta, schema = _current(table)
        new_schema = column_ddl.add_columns(schema, columns, label)
    parameters = {"columns": json.dumps(
        [{"column": _logged(c.path, c.field), **({"position": c.position} if c.position
                                                 else {})} for c in columns])}
    _commit_schema(altered.path, "ADD COLUMNS", parameters, table, new_schema, label)
    return altered.done(lake, st)


# --- ALTER | CHANGE COLUMN ------------------------------------------------------------------

def alter_columns(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t ALTER|CHANGE [COLUMN] c [TYPE T] [COMMENT '..'] [FIRST | AFTER x] |
    SET / DROP NOT NULL | SET / DROP DEFAULT, c nested too (s.f, m.value, a.element): one
    CHANGE COLUMN(S) commit. A new type is refused (type widening); SET NOT NULL checks every
    row first (the commit then conflicts with data added meanwhile)."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    path, label = altered.path, altered.label
    table = open_table(path)
    protocol = Protocol.of_table(table).names()
    has_defaults_feature = column_defaults.FEATURE in protocol
    type_widening = any(f.startswith("typeWidening") for f in protocol)
    meta, schema = _current(table)
    changes = []
    for spec in seq(st.plan.specs()):
        column = [str(p) for p in seq(spec.column().name())]
        new_type = option(spec.newDataType())
        nullable = option(spec.newNullability())
        comment = option(spec.newComment())
        data_type = None
        if new_type is not None:  # CHAR / VARCHAR compared with the column's declared type
            as_delta, declared = _delta_type(new_type)
            data_type = declared.get(column_ddl.CHAR_VARCHAR, as_delta)
        changes.append(ColumnChange(
            column, data_type=data_type,
            nullable=None if nullable is None else bool(nullable),
            comment=None if comment is None else str(comment),
            position=_position(option(spec.newPosition())),
            set_default=_default_setter(st, spec, column, label, has_defaults_feature)))
    tightened: list[list[str]] = []
    new_schema = schema
    for change in changes:
        before = new_schema
        new_schema = column_ddl.change_column(new_schema, change, label, type_widening)
        if change.nullable is False and _nullable(before, change.path):
            tightened.append(change.path)
    for column in tightened:
        rows = _null_rows(st, path, table.version(), column)
        if rows:
            raise column_ddl.not_null_violation(label, column, rows)
    logged = []
    for change in changes:
        field = _field(new_schema, change.path)
        logged.append({**_logged(change.path, field),
                       **({"position": change.position} if change.position else {})})
    if len(logged) == 1:
        operation = "CHANGE COLUMN"
        position = logged[0].pop("position", None)
        parameters = {"column": json.dumps(logged[0]),
                      **({"position": position} if position else {})}
    else:
        operation, parameters = "CHANGE COLUMNS", {"columns": json.dumps(logged)}
    _commit_schema(path, operation, parameters, table, new_schema, label,
                   reads_data=bool(tightened))
    return altered.done(lake, st)


def _default_setter(st: Statement, spec: Any, column: list[str], label: str,
                    has_feature: bool) -> Any:
    default = option(spec.newDefaultExpression())
    if default is None and not spec.dropDefault():
        return None
    if not has_feature:
        raise column_defaults.not_enabled_error(label, "ALTER TABLE")

    def apply(field: dict[str, Any]) -> None:
        metadata = field.setdefault("metadata", {})
        if default is None:
            metadata.pop(column_defaults.CURRENT_DEFAULT, None)
        else:
            metadata[column_defaults.CURRENT_DEFAULT] = column_defaults.checked_default(
                st.session, ".".join(column), str(default.originalSQL()),
                _parse_datatype_json_string(json.dumps(field["type"])), label)
    return apply


def _nullable(schema: dict[str, Any], path: list[str]) -> bool:
    return bool(_field(schema, path).get("nullable", True))


def _field(schema: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """The field at ``path`` (a map's key / value, an array's element as a pseudo-field)."""
    parent = column_ddl.resolve(schema, path[:-1], "", "")
    name = path[-1].lower()
    if parent.get("type") == "struct":
        return next(f for f in parent["fields"] if f["name"].lower() == name)
    if parent.get("type") == "map":
        return {"name": path[-1], "type": parent["keyType" if name == "key" else "valueType"],
                "nullable": name != "key" and parent.get("valueContainsNull", True)}
    return {"name": path[-1], "type": parent["elementType"],
            "nullable": parent.get("containsNull", True)}


def _null_rows(st: Statement, path: str, version: int, column: list[str]) -> int:
    """Rows of the table (at ``version``) whose ``column`` is NULL (a nested field's parent
    NULL counts: NOT NULL on s.f constrains s too)."""
    df = st.session.read.format("delta").option("versionAsOf", version).load(path)
    name = ".".join(f"`{p.replace('`', '``')}`" for p in column)
    return int(df.where(f"{name} IS NULL").count())


# --- REPLACE COLUMNS ------------------------------------------------------------------------

def replace_columns(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t REPLACE COLUMNS (c T [COMMENT '..'], ...): the new column list in one
    REPLACE COLUMNS commit, where delta-spark allows it (reorder, comments, new nullable
    columns and nested fields, looser nullability; dropping columns needs column mapping)."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    label = altered.label
    fields = []
    for col in seq(st.plan.columnsToAdd()):
        parts = [str(p) for p in seq(col.name())]
        if option(col.default()) is not None:
            raise HeadwaterError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} REPLACE COLUMNS: {'.'.join(parts)} has a DEFAULT.",
                "REPLACE COLUMNS keeps each existing column's metadata; headwater does not "
                "set defaults through it.",
                "Replace the columns without DEFAULT, then ALTER TABLE ... ALTER COLUMN ... "
                "SET DEFAULT.")
        data_type, metadata = _delta_type(col.dataType())
        comment = option(col.comment())
        if comment is not None:
            metadata["comment"] = str(comment)
        fields.append({"name": parts[-1], "type": data_type, "nullable": bool(col.nullable()),
                       "metadata": metadata})
    table = open_table(altered.path)
    meta, schema = _current(table)
    new_schema = column_ddl.replace_columns(schema, fields, label, _mapped(meta),
                                            list(meta["partitionColumns"]))
    parameters = {"columns": json.dumps([_logged([f["name"]], f) for f in fields])}
    _commit_schema(altered.path, "REPLACE COLUMNS", parameters, table, new_schema, label)
    return altered.done(lake, st)


# --- RENAME COLUMN / DROP COLUMN(S) (column mapping) ----------------------------------------

def rename_column(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t RENAME COLUMN a TO b (nested: s.f TO g) on a column-mapped table: one
    RENAME COLUMN metadata commit, as delta-spark writes it (the field keeps its physical
    name, so no file changes); a table without column mapping is refused as delta-spark
    refuses it (DELTA_UNSUPPORTED_RENAME_COLUMN)."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    label = altered.label
    path = [str(p) for p in seq(st.plan.column().name())]
    new_name = str(st.plan.newName())
    table = open_table(altered.path)
    meta, schema = _current(table)
    if not _mapped(meta):
        raise column_mapping.required_error(label, "RENAME COLUMN",
                                            "DELTA_UNSUPPORTED_RENAME_COLUMN")
    new_schema, partitions = column_mapping.rename_column(
        schema, dict(meta["configuration"]), list(meta["partitionColumns"]), path, new_name,
        label)
    new_path = ".".join([*path[:-1], new_name])
    column_mapping.commit_schema(altered.path, table, "RENAME COLUMN",
                                 {"oldColumnPath": ".".join(path), "newColumnPath": new_path},
                                 new_schema, partitions)
    return altered.done(lake, st)


def drop_columns(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t DROP COLUMN [IF EXISTS] c | DROP COLUMNS [IF EXISTS] (c, s.f) on a
    column-mapped table: one DROP COLUMNS metadata commit (the files keep the data, readers
    no longer see it, as in delta-spark); refused without column mapping
    (DELTA_UNSUPPORTED_DROP_COLUMN)."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    label = altered.label
    paths = [[str(p) for p in seq(c.name())] for c in seq(st.plan.columnsToDrop())]
    table = open_table(altered.path)
    meta, schema = _current(table)
    if not _mapped(meta):
        raise column_mapping.required_error(label, "DROP COLUMN",
                                            "DELTA_UNSUPPORTED_DROP_COLUMN")
    new_schema = column_mapping.drop_columns(
        schema, dict(meta["configuration"]), list(meta["partitionColumns"]), paths, label,
        bool(st.plan.ifExists()))
    if new_schema is not None:
        column_mapping.commit_schema(
            altered.path, table, "DROP COLUMNS",
            {"columns": json.dumps([".".join(p) for p in paths])}, new_schema)
    return altered.done(lake, st)
