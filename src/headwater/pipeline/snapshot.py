"""AUTO CDC FROM SNAPSHOT flows in a pipeline (Databricks' ``create_auto_cdc_from_snapshot_flow``,
formerly ``apply_changes_from_snapshot``): where the snapshots come from, their versions, and
the flow's saved progress. The diff and the commit are :mod:`headwater.delta.cdc.snapshot`'s.

Sources, as Databricks takes them:

- a table or view name: each pipeline update reads its current rows as one snapshot; the
  version is the update's ingestion time (a UTC timestamp), so SCD2's ``__START_AT`` /
  ``__END_AT`` are timestamps;
- a function ``next_snapshot_and_version(latest_snapshot_version)`` returning ``(DataFrame,
  version)`` or ``None``: called with the last version applied (``None`` the first time), again
  with each version it returned, until it returns ``None``; versions are ints, floats,
  strings, dates or datetimes, and must increase;
- one ``(DataFrame, version)`` pair (the older ``snapshot_and_version=`` argument): applied
  when its version is above the last one.

The last version applied and the snapshot count are saved in the flow's checkpoint folder
(``headwater-snapshot.json``) after each commit, so the next run continues where this one
stopped. Each snapshot's commit carries txn(flow, snapshot number): after a crash between the
commit and the save, the next run is handed the same version again (a function is asked for
the snapshot after the saved version and returns the same one), finds its txn and only saves.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from headwater.conf.layout import SNAPSHOT_STATE
from headwater.delta.cdc.snapshot import ERROR_CLASS, SnapshotSpec
from headwater.delta.cdc.spec import END_AT, START_AT
from headwater.errors import HeadwaterError
from headwater.pipeline import model
from headwater.pipeline.model import NextSnapshot
from headwater.spark.active import data_frame

if TYPE_CHECKING:
    from headwater.lakehouse import Lakehouse
    from headwater.pipeline.model import Location


class Graph(Protocol):
    """What snapshot flows ask of the pipeline's graph (:class:`headwater.pipeline.graph.Graph`)."""

    lakehouse: Lakehouse
    # (target, flow) -> (latest, answer): a snapshot function's answer got while the graph
    # was built, handed to the run's first call with the same latest version
    snapshot_answers: dict[tuple[str, str], tuple[Any, tuple[DataFrame, Any] | None]]

    def read(self, name: str, streaming: bool, options: dict[str, Any],
             location: Location) -> DataFrame: ...

# Python version values and the Spark type __START_AT / __END_AT (and the state) take.
_VERSION_TYPES: dict[type, tuple[str, T.DataType]] = {
    int: ("long", T.LongType()), float: ("double", T.DoubleType()),
    str: ("string", T.StringType()), dt.datetime: ("timestamp", T.TimestampType()),
    dt.date: ("date", T.DateType()),
}


def _invalid(where: Location, what: str, why: str, fix: str, kind: str) -> HeadwaterError:
    return HeadwaterError("HW_CDC_SNAPSHOT_INVALID", f"{where}: {what}", why, fix,
                          error_class=f"{ERROR_CLASS}.{kind}")


def version_type(version: Any, where: Location) -> T.DataType:
    """The Spark type of a snapshot version (HW_CDC_SNAPSHOT_INVALID for NULL or others)."""
    if version is None:
        raise _invalid(where, "a snapshot came with the version None.",
                       "Each snapshot needs a version: it orders the snapshots and becomes "
                       "__START_AT / __END_AT in SCD type 2.",
                       "Return (DataFrame, version) with a version that is not None.",
                       "INVALID_TUPLE_NULL_SNAPSHOT_VERSION")
    for kind in (dt.datetime, dt.date, str, float, int):  # datetime before its base, date
        if isinstance(version, kind) and not isinstance(version, bool):
            return _VERSION_TYPES[kind][1]
    raise _invalid(where, f"the snapshot version {version!r} is a {type(version).__name__}.",
                   "Versions are compared to order the snapshots and stored as __START_AT / "
                   "__END_AT.", "Use an int, float, str, date or datetime version.",
                   "INVALID_SNAPSHOT_VERSION_TYPE")


