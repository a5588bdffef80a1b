"""headwater's pipeline decorators: thin aliases over the active registry.

``@headwater.table`` and ``@dp.table`` (``from pyspark import pipelines as dp``) end in the same
:meth:`Registry.add_dataset` / :meth:`Registry.add_flow`; headwater's spelling adds what SDP
has no word for (output_mode, keys, keep_late_rows, expectations). Unlike SDP's decorators,
these return the function, so they stack with the ``expect*`` decorators in either order.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, overload

from headwater.errors import HeadwaterError
from headwater.lakehouse import active_lakehouse
from headwater.pipeline import model
from headwater.pipeline.cdc import cdc_flow
from headwater.pipeline.expectations import Expectation
from headwater.pipeline.fields import sink_fields, stored_fields
from headwater.pipeline.graph import current_graph
from headwater.pipeline.model import Location
from headwater.pipeline.registry import active_registry
from headwater.pipeline.snapshot import snapshot_flow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[F], F]
AnyDecorator = Decorator[Callable[..., Any]]
OUTPUT_MODES = ("append", "complete", "update")


def location_of(func: Callable[..., Any]) -> Location:
    """Where a definition function is written (its first decorator's line)."""
    code = getattr(func, "__code__", None)
    if code is None:
        return Location("<unknown>", 0)
    return Location(code.co_filename, code.co_firstlineno)


def _register(dataset: Callable[[Callable[..., Any], Location], model.Dataset], what: str,
              func: Callable[..., Any] | None,
              spark_conf: Mapping[str, str] | None = None) -> Any:
    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise HeadwaterError(
                "HW_PIPELINE_NOT_A_FUNCTION", f"@headwater.{what} decorates a "
                f"{type(f).__name__}, not a function.", "A definition is a function returning "
                "the DataFrame that computes the dataset.", "Decorate a `def`.")
        where = location_of(f)
        registry = active_registry(what, where)
        element = dataset(f, where)
        registry.add_dataset(element)
        registry.add_flow(model.Flow(name=element.name, target=element.name, func=f,
                                     location=where, spark_conf=_settings(spark_conf, where)))
        return f

    return register(func) if func is not None else register


def _settings(spark_conf: Mapping[str, str] | None, where: Location) -> dict[str, str]:
    """``spark_conf`` as a dict of strings (Spark settings are strings)."""
    if spark_conf is None:
        return {}
    if not isinstance(spark_conf, Mapping):
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"{where}: spark_conf is a {type(spark_conf).__name__}.",
            "spark_conf maps Spark setting names to values.",
            'Pass a dict, e.g. spark_conf={"spark.sql.shuffle.partitions": "4"}.')
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in spark_conf.items()}


@overload
def table(func: F) -> F: ...
@overload
def table(*, name: str | None = None,
          output_mode: Literal["append", "complete", "update"] | None = None,
          keys: Iterable[str] | None = None, partition_by: Iterable[str] | None = None,
          comment: str | None = None, table_properties: Mapping[str, str] | None = None,
          keep_late_rows: bool = False, schema: StructType | str | None = None,
          temporary: bool = False, spark_conf: Mapping[str, str] | None = None,
          cluster_by: Iterable[str] | None = None) -> AnyDecorator: ...
