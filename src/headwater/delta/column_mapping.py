"""Delta column mapping (name mode), as delta-spark applies it: columns known to readers by
their logical names, stored in data files under physical names
(``delta.columnMapping.physicalName``), each with an id (``delta.columnMapping.id``; the
table's highest in ``delta.columnMapping.maxColumnId``).

* :func:`enable`: ``ALTER TABLE t SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')``:
  every existing field (nested ones too) gets an id and keeps its current name as physical
  name (the files already hold it), the protocol gains columnMapping (the versions the
  statement asks for, e.g. reader 2 / writer 5, else table features: reader 3 / writer 7
  listing columnMapping), one commit of both.
* :func:`rename_column` / :func:`drop_columns`: the schemas ``RENAME COLUMN`` and
  ``DROP COLUMN(S)`` make: metadata only, the physical names stay, so no file is touched.
* :func:`map_new_table`: CREATE TABLE in name mode (``col-<uuid>`` physical names).

What mapping means for data files (the frame a writer writes, the changes a stream cannot
read across) is :mod:`headwater.delta.physical_names`'s.

``id`` mode (files matched by parquet field ids) is read by the Python reader but never
enabled or written here.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

from headwater.delta import column_ddl
from headwater.delta.column_ddl import (
    COLUMN_MAPPING_ID,
    MAX_COLUMN_ID,
    PHYSICAL_NAME,
    dotted,
    resolve,
    tree,
)
from headwater.delta.commit import Transaction, commit
from headwater.delta.log import normalize_uri, open_table
from headwater.delta.metadata import metadata_action
from headwater.delta.physical_names import MODE, is_mapped, mode_of
from headwater.delta.protocol import FEATURES_MIN_READER, FEATURES_MIN_WRITER, Protocol
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError

Json = dict[str, Any]

MODES = ("none", "name", "id")
FEATURE = "columnMapping"
MIN_READER = "delta.minReaderVersion"
MIN_WRITER = "delta.minWriterVersion"


# --- enabling -------------------------------------------------------------------------------

def _mode_change_error(label: str, old: str, new: str) -> HeadwaterError:
    return DeltaAnalysisError(
        "HW_DELTA_UNSUPPORTED_FEATURE",
        f"ALTER TABLE {label}: changing column mapping mode from '{old}' to '{new}' is not "
        "supported.",
        "An existing table's columns get physical names equal to their current names only in "
        "name mode; id mode needs field ids in every data file, and leaving column mapping "
        "would make renamed or dropped columns read wrong.",
        "Use 'name' mode (delta.columnMapping.mode = 'name') on an existing table; for 'id' "
        "mode, or no mapping, copy the rows into a new table (CREATE TABLE ... AS SELECT).",
        error_class="DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE")


def requested_mode(properties: dict[str, str]) -> str | None:
    """The mode ``SET TBLPROPERTIES`` sets, None when the statement does not name it."""
    for key, value in properties.items():
        if key.lower() == MODE.lower():
            mode = str(value).strip().lower()
            if mode not in MODES:
                raise HeadwaterError(
                    "HW_TABLE_PROPERTY_INVALID",
                    f"The column mapping mode `{value}` is not supported for this Delta "
                    f"version. Please upgrade if you want to use this mode.",
                    "delta.columnMapping.mode is one of none, name and id.",
                    "Set delta.columnMapping.mode = 'name'.",
                    error_class="DELTA_MODE_NOT_SUPPORTED")
            return mode
    return None


def assign_existing(schema: Json) -> int:
    """Give every field of ``schema`` (in place) an id and its current name as physical
    name, as delta-spark does when name mode is enabled on an existing table; returns the
    highest id."""
    highest = 0
    for f in column_ddl.nested_fields(schema):
        highest += 1
        metadata = f.setdefault("metadata", {})
        metadata[COLUMN_MAPPING_ID] = highest
        metadata[PHYSICAL_NAME] = f["name"]
    return highest


def enable(path: str, properties: dict[str, str], label: str) -> int | None:
    """SET TBLPROPERTIES with ``delta.columnMapping.mode`` (and the statement's other
    properties): one commit of the new protocol and metadata. None when nothing changes."""
    mode = requested_mode(properties)
    uri = normalize_uri(str(path))
    table = open_table(uri)
    current_mode = mode_of(table.metadata().configuration)
    if mode == current_mode:  # nothing to enable: the statement's other properties only
        return _commit_properties(uri, table, properties, label, None)
    if mode != "name" or current_mode != "none":
        raise _mode_change_error(label, current_mode, str(mode))
    return _commit_properties(uri, table, properties, label, "name")


def check_unset(keys: list[str], table: Any, label: str) -> None:
    """UNSET TBLPROPERTIES of the mode (or its max id) on a mapped table: refused, as
    delta-spark refuses leaving name mode by a property."""
    lowered = {k.lower() for k in keys}
    if is_mapped(table) and lowered & {MODE.lower(), MAX_COLUMN_ID.lower()}:
        raise _mode_change_error(label, mode_of(table.metadata().configuration), "none")


def without_mode(properties: dict[str, str]) -> dict[str, str]:
    """``properties`` without the column mapping keys a new table's definition sets itself."""
    return {k: v for k, v in properties.items()
            if k.lower() not in (MODE.lower(), MAX_COLUMN_ID.lower())}