def _encode(version: Any) -> dict[str, Any]:
    for kind in (dt.datetime, dt.date, str, float, int):
        if isinstance(version, kind):
            name = _VERSION_TYPES[kind][0]
            value = version.isoformat() if isinstance(version, dt.date) else version
            return {"type": name, "value": value}
    raise TypeError(version)  # version_type() checked it before


def _decode(saved: dict[str, Any]) -> Any:
    kind, value = saved["type"], saved["value"]
    if kind == "timestamp":
        return dt.datetime.fromisoformat(value)
    if kind == "date":
        return dt.date.fromisoformat(value)
    return {"long": int, "double": float, "string": str}[kind](value)


@dataclass(frozen=True)
class Progress:
    """What a snapshot flow has applied: the last version (None: nothing yet) and how many
    snapshots (the next one's txn number is ``count``)."""

    version: Any = None
    count: int = 0

    @staticmethod
    def load(checkpoint: str) -> Progress:
        path = Path(checkpoint) / SNAPSHOT_STATE
        if not path.is_file():
            return Progress()
        saved = json.loads(path.read_text())
        return Progress(_decode(saved["version"]), int(saved["count"]))

    def save(self, checkpoint: str) -> None:
        """Written whole or not at all (a temporary file renamed over the old one)."""
        folder = Path(checkpoint)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{SNAPSHOT_STATE}.tmp"
        tmp.write_text(json.dumps({"version": _encode(self.version), "count": self.count}))
        os.replace(tmp, folder / SNAPSHOT_STATE)


def ask_function(function: NextSnapshot, latest: Any, where: Location
                 ) -> tuple[DataFrame, Any] | None:
    """A snapshot function's next (snapshot, version) after ``latest``, checked; None at the
    end."""
    try:
        got = function(latest)
    except HeadwaterError:
        raise
    except Exception as exc:  # the user's function failed
        raise HeadwaterError(
            "HW_PIPELINE_DEFINITION_FAILED", f"{where}: the snapshot function failed "
            f"(asked for the snapshot after {latest!r}): {type(exc).__name__}: {exc}",
            "AUTO CDC FROM SNAPSHOT calls it for each next snapshot.",
            "Fix the function; it returns (DataFrame, version), or None when there is no "
            "newer snapshot.") from exc
    if got is None:
        return None
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], DataFrame)):
        raise _invalid(where, f"the snapshot function returned {type(got).__name__}, not "
                       "(DataFrame, version) or None.", "Each call hands over the next "
                       "snapshot and its version, or None when there is none.",
                       "Return (spark.read..., version) or None.", "INVALID_SNAPSHOT_VERSION")
    version_type(got[1], where)
    return got


def next_snapshot(graph: Graph, flow: model.Flow, latest: Any) -> tuple[DataFrame, Any] | None:
    """The flow's function's next (snapshot, version) after ``latest``: the answer
    :func:`snapshot_preview` got for the same ``latest`` while the graph was built (used
    once), or a new call."""
    assert flow.snapshot is not None and flow.snapshot.source.function is not None
    kept = graph.snapshot_answers.pop((flow.target, flow.name), None)
    if kept is not None and kept[0] == latest:
        return kept[1]
    return ask_function(flow.snapshot.source.function, latest, flow.location)


def _pair_as_function(pair: tuple[Any, Any], where: Location) -> NextSnapshot:
    """One (DataFrame, version) given up front: the next snapshot while its version is new."""
    if not (len(pair) == 2 and isinstance(pair[0], DataFrame)):
        raise _invalid(where, "snapshot_and_version is not a (DataFrame, version) pair.",
                       "It hands over one snapshot and its version.",
                       "Pass (spark.read.table(...), version), or a function.",
                       "INVALID_SNAPSHOT_VERSION")
    snapshot, version = pair

    def only(latest: Any) -> tuple[DataFrame, Any] | None:
        return (snapshot, version) if latest is None or version > latest else None

    return only


