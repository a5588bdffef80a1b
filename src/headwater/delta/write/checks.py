"""The checks of a write against the table it writes: schema, partitioning, writability.

Every entry point's :class:`headwater.delta.write.request.WriteRequest` passes through these
before files are written: a mismatched schema, partitioning or a table this writer cannot fill
is an error then, not after the rows are written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import DataType, StructField, StructType

from headwater.delta.column_ddl import widening, widening_by_evolution
from headwater.delta.generated import declares_generation
from headwater.delta.table_protocol import TYPE_WIDENING, TYPE_WIDENING_PROPERTY
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.delta.constraints import Constraints

# Writer features deltalake 1.6.6 refuses to commit to (inCommitTimestamp: "Unsupported table
# features required"; headwater's commit writes each commit's inCommitTimestamp).
_NOT_DELTALAKE = {"identityColumns", "clustering", "domainMetadata", "allowColumnDefaults",
                  "inCommitTimestamp", "typeWidening", "typeWidening-preview", "rowTracking"}
# Writer features whose rules a commit of added / removed whole files follows (or that do
# not concern such a commit): tables with others (row tracking, in-commit timestamps, ...)
# are not committed to here.
OWN_COMMIT_WRITER_FEATURES = {
    "appendOnly", "invariants", "changeDataFeed", "timestampNtz", "domainMetadata",
    "v2Checkpoint", "vacuumProtocolCheck", "checkConstraints", "deletionVectors",
    "generatedColumns", "identityColumns", "clustering", "typeWidening", "variantType",
    "allowColumnDefaults", "inCommitTimestamp", "typeWidening-preview", "columnMapping",
    "rowTracking",  # the commit gives new files their row ids (headwater.delta.row_tracking)
}


def own_commit_allowed(table: Any) -> bool:
    """True when :func:`headwater.delta.write.commit.commit_write` may commit to ``table``:
    every writer feature it supports is one whose rules such a commit follows
    (:data:`OWN_COMMIT_WRITER_FEATURES`; column mapping too: the caller wrote physical
    names, :attr:`WriteRequest.physical_names`)."""
    protocol = table.protocol()
    return not (protocol.min_writer_version >= 7
                and set(protocol.writer_features or []) - OWN_COMMIT_WRITER_FEATURES)


def deltalake_writes(table: Any) -> bool:
    """False when deltalake would refuse to commit to ``table`` (identity columns,
    clustering): headwater commits to it itself."""
    protocol = table.protocol()
    if protocol.min_writer_version == 6:  # legacy writer 6: identity columns
        return False
    return not (set(protocol.writer_features or []) & _NOT_DELTALAKE)


def refuse_deltalake_commit(table: Any, path: str, operation: str, fix: str) -> None:
    """Refuse ``operation``, which deltalake would commit, on a table deltalake cannot commit
    to (:func:`deltalake_writes`), naming the features; never a raw CommitFailedError."""
    if deltalake_writes(table):
        return
    protocol = table.protocol()
    features = sorted(set(protocol.writer_features or []) & _NOT_DELTALAKE) or \
        ["identityColumns"]  # legacy writer 6
    raise HeadwaterError(
        "HW_DELTA_UNSUPPORTED_FEATURE",
        f"{operation} cannot commit to the Delta table at {path}: it uses the table "
        f"feature(s) {', '.join(features)}, which deltalake's commit (this operation's "
        "engine) cannot write.", f"{operation} runs in deltalake.", fix,
        error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def type_widening_enabled(table: Any) -> bool:
    """Whether type widening is on for ``table`` (a deltalake snapshot; delta-spark's
    TypeWidening.isEnabled): ``delta.enableTypeWidening = true`` with the feature in the
    protocol. Only then does a write with schema evolution widen a column."""
    config = table.metadata().configuration or {}
    features = table.protocol().writer_features or []
    return str(config.get(TYPE_WIDENING_PROPERTY, "false")).lower() == "true" and \
        any(f.startswith(TYPE_WIDENING) for f in features)


def _type_differences(table: StructType, data: StructType
                      ) -> list[tuple[StructField, StructField]]:
    """(table field, data field) of the data's columns whose type differs from the table's."""
    by_name = {f.name.lower(): f for f in table.fields}
    return [(by_name[f.name.lower()], f) for f in data.fields
            if f.name.lower() in by_name
            and by_name[f.name.lower()].dataType.simpleString() != f.dataType.simpleString()]


def _by_evolution(existing: StructField, new: StructField) -> bool:
    return widening_by_evolution(existing.dataType.jsonValue(), new.dataType.jsonValue())


def widened_columns(table: StructType, data: StructType, widen: bool) -> list[str]:
    """The table's columns (as it spells them) a write of ``data`` widens: the changes Delta
    makes with schema evolution (:func:`headwater.delta.column_ddl.widening_by_evolution`);
    none unless ``widen`` (mergeSchema on a table with type widening enabled)."""
    if not widen:
        return []
    return [old.name for old, new in _type_differences(table, data) if _by_evolution(old, new)]


def written_type(table_type: DataType, data_type: DataType, widen: bool) -> DataType:
    """The type a column's values are cast to by a write that casts to the table's types
    (insertInto, SQL INSERT): the data's own where the write widens the column (``widen``:
    schema evolution on a table with type widening enabled, and a change Delta widens by
    itself), the table's otherwise."""
    if widen and widening_by_evolution(table_type.jsonValue(), data_type.jsonValue()):
        return data_type
    return table_type


def schema_differences(table: StructType, data: StructType) -> tuple[list[str], list[str]]:
    """(columns only in the data, columns whose types differ) — names are case-insensitive."""
    known = {f.name.lower() for f in table.fields}
    extra = [f.name for f in data.fields if f.name.lower() not in known]
    mismatched = [f"{new.name} (table {old.dataType.simpleString()}, "
                  f"data {new.dataType.simpleString()})"
                  for old, new in _type_differences(table, data)]
    return extra, mismatched