def table(func: Callable[..., Any] | None = None, *, name: str | None = None,
          output_mode: str | None = None,
          keys: Iterable[str] | None = None, partition_by: Iterable[str] | None = None,
          comment: str | None = None, table_properties: Mapping[str, str] | None = None,
          keep_late_rows: bool = False, schema: StructType | str | None = None,
          temporary: bool = False, spark_conf: Mapping[str, str] | None = None,
          cluster_by: Iterable[str] | None = None) -> Any:
    """A streaming table: the function returns a streaming DataFrame.

    name: default the function's name (``schema.table`` allowed).
    output_mode: "append"; "complete" rewrites the table each batch (aggregates); "update"
        MERGEs changed rows by ``keys`` (default: the aggregate's group keys). Default: append,
        except an aggregation without a watermark (Spark cannot append it), which rewrites the
        table each batch with the whole aggregate, as DLT does.
    partition_by, comment (default the docstring), table_properties: set when created.
    keep_late_rows: on a windowed aggregate with a watermark, rows Spark drops as late go to
        ``<table>__late`` instead of vanishing.
    schema: the table's columns (StructType or DDL); default the query's own schema.
    temporary: stored, but not published to the lakehouse's catalog (DLT's TEMPORARY / private
        table): only this pipeline reads it, by name; default False.
    spark_conf: Spark SQL settings for this table's query only (SDP's and DLT's spark_conf):
        in force while its DataFrame is defined and while its query starts, so its
        micro-batches and writer run with them; other flows do not see them. Default none.
    cluster_by: liquid clustering columns (instead of partition_by): OPTIMIZE clusters the
        table's files by them.
    """
    return _table(func, name=name, output_mode=output_mode, keys=keys,
                  partition_by=partition_by, comment=comment,
                  table_properties=table_properties, keep_late_rows=keep_late_rows,
                  schema=schema, temporary=temporary, spark_conf=spark_conf,
                  cluster_by=cluster_by)


def table_or_view(*, name: str | None = None, partition_by: Iterable[str] | None = None,
                  comment: str | None = None, table_properties: Mapping[str, str] | None = None,
                  schema: StructType | str | None = None, temporary: bool = False,
                  spark_conf: Mapping[str, str] | None = None,
                  cluster_by: Iterable[str] | None = None) -> AnyDecorator:
    """Databricks' ``@dlt.table``: a streaming table, or a materialized view when the
    function returns a batch DataFrame (decided when the graph evaluates it)."""
    def register(f: Callable[..., Any]) -> Any:
        return _table(f, name=name, partition_by=partition_by, comment=comment,
                      table_properties=table_properties, schema=schema, temporary=temporary,
                      spark_conf=spark_conf, kind_from_query=True, cluster_by=cluster_by)

    return register


def _table(func: Callable[..., Any] | None, *, name: str | None = None,
           output_mode: str | None = None, keys: Iterable[str] | None = None,
           partition_by: Iterable[str] | None = None, comment: str | None = None,
           table_properties: Mapping[str, str] | None = None, keep_late_rows: bool = False,
           schema: StructType | str | None = None, temporary: bool = False,
           spark_conf: Mapping[str, str] | None = None, kind_from_query: bool = False,
           cluster_by: Iterable[str] | None = None) -> Any:
    def build(f: Callable[..., Any], where: Location) -> model.Dataset:
        table_name = name or f.__name__
        if output_mode is not None and output_mode not in OUTPUT_MODES:
            raise HeadwaterError(
                "HW_OPTION_INVALID", f"{where}: output_mode={output_mode!r} for {table_name!r}.",
                "A streaming table writes appended rows, the complete result, or updated rows.",
                "Use 'append' (default), 'complete' or 'update'.")
        return model.StreamingTable(
            **stored_fields(table_name, where, comment or inspect.getdoc(f) or None,
                            table_properties, partition_by, cluster_by, schema, None),
            output_mode=output_mode,  # type: ignore[arg-type]
            keys=tuple(keys) if keys else None, keep_late_rows=bool(keep_late_rows),
            temporary=bool(temporary), kind_from_query=kind_from_query)

    return _register(build, "table", func, spark_conf)


@overload
def materialized_view(func: F) -> F: ...
@overload
def materialized_view(*, name: str | None = None, partition_by: Iterable[str] | None = None,
                      comment: str | None = None,
                      table_properties: Mapping[str, str] | None = None,
                      schema: StructType | str | None = None,
                      temporary: bool = False,
                      spark_conf: Mapping[str, str] | None = None,
                      cluster_by: Iterable[str] | None = None) -> AnyDecorator: ...
def materialized_view(func: Callable[..., Any] | None = None, *, name: str | None = None,
                      partition_by: Iterable[str] | None = None, comment: str | None = None,
                      table_properties: Mapping[str, str] | None = None,
                      schema: StructType | str | None = None, temporary: bool = False,
                      spark_conf: Mapping[str, str] | None = None,
                      cluster_by: Iterable[str] | None = None) -> Any:
    """A table recomputed from batch reads each run, committed as one overwrite.

    name, partition_by, comment (default the docstring), table_properties, schema, temporary,
    spark_conf (in force while it is recomputed), cluster_by: as for :func:`table`."""
    return _register(lambda f, where: model.MaterializedView(**stored_fields(
        name or f.__name__, where, comment or inspect.getdoc(f) or None, table_properties,
        partition_by, cluster_by, schema, None), temporary=bool(temporary)),
        "materialized_view", func, spark_conf)


