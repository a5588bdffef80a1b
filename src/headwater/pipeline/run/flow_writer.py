"""A streaming table's flow: its stream started, and every micro-batch written through
foreachBatch.

Every flow writes through foreachBatch: Spark's own parquet writer writes the files and the
driver commits them with txn(flow, batch id), exactly once. A batch's rows go to the table
(appended, overwritten in complete mode, merged by key in update mode); rows an expectation
drops go to ``<table>__quarantine`` and rows behind the watermark to ``<table>__late``.

In complete mode each batch is the whole result (an aggregate declared complete, or one
without a watermark: see :mod:`headwater.pipeline.output_mode`), so the table and its
quarantine are both replaced, as a materialized view's are: the quarantine holds the groups
the expectations reject now, not one copy per batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import Observation

from headwater.conf.layout import LATE_SUFFIX, QUARANTINE_SUFFIX
from headwater.delta import autocompact
from headwater.delta.cdc import apply_changes_batch
from headwater.delta.cdc.apply import state_path
from headwater.delta.log import DeltaLog, normalize_uri, open_table
from headwater.delta.native_source import native_stream_leaf
from headwater.delta.update_mode import merge_batch
from headwater.delta.write.native import fault, write_native
from headwater.delta.write.request import WriteRequest
from headwater.lakehouse.names import parse_name
from headwater.pipeline import expectations as expect_mod
from headwater.pipeline.late import LateRows
from headwater.pipeline.run.hops import (
    COMMIT_DRIVEN_TRIGGER,
    commit_driven,
    wait_options,
    waits_for_some_commit,
)
from headwater.spark.plan import Relation, group_keys, swap_streams

log = logging.getLogger("headwater.delta.native")

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    from headwater.lakehouse import Lakehouse
    from headwater.pipeline.graph import Graph, ResolvedFlow
    from headwater.pipeline.run.progress import FlowResult



def start_stream(graph: Graph, rf: ResolvedFlow, checkpoint: str, trigger: dict[str, Any],
                 result: FlowResult, auto_compact: bool = False,
                 commit_wait: float | None = None) -> StreamingQuery:
    """Start ``rf``'s query on ``checkpoint``; each batch's counts go to ``result``.
    auto_compact: compact the tables it writes after commits (a table's
    ``delta.autoOptimize.autoCompact`` property wins).
    commit_wait: a continuous run's interval (seconds): when every stream of the flow is a
    Delta table or a local folder's files, the flow runs commit-driven (see
    :mod:`headwater.pipeline.run.hops`; ``result.commit_driven`` says whether it does)."""
    dataset = rf.dataset
    df = graph.rebuild(rf, stream_options=wait_options(commit_wait) if commit_wait else None)
    if commit_wait and commit_driven(df):
        trigger = COMMIT_DRIVEN_TRIGGER
        result.commit_driven = True
    elif commit_wait and waits_for_some_commit(df):
        df = graph.rebuild(rf)  # a stream beside Kafka or an object store's files: no wait
    # the Python Delta sources swapped for native ones (their options, the commit wait
    # included, carried over)
    df = native_streams(graph, df)
    rules = dataset.expectations
    if rules:
        df = expect_mod.observe(df, rules, dataset.name)
    late = None
    if dataset.keep_late_rows:
        late = LateRows.prepare(df, dataset.name, rf.output_mode)
        df = late.stream_df
    writer = (df.writeStream.queryName(rf.key).trigger(**trigger)
              .option("checkpointLocation", checkpoint))
    writer = writer.outputMode(rf.output_mode).foreachBatch(
        batch_writer(graph.lakehouse, rf, checkpoint, late, result, auto_compact))
    return writer.start()


def native_streams(graph: Graph, df: DataFrame) -> DataFrame:
    """``df`` with each stream of a lakehouse table read by the native Delta stream source
    (Spark's parquet reader reads each micro-batch) where the table allows it; the same
    offsets as the Python source's, so the flow's checkpoint carries on either way. The
    definitions were evaluated with Python sources (the graph reads their plans)."""
    lake = graph.lakehouse
    spark = lake.spark

    def native(relation: Relation, output: Any) -> Any:
        name = graph.names.name_of(relation)
        if name is None or not lake.exists(name):
            return None
        try:
            return native_stream_leaf(spark, str(lake.path(name)), dict(relation.options),
                                      output, (parse_name(name).source_name, name))
        except Exception:  # noqa: BLE001 - any doubt: the flow keeps the Python source
            log.debug("stream of %s: headwater's Python reader (kept in the flow)", name,
                      exc_info=True)
            return None

    return swap_streams(df, native)


def batch_writer(lake: Lakehouse, rf: ResolvedFlow, checkpoint: str,
                 late: LateRows | None, result: FlowResult, auto_compact: bool = False
                 ) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of ``rf``: late rows split off, expectations applied, the
    rest written in the table's output mode, each commit tagged (flow, batch id)."""
    dataset = rf.dataset
    name = dataset.name
    app_id = f"headwater-{rf.key}"
    rules = dataset.expectations
    drops = any(r.action == "drop" for r in rules)
    keys = dataset.keys
    whole = rf.output_mode == "complete"  # each batch is the whole result

    # Persisting would make Spark report the expectations' observed counts from the
    # caching job only; cache just for late rows, whose split re-reads the aggregate.
    cache = late is not None and not rules
    # An appending flow writes its table first, counting the dropped rows as it does, then
    # quarantines them only if there are any: no job of its own to learn that none were.
    quarantine_after = drops and not whole and rf.flow.cdc is None \
        and rf.output_mode != "update"

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        if cache:
            batch.persist()
        try:
            rows = batch
            if late is not None:
                rows, late_rows = late.split(batch, batch_id, checkpoint)
                result.late_rows += append_side(lake, late_rows, name + LATE_SUFFIX,
                                                app_id, batch_id, auto_compact)
            bad = counted = checked = None
            if quarantine_after:
                # the quarantine query is built only if the kept rows' write counted any
                checked, counted = rows, Observation()
                rows = expect_mod.kept(rows, rules, name, batch_id, validated=True,
                                       count_dropped=counted)
            elif rules:
                # the rules were checked against the stream's columns when it started
                rows, bad = expect_mod.split(rows, rules, name, batch_id, validated=True)
                if drops and whole:
                    result.quarantined = replace_side(
                        lake, bad, name + QUARANTINE_SUFFIX, app_id, batch_id, auto_compact)
                elif drops and not quarantine_after:
                    result.quarantined += append_side(
                        lake, bad, name + QUARANTINE_SUFFIX, app_id, batch_id, auto_compact)
            if rf.flow.cdc is not None:
                done = apply_changes_batch(rows, batch_id, lake.path(name), rf.flow.cdc, app_id)
                result.rows_written += done.deleted + max(done.upserted, done.history_rows)
                if done.applied:
                    result.add_cdc(batch_id, done.counts())
                    compact_cdc_tables(lake.path(name), auto_compact)
            elif rf.output_mode == "update":
                merge_keys = list(keys or group_keys(rf.df))
                merge_batch(rows, lake.path(name), merge_keys, app_id, batch_id,
                            auto_compact=auto_compact)
            else:
                mode = "overwrite" if whole else "append"
                written = write_table(rows, lake.path(name), mode, (app_id, batch_id),
                                      auto_compact=auto_compact)
                result.report(batch_id, {"output_rows": written})
                # complete mode rewrites the whole result: count the latest, not the sum
                result.rows_written = written if mode == "overwrite" else \
                    result.rows_written + written
            if counted is not None and checked is not None:
                dropped = expect_mod.dropped_count(counted)
                if dropped != 0:
                    result.quarantined += append_side(
                        lake, expect_mod.quarantined(checked, rules, batch_id),
                        name + QUARANTINE_SUFFIX, app_id, batch_id, auto_compact,
                        rows=dropped)
        finally:
            if cache:
                batch.unpersist()

    return write_batch


def append_side(lake: Lakehouse, df: DataFrame, name: str, app_id: str,
                batch_id: int, auto_compact: bool = False, rows: int | None = None) -> int:
    """Quarantined or late rows: a side table, created at the first such row. rows: how
    many ``df`` holds, when the caller counted them already (None: looked at here)."""
    if rows == 0 or (rows is None and df.isEmpty()):
        return 0
    lake.create_table(name, df.schema)
    return write_table(df, lake.path(name), "append", (app_id, batch_id),
                       auto_compact=auto_compact)


def replace_side(lake: Lakehouse, df: DataFrame, name: str, app_id: str,
                 batch_id: int, auto_compact: bool = False) -> int:
    """Quarantined rows of a table rewritten whole (complete mode): the side table replaced
    by this batch's, emptied when none is rejected any more; created at the first such row."""
    if not lake.exists(name):
        if df.isEmpty():
            return 0
        lake.create_table(name, df.schema)
    return write_table(df, lake.path(name), "overwrite", (app_id, batch_id),
                       auto_compact=auto_compact)


def write_table(df: DataFrame, path: str, mode: str, txn: tuple[str, int] | None = None,
                merge_schema: bool = True, auto_compact: bool = False) -> int:
    """Spark's parquet writer plus a Delta commit; the Python writer where a table needs it
    (a table on an object store). Returns the rows written (for the Python
    writer, read from its commit's file stats).

    Pipeline tables follow their query's schema: new columns (a file source's schema
    evolved) are added to the table; a changed type is still an error. auto_compact: compact
    small files after the commit unless the table's property says otherwise.

    By path: foreachBatch runs in a clone of the session taken at query start, which does not
    see the per-table data sources registered later.
    """
    written = write_native(df, WriteRequest(
        path=normalize_uri(path), mode=mode, txn=txn, merge_schema=merge_schema,
        auto_compact=auto_compact))
    if written is None:
        writer = (df.write.format("delta").mode(mode).option("mergeSchema", merge_schema)
                  .option("autoCompact", auto_compact)
                  # a flow's overwrite (complete mode) replaces its whole table, whatever the
                  # session's partitionOverwriteMode says (as on the native path)
                  .option("partitionOverwriteMode", "static"))
        if txn is not None:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
        before = _version(path)
        writer.save(path)
        fault("python_writer_after_commit", path)  # crash tests: Spark's commit log not yet
        return _rows_committed(path, txn, before)
    return written


def _version(path: str) -> int:
    """The newest version of the table at ``path``; -1 when there is none yet."""
    log = DeltaLog(path)
    return log.latest_version() if log.exists() else -1


def _rows_committed(path: str, txn: tuple[str, int] | None, before: int) -> int:
    """The rows this batch's commit added: the commit after version ``before`` carrying
    ``txn`` (an auto-compaction or another writer may have committed after it; without
    ``txn`` the first one after ``before`` that adds data, not a schema change or an
    OPTIMIZE); 0 when there is none (the batch was committed before: a replay writes
    nothing)."""
    log = DeltaLog(path)
    for version in range(before + 1, _version(path) + 1):
        actions = log.read_commit(version) or []
        if txn is None:
            mine = any(a["add"].get("dataChange", True) for a in actions if "add" in a)
        else:
            mine = any(a["txn"].get("appId") == txn[0] and a["txn"].get("version") == txn[1]
                       for a in actions if "txn" in a)
        if mine:
            return sum(int(json.loads(a["add"].get("stats") or "{}").get("numRecords", 0))
                       for a in actions if "add" in a)
    return 0


def compact_cdc_tables(target: str, auto_compact: bool) -> None:
    """An AUTO CDC target commits a MERGE per micro-batch, and so does its state table: both
    are compacted like any pipeline table (OPTIMIZE, dataChange=false: no change data)."""
    table = open_table(target)
    autocompact.compact_if_due(table, auto_compact)
    autocompact.compact_if_due(open_table(state_path(target)), auto_compact, settings_of=table)

