"""Kafka as a Spark source and sink (``format("headwater.kafka")``, and
``format("kafka")`` on readers and writers when Spark has no Kafka connector: see alias.py).

Imports nothing above ``headwater.errors``; clients are created only where they are used.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from headwater.kafka import alias
from headwater.kafka.source import FORMAT_NAME, KafkaDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT_NAME", "KafkaDataSource", "register_message_sources"]

_registered: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def register_message_sources(spark: SparkSession) -> None:
    """Make ``format("headwater.kafka")`` work on ``spark`` (once per session), and
    ``format("kafka")`` on its readers and writers."""
    alias.install()
    with _lock:
        if spark in _registered:
            return
        spark.dataSource.register(KafkaDataSource)
        _registered.add(spark)