@overload
def view(func: F) -> F: ...
@overload
def view(*, name: str | None = None, comment: str | None = None,
         spark_conf: Mapping[str, str] | None = None) -> AnyDecorator: ...
def view(func: Callable[..., Any] | None = None, *, name: str | None = None,
         comment: str | None = None, spark_conf: Mapping[str, str] | None = None) -> Any:
    """A named DataFrame other definitions read (also as a Spark temporary view); not stored.

    name: default the function's name. comment: default the docstring. spark_conf: Spark SQL
    settings in force while the view's DataFrame is defined (the flows reading it run with
    their own)."""
    return _register(lambda f, where: model.View(
        name=name or f.__name__, location=where, comment=comment or inspect.getdoc(f) or None),
        "view", func, spark_conf)


temporary_view = view


def append_flow(func: Callable[..., Any] | None = None, *, target: str, name: str | None = None,
                once: bool = False, spark_conf: Mapping[str, str] | None = None) -> Any:
    """One more streaming flow into the streaming table ``target`` (its own checkpoint).

    name: default the function's name. once: run the flow one time only (a backfill; its
    function may return a batch DataFrame). spark_conf: Spark SQL settings for this flow's
    query only, as for :func:`table`."""
    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        where = location_of(f)
        active_registry("append_flow", where).add_flow(model.Flow(
            name=name or f.__name__, target=target, func=f, location=where, once=bool(once),
            spark_conf=_settings(spark_conf, where)))
        return f

    return register(func) if func is not None else register


def create_streaming_table(name: str, *, comment: str | None = None,
                           table_properties: Mapping[str, str] | None = None,
                           partition_by: Iterable[str] | None = None,
                           schema: StructType | str | None = None,
                           output_mode: Literal["append", "complete", "update"] | None = None,
                           keys: Iterable[str] | None = None, temporary: bool = False,
                           spark_conf: Mapping[str, str] | None = None,
                           cluster_by: Iterable[str] | None = None) -> None:
    """A streaming table without a query of its own: append flows fill it (temporary: as
    for :func:`table`). spark_conf: Spark SQL settings for every flow into it (a flow's own
    spark_conf wins)."""
    where = caller_location()
    if output_mode is not None and output_mode not in OUTPUT_MODES:
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"{where}: output_mode={output_mode!r} for {name!r}.",
            "A streaming table writes appended rows, the complete result, or updated rows.",
            "Use 'append' (default), 'complete' or 'update'.")
    active_registry("create_streaming_table", where).add_dataset(model.StreamingTable(
        **stored_fields(name, where, comment, table_properties, partition_by, cluster_by,
                        schema, None), output_mode=output_mode, keys=tuple(keys) if keys else None,
        temporary=bool(temporary), spark_conf=_settings(spark_conf, where)))


def create_sink(name: str, format: str, options: Mapping[str, str] | None = None, *,
                comment: str | None = None) -> None:
    """An external destination that append flows (``append_flow(target=name)``) write to as
    a streaming write in ``format`` with ``options``, as SDP's ``dp.create_sink``.

    format: 'delta' (headwater's Delta writer, exactly once), a file format ('parquet', 'json',
        'csv', 'orc', 'text'; exactly once through Spark's file sink log), 'headwater.kafka'
        (at least once), or any data source with a streaming writer.
    options: the writer's options; file formats and delta need 'path' (a relative path is
        made absolute when the definitions load). comment: a description. Each flow keeps its
        checkpoint under the lakehouse; the sink itself is never created or truncated."""
    where = caller_location()
    active_registry("create_sink", where).add_dataset(
        model.Sink(**sink_fields(name, where, format, options, comment)))


