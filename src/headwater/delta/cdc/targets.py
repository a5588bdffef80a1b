"""AUTO CDC's two Delta tables (the target and ``<target>/_hw_cdc_state``): opened once per
batch, created on first use, and the target's one MERGE per batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import TableNotFoundError

from headwater.conf.storage import options_for
from headwater.delta.cdc import timeline as tl
from headwater.delta.constraints import Constraints, refuse_checks_on_deltalake
from headwater.delta.log import open_table
from headwater.delta.schema import arrow_schema, as_nullable, spark_schema
from headwater.delta.update_mode import as_table_arrow
from headwater.delta.write.checks import check_schema, refuse_deltalake_commit
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def open_or_none(uri: str) -> Any:
    """delta-rs' table at ``uri``, or None when there is none yet."""
    try:
        return open_table(uri)
    except TableNotFoundError:
        return None


def ensure_table(uri: str, schema: StructType, configuration: dict[str, str], where: str,
                  table: Any = None):
    """The Delta table at ``uri`` (``table``: already opened), created empty with ``schema``
    when missing; an existing table must have the columns the flow writes."""
    table = table if table is not None else open_or_none(uri)
    if table is None:
        return DeltaTable.create(uri, arrow_schema(as_nullable(schema)), mode="ignore",
                                 configuration=configuration or None,
                                 storage_options=options_for(uri))
    existing = spark_schema(table.schema().to_json())
    missing = {f.name.lower() for f in schema.fields} - {f.name.lower() for f in existing.fields}
    if missing:
        raise HeadwaterError(
            "HW_CDC_TARGET_MISMATCH", f"{where}: the table lacks the columns "
            f"{sorted(missing)} the flow writes (it has {', '.join(existing.fieldNames())}).",
            "AUTO CDC writes the selected source columns (SCD2: and __START_AT/__END_AT).",
            "Fix column_list / stored_as_scd_type, or full-refresh the table.")
    check_schema(uri, existing, as_nullable(schema), merge_schema=False)
    return table


def merge(table, data, on: list[str], schema: StructType, truncating: bool,
                  app_id: str, batch_id: int, guard: str | None = None
                  ) -> tuple[int | None, dict[str, Any]]:
    """One MERGE of ``data``'s rows by their ACTION, txn(app_id, batch_id): the new version
    and the MERGE's metrics. guard: a matched row changes only when its ``guard`` column
    (the sequence) is NULL or below the source row's."""
    if data.num_rows == 0 and not truncating:
        return None, {}
    uri = str(table.table_uri)
    refuse_checks_on_deltalake(table, uri, "AUTO CDC MERGE")
    refuse_deltalake_commit(table, uri, "AUTO CDC's MERGE", "Create the AUTO CDC target "
                            "without identity columns, clustering or column defaults.")
    action = data.column(tl.ACTION)
    body = as_table_arrow(data.drop_columns([tl.ACTION]), schema)
    # NOT NULL on the rows written (deletes carry only their keys), before deltalake's
    # MERGE, whose own check is a raw "Invalid data found"
    Constraints.of_table(table).check_arrow(
        body.filter(pc.equal(action, "upsert")), uri)
    source = body.append_column(tl.ACTION, action)
    columns = {tl.q(f.name): f"s.{tl.q(f.name)}" for f in schema.fields}
    # `=` where the source has no NULL (the same matches; delta-rs hash-joins on it)
    nulls = {n.lower(): source.column(n).null_count for n in source.column_names}
    match = " AND ".join(f"t.{tl.q(k)} {'<=>' if nulls[k.lower()] else '='} s.{tl.q(k)}"
                         for k in on)
    newer = "" if guard is None else \
        f" AND (t.{tl.q(guard)} IS NULL OR t.{tl.q(guard)} < s.{tl.q(guard)})"
    merger = (table.merge(source, match,
                          source_alias="s", target_alias="t",
                          commit_properties=CommitProperties(
                              app_transactions=[Transaction(app_id, batch_id)]))
              .when_matched_update(columns, predicate=f"s.{tl.ACTION} = 'upsert'{newer}")
              .when_matched_delete(predicate=f"s.{tl.ACTION} = 'delete'{newer}")
              .when_not_matched_insert(columns, predicate=f"s.{tl.ACTION} = 'upsert'"))
    if truncating:
        merger = merger.when_not_matched_by_source_delete()
    metrics = merger.execute()
    return table.version(), metrics
