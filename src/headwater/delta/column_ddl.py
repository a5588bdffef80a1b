"""Column DDL on a Delta schema, as delta-spark applies it (its AlterTableAddColumns /
ChangeColumn / ReplaceColumns commands): new schemas computed from the table's schema JSON
(Spark's form: ``{"type": "struct", "fields": [...]}``), never a data file touched.

* :func:`add_columns`: ``ADD COLUMNS (c T [COMMENT ..] [FIRST | AFTER x], s.f T ...)``:
  nullable columns at a position, nested ones in the struct their path names.
* :func:`change_column`: ``ALTER | CHANGE COLUMN c`` with a type (the same one, or on a table
  with type widening a wider one, recorded in the field's ``delta.typeChanges``),
  nullability, comment, position; nested (``s.f``), map ``key`` / ``value`` and array
  ``element`` as delta-spark resolves them.
* :func:`replace_columns`: ``REPLACE COLUMNS (...)``: the new list keeps every existing
  column's metadata (comments given replace theirs), may reorder, add nullable columns and
  loosen nullability; it drops columns only on column-mapped tables (delta-spark's rule).

Names resolve case-insensitively (Spark's default resolver). Every refusal is a
:class:`DeltaAnalysisError` with delta-spark's error class. On column-mapped tables new
fields get a column id and a physical name (``delta.columnMapping.maxColumnId`` grows), as
delta-spark assigns them.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwater.errors.delta import DeltaAnalysisError

Json = dict[str, Any]

COMMENT = "comment"
COLUMN_MAPPING_ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"
IDENTITY_START = "delta.identity.start"
# delta-spark's checkSchemaFieldNames: characters parquet column names cannot hold without
# column mapping
INVALID_NAME_CHARS = " ,;{}()\n\t="


@dataclass(frozen=True)
class NewColumn:
    """One column of ADD COLUMNS: its path (``["s", "f"]`` for a nested field), the field's
    JSON (name = the last part) and its position (None, ``"FIRST"`` or ``"AFTER x"``)."""

    path: list[str]
    field: Json
    position: str | None = None


@dataclass
class ColumnChange:
    """One ALTER / CHANGE COLUMN spec, each part None when not given."""

    path: list[str]
    data_type: Any = None          # the new type's JSON (str or dict)
    nullable: bool | None = None
    comment: str | None = None
    position: str | None = None    # "FIRST" or "AFTER x"
    set_default: Callable[[Json], None] | None = None  # applies SET / DROP DEFAULT to a field


def dotted(path: list[str]) -> str:
    return ".".join(f"`{p}`" if "." in p else p for p in path)


def type_string(data_type: Any) -> str:
    """A type's SQL-ish name for messages (``INT``, ``STRUCT<f: INT>``)."""
    if isinstance(data_type, str):
        return {"integer": "INT", "long": "BIGINT", "short": "SMALLINT", "byte": "TINYINT"}.get(
            data_type, data_type.upper())
    kind = data_type.get("type")
    if kind == "struct":
        inner = ", ".join(f"{f['name']}: {type_string(f['type'])}"
                          + ("" if f.get("nullable", True) else " NOT NULL")
                          for f in data_type["fields"])
        return f"STRUCT<{inner}>"
    if kind == "array":
        return f"ARRAY<{type_string(data_type['elementType'])}>"
    if kind == "map":
        return f"MAP<{type_string(data_type['keyType'])}, {type_string(data_type['valueType'])}>"
    return json.dumps(data_type)


def tree(schema: Json) -> str:
    """The schema as Spark's treeString prints it (for messages)."""
    lines = ["root"]

    def walk(data_type: Any, depth: int) -> None:
        if isinstance(data_type, dict) and data_type.get("type") == "struct":
            for f in data_type["fields"]:
                lines.append(f"{' |   ' * depth} |-- {f['name']}: {_simple(f['type'])} "
                             f"(nullable = {str(f.get('nullable', True)).lower()})")
                walk(f["type"], depth + 1)
        elif isinstance(data_type, dict) and data_type.get("type") == "array":
            walk(data_type["elementType"], depth)
        elif isinstance(data_type, dict) and data_type.get("type") == "map":
            walk(data_type["valueType"], depth)

    walk(schema, 0)
    return "\n".join(lines)


