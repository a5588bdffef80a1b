"""The checks of a write against the table it writes: schema, partitioning, writability.

Every entry point's :class:`headwater.delta.write.request.WriteRequest` passes through these
before files are written: a mismatched schema, partitioning or a table this writer cannot fill
is an error then, not after the rows are written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import StructType

from headwater.delta.generated import declares_generation
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


def schema_differences(table: StructType, data: StructType) -> tuple[list[str], list[str]]:
    """(columns only in the data, columns whose types differ) — names are case-insensitive."""
    by_name = {f.name.lower(): f for f in table.fields}
    extra, mismatched = [], []
    for f in data.fields:
        existing = by_name.get(f.name.lower())
        if existing is None:
            extra.append(f.name)
        elif existing.dataType.simpleString() != f.dataType.simpleString():
            mismatched.append(
                f"{f.name} (table {existing.dataType.simpleString()}, "
                f"data {f.dataType.simpleString()})"
            )
    return extra, mismatched


def check_schema(path: str, table: StructType, data: StructType, merge_schema: bool) -> list[str]:
    """Raise on a mismatch; return the new columns to add when mergeSchema is on."""
    extra, mismatched = schema_differences(table, data)
    if mismatched:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data does not fit the Delta table at {path}: mismatched column types: "
            f"{', '.join(mismatched)}.",
            "Delta enforces the table schema on every write; changing a column's type would "
            "make existing files unreadable.",
            "Cast the columns to the table's types, or write to a new table.",
        )
    if extra and not merge_schema:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data has columns the Delta table at {path} does not: {', '.join(extra)}.",
            "Delta enforces the table schema on every write.",
            "Drop those columns, or add .option('mergeSchema', 'true') to add them to the table.",
        )
    return extra


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
