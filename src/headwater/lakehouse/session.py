"""``headwater.spark_session()``: a SparkSession with Delta and file ingestion registered, and
optionally a lakehouse attached. It composes the lower rooms (spark, delta, ingest)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.spark.session import build_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


_SOURCES_KEY = "headwater.sources"


def spark_session(
    master: str | None = None,
    app_name: str = "headwater",
    conf: dict[str, Any] | None = None,
    lakehouse: str | os.PathLike | None = None,
) -> "SparkSession":
    """Start (or return) a SparkSession with Delta Lake registered as ``format("delta")``.

    master: a Spark master URL; ``local[*]`` when None.
    app_name: the application name shown in the Spark UI; default ``"headwater"``.
    conf: extra Spark settings; they override headwater's defaults (UTC session time zone,
        quiet logs, no console progress bar, filter pushdown on, 8 shuffle partitions).
    lakehouse: a folder of Delta tables, attached to the session: every table in it is
        registered by name, so ``spark.table("bronze")``, ``readStream.table``, ``toTable``,
        ``saveAsTable`` and ``spark.sql`` (CREATE/ALTER/DROP TABLE included) work on them. Get
        the :class:`~headwater.Lakehouse` object with ``headwater.Lakehouse.of(spark)``;
        ``headwater.Lakehouse(root, spark)`` attaches one to an existing session, and its
        ``detach()`` gives the session back Spark's own behaviour.

    Python workers use this interpreter, and Spark is stopped on every exit path
    (normal exit, exception, SIGTERM, Ctrl-C).
    """
    # Spark's managed-table folders (always empty: the data lives in the lakehouse).
    warehouse = Path(lakehouse).expanduser().resolve() / "_warehouse" if lakehouse else None
    spark = build_session(master, app_name, conf, warehouse)
    register_sources(spark)
    if lakehouse is not None:
        from headwater.lakehouse.tables import Lakehouse

        Lakehouse(lakehouse, spark)
    return spark


def register_sources(spark: "SparkSession") -> None:
    """Make ``format("delta")`` and ``format("cloudFiles")`` work on ``spark`` (once)."""
    # A session conf marker, not an attribute: cloned sessions (foreachBatch) inherit both
    # the marker and the registered sources.
    if spark.conf.get(_SOURCES_KEY, None) == "registered":
        return
    from headwater.delta.datasource import DeltaDataSource
    from headwater.delta.filelist import DeltaFileListSource
    from headwater.ingest.clean import install_listener
    from headwater.ingest.source import FilesDataSource

    for source in (DeltaDataSource, DeltaFileListSource, FilesDataSource):
        spark.dataSource.register(source)
    install_listener(spark)
    spark.conf.set(_SOURCES_KEY, "registered")