def _simple(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else data_type.get("type", "?")


def strip_metadata(data_type: Any) -> Any:
    """A type's JSON without field metadata (comments, column mapping): for comparing types."""
    if not isinstance(data_type, dict):
        return data_type
    kind = data_type.get("type")
    if kind == "struct":
        return {"type": "struct", "fields": [
            {"name": f["name"], "type": strip_metadata(f["type"]),
             "nullable": f.get("nullable", True)} for f in data_type["fields"]]}
    if kind == "array":
        return {**data_type, "elementType": strip_metadata(data_type["elementType"])}
    if kind == "map":
        return {**data_type, "keyType": strip_metadata(data_type["keyType"]),
                "valueType": strip_metadata(data_type["valueType"])}
    return data_type


def _index(struct: Json, name: str) -> int:
    lowered = name.lower()
    return next((i for i, f in enumerate(struct["fields"]) if f["name"].lower() == lowered), -1)


def _not_found(path: list[str], schema: Json, label: str, statement: str) -> DeltaAnalysisError:
    return DeltaAnalysisError(
        "HW_ALTER_COLUMN_NOT_FOUND",
        f"ALTER TABLE {label} {statement}: couldn't find column {dotted(path)} in:\n"
        f"{tree(schema)}",
        "The statement names an existing column (nested fields by their path, s.f; a map's "
        "key / value and an array's element by those words).",
        "Check the column's name against the table's schema (DESCRIBE TABLE).",
        error_class="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA")


def resolve(schema: Json, path: list[str], label: str, statement: str) -> Any:
    """The type at ``path`` (delta-spark's findColumnPosition): struct fields by name, a map's
    ``key`` / ``value``, an array's ``element``. Raises DELTA_COLUMN_NOT_FOUND_IN_SCHEMA."""
    current: Any = schema
    for depth, name in enumerate(path):
        kind = current.get("type") if isinstance(current, dict) else None
        if kind == "struct":
            i = _index(current, name)
            if i < 0:
                raise _not_found(path[:depth + 1], schema, label, statement)
            current = current["fields"][i]["type"]
        elif kind == "map" and name.lower() in ("key", "value"):
            current = current["keyType" if name.lower() == "key" else "valueType"]
        elif kind == "array" and name.lower() == "element":
            current = current["elementType"]
        else:
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_NOT_FOUND",
                f"ALTER TABLE {label} {statement}: {dotted(path[:depth])} is "
                f"{type_string(current)}, which has no field {name!r}.",
                "Nested fields are reached through structs by name, through a map by key / "
                "value and through an array by element.",
                f"Name the field by its full path, e.g. {dotted(path[:depth])}.element."
                if kind == "array" else "Check the column's path (DESCRIBE TABLE).",
                error_class="DELTA_COLUMN_PATH_NOT_NESTED" if kind not in ("map", "array")
                else "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA")
    return current


def _position_index(struct: Json, position: str | None, path: list[str], schema: Json,
                    label: str, statement: str) -> int:
    if position is None:
        return len(struct["fields"])
    if position == "FIRST":
        return 0
    after = position[len("AFTER "):]
    i = _index(struct, after)
    if i < 0:
        raise _not_found([*path, after], schema, label, statement)
    return i + 1


