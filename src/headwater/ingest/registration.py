"""Registering headwater's data sources on a SparkSession: ``format("delta")``,
``format("cloudFiles")`` and the Delta file-list stream. Nothing else is added to the session:
no streaming listener (cleanSource is the stream reader's, ``clean.py``).

It sits in ingest/, the lowest room that sees both the Delta and the file sources, so that
``read_files`` and ``headwater.spark_session`` share it without ingest importing the lakehouse.

Each session gets its own subclasses of the sources carrying the session's
``defaultParallelism`` (how many partitions a scan aims for): Spark pickles the class when it
is registered, so the value reaches the planning worker with it. That is the reason for the
subclasses: no environment variable, and nothing is set on Spark's objects; which sessions
are done is kept in a weak map here (an entry goes when its session is collected). The
storage defaults ([storage] in headwater.toml) travel the same way; a session is registered
again when they change.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from headwater.conf import storage
from headwater.delta.datasource import DeltaDataSource
from headwater.delta.filelist import DeltaFileListSource
from headwater.ingest import schema_location
from headwater.ingest.source import FilesDataSource
from headwater.spark.session import session_parallelism

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_registered: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def register_sources(spark: SparkSession) -> None:
    """Make ``format("delta")`` and ``format("cloudFiles")`` work on ``spark`` (once per
    session), with scans split for the session's parallelism."""
    defaults = storage.Defaults.current()
    schema_location.install()  # format("cloudFiles") without a schemaLocation gets one
    with _lock:
        if _registered.get(spark) == defaults:
            return
        parallelism = session_parallelism(spark)
        for source in (DeltaDataSource, DeltaFileListSource, FilesDataSource):
            spark.dataSource.register(with_parallelism(source, parallelism, defaults))
        _registered[spark] = defaults


def with_parallelism(source: type, parallelism: int,
                     defaults: storage.Defaults | None = None) -> type:
    """A subclass of ``source`` whose scans aim for ``parallelism`` partitions (same ``name()``),
    carrying the process's storage defaults ([storage]) to Spark's planning workers."""
    return type(f"{source.__name__}_p{parallelism}", (source,),
                {"parallelism": parallelism, "storage_defaults": defaults,
                 "__module__": __name__})