def create_auto_cdc_flow(target: str, source: str, keys: Iterable[Any], sequence_by: Any,
                         apply_as_deletes: Any = None, apply_as_truncates: Any = None,
                         column_list: Iterable[Any] | None = None,
                         except_column_list: Iterable[Any] | None = None,
                         stored_as_scd_type: int | str = 1,
                         track_history_column_list: Iterable[Any] | None = None,
                         track_history_except_column_list: Iterable[Any] | None = None,
                         ignore_null_updates: bool = False, name: str | None = None,
                         tombstone_gc_seconds: int | None = None) -> None:
    """An AUTO CDC flow (Databricks' ``APPLY CHANGES``): the change events of the dataset
    ``source`` applied to the streaming table ``target`` (declare it with
    :func:`create_streaming_table`).

    keys: columns identifying a row. sequence_by: the column (or SQL / Column, or a list of
        columns compared in order) ordering each key's events; the newest wins, older events
        change nothing, a NULL is an error (HW_CDC_SEQUENCE_NULL), two different events with
        one key and sequence too (HW_CDC_DUPLICATE_SEQUENCE).
    apply_as_deletes: condition marking a delete (SQL or Column); deletes leave tombstones so
        older upserts arriving later do not resurrect the row, for ``tombstone_gc_seconds``
        (default two days; Databricks' pipelines.cdc.tombstoneGCThresholdInSeconds).
    apply_as_truncates: condition marking a truncate of the whole table (SCD type 1 only).
    column_list / except_column_list: the source columns the target keeps (keys always).
    stored_as_scd_type: 1 (default: the latest row per key) or 2 (history rows with
        ``__START_AT`` / ``__END_AT``, typed as the sequence; the current row's ``__END_AT``
        is NULL). track_history_column_list / track_history_except_column_list (SCD2): the
        columns whose change opens a new history row; others update the current row.
    ignore_null_updates: a NULL in an update keeps the stored value (default False).
    name: the flow's name (default: the target's).
    The target is created with ``delta.enableChangeDataFeed=true``.
    """
    where = caller_location()  # the user's line, also through headwater.dlt
    extra: dict[str, Any] = {} if tombstone_gc_seconds is None else {
        "tombstone_gc_seconds": int(tombstone_gc_seconds)}
    active_registry("create_auto_cdc_flow", where).add_flow(cdc_flow(
        target=target, source=source, name=name, location=where, keys=keys,
        sequence_by=sequence_by, apply_as_deletes=apply_as_deletes,
        apply_as_truncates=apply_as_truncates, column_list=column_list,
        except_column_list=except_column_list, stored_as_scd_type=stored_as_scd_type,
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list,
        ignore_null_updates=bool(ignore_null_updates), **extra))


apply_changes = create_auto_cdc_flow  # DLT's older name


SnapshotSourceArg = Union[str, Callable[[Any], "tuple[DataFrame, Any] | None"],
                          "tuple[DataFrame, Any]"]


def create_auto_cdc_from_snapshot_flow(
        target: str, source: SnapshotSourceArg, keys: Iterable[Any],
        stored_as_scd_type: int | str = 1,
        track_history_column_list: Iterable[Any] | None = None,
        track_history_except_column_list: Iterable[Any] | None = None,
        name: str | None = None) -> None:
    """An AUTO CDC FROM SNAPSHOT flow (Databricks' ``create_auto_cdc_from_snapshot_flow``,
    formerly ``apply_changes_from_snapshot``): each new full snapshot of ``source`` is diffed
    against the streaming table ``target`` (declare it with :func:`create_streaming_table`;
    this flow must be its only one) and the differences applied: new keys inserted, changed
    rows updated, keys missing from the snapshot deleted.

    source: a table or view name (each run reads its current rows; the version is the run's
        time), or a function ``next_snapshot_and_version(latest_snapshot_version)`` returning
        ``(DataFrame, version)`` or None, called with the last version applied (None the
        first time) and then with each version it returned, until None. The last version is
        kept, so the next run continues from it.
    keys: columns identifying a row. stored_as_scd_type: 1 (default) or 2 (history with
        ``__START_AT`` / ``__END_AT`` = snapshot versions; a deleted key's row is closed).
    track_history_column_list / track_history_except_column_list (SCD2): the columns whose
        change opens a new history row; other changes update the current row.
    name: the flow's name (default: the target's).
    """
    where = caller_location()
    active_registry("create_auto_cdc_from_snapshot_flow", where).add_flow(snapshot_flow(
        target=target, source=source, name=name, location=where, keys=keys,
        stored_as_scd_type=stored_as_scd_type,
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list))