def add_columns(schema: Json, columns: list[NewColumn], label: str) -> Json:
    """The schema with ``columns`` added, each in turn (a later one may be AFTER an earlier
    one). Refuses NOT NULL (DELTA_OPERATION_NOT_ALLOWED), a parent that is no struct
    (DELTA_ADD_COLUMN_PARENT_NOT_STRUCT), names taken (DELTA_DUPLICATE_COLUMNS_FOUND)."""
    schema = copy.deepcopy(schema)
    for column in columns:
        if _has_not_null(column.field):
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} ADD COLUMNS: {dotted(column.path)} is NOT NULL.",
                "Operation not allowed: `NOT NULL in ALTER TABLE ADD COLUMNS` is not supported "
                "for Delta tables: the table's existing rows hold no value for it.",
                "Add the column nullable; once every row has a value, ALTER TABLE ... ALTER "
                "COLUMN ... SET NOT NULL.", error_class="DELTA_OPERATION_NOT_ALLOWED")
        parent_path = column.path[:-1]
        parent = resolve(schema, parent_path, label, "ADD COLUMNS")
        if not (isinstance(parent, dict) and parent.get("type") == "struct"):
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} ADD COLUMNS: cannot add {dotted(column.path)} because its "
                f"parent is not a struct. Found {type_string(parent)}.",
                "Fields are added to structs only (docs.delta.io: arrays and maps are not "
                "supported).",
                f"Add it to the struct inside, e.g. {dotted([*parent_path, 'element'])}."
                f"{column.path[-1]} for an array of structs." if isinstance(parent, dict)
                else "Add a top-level column or a field of a struct column.",
                error_class="DELTA_ADD_COLUMN_PARENT_NOT_STRUCT")
        if _index(parent, column.path[-1]) >= 0:
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} ADD COLUMNS: found duplicate column(s): "
                f"{dotted(column.path)}. The duplicate was found while adding columns.",
                "Column names are unique in a struct, case-insensitively.",
                "Pick another name, or change the existing column with ALTER COLUMN.",
                error_class="DELTA_DUPLICATE_COLUMNS_FOUND.ADDING_COLUMNS")
        at = _position_index(parent, column.position, parent_path, schema, label,
                             "ADD COLUMNS")
        parent["fields"].insert(at, copy.deepcopy(column.field))
    return schema


def _has_not_null(field: Json) -> bool:
    if not field.get("nullable", True):
        return True
    return any(not f.get("nullable", True) for f in nested_fields(field["type"]))


def nested_fields(data_type: Any) -> list[Json]:
    """Every struct field inside ``data_type`` (through arrays and maps), nested ones too."""
    found: list[Json] = []
    if not isinstance(data_type, dict):
        return found
    kind = data_type.get("type")
    if kind == "struct":
        for f in data_type["fields"]:
            found.append(f)
            found.extend(nested_fields(f["type"]))
    elif kind == "array":
        found.extend(nested_fields(data_type["elementType"]))
    elif kind == "map":
        found.extend(nested_fields(data_type["keyType"]))
        found.extend(nested_fields(data_type["valueType"]))
    return found


def change_column(schema: Json, change: ColumnChange, label: str,
                  type_widening: bool = False) -> Json:
    """The schema with one ALTER / CHANGE COLUMN spec applied (delta-spark's
    AlterTableChangeColumnDeltaCommand). SET NOT NULL's check of the rows is the caller's."""
    schema = copy.deepcopy(schema)
    path = change.path
    statement = "ALTER COLUMN"
    parent = resolve(schema, path[:-1], label, statement)
    name = path[-1]
    kind = parent.get("type") if isinstance(parent, dict) else None
    if kind == "struct":
        i = _index(parent, name)
        if i < 0:
            raise _not_found(path, schema, label, statement)
        field = parent["fields"][i]
        if type_widening and widening(field["type"], change.data_type):
            _check_identity(field, change, label)
            widen_field(field, change.data_type)
        else:
            _check_type(field, change, label, type_widening)
            _check_identity(field, change, label)
        if change.nullable is not None:
            field["nullable"] = change.nullable
        if change.comment is not None:
            field.setdefault("metadata", {})[COMMENT] = change.comment
        if change.set_default is not None:
            change.set_default(field)
        if change.position is not None:
            moved = parent["fields"].pop(i)
            if change.position == f"AFTER {moved['name']}" or (
                    change.position.startswith("AFTER ")
                    and change.position[6:].lower() == moved["name"].lower()):
                parent["fields"].insert(i, moved)
            else:
                at = _position_index(parent, change.position, path[:-1], schema, label,
                                     statement)
                parent["fields"].insert(at, moved)
        return schema
    # a map's key / value, an array's element: only a type no-op, never comments or nullability
    if kind in ("map", "array"):
        if name.lower() not in ({"key", "value"} if kind == "map" else {"element"}):
            raise _not_found(path, schema, label, statement)
        key = {"key": ("keyType", None), "value": ("valueType", "valueContainsNull"),
               "element": ("elementType", "containsNull")}[name.lower()]
        current_null = False if key[1] is None else bool(parent.get(key[1], True))
        pseudo = {"name": name, "type": parent[key[0]], "nullable": current_null}
        if change.comment is not None:
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} ALTER COLUMN: can't add a comment to {dotted(path)}.",
                "Adding a comment to a map key/value or array element is not supported.",
                "Comment the column itself instead.",
                error_class="DELTA_UNSUPPORTED_COMMENT_MAP_ARRAY")
        if change.nullable is not None and change.nullable != current_null:
            raise _change_col_op(label, path, pseudo, {**pseudo, "nullable": change.nullable},
                                 "the nullability of a map's key / value or an array's element "
                                 "cannot change")
        if change.position is not None or change.set_default is not None:
            raise _change_col_op(label, path, pseudo, pseudo,
                                 "a map's key / value or an array's element has no position "
                                 "or default")
        if type_widening and widening(pseudo["type"], change.data_type):
            raise _change_col_op(label, path, pseudo, {**pseudo, "type": change.data_type},
                                 "headwater widens struct fields and top-level columns; a "
                                 "map's key / value or an array's element not yet.")
        _check_type(pseudo, change, label, type_widening)
        return schema
    raise DeltaAnalysisError(  # resolve() returned an atomic type: the path goes through it
        "HW_ALTER_COLUMN_NOT_FOUND",
        f"ALTER TABLE {label} ALTER COLUMN: {dotted(path[:-1])} is {type_string(parent)}, "
        f"which has no field {name!r}.", "Only structs, maps and arrays have nested fields.",
        "Check the column's path (DESCRIBE TABLE).", error_class="DELTA_COLUMN_PATH_NOT_NESTED")