def check_new_mode(mode: str, label: str, object_store: bool) -> None:
    """A new table's mode: ``name`` on a local table (headwater writes its first commit)."""
    if mode not in MODES:
        requested_mode({MODE: mode})  # DELTA_MODE_NOT_SUPPORTED
    if mode == "id" or object_store:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Creating {label} with delta.columnMapping.mode = '{mode}' is not supported "
            + ("on an object store." if object_store else "(id mode)."),
            "headwater writes column-mapped tables in name mode, committing them itself, "
            "which needs local or mounted storage; id mode needs parquet field ids matched "
            "by every reader.",
            "Use delta.columnMapping.mode = 'name' on a local or mounted path.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def map_new_table(meta: Json) -> None:
    """A new table's metaData action (in place) in name mode: every field an id and a
    ``col-<uuid>`` physical name, as delta-spark creates a mapped table."""
    schema = json.loads(meta["schemaString"])
    configuration = column_ddl.assign_column_mapping(schema, {MAX_COLUMN_ID: "0"})
    meta["schemaString"] = json.dumps(schema, separators=(",", ":"))
    meta["configuration"] = {**meta["configuration"], MODE: "name", **configuration}


def protocol_with_mapping(action: Json) -> Json:
    """A new table's protocol action (its body) with columnMapping supported."""
    current = Protocol(int(action["minReaderVersion"]), int(action["minWriterVersion"]),
                       frozenset(action["readerFeatures"]) if "readerFeatures" in action
                       else None,
                       frozenset(action["writerFeatures"]) if "writerFeatures" in action
                       else None)
    return _requested_protocol(current, {}).action()["protocol"]


def _requested_protocol(current: Protocol, properties: dict[str, str], mapping: bool = True
                        ) -> Protocol:
    """The protocol after the statement: the versions it names (never lower), and with
    ``mapping`` columnMapping supported (by legacy versions 2 / 5 when they are asked for,
    else as a table feature)."""
    lowered = {k.lower(): v for k, v in properties.items()}
    reader = int(lowered.get(MIN_READER.lower(), current.reader))
    writer = int(lowered.get(MIN_WRITER.lower(), current.writer))
    if writer < FEATURES_MIN_WRITER:
        reader = min(reader, 2)
    protocol = current.merge(Protocol.of(reader, writer))
    if not mapping or any(f.name == FEATURE for f in protocol.known()):
        return protocol
    # table features, the reader's listed too (delta-spark would write reader 2): readers
    # that cannot map columns refuse the table (deltalake's pyarrow reader reads a legacy
    # reader-2 table's renamed columns as NULLs instead)
    listed = protocol.denormalized()
    return replace(listed, reader=FEATURES_MIN_READER,
                   reader_features=(listed.reader_features or frozenset()) | {FEATURE},
                   writer_features=(listed.writer_features or frozenset()) | {FEATURE})