apply_changes_from_snapshot = create_auto_cdc_from_snapshot_flow  # DLT's older name


# --- expectations --------------------------------------------------------------------------


def _expect(rules: Mapping[str, str], action: str) -> AnyDecorator:
    def add(f: Any) -> Any:
        if not callable(f):
            raise HeadwaterError(
                "HW_EXPECTATION_INVALID", f"@headwater.expect* decorates a {type(f).__name__}.",
                "Expectations attach to a definition function. SDP's @dp.table returns None, "
                "so an expectation written above it has nothing to attach to.",
                "Write the @headwater.expect* decorators below @dp.table (next to the def), or "
                "use @headwater.table.")
        # kept by the registry for the function (never set on it), folded into the flow
        active_registry("expect", location_of(f)).expect(
            f, [Expectation(n, c, action) for n, c in rules.items()])
        return f

    return add


def expect(name: str, condition: str) -> AnyDecorator:
    """Count rows failing ``condition`` (a SQL boolean); keep them."""
    return _expect({name: condition}, "warn")


def expect_or_drop(name: str, condition: str) -> AnyDecorator:
    """Drop rows failing ``condition`` into ``<table>__quarantine``, counted."""
    return _expect({name: condition}, "drop")


def expect_or_fail(name: str, condition: str) -> AnyDecorator:
    """Stop the flow when a row fails ``condition``, naming the rule, a row and the batch."""
    return _expect({name: condition}, "fail")


def expect_all(rules: Mapping[str, str]) -> AnyDecorator:
    """:func:`expect` for each ``name: condition``."""
    return _expect(dict(rules), "warn")


def expect_all_or_drop(rules: Mapping[str, str]) -> AnyDecorator:
    """:func:`expect_or_drop` for each ``name: condition``."""
    return _expect(dict(rules), "drop")


def expect_all_or_fail(rules: Mapping[str, str]) -> AnyDecorator:
    """:func:`expect_or_fail` for each ``name: condition``."""
    return _expect(dict(rules), "fail")


# --- reads ---------------------------------------------------------------------------------


def read_stream(name: str, read_change_feed: bool = False, **options: Any) -> DataFrame:
    """A stream over a pipeline dataset or lakehouse table (inside or outside a pipeline).

    read_change_feed: stream the table's change data feed (rows plus _change_type,
        _commit_version, _commit_timestamp) instead of its appends; default False. The
        table needs delta.enableChangeDataFeed=true.
    options: Delta source options (maxFilesPerTrigger, startingVersion, ...)."""
    if read_change_feed:
        options = {**options, "readChangeFeed": "true"}
    return _read(name, True, options)


def read(name: str, **options: Any) -> DataFrame:
    """A batch read of a pipeline dataset or lakehouse table (versionAsOf, timestampAsOf)."""
    return _read(name, False, options)


def _read(name: str, streaming: bool, options: dict[str, Any]) -> DataFrame:
    graph = current_graph()
    if graph is not None:
        return graph.read(name, streaming, options, caller_location())
    lake = active_lakehouse()
    if lake is None:
        raise HeadwaterError(
            "HW_LAKEHOUSE_NOT_ATTACHED", f"headwater.{'read_stream' if streaming else 'read'}({name!r}) "
            "was called with no lakehouse.", "Names are looked up in a lakehouse.",
            "Start the session with headwater.spark_session(lakehouse='path'), or create "
            "headwater.Lakehouse('path').")
    return lake.read_stream(name, **options) if streaming else lake.read(name, **options)


def caller_location() -> Location:
    """The user's file and line that called into headwater (skipping headwater's frames)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = inspect.currentframe()
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame = frame.f_back
    if frame is None:
        return Location("<unknown>", 0)
    return Location(frame.f_code.co_filename, frame.f_lineno)