def snapshot_flow(*, target: str, source: Any, name: str | None, location: Location,
                  keys: Any, stored_as_scd_type: Any = 1,
                  track_history_column_list: Any = None,
                  track_history_except_column_list: Any = None, query: str | None = None,
                  column_list: Any = None, except_column_list: Any = None) -> model.Flow:
    """An AUTO CDC FROM SNAPSHOT flow into ``target``. source: a table or view name, a
    function ``next_snapshot_and_version(latest)``, or one (DataFrame, version) pair; query
    (SQL's ``FROM SNAPSHOT (query)``): a query whose rows are each run's snapshot.
    column_list / except_column_list (SQL's COLUMNS clause): the snapshot columns kept."""
    if query is not None:
        origin = model.SnapshotSource(query=query)
    elif isinstance(source, str) and source:
        origin = model.SnapshotSource(table=source)
    elif isinstance(source, tuple):
        origin = model.SnapshotSource(function=_pair_as_function(source, location))
    elif callable(source):
        origin = model.SnapshotSource(function=source)
    else:
        raise HeadwaterError(
            "HW_CDC_INVALID", f"{location}: AUTO CDC FROM SNAPSHOT into {target!r} got source "
            f"{source!r}.", "The source is a table or view name, or a function returning the "
            "next (DataFrame, version).",
            "Pass source='orders_snapshot' or source=next_snapshot_and_version.")
    try:
        spec = SnapshotSpec.build(keys, stored_as_scd_type, track_history_column_list,
                                  track_history_except_column_list, column_list,
                                  except_column_list)
    except HeadwaterError as exc:
        raise HeadwaterError(exc.code, f"{location}: {exc.what}", exc.why, exc.fix) from None

    def snapshots() -> DataFrame:  # never called: the graph asks the source itself
        raise AssertionError("a snapshot flow's source is read by the graph")

    snapshots.__name__ = f"auto_cdc_from_snapshot_into_{target}"
    return model.Flow(name=name or target, target=target, func=snapshots, location=location,
                      snapshot=model.SnapshotFlow(origin, spec))


# --- what the graph and the runner ask of a snapshot flow ----------------------------------


def periodic_snapshot(graph: Graph, flow: model.Flow) -> DataFrame:
    """A table or query source's rows now (a batch read, through the graph: its edges)."""
    assert flow.snapshot is not None
    source = flow.snapshot.source
    if source.table is not None:
        return graph.read(source.table, False, {}, flow.location)
    assert source.query is not None
    return graph.lakehouse.spark.sql(source.query)


def snapshot_preview(graph: Graph, target: str, flow: model.Flow) -> tuple[DataFrame, T.DataType]:
    """While the graph is built: the flow's next snapshot (its columns make the target's, its
    reads the graph's edges) and its version's type. A table or query is read now; a function
    is asked for the snapshot after the saved version (its answer kept for the run); when it
    has none, the target's own columns stand for it."""
    assert flow.snapshot is not None
    source = flow.snapshot.source
    if source.periodic:
        df = periodic_snapshot(graph, flow)
        if df.isStreaming:
            raise HeadwaterError(
                "HW_CDC_INVALID", f"{flow.location}: AUTO CDC FROM SNAPSHOT reads "
                f"{source.table or source.query!r}, a stream.", "A snapshot is a table's "
                "whole current content, read as a batch.",
                "Name a table (or a view over batch reads) as the source.")
        return df, T.TimestampType()
    lake = graph.lakehouse
    progress = Progress.load(lake.checkpoint(target, flow.name))
    assert source.function is not None
    got = ask_function(source.function, progress.version, flow.location)
    graph.snapshot_answers[(flow.target, flow.name)] = (progress.version, got)  # the run's first
    if got is not None:
        return got[0], version_type(got[1], flow.location)
    if progress.version is None and not lake.exists(target):
        raise HeadwaterError(
            "HW_CDC_SNAPSHOT_FIRST_EMPTY", f"{flow.location}: the snapshot function of "
            f"{flow.name!r} returned None for the first snapshot.",
            "The target's columns come from the first snapshot, and there is none yet.",
            "Make the function return (DataFrame, version) when called with None.",
            error_class=f"{ERROR_CLASS}.FIRST_SNAPSHOT_EMPTY")
    stored = lake.read(target).schema if lake.exists(target) else T.StructType()
    columns = [f for f in stored.fields if f.name not in (START_AT, END_AT)]
    kind = T.TimestampType() if progress.version is None else \
        version_type(progress.version, flow.location)
    return data_frame(lake.spark, [], T.StructType(columns)), kind