def _commit_properties(uri: str, table: Any, properties: dict[str, str], label: str,
                       enabling: str | None) -> int:
    meta = metadata_action(table)["metaData"]
    configuration = {k: v for k, v in meta["configuration"].items()}
    plain = {k: v for k, v in properties.items()  # the mode under its canonical spelling
             if k.lower() not in (MIN_READER.lower(), MIN_WRITER.lower(), MODE.lower())}
    mode = requested_mode(properties)
    if mode is not None:
        configuration = {k: v for k, v in configuration.items() if k.lower() != MODE.lower()}
        configuration[MODE] = mode
    configuration.update(plain)
    actions: list[Json] = []
    current = Protocol.of_table(table)
    protocol = _requested_protocol(current, properties, mapping=bool(enabling))
    if protocol != current:
        actions.append(protocol.action())
    if enabling:
        schema = json.loads(meta["schemaString"])
        highest = assign_existing(schema)
        meta["schemaString"] = json.dumps(schema, separators=(",", ":"))
        configuration[MODE] = enabling
        configuration[MAX_COLUMN_ID] = str(highest)
    meta["configuration"] = configuration
    actions.append({"metaData": meta})
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation="SET TBLPROPERTIES",
        parameters={"properties": json.dumps(properties)}, metrics={}, actions=actions,
        extra={"engineInfo": "headwater"}, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


# --- RENAME COLUMN / DROP COLUMNS -------------------------------------------------------------

def required_error(label: str, statement: str, error_class: str) -> DeltaAnalysisError:
    """delta-spark's refusal of RENAME / DROP COLUMN on a table without column mapping."""
    what = "Column rename" if statement == "RENAME COLUMN" else "DROP COLUMN"
    return DeltaAnalysisError(
        "HW_ALTER_COLUMN_UNSUPPORTED",
        f"ALTER TABLE {label} {statement}: {what} is not supported for your Delta table. "
        "Please enable Column Mapping on your Delta table with mapping mode 'name'.",
        "Without column mapping, data files name columns by their logical names: renaming or "
        "dropping one would mean rewriting every file (or reading the old files wrong).",
        f"Enable column mapping first: ALTER TABLE {label} SET TBLPROPERTIES "
        "('delta.columnMapping.mode' = 'name'), then run the statement again.",
        error_class=error_class)


def _parent_struct(schema: Json, path: list[str], label: str, statement: str) -> Json:
    parent = resolve(schema, path[:-1], label, statement)
    if not (isinstance(parent, dict) and parent.get("type") == "struct"):
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label} {statement}: {dotted(path)} is not a field of a struct.",
            "Only struct fields (top-level columns and nested fields) have names.",
            "Name a column or a struct's field (DESCRIBE TABLE).",
            error_class="DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT")
    return parent


def _index(struct: Json, name: str) -> int:
    lowered = name.lower()
    return next((i for i, f in enumerate(struct["fields"]) if f["name"].lower() == lowered), -1)


def _not_found(schema: Json, path: list[str], label: str, statement: str
               ) -> DeltaAnalysisError:
    return DeltaAnalysisError(
        "HW_ALTER_COLUMN_NOT_FOUND",
        f"ALTER TABLE {label} {statement}: couldn't find column {dotted(path)} in:\n"
        f"{tree(schema)}", "The statement names an existing column (nested fields by path).",
        "Check the column's name against the table's schema (DESCRIBE TABLE).",
        error_class="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA")


def _references(text: str, names: list[str]) -> bool:
    lowered = text.lower()
    return any(n.lower() in lowered for n in names)


def _dependents(configuration: dict[str, str], schema: Json, path: list[str]
                ) -> list[str]:
    """CHECK constraints and generated columns whose expression names ``path``'s column (by
    its top-level name: delta-spark refuses to rename / drop a column they use)."""
    names = [path[0], ".".join(path)]
    found = [k for k, v in configuration.items()
             if k.lower().startswith("delta.constraints.") and _references(str(v), names)]
    for f in schema["fields"]:
        expression = (f.get("metadata") or {}).get("delta.generationExpression")
        if expression and _references(str(expression), names):
            found.append(f"generated column {f['name']}")
    return found


