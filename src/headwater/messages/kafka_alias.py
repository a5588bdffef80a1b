"""``format("kafka")`` on readers is ``format("headwater.kafka")`` when Spark has no Kafka
connector, so Databricks' and Spark's Kafka code runs unchanged:
``spark.readStream.format("kafka").option("kafka.bootstrap.servers", ...).option("subscribe",
...)``.

Why not register the data source as "kafka": Spark 4.3 looks the name "kafka" up before any
Python data source, answers KAFKA_DATA_SOURCE_NOT_ENABLED without the spark-sql-kafka jar, and
``spark.dataSource.register`` refuses the name (DATA_SOURCE_ALREADY_EXISTS). So
``DataStreamReader.format`` and ``DataFrameReader.format`` are wrapped (once, class-level): the
name "kafka" (any case) becomes headwater's source unless the session's JVM has Spark's own
connector (``org.apache.spark.sql.kafka010.KafkaSourceProvider``), which then keeps the name.
Writers are left alone (a sink's format is mapped where the pipeline declares it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming.readwriter import DataStreamReader

from headwater.messages.kafka_source import FORMAT_NAME

SPARK_NAME = "kafka"
_CONNECTOR = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
_MARK = "_hw_kafka_alias"
_guard = threading.Lock()
_has_connector: dict[int, bool] = {}  # id of the JVM gateway -> Spark's connector is there


def install() -> None:
    """Wrap the readers' ``format`` (idempotent)."""
    with _guard:
        for cls in (DataStreamReader, DataFrameReader):
            current = cls.__dict__["format"]
            if not getattr(current, _MARK, False):
                cls.format = _format(current)  # type: ignore[method-assign]


def kafka_format(spark: Any, source: str, alias: str) -> str:
    """``alias`` for "kafka" when ``spark`` has no Kafka connector; ``source`` otherwise."""
    if not isinstance(source, str) or source.lower() != SPARK_NAME:
        return source
    return source if spark_has_connector(spark) else alias


def spark_has_connector(spark: Any) -> bool:
    """True when the session's JVM can load Spark's own Kafka source."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    key = id(spark.sparkContext._gateway)
    if key not in _has_connector:
        try:
            jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(_CONNECTOR)
            _has_connector[key] = True
        except Exception:  # noqa: BLE001 - ClassNotFoundException through Py4J
            _has_connector[key] = False
    return _has_connector[key]


def _format(original: Callable[..., Any]) -> Callable[..., Any]:
    def format(self: Any, source: str) -> Any:  # noqa: A001 (Spark's name)
        return original(self, kafka_format(self._spark, source, FORMAT_NAME))

    format.__doc__ = original.__doc__
    setattr(format, _MARK, True)
    return format