def _change_col_op(label: str, path: list[str], old: Json, new: Json, why: str
                   ) -> DeltaAnalysisError:
    def show(f: Json) -> str:
        return type_string(f["type"]) + ("" if f.get("nullable", True) else " NOT NULL")
    return DeltaAnalysisError(
        "HW_ALTER_COLUMN_UNSUPPORTED",
        f"ALTER TABLE {label}: ALTER TABLE CHANGE COLUMN is not supported for changing column "
        f"{dotted(path)} from {show(old)} to {show(new)}.", why,
        "Rewrite the table with the column changed: CREATE OR REPLACE TABLE ... AS SELECT "
        "(or df.write.mode('overwrite').option('overwriteSchema', 'true')).",
        error_class="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP")


# Type widening (docs.delta.io "Type widening"; delta-spark's TypeWidening
# .isTypeChangeSupported): integers to wider integers, to double, to a decimal with room for
# their digits; float to double; date to timestamp_ntz; a decimal to one with no fewer
# integer digits and no smaller scale.
TYPE_CHANGES = "delta.typeChanges"
_INTEGER_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
_INTEGERS = ["byte", "short", "integer", "long"]
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def widening(old: Any, new: Any) -> bool:
    """Whether type widening allows changing a column of type ``old`` to ``new`` (Delta's
    type JSON: ``"integer"``, ``"decimal(10,2)"``...)."""
    if not isinstance(old, str) or not isinstance(new, str) or old == new:
        return False
    if old in _INTEGERS and new in _INTEGERS:
        return _INTEGERS.index(new) > _INTEGERS.index(old)
    if old in ("byte", "short", "integer") and new == "double":
        return True
    if (old, new) in (("float", "double"), ("date", "timestamp_ntz")):
        return True
    to = _DECIMAL.fullmatch(new)
    if to is None:
        return False
    precision, scale = int(to.group(1)), int(to.group(2))
    if old in _INTEGER_DIGITS:
        return precision - scale >= _INTEGER_DIGITS[old]
    was = _DECIMAL.fullmatch(old)
    return was is not None and scale >= int(was.group(2)) and \
        precision - scale >= int(was.group(1)) - int(was.group(2))


def widening_by_evolution(old: Any, new: Any) -> bool:
    """Whether a write with schema evolution (mergeSchema / autoMerge) widens a column of
    type ``old`` to ``new`` by itself (delta-spark's TypeWidening
    .isTypeChangeSupportedForSchemaEvolution): integers to wider integers, float -> double,
    date -> timestamp_ntz, a decimal to one with no fewer integer digits and no smaller
    scale. Integers to double or to a decimal take ALTER COLUMN TYPE."""
    if not widening(old, new):
        return False
    if old in _INTEGERS:
        return new in _INTEGERS
    return _DECIMAL.fullmatch(old) is None or _DECIMAL.fullmatch(new) is not None


