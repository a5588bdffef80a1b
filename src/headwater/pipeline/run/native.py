"""Stateless Delta-to-Delta flows at native speed.

Such a flow's output for a micro-batch is its definition applied to that batch's rows, so
the batch can be read by Spark's parquet reader (not through Python) and the definition
re-applied to it. The stream (``hw_delta_files``) only keeps the Delta source's offsets in the
checkpoint; the files a batch covers are found on the driver from the offsets Spark logged
for it (:class:`BatchFiles`), so no Spark job and no Python worker runs to list them.
Expectations and late rows keep the streaming plan: their counts belong in the query's own
progress.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.delta.log import DeltaLog, FileEntry, normalize_uri
from headwater.delta.native_read import natively_readable
from headwater.delta.schema import spark_schema, strip_field_metadata
from headwater.delta.source import Offset, SourceOptions, SourcePlanner
from headwater.errors import HeadwaterError
from headwater.pipeline.run.flow_writer import write_table
from headwater.pipeline.run.hops import COMMIT_DRIVEN_TRIGGER, wait_options
from headwater.spark.jvm import analyzed_plan
from headwater.spark.offset_log import COMMITS, logged_offsets
from headwater.spark.plan import node_name, nodes

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from headwater.pipeline.graph import Graph, Read, ResolvedFlow
    from headwater.pipeline.run.progress import FlowResult

# Plan nodes that keep state across batches or need all rows at once: a flow with one cannot
# be re-applied batch by batch.
STATEFUL_NODES = {
    "Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "Join", "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPySpark",
    "EventTimeWatermark", "GlobalLimit", "LocalLimit", "Sort", "Window", "Distinct",
    "CollectMetrics", "Sample",
}


def native_input(graph: Graph, rf: ResolvedFlow) -> Read | None:
    """The one Delta stream a stateless flow reads, when the flow can run natively."""
    dataset = rf.dataset
    if dataset.expectations or dataset.keep_late_rows or rf.output_mode != "append" \
            or rf.flow.cdc is not None:  # AUTO CDC applies its batches through foreachBatch
        return None
    if rf.flow.sql is not None:
        return None  # spark.sql reads its tables itself: no batch can be substituted
    streams = [r for r in rf.reads if r.streaming]
    if len(streams) != 1:
        return None
    if any(k.lower() in ("readchangefeed", "readchangedata") for k, _ in streams[0].options):
        return None  # change rows are made by the Delta source, not read from data files
    source = graph.registry.datasets.get(streams[0].name)
    if source is not None and not source.stored:
        return None  # a view: its rows are a query, not files
    leaves = 0
    for node in nodes(analyzed_plan(rf.df)):
        if not node.isStreaming():
            continue
        if node_name(node) in STATEFUL_NODES:
            return None
        if node.children().size() == 0:
            leaves += 1
    if leaves != 1:
        return None  # another stream (files, rate, ...) feeds this flow too
    store = graph.store_for(streams[0].name)
    table = DeltaLog(store.path(streams[0].name)).table()
    # the stream names files only: their partition values (in the log) would be missing
    plain = not table.metadata().partition_columns
    return streams[0] if plain and natively_readable(table) else None


def start_native(graph: Graph, rf: ResolvedFlow, checkpoint: str, read: Read,
                 trigger: dict[str, Any], result: FlowResult,
                 auto_compact: bool = False, commit_wait: float | None = None
                 ) -> StreamingQuery:
    """Start ``rf`` reading ``read``'s files batch by batch; rows written go to ``result``.
    auto_compact, commit_wait: as for
    :func:`headwater.pipeline.run.flow_writer.start_stream` (the one stream here is a
    Delta table's: a commit wait makes the flow commit-driven)."""
    lake = graph.lakehouse
    spark = lake.spark
    source_path = graph.store_for(read.name).path(read.name)
    options = dict(read.options)
    if commit_wait:
        options.update(wait_options(commit_wait))
        trigger = COMMIT_DRIVEN_TRIGGER
        result.commit_driven = True
    files = (spark.readStream.format("hw_delta_files").option("path", source_path)
             .options(**options).load())
    # the schema headwater's Delta source reports, read here (no Python data source asked)
    schema = strip_field_metadata(spark_schema(DeltaLog(source_path).table().schema().to_json()))
    name = rf.dataset.name
    app_id = f"headwater-{rf.key}"
    listing = BatchFiles(source_path, options, checkpoint)

    def write_batch(batch: Any, batch_id: int) -> None:
        entries = listing.files(batch_id)
        if entries is None:  # offsets this driver cannot read back: the stream's own rows
            found = [(row.path, row.has_dv) for row in batch.collect()]
        else:
            found = [(entry.path, entry.has_dv) for entry in entries]
            result.report(batch_id, listing.details(entries))
        if any(has_dv for _, has_dv in found):
            raise HeadwaterError(
                "HW_NATIVE_READ_DV", f"Flow {rf.key}: {read.name} gained deletion vectors "
                "while the flow read it with Spark's parquet reader.",
                "Spark's reader cannot apply deletion vectors; the rows would come back.",
                f"Run the flow again: it then reads {read.name} through headwater's reader.")
        paths = [path for path, _ in found]
        if not paths:
            return  # no rows in, none out: an empty append commits nothing
        # the batch is planned and written on the pipeline's session: with the flow's
        # spark_conf, as a stream's micro-batch runs with the settings its query started with
        with graph.flow_conf(rf.dataset, rf.flow):
            rows = spark.read.schema(schema).parquet(*paths)
            df = graph.rebuild(rf, {read.name: rows})
            written = write_table(df, lake.path(name), "append", (app_id, batch_id),
                                  auto_compact=auto_compact)
        result.rows_written += written
        result.report(batch_id, {"output_rows": written})

    return (files.writeStream.queryName(rf.key).trigger(**trigger)
            .option("checkpointLocation", checkpoint).foreachBatch(write_batch).start())


def read_through(checkpoint: str, version: int) -> bool:
    """True when the native flow on ``checkpoint`` has committed a batch that read every file
    of its input up to ``version`` (its end offset is past that version: offsets move to
    the next version once a version is read whole)."""
    commits = Path(checkpoint) / COMMITS
    try:
        batches = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    except OSError:
        return False
    logged = logged_offsets(checkpoint, max(batches)) if batches else None
    if not logged or len(logged) != 1 or not isinstance(logged[0], dict):
        return False
    try:
        return Offset.from_dict(logged[0]).version > version
    except (KeyError, TypeError, ValueError):
        return False


class BatchFiles:
    """The data files each micro-batch of a native flow covers, as the stream's reader would
    list them, found on the driver: the batch's end offset is in the checkpoint's offset log
    (written before the batch runs), its start the previous batch's end.

    Batch 0 starts at the reader's initial offset, which Spark does not log; it is derived
    where the options make it certain (see :meth:`_initial`), else :meth:`files` answers None
    and the caller reads the stream's own rows.
    """

    def __init__(self, path: str, options: dict[str, str], checkpoint: str) -> None:
        self.checkpoint = Path(checkpoint)
        # the planner the stream's reader (delta.filelist) builds, on this driver
        log = DeltaLog(normalize_uri(path))
        table = log.table()
        self.options = SourceOptions.from_options({k.lower(): v for k, v in options.items()})
        self.planner = SourcePlanner(log, spark_schema(table.schema().to_json()),
                                     list(table.metadata().partition_columns),
                                     table.metadata().id, self.options)

    def files(self, batch_id: int) -> list[FileEntry] | None:
        """The files of ``batch_id`` in stream order; None when its offsets are unknown."""
        end = self._offset(batch_id)
        if end is None:
            return None
        start = self._offset(batch_id - 1) if batch_id > 0 else self._initial(end)
        if start is None:
            return None
        entries = self.planner.files_between(start, end)
        self.planner.forget_before(end.version)  # the next batch starts at ``end``
        return entries

    def _offset(self, batch_id: int) -> Offset | None:
        logged = logged_offsets(self.checkpoint, batch_id)
        if not logged or len(logged) != 1 or not isinstance(logged[0], dict):
            return None
        try:
            return Offset.from_dict(logged[0])
        except (KeyError, TypeError, ValueError):
            return None

    def _initial(self, end: Offset) -> Offset | None:
        """Where batch 0 started, given where it ended.

        A numeric ``startingVersion`` is the offset itself. Without a starting option the
        stream starts in the snapshot of the version it first saw, which may be older than
        the one the reader asks now; on a table the stream reads append-only, the snapshot
        of the last version ``end`` covers holds the same rows (the reader itself replays
        batch 0 this way, ``source._starting_within``). With ``ignoreDeletes`` /
        ``ignoreChanges`` / ``skipChangeCommits`` the commits in between may delete rows the
        older snapshot has, and ``startingVersion=latest`` / ``startingTimestamp`` depend
        on when the reader first asked: None then (the stream's own rows are read).
        """
        opts = self.options
        if opts.starting_timestamp is not None:
            return None
        if opts.starting_version is not None:
            text = str(opts.starting_version).strip()
            return Offset(end.table_id, int(text), -1, False) if text.isdigit() else None
        if opts.ignore_deletes or opts.ignore_changes or opts.skip_change_commits:
            return None
        covered = end.version if end.is_starting else end.version - 1
        return Offset(end.table_id, covered, -1, True)

    @staticmethod
    def details(entries: list[FileEntry]) -> dict[str, int]:
        """What the batch read: files, and rows when every file's stats count them (Spark's
        progress counts none: the stream's own rows are never read)."""
        counted = [json.loads(e.stats).get("numRecords") if e.stats else None
                   for e in entries]
        details = {"input_files": len(entries)}
        if all(isinstance(n, int) for n in counted):
            details["input_rows"] = sum(n for n in counted if n is not None)
        return details