def check_schema(path: str, table: StructType, data: StructType, merge_schema: bool,
                 type_widening: bool = False) -> list[str]:
    """Raise on a mismatch; return the new columns to add when mergeSchema is on.
    ``type_widening``: the table has it enabled (:func:`type_widening_enabled`); with
    mergeSchema the data's wider types then pass (:func:`widened_columns`)."""
    extra, _ = schema_differences(table, data)
    widen = merge_schema and type_widening
    differing = [(old, new) for old, new in _type_differences(table, data)
                 if not (widen and _by_evolution(old, new))]
    if differing:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data does not fit the Delta table at {path}: mismatched column types: "
            + ", ".join(f"{new.name} (table {old.dataType.simpleString()}, "
                        f"data {new.dataType.simpleString()})" for old, new in differing)
            + ".",
            "Delta enforces the table schema on every write; a column's type changes only by "
            "type widening (the table's old files keep their type and are read widened): "
            "ALTER COLUMN TYPE, or a write with schema evolution for the changes Delta widens "
            "by itself (integers to wider integers, float to double, date to timestamp_ntz, "
            "a decimal to a wider one).",
            _mismatch_fix(differing, type_widening),
        )
    if extra and not merge_schema:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data has columns the Delta table at {path} does not: {', '.join(extra)}.",
            "Delta enforces the table schema on every write.",
            "Drop those columns, or add .option('mergeSchema', 'true') to add them to the table.",
        )
    return extra


def _mismatch_fix(differing: list[tuple[StructField, StructField]],
                  type_widening: bool) -> str:
    """The ways out of a type mismatch: schema evolution for the automatic widenings, ALTER
    COLUMN TYPE for the others type widening allows, a cast for the rest."""
    ways = []
    if any(_by_evolution(old, new) for old, new in differing):
        evolution = ".option('mergeSchema', 'true') (or spark.databricks.delta.schema" \
            ".autoMerge.enabled = true)"
        ways.append(f"write with {evolution} to widen the column in the write's commit"
                    if type_widening else
                    f"enable type widening (ALTER TABLE ... SET TBLPROPERTIES "
                    f"('{TYPE_WIDENING_PROPERTY}' = 'true')) and write with {evolution} to "
                    "widen the column in the write's commit")
    manual = [(old, new) for old, new in differing
              if widening(old.dataType.jsonValue(), new.dataType.jsonValue())]
    if manual:
        alters = "; ".join(f"ALTER TABLE ... ALTER COLUMN {old.name} TYPE "
                           f"{new.dataType.simpleString().upper()}" for old, new in manual)
        ways.append(f"widen the column first: {alters}" + (
            "" if type_widening else f" (with '{TYPE_WIDENING_PROPERTY}' = 'true' set on "
            "the table first)") + ", then write")
    ways.append("cast the columns to the table's types, or write to a new table")
    text = "; or ".join(ways) + "."
    return text[0].upper() + text[1:]


def refuse_driver_only(path: str, table: Any) -> None:
    """Refuse a table whose writes need the driver: generated or identity columns (values
    computed on the DataFrame before it is written) or a feature deltalake cannot commit
    (identity, clustering). headwater's own entry points send those to
    :func:`headwater.delta.write.native.write_native`; a data source writer gets here only through
    another API (``df.writeTo``, a parameterized INSERT), and never writes wrong values."""
    if declares_generation(table.schema().to_json()) or not deltalake_writes(table):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"The table at {path} has generated, identity or DEFAULT columns, liquid "
            "clustering or row tracking, which this write path cannot fill in or commit.",
            "headwater computes those values on the driver's DataFrame and commits the table "
            "itself; a Python data source writer only receives finished rows.",
            "Write with INSERT INTO (no parameter markers), df.write.format('delta'), "
            "saveAsTable, writeStream.toTable / start(path), or DeltaTable's merge.")


def check_partitioning(path: str, existing: list[str], requested: list[str]) -> None:
    if requested and [c.lower() for c in requested] != [c.lower() for c in existing]:
        raise HeadwaterError(
            "HW_SINK_PARTITION_MISMATCH",
            f"partitionBy {requested} does not match the table at {path}, partitioned by "
            f"{existing or 'nothing'}.",
            "A Delta table's partition columns are fixed when it is created.",
            "Drop partitionBy (the table's own partitioning is used) or write to a new table.",
        )


# --- the commit ------------------------------------------------------------------------



def table_spelling(table: StructType, names: list[str]) -> list[str] | None:
    """The data's column ``names`` as the table spells them (Spark matches column names
    case-insensitively: a column ``ID`` writes into ``id``, never into a second column), or
    None when they already are."""
    spelled = {f.name.lower(): f.name for f in table.fields}
    renamed = [spelled.get(n.lower(), n) for n in names]
    return None if renamed == list(names) else renamed


def spelled_as_table(df: DataFrame, table: StructType) -> DataFrame:
    """``df`` with its columns named as the table names them (:func:`table_spelling`)."""
    renamed = table_spelling(table, list(df.columns))
    return df if renamed is None else df.toDF(*renamed)


def prepared_batches(batches: Iterator[Any], table: str, names: list[str] | None,
                     constraints: Constraints) -> Iterator[Any]:
    """A Python writer's Arrow batches with the table's column spelling (``names``, from
    :func:`table_spelling`) and its NOT NULL columns checked."""
    for batch in batches:
        if names is not None:
            batch = batch.rename_columns(names)
        if constraints.not_null:
            constraints.check_arrow(batch, table)
        yield batch
