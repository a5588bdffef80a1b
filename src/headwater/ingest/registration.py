"""Registering headwater's data sources on a SparkSession: ``format("delta")``,
``format("cloudFiles")`` and the Delta file-list stream, plus the cleanSource listener.

It sits in ingest/, the lowest room that sees both the Delta and the file sources, so that
``read_files`` and ``headwater.spark_session`` share it without ingest importing the lakehouse.

Each session gets its own subclasses of the sources carrying the session's
``defaultParallelism`` (how many partitions a scan aims for): Spark pickles the class when it
is registered, so the value reaches the planning worker with it. That is the reason for the
subclasses: no environment variable, and nothing is set on Spark's objects; which sessions
are done is kept in a weak set here (an entry goes when its session is collected).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_registered: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def register_sources(spark: SparkSession) -> None:
    """Make ``format("delta")`` and ``format("cloudFiles")`` work on ``spark`` (once per
    session), with scans split for the session's parallelism, and clean ingested files
    (``clean_source``) when their batch commits."""
    from headwater.delta.datasource import DeltaDataSource
    from headwater.delta.filelist import DeltaFileListSource
    from headwater.ingest.clean import install_listener
    from headwater.ingest.source import FilesDataSource
    from headwater.spark.session import session_parallelism

    with _lock:
        if spark in _registered:
            return
        parallelism = session_parallelism(spark)
        for source in (DeltaDataSource, DeltaFileListSource, FilesDataSource):
            spark.dataSource.register(with_parallelism(source, parallelism))
        install_listener(spark)
        _registered.add(spark)


def with_parallelism(source: type, parallelism: int) -> type:
    """A subclass of ``source`` whose scans aim for ``parallelism`` partitions (same ``name()``)."""
    return type(f"{source.__name__}_p{parallelism}", (source,),
                {"parallelism": parallelism, "__module__": __name__})