def widen_field(field: Json, wanted: str) -> None:
    """The field's type changed to ``wanted``, the change recorded in its typeChanges."""
    metadata = field.setdefault("metadata", {})
    metadata[TYPE_CHANGES] = [*metadata.get(TYPE_CHANGES, []),
                              {"fromType": field["type"], "toType": wanted}]
    field["type"] = wanted


def _check_type(field: Json, change: ColumnChange, label: str, type_widening: bool) -> None:
    wanted = change.data_type
    if wanted is None:
        return
    current = field["type"]
    char_varchar = (field.get("metadata") or {}).get(CHAR_VARCHAR)
    if isinstance(wanted, str) and wanted.startswith(("char(", "varchar(")):
        if wanted == char_varchar:
            return
        raise _change_col_op(label, change.path, field, {**field, "type": wanted},
                             "headwater keeps CHAR / VARCHAR columns as they were declared.")
    if strip_metadata(wanted) == strip_metadata(current):
        return
    kind = current.get("type") if isinstance(current, dict) else None
    which = {"struct": ("DELTA_CANNOT_UPDATE_STRUCT_FIELD",
                        "update struct by adding, deleting, or updating its fields",
                        "ADD COLUMNS (s.new T) adds a field; ALTER COLUMN s.f changes one."),
             "map": ("DELTA_CANNOT_UPDATE_MAP_FIELD",
                     f"update a map by updating `{dotted(change.path)}.key` or "
                     f"`{dotted(change.path)}.value`",
                     f"ALTER COLUMN {dotted(change.path)}.value ..."),
             "array": ("DELTA_CANNOT_UPDATE_ARRAY_FIELD",
                       f"update the element by updating `{dotted(change.path)}.element`",
                       f"ALTER COLUMN {dotted(change.path)}.element ...")}.get(kind or "")
    if which is not None:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label}: cannot update field {dotted(change.path)} type: {which[1]}.",
            "Delta changes a struct, map or array column through its nested fields.",
            which[2], error_class=which[0])
    raise DeltaAnalysisError(
        "HW_ALTER_COLUMN_UNSUPPORTED",
        f"ALTER TABLE {label}: ALTER TABLE CHANGE COLUMN is not supported for changing column "
        f"{dotted(change.path)} from {type_string(current)} to {type_string(wanted)}.",
        "Delta changes a column's type in place only with the typeWidening table feature "
        "(delta.enableTypeWidening = true): files keep the old type and every reader widens "
        "it." if not type_widening else
        "Type widening allows only wider types: byte -> short -> int -> long, integers to "
        "double or to a decimal with room for their digits, float -> double, date -> "
        "timestamp_ntz, a decimal to more precision and scale.",
        "Rewrite the table with the column cast: CREATE OR REPLACE TABLE t AS SELECT "
        "CAST(c AS <type>) AS c, ... FROM t (or df.write.mode('overwrite').option("
        "'overwriteSchema', 'true')).",
        error_class="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP")


def _check_identity(field: Json, change: ColumnChange, label: str) -> None:
    if IDENTITY_START not in (field.get("metadata") or {}):
        return
    # as delta-spark: any nullability or default change, even a no-op (a type only when new)
    if (change.data_type is not None and strip_metadata(change.data_type)
            != strip_metadata(field["type"])) or change.set_default is not None or \
            change.nullable is not None:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label}: ALTER TABLE ALTER COLUMN is not supported for IDENTITY "
            f"columns ({dotted(change.path)}).",
            "An identity column's type, nullability and default are part of its generation.",
            "Change only its comment or position, or recreate the table.",
            error_class="DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED")


def not_null_violation(label: str, path: list[str], rows: int) -> DeltaAnalysisError:
    return DeltaAnalysisError(
        "HW_CONSTRAINT_VIOLATED",
        f"ALTER TABLE {label} ALTER COLUMN {dotted(path)} SET NOT NULL: {rows} rows in "
        f"{label} violate the new NOT NULL constraint on {dotted(path)}.",
        "NOT NULL holds for every row of the table, the existing ones too.",
        f"Fill the NULLs first (UPDATE {label} SET {dotted(path)} = ... WHERE {dotted(path)} "
        "IS NULL), or delete those rows.", error_class="DELTA_NEW_NOT_NULL_VIOLATION")


# --- REPLACE COLUMNS ------------------------------------------------------------------------

