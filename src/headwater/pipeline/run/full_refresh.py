"""``--full-refresh``: rebuild tables from scratch, data and checkpoints.

Streaming tables downstream of a refreshed table are refreshed too: their checkpoints hold
offsets into table versions that no longer exist. Materialized views need nothing: they are
recomputed whole on every run. A sink (named, or downstream) gets its flows' checkpoints reset
only: its data belongs to the external system and is never truncated (as in SDP), so its flows
send every row again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from shutil import rmtree

from headwater.conf.layout import LATE_SUFFIX, QUARANTINE_SUFFIX
from headwater.pipeline.graph import Graph
from headwater.pipeline.model import SINK, TABLE
from headwater.spark.checkpoint_lock import CheckpointLock


def full_refresh(graph: Graph, targets: list[str], echo: Callable[[str], None] = print) -> Graph:
    """Drop ``targets`` (and the streaming tables that stream from them): tables, side tables
    and checkpoints; print what goes through ``echo``. Returns the graph built anew.

    Refused with HW_CHECKPOINT_IN_USE, before anything is deleted, while a running pipeline
    holds one of the flows' checkpoints.
    """
    chosen = graph.datasets_named(targets, "--full-refresh")
    # only streams keep offsets into a table: a stream-static join or a materialized view
    # reading it is left alone (rebuilding it could lose input its source no longer has)
    cascade = sorted({d for t in chosen for d in graph.downstream(t, streams_only=True)
                      if graph.registry.datasets[d].kind in (TABLE, SINK)} - set(chosen))
    echo(f"full refresh: {', '.join(chosen)}"
         + (f" (+ downstream streaming tables: {', '.join(cascade)})" if cascade else ""))
    lake = graph.lakehouse
    # Dropping would delete the checkpoint, lock file included, under a running query.
    locks = []
    try:
        for name in chosen + cascade:
            for rf in graph.flows_of(name):
                checkpoint = lake.checkpoint(name, rf.flow.name)
                if Path(checkpoint).is_dir():
                    locks.append(CheckpointLock(
                        checkpoint, f"headwater run --full-refresh: {rf.key}").acquire())
        for name in chosen + cascade:
            if graph.registry.datasets[name].stored:
                for table in (name, name + QUARANTINE_SUFFIX, name + LATE_SUFFIX):
                    lake.drop(table)
            elif graph.registry.datasets[name].kind == SINK:
                echo(f"full refresh: sink {name}: checkpoints reset, its data kept (its flows "
                     "send every row again)")
                rmtree(lake.checkpoint(name), ignore_errors=True)
    finally:
        for lock in locks:
            lock.release()
    graph.close()
    return Graph(graph.registry, lake).build()
