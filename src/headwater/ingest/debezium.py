"""Debezium change events as change rows for AUTO CDC.

Debezium (through Kafka Connect) delivers each change of a database row as an envelope::

    {"before": {...} | null, "after": {...} | null, "op": "c" | "u" | "d" | "r" | "t",
     "ts_ms": 1767225600123, "source": {"connector": ..., "db": ..., "table": ...,
     "lsn": 42, ...}, "transaction": null}

or, with the JsonConverter's ``schemas.enable=true``, wrapped as
``{"schema": {...}, "payload": <envelope>}``. ``envelope_schema`` is the schema to read such
files with (``headwater.read_files(path, schema=envelope_schema(row))``);
``change_rows`` flattens the envelope into what ``create_auto_cdc_flow`` takes: the row's
columns (from ``after``, or ``before`` for a delete), ``op``, ``lsn`` and ``ts_ms``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The ``source`` block's fields that order and place an event; connectors add more (they are
# kept in the rescued column when read with a fixed schema, never lost).
SOURCE_DDL = ("version STRING, connector STRING, name STRING, ts_ms BIGINT, snapshot STRING, "
              "db STRING, schema STRING, table STRING, txId BIGINT, lsn BIGINT, "
              "sequence STRING, file STRING, pos BIGINT, gtid STRING, scn STRING")


def envelope_schema(row_schema: StructType | str, *, wrapped: bool = False) -> StructType:
    """The schema of Debezium change events for rows of ``row_schema``.

    row_schema: the table's columns, a StructType or DDL (``"id INT, name STRING"``).
    wrapped: False (default) for bare envelopes (the JsonConverter with
        ``schemas.enable=false``, Debezium Server); True for ``{"schema", "payload"}`` events
        (``schemas.enable=true``): the Connect schema is kept as a JSON string column.
    """
    row = _row_schema(row_schema)
    envelope = StructType([
        StructField("before", row, True), StructField("after", row, True),
        StructField("source", StructType.fromDDL(SOURCE_DDL), True),
        StructField("op", StringType(), True), StructField("ts_ms", LongType(), True),
        StructField("transaction", StructType.fromDDL(
            "id STRING, total_order BIGINT, data_collection_order BIGINT"), True)])
    if not wrapped:
        return envelope
    return StructType([StructField("schema", StringType(), True),
                       StructField("payload", envelope, True)])


def change_rows(events: DataFrame, *, op_column: str = "op", sequence_column: str = "lsn",
                timestamp_column: str = "ts_ms") -> DataFrame:
    """Debezium envelopes (read with :func:`envelope_schema`, wrapped or not) as flat change
    rows: the row's columns (``after``'s; ``before``'s for a delete, whose ``after`` is
    NULL), then ``op`` (``c``, ``u``, ``d``, ``r``, ``t``), ``lsn`` (``source.lsn``) and
    ``ts_ms``, under the names given. A ``_rescued_data`` column (read_files') is kept, so
    bad events can be quarantined. Feed the result to::

        create_auto_cdc_flow(..., keys=[...], sequence_by="lsn",
                             apply_as_deletes="op = 'd'", except_column_list=["op", "ts_ms"])
    """
    if "payload" in events.columns and "after" not in events.columns:
        rescued = [c for c in events.columns if c == "_rescued_data"]
        events = events.select("payload.*", *rescued)
    missing = [c for c in ("before", "after", "op", "source") if c not in events.columns]
    if missing:
        raise HeadwaterError(
            "HW_DEBEZIUM_NOT_ENVELOPE", f"change_rows: the events lack {missing} (they have "
            f"{', '.join(events.columns)}).",
            "Debezium envelopes carry before, after, op and source.",
            "Read the files with schema=headwater.debezium_schema(row_schema) "
            "(wrapped=True for {\"schema\", \"payload\"} events).")
    row = events.schema["after"].dataType
    names = [f.name for f in row.fields]  # type: ignore[attr-defined]
    clash = {op_column, sequence_column, timestamp_column} & set(names)
    if clash:
        raise HeadwaterError(
            "HW_DEBEZIUM_NOT_ENVELOPE", f"change_rows: the table has columns named "
            f"{sorted(clash)}, which change_rows would add too.",
            "The change rows carry the table's columns and the event's op, lsn and ts_ms.",
            "Pass other names, e.g. op_column='_op', sequence_column='_lsn'.")
    deleted = F.col("op") == F.lit("d")
    columns = [F.when(deleted, F.col(f"before.`{n}`")).otherwise(F.col(f"after.`{n}`"))
               .alias(n) for n in names]
    extra = [F.col("_rescued_data")] if "_rescued_data" in events.columns else []
    return events.select(*columns, F.col("op").alias(op_column),
                         F.col("source.lsn").alias(sequence_column),
                         F.col("ts_ms").alias(timestamp_column), *extra)


def _row_schema(row_schema: StructType | str) -> StructType:
    if isinstance(row_schema, StructType):
        return row_schema
    try:
        parsed = StructType.fromDDL(row_schema)
        if not isinstance(parsed, StructType):
            raise TypeError(type(parsed).__name__)
        return parsed
    except Exception as exc:  # noqa: BLE001 - Spark's ParseException
        raise HeadwaterError(
            "HW_INGEST_BAD_SCHEMA", f"envelope_schema: {row_schema!r} is not a column "
            "list.", "The row schema names the table's columns and types.",
            "Pass DDL such as 'id INT, name STRING', or a StructType.") from exc
