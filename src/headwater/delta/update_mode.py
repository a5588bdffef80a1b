"""Update output mode: MERGE each micro-batch's changed rows into a Delta table by key.

Why: Spark rejects update mode for Python data-source sinks, so headwater runs update mode
through ``foreachBatch``. An update-mode batch holds only the groups that changed (small), so
it is collected to Arrow on the driver and MERGEd with delta-rs in one commit that carries a
``txn`` (app id, batch id): a re-delivered batch finds its version committed and is skipped.

Keys match null-safely (``<=>``: a NULL key is a group of its own, as in ``groupBy``). Struct
keys such as the ``window`` of a window aggregation compare as whole structs: delta-rs
supports ``<=>`` on structs (checked with deltalake 1.6.6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltalake import CommitProperties, Transaction
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from headwater.delta import autocompact
from headwater.delta.commit import delta_rs_conflict
from headwater.delta.constraints import Constraints, refuse_checks_on_deltalake
from headwater.delta.log import normalize_uri, open_table
from headwater.delta.schema import arrow_schema, as_nullable, spark_schema
from headwater.delta.write.checks import check_schema, refuse_deltalake_commit
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

TARGET, SOURCE = "tgt", "src"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def merge_predicate(keys: list[str]) -> str:
    """``tgt.`k` <=> src.`k` AND ...`` (null-safe equality on every key)."""
    return " AND ".join(f"{TARGET}.{_quote(k)} <=> {SOURCE}.{_quote(k)}" for k in keys)


def _resolve_keys(keys: list[str], columns: list[str], path: str) -> list[str]:
    by_lower = {c.lower(): c for c in columns}
    missing = [k for k in keys if k.lower() not in by_lower]
    if not keys or missing:
        raise HeadwaterError(
            "HW_MERGE_KEYS_INVALID",
            f"MERGE into {path}: keys {missing or keys!r} are not columns of the batch "
            f"({', '.join(columns)}).",
            "Update mode MERGEs each changed row into the table by its key columns.",
            "Pass keys naming the grouping columns of the aggregation, e.g. ['window', 'k'].",
        )
    return [by_lower[k.lower()] for k in keys]


def as_table_arrow(data: pa.Table, table_schema: StructType) -> pa.Table:
    """Spark's Arrow types (timestamps in the session zone, field metadata) -> the table's
    own, under the table's column names (matched case-insensitively)."""
    table_columns = {f.name.lower(): f for f in table_schema.fields}
    fields = [table_columns[name.lower()] for name in data.column_names]
    target = arrow_schema(as_nullable(type(table_schema)(fields)))
    return data.rename_columns(target.names).cast(target)


def merge_batch(batch_df: DataFrame, path: str, keys: list[str], app_id: str,
                version: int, auto_compact: bool = False) -> bool:
    """MERGE ``batch_df`` into the Delta table at ``path`` by ``keys``, exactly once.

    False (nothing done) when the table already holds txn ``version`` (or later) of ``app_id``.
    True otherwise; an empty batch needs no commit. The table must exist. auto_compact:
    compact small files afterwards unless the table's ``delta.autoOptimize.autoCompact``
    says otherwise (default False: only the property decides).
    """
    uri = normalize_uri(str(path))
    key_columns = _resolve_keys(list(keys), batch_df.columns, uri)
    try:
        table = open_table(uri)
    except TableNotFoundError as exc:
        raise HeadwaterError(
            "HW_DELTA_TABLE_NOT_FOUND", f"MERGE target {uri} is not a Delta table.",
            "Update mode MERGEs into an existing table and never creates one (its schema "
            "and keys are a decision, not a side effect).",
            "Create the table first, e.g. spark.createDataFrame([], df.schema).write"
            ".format('delta').save(path).",
        ) from exc
    # deltalake's merge refuses it; never a "conflict"
    refuse_deltalake_commit(table, uri, "Update mode's MERGE",
                            "Write to this table in append or complete mode, or MERGE with "
                            "DeltaTable.merge in foreachBatch (headwater's own MERGE commits "
                            "to it).")
    done = table.transaction_version(app_id)
    if done is not None and done >= version:
        return False
    refuse_checks_on_deltalake(table, uri, "update-mode MERGE")

    table_schema = spark_schema(table.schema().to_json())
    data_schema = as_nullable(batch_df.schema)
    check_schema(uri, table_schema, data_schema, merge_schema=False)
    table_columns = {f.name.lower(): f for f in table_schema.fields}
    _resolve_keys(key_columns, [f.name for f in table_schema.fields], uri)

    data = batch_df.toArrow()
    if data.num_rows == 0:
        return True
    data = as_table_arrow(data, table_schema)
    # NOT NULL before deltalake's MERGE (its own check is a raw "Invalid data found")
    Constraints.of_table(table).check_arrow(data, uri)
    names = [table_columns[k.lower()].name for k in key_columns]
    try:
        (
            table.merge(data, merge_predicate(names), source_alias=SOURCE, target_alias=TARGET,
                        commit_properties=CommitProperties(
                            app_transactions=[Transaction(app_id, version)]))
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    except CommitFailedError as exc:  # another writer's conflicting commit won
        raise delta_rs_conflict(exc, "MERGE", uri, "HW_DELTA_COMMIT_CONFLICT") from exc
    if autocompact.enabled(table.metadata().configuration, auto_compact):
        table.update_incremental()
        autocompact.compact_if_due(table, auto_compact)
    return True
