"""Databricks' DLT Python names on headwater: ``import headwater.dlt as dlt`` runs DLT pipeline
code with only the import changed.

Every name is a thin alias over headwater's own decorators (:mod:`headwater.pipeline.api`), so
both spellings share one registry and one code path. What DLT means differently:

- ``@dlt.table`` is a streaming table when its function returns a stream, and a materialized
  view when it returns a batch DataFrame (decided when the graph resolves the query).
- ``dlt.read("LIVE.x")`` / ``dlt.read_stream("LIVE.x")``: the ``LIVE.`` prefix is dropped (so
  is it in ``spark.table`` / ``spark.readStream.table`` / ``spark.sql`` inside definitions).
- ``dlt.apply_changes`` / ``dlt.create_auto_cdc_flow`` go to headwater's AUTO CDC flow.
- ``@dlt.table(temporary=True)``: stored, not published to the lakehouse's catalog.
- Older names: ``@dlt.create_table`` (``@dlt.table``), ``@dlt.create_view`` (``@dlt.view``),
  ``dlt.create_target_table`` and ``dlt.create_streaming_live_table``
  (``dlt.create_streaming_table``).
- ``@dlt.view`` takes expectations (``@dlt.expect*`` below or above it): they are checked
  where the view is read, in each flow reading it (see
  :func:`headwater.pipeline.expectations.guard`).
- ``dlt.apply_changes_from_snapshot`` / ``dlt.create_auto_cdc_from_snapshot_flow`` go to
  headwater's AUTO CDC FROM SNAPSHOT flow (:mod:`headwater.pipeline.snapshot`).

- ``spark_conf=`` on every decorator and ``create_streaming_table``: Spark SQL settings "for
  the execution of this query only" (Databricks' words), in force while the query is defined
  and while it starts; its micro-batches keep them (see :mod:`headwater.spark.scoped_conf`).
  ``pipelines.trigger.interval`` there sets the flow's interval in a continuous run.
- ``dbutils`` in definition files: :mod:`headwater.dlt.dbutils`.

Refused with ``HW_PIPELINE_UNSUPPORTED`` (headwater has no equivalent): ``path=`` (tables live
in the lakehouse), ``row_filter``, expectations passed to
``create_streaming_table``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from headwater.dlt.dbutils import DBUtils
from headwater.errors import HeadwaterError
from headwater.pipeline import api
from headwater.pipeline.api import (
    create_sink,
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
)
from headwater.pipeline.live_schema import without_live
from headwater.pipeline.loader import register_dlt

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "append_flow", "apply_changes", "apply_changes_from_snapshot", "create_auto_cdc_flow",
    "create_auto_cdc_from_snapshot_flow", "create_sink", "create_streaming_live_table",
    "create_streaming_table", "create_table", "create_target_table", "create_view", "expect",
    "expect_all", "expect_all_or_drop", "expect_all_or_fail", "expect_or_drop", "expect_or_fail",
    "materialized_view", "read", "read_stream", "table", "view",
]


def _refuse(what: str, **given: Any) -> None:
    """HW_PIPELINE_UNSUPPORTED for each DLT option headwater has no equivalent for."""
    used = [k for k, v in given.items() if v not in (None, False, {}, [], ())]
    if used:
        where = api.caller_location()
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{where}: dlt.{what}({', '.join(f'{k}=...' for k in used)}"
            ") is not supported by headwater.",
            "headwater stores every dataset as a Delta table in the pipeline's lakehouse; "
            "external paths and row filters have no equivalent there.",
            f"Remove {', '.join(used)} (see docs/migrate/from-dlt.md).")


def table(query_function: Callable[..., Any] | None = None, *, name: str | None = None,
          comment: str | None = None, spark_conf: Mapping[str, str] | None = None,
          table_properties: Mapping[str, str] | None = None,
          partition_cols: Iterable[str] | None = None, cluster_by: Iterable[str] | None = None,
          path: str | None = None, schema: Any = None, row_filter: str | None = None,
          temporary: bool = False) -> Any:
    """DLT's ``@dlt.table``: a streaming table, or a materialized view when the function returns
    a batch DataFrame. name (default the function's), comment (default the docstring),
    table_properties, partition_cols, schema: as in DLT. temporary: stored, but not published
    to the lakehouse's catalog (only the pipeline reads it)."""
    _refuse("table", path=path, row_filter=row_filter)

    register = api.table_or_view(name=name, comment=comment, table_properties=table_properties,
                                 partition_by=partition_cols, schema=schema,
                                 temporary=bool(temporary), spark_conf=spark_conf,
                                 cluster_by=cluster_by)
    return register(query_function) if query_function is not None else register


create_table = table  # DLT's first name for @dlt.table


def materialized_view(query_function: Callable[..., Any] | None = None, *,
                      name: str | None = None, comment: str | None = None,
                      spark_conf: Mapping[str, str] | None = None,
                      table_properties: Mapping[str, str] | None = None,
                      partition_cols: Iterable[str] | None = None,
                      cluster_by: Iterable[str] | None = None, path: str | None = None,
                      schema: Any = None, row_filter: str | None = None,
                      temporary: bool = False) -> Any:
    """DLT's ``@dlt.materialized_view``: recomputed from batch reads each run."""
    _refuse("materialized_view", path=path, row_filter=row_filter)
    decorator = api.materialized_view(name=name, comment=comment,
                                      table_properties=table_properties,
                                      partition_by=partition_cols, schema=schema,
                                      spark_conf=spark_conf, cluster_by=cluster_by,
                                      temporary=bool(temporary))
    return decorator(query_function) if query_function is not None else decorator


def view(query_function: Callable[..., Any] | None = None, *, name: str | None = None,
         comment: str | None = None, spark_conf: Mapping[str, str] | None = None) -> Any:
    """DLT's ``@dlt.view``: a named query other datasets read; not stored. Its expectations
    are checked in each flow that reads it."""
    decorator = api.view(name=name, comment=comment, spark_conf=spark_conf)
    return decorator(query_function) if query_function is not None else decorator


create_view = view  # DLT's first name for @dlt.view


def read(name: str, **options: Any) -> DataFrame:
    """DLT's ``dlt.read``: a batch read of a pipeline dataset or lakehouse table."""
    return api.read(without_live(name), **options)


def read_stream(name: str, **options: Any) -> DataFrame:
    """DLT's ``dlt.read_stream``: a stream over a pipeline dataset or lakehouse table."""
    return api.read_stream(without_live(name), **options)


def create_streaming_table(name: str, comment: str | None = None,
                           spark_conf: Mapping[str, str] | None = None,
                           table_properties: Mapping[str, str] | None = None,
                           partition_cols: Iterable[str] | None = None,
                           cluster_by: Iterable[str] | None = None, path: str | None = None,
                           schema: Any = None,
                           expect_all: Mapping[str, str] | None = None,
                           expect_all_or_drop: Mapping[str, str] | None = None,
                           expect_all_or_fail: Mapping[str, str] | None = None,
                           row_filter: str | None = None, temporary: bool = False) -> None:
    """DLT's ``dlt.create_streaming_table``: a table filled by append or AUTO CDC flows."""
    _refuse("create_streaming_table", path=path,
            row_filter=row_filter, expect_all=expect_all,
            expect_all_or_drop=expect_all_or_drop, expect_all_or_fail=expect_all_or_fail)
    api.create_streaming_table(name, comment=comment, table_properties=table_properties,
                               partition_by=partition_cols, schema=schema,
                               spark_conf=spark_conf, cluster_by=cluster_by,
                               temporary=bool(temporary))


# DLT's earlier names for create_streaming_table
create_target_table = create_streaming_table
create_streaming_live_table = create_streaming_table


def append_flow(func: Callable[..., Any] | None = None, *, target: str,
                name: str | None = None, comment: str | None = None,
                spark_conf: Mapping[str, str] | None = None, once: bool = False) -> Any:
    """DLT's ``@dlt.append_flow``: one more streaming flow into the table ``target``."""
    return api.append_flow(func, target=target, name=name, once=once, spark_conf=spark_conf)


def create_auto_cdc_flow(target: str, source: str, keys: Any, sequence_by: Any,
                         where: Any = None, ignore_null_updates: bool = False,
                         apply_as_deletes: Any = None, apply_as_truncates: Any = None,
                         column_list: Any = None, except_column_list: Any = None,
                         stored_as_scd_type: int | str = 1,
                         track_history_column_list: Any = None,
                         track_history_except_column_list: Any = None,
                         flow_name: str | None = None, name: str | None = None,
                         once: bool = False) -> None:
    """DLT's ``dlt.apply_changes`` / ``dlt.create_auto_cdc_flow``: the change events of
    ``source`` applied by ``keys`` in ``sequence_by`` order to the streaming table ``target``
    (SCD type 1 or 2), through headwater's AUTO CDC flow."""
    _refuse("create_auto_cdc_flow", where=where, once=once)
    args: dict[str, Any] = dict(
        target=target, source=source, keys=keys, sequence_by=sequence_by,
        apply_as_deletes=apply_as_deletes, column_list=column_list,
        except_column_list=except_column_list, stored_as_scd_type=stored_as_scd_type,
        name=flow_name or name, track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list)
    api.create_auto_cdc_flow(**args, apply_as_truncates=apply_as_truncates,
                             ignore_null_updates=ignore_null_updates)


apply_changes = create_auto_cdc_flow


def create_auto_cdc_from_snapshot_flow(target: str, source: Any = None, keys: Any = None,
                                       stored_as_scd_type: int | str = 1,
                                       track_history_column_list: Any = None,
                                       track_history_except_column_list: Any = None,
                                       snapshot_and_version: Any = None,
                                       name: str | None = None, once: bool = False) -> None:
    """DLT's ``dlt.create_auto_cdc_from_snapshot_flow`` / ``dlt.apply_changes_from_snapshot``:
    each new snapshot of ``source`` (a table or view name, or a function
    ``next_snapshot_and_version(latest_version)`` returning ``(DataFrame, version)`` or None)
    diffed against ``target`` by ``keys`` and applied as SCD type 1 or 2. snapshot_and_version:
    the older name of ``source`` (a function, or one (DataFrame, version) pair)."""
    _refuse("create_auto_cdc_from_snapshot_flow", once=once)
    if source is not None and snapshot_and_version is not None:
        raise HeadwaterError(
            "HW_CDC_INVALID", f"{api.caller_location()}: both source and snapshot_and_version "
            "were given.", "snapshot_and_version is the older name of source.",
            "Pass one of them.")
    api.create_auto_cdc_from_snapshot_flow(
        target=target, source=source if source is not None else snapshot_and_version,
        keys=keys, stored_as_scd_type=stored_as_scd_type,
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list, name=name)


apply_changes_from_snapshot = create_auto_cdc_from_snapshot_flow


# What ``import dlt`` and ``dbutils`` are in definition files: the loader (a room below) is
# told here, never imports this package itself.
register_dlt(sys.modules[__name__], DBUtils)
