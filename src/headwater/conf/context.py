"""Facts lower rooms need about what is running, without importing the rooms that know them.

- The pipeline definition being evaluated: the pipeline sets it (a ContextVar, so concurrent
  threads and nested definitions each see their own) while it runs a definition function;
  ``read_files`` reads it to keep its schema and file index inside that dataset's storage.
- The Delta paths a definition reads by path (``format("delta").load(path)``, batch or
  stream): the readers record them while the pipeline evaluates a definition, so the pipeline
  finds a dataset read by path before its table exists from what was read, never from an
  error's text.
- Read options for the lakehouse tables and local folders a definition streams: a
  continuous pipeline run sets them while it rebuilds a flow (its commit wait, see
  pipeline/run/hops.py), and the table readers (``headwater.read_stream``,
  ``spark.readStream.table``) and the file stream's ``load`` (``format("cloudFiles")``,
  ``read_files``, of a local folder) add them.
- The lakehouse root: recorded in the session's runtime conf under :data:`LAKEHOUSE_ROOT_CONF`
  when a lakehouse is attached (Spark's cloned foreachBatch sessions inherit it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from headwater.conf.layout import LAKEHOUSE_ROOT_CONF, LAKEHOUSE_STATE_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class DefinitionContext:
    """dataset: the qualified name whose definition runs now.
    ingest_root: the folder where ``read_files`` keeps its state by default
    (``<checkpoint of the dataset>/_ingest``)."""

    dataset: str
    ingest_root: str


_definition: ContextVar[DefinitionContext | None] = ContextVar("headwater_definition",
                                                               default=None)


@contextlib.contextmanager
def defining(context: DefinitionContext) -> Iterator[DefinitionContext]:
    """Make ``context`` the current definition; the previous one comes back on exit."""
    token = _definition.set(context)
    try:
        yield context
    finally:
        _definition.reset(token)


def current_definition() -> DefinitionContext | None:
    """The definition being evaluated in this thread/context, if any."""
    return _definition.get()


_path_reads: ContextVar[list[str] | None] = ContextVar("headwater_path_reads", default=None)


@contextlib.contextmanager
def recording_path_reads() -> Iterator[list[str]]:
    """Collect, in the list given, the paths ``format("delta").load(path)`` reads while the
    block runs (see :func:`record_path_read`); the previous collection comes back on exit."""
    reads: list[str] = []
    token = _path_reads.set(reads)
    try:
        yield reads
    finally:
        _path_reads.reset(token)


def record_path_read(path: str) -> None:
    """A reader was asked for the Delta table at ``path`` (kept only inside
    :func:`recording_path_reads`)."""
    reads = _path_reads.get()
    if reads is not None:
        reads.append(path)


_stream_read_options: ContextVar[dict[str, str] | None] = ContextVar(
    "headwater_stream_read_options", default=None)


@contextlib.contextmanager
def adding_stream_read_options(options: dict[str, str]) -> Iterator[None]:
    """While the block runs, stream reads of lakehouse tables and of local folders' files
    get ``options`` too (see
    :func:`stream_read_options`); the previous ones come back on exit."""
    token = _stream_read_options.set(dict(options) or None)
    try:
        yield
    finally:
        _stream_read_options.reset(token)


def stream_read_options() -> dict[str, str]:
    """The options to add to a stream read of a lakehouse table now (usually none)."""
    return dict(_stream_read_options.get() or {})


def lakehouse_root(spark: SparkSession) -> str | None:
    """The root of the lakehouse attached to ``spark``, if one is."""
    return spark.conf.get(LAKEHOUSE_ROOT_CONF, None) or None


def lakehouse_state_dir(spark: SparkSession) -> str | None:
    """The local state folder (checkpoints, ``_ingest``) of the lakehouse attached to
    ``spark``: the root itself unless the root is on an object store."""
    return spark.conf.get(LAKEHOUSE_STATE_CONF, None) or lakehouse_root(spark)
