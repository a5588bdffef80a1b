"""Replacing a whole Delta table in one commit: CREATE OR REPLACE, saveAsTable / save with
``overwriteSchema``, REPLACE TABLE AS SELECT (data, schema, partitioning, description and
properties at once), written by Spark's parquet writer where it can, by the driver otherwise.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from deltalake import Schema
from deltalake.transaction import AddAction, create_table_with_add_actions
from pyspark.sql.types import StructField, StructType

from headwater.conf import storage
from headwater.delta.constraints import Constraints
from headwater.delta.files import FileWriter
from headwater.delta.generated import declares_generation
from headwater.delta.log import DeltaLog, normalize_uri, open_table
from headwater.delta.schema import arrow_schema, as_nullable
from headwater.delta.table_protocol import invalid_property, split_properties
from headwater.delta.write.commit import delete_files
from headwater.delta.write.native import fault
from headwater.delta.write.request import DEFAULT_TARGET_FILE_BYTES
from headwater.delta.write.staging import delete_staged, stage_files, unreferenced
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pyspark.sql import DataFrame


def replace_native(df: DataFrame, path: str, partition_by: list[str] | None = None,
                   name: str | None = None, description: str | None = None,
                   configuration: dict[str, str] | None = None,
                   declared: bool | StructType = False,
                   committing: AbstractContextManager[Any] | None = None) -> int:
    """Replace the table at ``path`` (created when missing) by ``df``: Spark's parquet writer
    writes the new files first, then ONE commit ("CREATE OR REPLACE TABLE") removes every old
    file and sets the new schema, partitioning, description and properties. Versions before it
    stay readable (time travel) until VACUUM. If ``df`` fails, its partial files are deleted and
    the table is exactly as it was. Returns the rows written.

    committing: entered around the commits only, after ``df`` is computed and its files are
    written (a caller's lock on creating tables need not be held while the query runs); its
    exit runs only when the commits succeeded.

    Properties outside Delta's ``delta.*`` namespace (e.g. ``'team'='sales'``) follow in a
    second commit: deltalake validates only Delta's own keys when it creates a table.

    declared: ``df``'s schema is a declaration (CREATE OR REPLACE TABLE t (id INT NOT NULL)),
    or the declared schema itself (a pipeline's materialized view): its NOT NULL columns are
    recorded and ``df``'s rows are checked against them (delta-spark's
    DELTA_NOT_NULL_CONSTRAINT_VIOLATED; nothing is written then).

    Tables whose protocol needs more than reader 1 / writer 4 (column mapping, deletion
    vectors, table features) are refused: a replace would have to keep their protocol, which
    deltalake's replace does not do. Up to writer 4 (appendOnly, check constraints, change
    data feed) the replace commit's own definition sets the protocol again.
    """
    uri = normalize_uri(path)
    if declares_generation(df.schema.json()):
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Replacing the table at {path} with generated, identity or DEFAULT columns this "
            "way is "
            "not supported yet.", "This replace writes the data and the schema in one "
            "deltalake commit, which would drop the columns' generation.",
            "Replace it by name in the lakehouse (CREATE OR REPLACE TABLE name ... / "
            "DeltaTable.createOrReplace().tableName(...)), or with "
            "DeltaTable.createOrReplace().location(path).")
    log = DeltaLog(uri)
    if log.exists():
        protocol = log.table().protocol()
        if protocol.min_reader_version > 1 or protocol.min_writer_version > 4:
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE",
                f"The table at {path} uses Delta protocol ({protocol.min_reader_version}, "
                f"{protocol.min_writer_version}); headwater cannot replace it in one commit "
                "yet.", "Replacing must keep the table's features (e.g. column mapping), "
                "which the replace commit would drop.",
                "Drop the table and create it again, or overwrite rows with the same schema.")
    delta_keys, user_keys = split_properties(configuration)
    partition_columns = list(partition_by or [])
    # a declared schema (CREATE OR REPLACE TABLE t (id INT NOT NULL)) keeps its NOT NULL; a
    # DataFrame's is nullable, as delta-spark creates tables from data
    data_schema = declared_schema(df.schema, declared)
    if declared is not False:
        df = Constraints.of(data_schema, {}).enforce(df, uri)
    schema = Schema.from_arrow(arrow_schema(data_schema))  # before writing: a bad type fails now
    committing = committing if committing is not None else contextlib.nullcontext()
    if storage.bucket_of(uri) is not None:
        return _replace_through_driver(df, uri, data_schema, partition_columns, name,
                                       description, delta_keys, user_keys, committing)
    return _replace_staged(df, uri, schema, partition_columns, name, description,
                           delta_keys, user_keys, path, committing)


def declared_schema(schema: StructType, declared: bool | StructType) -> StructType:
    """The new table's schema: ``schema`` as declared (True), with the NOT NULL columns of
    a declared schema (a StructType), or all nullable (a DataFrame's, as delta-spark)."""
    if declared is True:
        return schema
    required = set() if declared is False else \
        {f.name.lower() for f in declared.fields if not f.nullable}
    return StructType([StructField(f.name, f.dataType, f.name.lower() not in required,
                                   f.metadata) for f in as_nullable(schema).fields])


def _replace_through_driver(df: DataFrame, uri: str, data_schema, partition_columns: list[str],
                            name: str | None, description: str | None,
                            delta_keys: dict, user_keys: dict,
                            committing: AbstractContextManager[Any]) -> int:
    """An object-store table: Spark's parquet writer has no Hadoop filesystem for it (no
    hadoop-aws), so the rows come to the driver as Arrow (a failing ``df`` fails before
    anything is written), headwater's file writer puts them under the table, and ONE commit
    replaces the table, as :func:`_replace_staged` does: new schema, partitioning,
    description and properties (delta-rs' overwrite keeps an existing table's description
    and properties); files of a failed commit are deleted."""
    table = df.toArrow().cast(arrow_schema(data_schema))
    writer = FileWriter(uri, partition_columns, DEFAULT_TARGET_FILE_BYTES)
    try:
        for batch in table.to_batches():
            writer.write(batch)
        adds = writer.close().adds
    except BaseException as exc:
        delete_files(uri, unreferenced(uri, writer.adds))
        raise invalid_property(exc, uri) from exc
    with committing:
        try:
            create_table_with_add_actions(
                uri, Schema.from_arrow(arrow_schema(data_schema)),
                [AddAction(a["path"], a["size"], a["partitionValues"], a["modificationTime"],
                           a["dataChange"], a["stats"]) for a in adds],
                mode="overwrite", partition_by=partition_columns or None, name=name,
                description=description, configuration=delta_keys or None,
                storage_options=storage.options_for(uri))
        except BaseException as exc:
            delete_files(uri, unreferenced(uri, writer.adds))
            raise invalid_property(exc, uri) from exc
        _set_user_properties(uri, user_keys)
    return int(table.num_rows)


def _replace_staged(df: DataFrame, uri: str, schema, partition_columns: list[str],
                    name: str | None, description: str | None, delta_keys: dict,
                    user_keys: dict, path: str, committing: AbstractContextManager[Any]) -> int:
    """Spark's parquet writer stages the files under the table (the query runs), then one
    commit adds them (``committing`` entered around it)."""
    adds = stage_files(df, uri, partition_columns, {})
    with committing:
        try:
            fault("native_before_commit", uri)
            create_table_with_add_actions(
                uri, schema,
                [AddAction(a["path"], a["size"], a["partitionValues"], a["modificationTime"],
                           a["dataChange"], a["stats"]) for a in adds],
                mode="overwrite", partition_by=partition_columns or None, name=name,
                description=description, configuration=delta_keys or None)
        except BaseException as exc:
            delete_staged(uri, unreferenced(uri, adds))
            raise invalid_property(exc, path) from exc
        _set_user_properties(uri, user_keys)
    return sum(json.loads(a["stats"])["numRecords"] for a in adds)


def _set_user_properties(uri: str, user_keys: dict) -> None:
    """Properties outside ``delta.*``: a second commit (deltalake validates only its own keys
    when it creates a table)."""
    if user_keys:
        open_table(uri).alter.set_table_properties(user_keys, raise_if_not_exists=False)
