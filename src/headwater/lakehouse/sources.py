"""A SparkSession with every headwater source registered: ``format("delta")``,
``format("cloudFiles")`` and ``format("headwater.kafka")``. No lakehouse is attached here
(session.py does that), so the lakehouse's own modules can start a session too."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from headwater.ingest.registration import register_sources
from headwater.kafka import register_message_sources
from headwater.lakehouse.hooks import install_path_writer
from headwater.spark.session import build_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def start_session(master: str | None = None, app_name: str = "headwater",
                  conf: dict[str, Any] | None = None,
                  warehouse: str | os.PathLike[str] | None = None) -> SparkSession:
    """Start (or return) a session (see ``spark.session.build_session``) with the sources."""
    spark = build_session(master, app_name, conf, warehouse)
    register_sources(spark)
    register_message_sources(spark)
    install_path_writer()
    return spark