def replace_columns(schema: Json, columns: list[Json], label: str, column_mapping: bool,
                    partition_columns: list[str]) -> Json:
    """The schema REPLACE COLUMNS makes (delta-spark's AlterTableReplaceColumnsDeltaCommand:
    canChangeDataType with failOnAmbiguousChanges, then changeDataType)."""
    if any(IDENTITY_START in (f.get("metadata") or {}) for f in schema["fields"]):
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label} REPLACE COLUMNS is not supported for a table with IDENTITY "
            "columns.", "The identity column's generation would be lost.",
            "Use ADD COLUMNS / ALTER COLUMN to change the other columns.",
            error_class="DELTA_IDENTITY_COLUMNS_REPLACE_COLUMN_NOT_SUPPORTED")
    new = {"type": "struct", "fields": columns}
    reason = _cannot_change(schema, new, [], column_mapping)
    if reason is not None:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label}: unsupported ALTER TABLE REPLACE COLUMNS operation. Reason: "
            f"{reason}. Failed to change schema from {type_string(strip_metadata(schema))} to "
            f"{type_string(strip_metadata(new))}.",
            "REPLACE COLUMNS may reorder columns, change comments, add nullable columns and "
            "loosen nullability; it drops columns only on tables with column mapping, and "
            "changes no type.",
            "List every existing column (with its type) in the new order; drop columns "
            "after enabling column mapping (delta.columnMapping.mode = 'name') or rewrite "
            "the table (CREATE OR REPLACE TABLE ... AS SELECT).",
            error_class="DELTA_UNSUPPORTED_ALTER_TABLE_REPLACE_COL_OP")
    result = _change_data_type(schema, new)
    names = [f["name"].lower() for f in result["fields"]]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label} REPLACE COLUMNS: found duplicate column(s): "
            f"{', '.join(duplicates)}. The duplicate was found while replacing columns.",
            "Column names are unique, case-insensitively.", "Name each column once.",
            error_class="DELTA_DUPLICATE_COLUMNS_FOUND.REPLACING_COLUMNS")
    kept = {f["name"].lower() for f in result["fields"]}
    lost = [c for c in partition_columns if c.lower() not in kept]
    if lost:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label} REPLACE COLUMNS would drop the partition column(s) "
            f"{', '.join(lost)}.", "Dropping partition columns is not supported.",
            "Keep the partition columns in the list.",
            error_class="DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN")
    return result


def _cannot_change(old: Any, new: Any, path: list[str], column_mapping: bool) -> str | None:
    """delta-spark's SchemaUtils.canChangeDataType: the reason a change is refused, or None."""
    def nullability(from_null: bool, to_null: bool, at: list[str]) -> str | None:
        return None if to_null or not from_null else \
            f"tightening nullability of {dotted(at)}"

    old_kind = old.get("type") if isinstance(old, dict) else None
    new_kind = new.get("type") if isinstance(new, dict) else None
    if old_kind == "array" and new_kind == "array":
        return nullability(old.get("containsNull", True), new.get("containsNull", True), path) \
            or _cannot_change(old["elementType"], new["elementType"], [*path, "element"],
                              column_mapping)
    if old_kind == "map" and new_kind == "map":
        return nullability(old.get("valueContainsNull", True),
                           new.get("valueContainsNull", True), path) \
            or _cannot_change(old["keyType"], new["keyType"], [*path, "key"], column_mapping) \
            or _cannot_change(old["valueType"], new["valueType"], [*path, "value"],
                              column_mapping)
    if old_kind == "struct" and new_kind == "struct":
        remaining = {f["name"].lower(): f for f in old["fields"]}
        adding = False
        for to in new["fields"]:
            found = remaining.pop(to["name"].lower(), None) or next(
                (f for f in old["fields"] if f["name"].lower() == to["name"].lower()), None)
            if found is not None:
                at = [*path, found["name"]]
                problem = nullability(found.get("nullable", True), to.get("nullable", True),
                                      at) or _cannot_change(found["type"], to["type"], at,
                                                            column_mapping)
                if problem:
                    return problem
            else:
                adding = True
                if not to.get("nullable", True):
                    return f"adding non-nullable column {dotted([*path, to['name']])}"
        if remaining and adding:
            return (f"cannot change data type of {dotted(path) or 'the table'} from "
                    f"{type_string(strip_metadata(old))} to {type_string(strip_metadata(new))}: "
                    "this change contains column removals and additions, therefore they are "
                    "ambiguous. Please make these changes individually using ALTER TABLE "
                    "[ADD | DROP | RENAME] COLUMN")
        if remaining and not column_mapping:
            gone = ", ".join(f["name"] for f in old["fields"] if f["name"].lower() in remaining)
            return f"dropping column(s) [{gone}]" + (f" from {dotted(path)}" if path else "")
        return None
    if old == "null":
        return None
    if strip_metadata(old) != strip_metadata(new):
        return (f"changing data type of {dotted(path)} from {type_string(old)} to "
                f"{type_string(new)}")
    return None


