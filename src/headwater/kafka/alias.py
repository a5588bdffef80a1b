"""``format("kafka")`` is ``format("headwater.kafka")`` when Spark has no Kafka connector, on
readers and writers, so Databricks' and Spark's Kafka code runs unchanged:
``spark.readStream.format("kafka").option("kafka.bootstrap.servers", ...).option("subscribe",
...)``, ``df.writeStream.format("kafka").option("topic", ...)``, ``df.write.format("kafka")``.

Why not register the data source as "kafka": Spark 4.3 looks the name "kafka" up before any
Python data source, answers KAFKA_DATA_SOURCE_NOT_ENABLED without the spark-sql-kafka jar, and
``spark.dataSource.register`` refuses the name (DATA_SOURCE_ALREADY_EXISTS). So ``format`` of
``DataStreamReader``, ``DataFrameReader``, ``DataStreamWriter`` and ``DataFrameWriter`` is
wrapped (class-level, the ``kafka`` rows of :mod:`headwater.spark.patches`): the name
"kafka" (any case) becomes headwater's source unless the session's JVM has Spark's own
connector (``org.apache.spark.sql.kafka010.KafkaSourceProvider``), which then keeps the name.
(``load(format=...)``, ``save(format=...)`` and ``start(format=...)`` call ``format`` too.)

A batch write has one more difference: Spark's Kafka sink takes the default save mode
(ErrorIfExists) as append, and refuses overwrite and ignore
(https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html, "Writing
the output of Batch Queries to Kafka"); Spark refuses ErrorIfExists for every Python data
source. So ``DataFrameWriter.save`` is wrapped too: into headwater's Kafka sink (by either
name), the default mode becomes append and overwrite / ignore are HW_KAFKA_SAVE_MODE.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from pyspark.sql.readwriter import DataFrameWriter

from headwater.kafka.sink import save_mode_refused
from headwater.kafka.source import FORMAT_NAME
from headwater.spark import patches
from headwater.spark.jvm import class_loadable, has_jvm_writer, writer_mode

SPARK_NAME = "kafka"
_CONNECTOR = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
# Batch writers whose format is headwater's Kafka sink (weak: writers are short-lived).
_kafka_writers: weakref.WeakSet[Any] = weakref.WeakSet()


def install() -> None:
    """Wrap the readers' and writers' ``format`` and ``DataFrameWriter.save`` (idempotent)."""
    patches.install(patches.KAFKA)


def kafka_format(spark: Any, source: str, alias: str) -> str:
    """``alias`` for "kafka" when ``spark`` has no Kafka connector; ``source`` otherwise."""
    if not isinstance(source, str) or source.lower() != SPARK_NAME:
        return source
    return source if spark_has_connector(spark) else alias


def spark_has_connector(spark: Any) -> bool:
    """True when the session's JVM can load Spark's own Kafka source."""
    return class_loadable(spark, _CONNECTOR)


def _format(original: Callable[..., Any]) -> Callable[..., Any]:
    def format(self: Any, source: str) -> Any:  # noqa: A001 (Spark's name)
        mapped = kafka_format(self._spark, source, FORMAT_NAME)
        if isinstance(self, DataFrameWriter):
            if isinstance(mapped, str) and mapped.lower() == FORMAT_NAME:
                _kafka_writers.add(self)
            else:
                _kafka_writers.discard(self)
        return original(self, mapped)

    format.__doc__ = original.__doc__
    return format


def _save(original: Callable[..., Any]) -> Callable[..., Any]:
    def save(self: Any, path: str | None = None, format: str | None = None,  # noqa: A002
             mode: str | None = None, partitionBy: Any = None,  # noqa: N803 (Spark's name)
             **options: Any) -> None:
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        if self in _kafka_writers:
            kafka_save_mode(self)
        return original(self, path, partitionBy=partitionBy, **options)

    save.__doc__ = original.__doc__
    return save


def kafka_save_mode(writer: Any) -> None:
    """Spark's Kafka sink's save modes on a Python data source: errorifexists (the default)
    writes as append; overwrite and ignore are refused, as Spark refuses them."""
    if not has_jvm_writer(writer):
        return
    mode = writer_mode(writer)
    if mode in ("errorifexists", "error"):
        writer.mode("append")
    elif mode != "append":
        raise save_mode_refused(mode)