def rename_column(schema: Json, configuration: dict[str, str], partition_columns: list[str],
                  path: list[str], new_name: str, label: str) -> tuple[Json, list[str]]:
    """The schema (and partition columns) after ``RENAME COLUMN path TO new_name``: the field
    keeps its id and physical name."""
    statement = "RENAME COLUMN"
    schema = copy.deepcopy(schema)
    parent = _parent_struct(schema, path, label, statement)
    i = _index(parent, path[-1])
    if i < 0:
        raise _not_found(schema, path, label, statement)
    taken = _index(parent, new_name)
    if taken >= 0 and taken != i:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label} RENAME COLUMN: cannot rename column {dotted(path)} to "
            f"{new_name}: found duplicate column(s): {new_name}.",
            "Column names are unique in a struct, case-insensitively.",
            "Pick another name, or drop the other column first.",
            error_class="DELTA_DUPLICATE_COLUMNS_FOUND")
    users = _dependents(configuration, schema, path)
    if users:
        raise DeltaAnalysisError(
            "HW_ALTER_COLUMN_UNSUPPORTED",
            f"ALTER TABLE {label} RENAME COLUMN: cannot rename column {dotted(path)} because "
            f"{', '.join(users)} use(s) it.",
            "A CHECK constraint or generation expression names the column by its old name.",
            "Drop the constraint (ALTER TABLE ... DROP CONSTRAINT) first, then rename and "
            "add it again with the new name.",
            error_class="DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE")
    old = parent["fields"][i]["name"]
    parent["fields"][i]["name"] = new_name
    partitions = [new_name if len(path) == 1 and c.lower() == old.lower() else c
                  for c in partition_columns]
    return schema, partitions


def drop_columns(schema: Json, configuration: dict[str, str], partition_columns: list[str],
                 paths: list[list[str]], label: str, if_exists: bool) -> Json | None:
    """The schema after ``DROP COLUMN(S)`` (None: nothing to drop, IF EXISTS). Refuses a
    partition column, the last column, a column a constraint or generated column uses."""
    statement = "DROP COLUMNS"
    schema = copy.deepcopy(schema)
    dropped = 0
    for path in paths:
        try:
            parent = _parent_struct(schema, path, label, statement)
        except DeltaAnalysisError:
            if if_exists:
                continue
            raise
        i = _index(parent, path[-1])
        if i < 0:
            if if_exists:
                continue
            raise _not_found(schema, path, label, statement)
        if len(path) == 1 and path[0].lower() in {c.lower() for c in partition_columns}:
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} DROP COLUMNS: dropping partition column(s) "
                f"{path[0]} is not allowed.", "Dropping partition columns is not supported.",
                "Keep the partition columns; rewrite the table to partition it otherwise.",
                error_class="DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN")
        users = _dependents(configuration, schema, path)
        if users:
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} DROP COLUMNS: cannot drop column {dotted(path)} because "
                f"{', '.join(users)} use(s) it.",
                "A CHECK constraint or generation expression names the column.",
                "Drop the constraint (ALTER TABLE ... DROP CONSTRAINT) first.",
                error_class="DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE")
        if len(parent["fields"]) == 1:
            raise DeltaAnalysisError(
                "HW_ALTER_COLUMN_UNSUPPORTED",
                f"ALTER TABLE {label} DROP COLUMNS: cannot drop {dotted(path)}: it is the "
                "only field of " + ("the table." if len(path) == 1 else
                                    f"struct {dotted(path[:-1])}."),
                "Dropping all columns is not supported.",
                "Keep at least one column (or drop the struct itself).",
                error_class="DELTA_DROP_COLUMN_ON_SINGLE_FIELD_SCHEMA")
        parent["fields"].pop(i)
        dropped += 1
    return schema if dropped else None


def commit_schema(path: str, table: Any, operation: str, parameters: dict[str, str],
                  schema: Json, partition_columns: list[str] | None = None) -> int:
    """One metaData commit of ``schema`` (and renamed partition columns) on ``table``."""
    meta = metadata_action(table)["metaData"]
    meta["schemaString"] = json.dumps(schema, separators=(",", ":"))
    if partition_columns is not None:
        meta["partitionColumns"] = partition_columns
    return commit(Transaction(
        uri=normalize_uri(str(path)), read_version=table.version(), operation=operation,
        parameters=parameters, metrics={}, actions=[{"metaData": meta}],
        extra={"engineInfo": "headwater"}, conflict_code="HW_DELTA_COMMIT_CONFLICT"))
