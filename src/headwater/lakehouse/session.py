"""``headwater.spark_session()``: a SparkSession with Delta and file ingestion registered, and
optionally a lakehouse attached. It composes the lower rooms (spark, delta, ingest)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from headwater.conf import storage
from headwater.conf.layout import WAREHOUSE
from headwater.conf.location import location, state_folder
from headwater.ingest.registration import register_sources
from headwater.lakehouse.lakehouse import Lakehouse
from headwater.lakehouse.sources import start_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_session(
    master: str | None = None,
    app_name: str = "headwater",
    conf: dict[str, Any] | None = None,
    lakehouse: str | os.PathLike[str] | None = None,
    storage_options: dict[str, str] | None = None,
    lakehouse_state_dir: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Start (or return) a SparkSession with Delta Lake registered as ``format("delta")``.

    master: a Spark master URL; ``local[*]`` when None.
    app_name: the application name shown in the Spark UI; default ``"headwater"``.
    conf: extra Spark settings; they override headwater's defaults (UTC session time zone,
        quiet logs, no console progress bar, filter pushdown on, 8 shuffle partitions).
    lakehouse: a folder of Delta tables; every table in it is registered by name, so
        ``spark.table("bronze")``, ``readStream.table``, ``toTable`` and SQL work on them.
        ``headwater.Lakehouse(root)`` gives the same from an existing session. May be an
        object-store URI (``s3://bucket/lake``), with ``lakehouse_state_dir``.
    storage_options: object-store credentials for every ``s3://`` / ``az://`` / ``gs://``
        path (delta-rs keys such as ``AWS_REGION``; as ``[storage]`` in headwater.toml).
        Default: the environment's. Kept in memory only, never printed or logged.
        delta-spark's session settings ``spark.hadoop.fs.s3a.access.key``, ``.secret.key``,
        ``.session.token``, ``.endpoint``, ``.endpoint.region``,
        ``.connection.ssl.enabled`` (in ``conf``, spark-defaults or ``--conf``) count too,
        over ``[storage]``; ``storage_options`` win over them.
    lakehouse_state_dir: the lakehouse's local folder for checkpoints, run files and
        ``read_files`` state (``Lakehouse``'s ``state_dir``); default the lakehouse folder,
        which must then be local.

    Python workers use this interpreter, and Spark is stopped on every exit path
    (normal exit, exception, SIGTERM, Ctrl-C).
    """
    # Spark's managed-table folders (always empty: the data lives in the lakehouse).
    if storage_options is not None:
        storage.set_defaults(storage_options)

    warehouse = (state_folder(location(lakehouse), lakehouse_state_dir) / WAREHOUSE
                 if lakehouse else None)
    spark = start_session(master, app_name, conf, warehouse)
    # spark.hadoop.fs.s3a.access.key, ... (conf, spark-defaults, --conf): credentials for
    # s3:// paths too; the sources are registered again to carry them to the workers
    hadoop = storage.from_hadoop_conf({**dict(spark.sparkContext.getConf().getAll()),
                                       **(conf or {})})
    if hadoop:
        storage.add_defaults({**hadoop, **(storage_options or {})})
        register_sources(spark)
    if lakehouse is not None:
        Lakehouse(lakehouse, spark, state_dir=lakehouse_state_dir)
    return spark