def _change_data_type(old: Any, new: Any) -> Any:
    """delta-spark's SchemaUtils.changeDataType: ``new``'s shape, existing fields keeping their
    metadata (a comment given replaces theirs) and taking the new nullability."""
    old_kind = old.get("type") if isinstance(old, dict) else None
    new_kind = new.get("type") if isinstance(new, dict) else None
    if old_kind == "array" and new_kind == "array":
        return {**old, "elementType": _change_data_type(old["elementType"], new["elementType"])}
    if old_kind == "map" and new_kind == "map":
        return {**old, "keyType": _change_data_type(old["keyType"], new["keyType"]),
                "valueType": _change_data_type(old["valueType"], new["valueType"])}
    if old_kind == "struct" and new_kind == "struct":
        fields = []
        for to in new["fields"]:
            found = next((f for f in old["fields"] if f["name"].lower() == to["name"].lower()),
                         None)
            if found is None:
                fields.append(copy.deepcopy(to))
                continue
            metadata = dict(found.get("metadata") or {})
            if COMMENT in (to.get("metadata") or {}):
                metadata[COMMENT] = to["metadata"][COMMENT]
            fields.append({"name": found["name"],
                           "type": _change_data_type(found["type"], to["type"]),
                           "nullable": to.get("nullable", True), "metadata": metadata})
        return {"type": "struct", "fields": fields}
    return copy.deepcopy(new)


# --- checks and column mapping --------------------------------------------------------------

def check_field_names(schema: Json, label: str, column_mapping: bool) -> None:
    """delta-spark's checkSchemaFieldNames: without column mapping, parquet cannot hold
    names with `` ,;{}()\\n\\t=``."""
    if column_mapping:
        return
    bad = [f["name"] for f in nested_fields(schema)
           if any(c in f["name"] for c in INVALID_NAME_CHARS)]
    if bad:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label}: found invalid character(s) among ' ,;{{}}()\\n\\t=' in the "
            f"column names of the schema. Invalid column names: {', '.join(bad)}.",
            "Parquet files name columns by these names; without column mapping they cannot "
            "hold these characters.",
            "Use other characters, or enable column mapping (delta.columnMapping.mode = "
            "'name').", error_class="DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES")


def assign_column_mapping(schema: Json, configuration: dict[str, str]) -> dict[str, str]:
    """Give every field without a column id one (and a physical name), as delta-spark does
    for new fields of a column-mapped table; returns the configuration with the new
    ``delta.columnMapping.maxColumnId``."""
    fields = nested_fields(schema)
    highest = max([int(configuration.get(MAX_COLUMN_ID, "0"))] + [
        int(f["metadata"][COLUMN_MAPPING_ID]) for f in fields
        if COLUMN_MAPPING_ID in (f.get("metadata") or {})])
    for f in fields:
        metadata = f.setdefault("metadata", {})
        if COLUMN_MAPPING_ID not in metadata:
            highest += 1
            metadata[COLUMN_MAPPING_ID] = highest
            metadata[PHYSICAL_NAME] = f"col-{uuid.uuid4()}"
    return {**configuration, MAX_COLUMN_ID: str(highest)}


def has_type(schema: Any, name: str) -> bool:
    """Whether ``schema`` holds a column of the atomic type ``name`` anywhere."""
    if isinstance(schema, str):
        return schema == name
    return any(has_type(f["type"], name) for f in nested_fields(schema)) or (
        schema.get("type") == "array" and has_type(schema["elementType"], name)) or (
        schema.get("type") == "map" and (has_type(schema["keyType"], name)
                                         or has_type(schema["valueType"], name)))
