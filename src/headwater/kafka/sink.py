"""Writing rows to Kafka: ``value`` and optional ``key``, ``topic``, ``partition``, ``headers``.

Each task produces its rows and waits until the brokers acknowledged every one (acks=all, an
idempotent producer) before it reports success; a failed delivery fails the task. So a
committed micro-batch is in Kafka at least once. Duplicates can appear when Spark retries a
task or replays a batch after a crash (see docs: Kafka, guarantees).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from headwater.conf.layout import KAFKA_FLUSH_TIMEOUT_ENV
from headwater.errors import HeadwaterError
from headwater.kafka.client import new_client
from headwater.kafka.options import SinkOptions

FLUSH_TIMEOUT_S = float(os.environ.get(KAFKA_FLUSH_TIMEOUT_ENV, "120"))  # a test hook

# One producer per configuration per Python worker, reused by later tasks (as Spark caches
# its Kafka producers): an idempotent producer's start costs ~0.5 s against Tansu. Workers
# are forked by Spark's daemon before this module is imported, and never fork afterwards.
_PRODUCERS: dict[tuple, object] = {}


def _producer(config: dict[str, str]):
    key = tuple(sorted(config.items()))
    if key not in _PRODUCERS:
        _PRODUCERS[key] = new_client(Producer, config)
    return key, _PRODUCERS[key]


def _bad_schema(what: str, fix: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_KAFKA_SINK_SCHEMA", what,
        "The Kafka sink writes the columns value (string or binary), and optionally key "
        "(string or binary), topic (string), partition (int) and headers "
        "(array<struct<key: string, value: binary>>), as Spark's Kafka sink does.", fix)


def check_schema(schema: StructType, topic_option: str | None) -> None:
    """The input columns the sink uses must have Spark's Kafka sink types."""
    types: dict[str, DataType] = {f.name.lower(): f.dataType for f in schema.fields}
    text_or_bytes = (StringType, BinaryType)
    if "value" not in types:
        raise _bad_schema("The data written to Kafka has no 'value' column.",
                          "Select or alias the message body as value, e.g. "
                          "to_json(struct(*)) AS value.")
    for name in ("value", "key"):
        if name in types and not isinstance(types[name], text_or_bytes):
            raise _bad_schema(f"Column '{name}' is {types[name].simpleString()}.",
                              f"Cast it: CAST({name} AS STRING) or to_json(...).")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise _bad_schema(f"Column 'topic' is {types['topic'].simpleString()}.",
                          "Cast it to string.")
    if "topic" not in types and not topic_option:
        raise _bad_schema("No topic: the data has no 'topic' column and the option 'topic' "
                          "is not set.", "Add .option('topic', 'name') or a topic column.")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise _bad_schema(f"Column 'partition' is {types['partition'].simpleString()}.",
                          "Cast it to int.")
    headers = types.get("headers")
    if headers is not None and not (
            isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]):
        raise _bad_schema(f"Column 'headers' is {headers.simpleString()}.",
                          "Build it as array(struct(k AS key, CAST(v AS BINARY) AS value)).")


def save_mode_refused(mode: str) -> HeadwaterError:
    """Spark's Kafka sink allows append and errorifexists (its default, also an append)."""
    return HeadwaterError(
        "HW_KAFKA_SAVE_MODE", f"Save mode {mode} is not allowed for Kafka.",
        "A Kafka topic is an append-only log: a batch write adds records; nothing can be "
        "overwritten or skipped (Spark's Kafka sink allows only append and errorifexists, its "
        "default, too).",
        "Remove .mode(...), or use .mode('append').")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


def _as_bytes(column: pa.ChunkedArray | pa.Array | None) -> list:
    if column is None:
        return []
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode("utf-8") for v in column.to_pylist()]
    return column.to_pylist()


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row; return the count once all are acknowledged, else raise."""
    cache_key, producer = _producer(options.config)
    try:
        return _produce(producer, options, batches)
    except BaseException:
        _PRODUCERS.pop(cache_key, None)  # a failed producer may be fenced or stuck: start over
        raise


def _produce(producer, options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None and len(failures) < 5:
            failures.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    count = 0
    for batch in batches:
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}

        def col(name: str, batch=batch, names=names):
            return batch.column(names[name]) if name in names else None
        values = _as_bytes(col("value"))
        keys = _as_bytes(col("key")) if "key" in names else [None] * len(values)
        topics = ([options.topic] * len(values) if options.topic
                  else col("topic").to_pylist())
        parts = col("partition").to_pylist() if "partition" in names else [None] * len(values)
        headers = col("headers").to_pylist() if "headers" in names else [None] * len(values)
        for i, value in enumerate(values):
            topic = topics[i]
            if topic is None:
                raise HeadwaterError(
                    "HW_KAFKA_SINK_SCHEMA", f"Row {count + i} has a null topic.",
                    "Every Kafka record needs a topic.",
                    "Fill the topic column, or set .option('topic', 'name').")
            kwargs = {}
            if parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topic, value=value, key=keys[i], on_delivery=delivered,
                                     **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.05)
                except KafkaException as exc:
                    raise HeadwaterError(
                        "HW_KAFKA_PRODUCE_FAILED", f"Kafka refused a record for {topic}: {exc}.",
                        "The topic or partition may not exist, or the record is too large.",
                        "Create the topic (with enough partitions) or fix the record.") from exc
            producer.poll(0)
        count += len(values)
    left = producer.flush(FLUSH_TIMEOUT_S)
    if left or failures:
        raise HeadwaterError(
            "HW_KAFKA_PRODUCE_FAILED",
            f"{left} record(s) were not acknowledged within {FLUSH_TIMEOUT_S:.0f} s"
            + (f"; failed: {'; '.join(failures)}" if failures else "") + ".",
            "The brokers did not accept every record, so this task fails and Spark retries "
            "it (records already written may then appear twice).",
            "Check the brokers and the topic; the query can be restarted from its checkpoint.")
    return count


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(produce_batches(self.options, iterator))


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(produce_batches(self.options, iterator))

    def commit(self, messages, batchId: int) -> None:
        """Every record was acknowledged before its task ended: nothing left to do."""

    def abort(self, messages, batchId: int) -> None:
        """Records of successful tasks stay in Kafka (at-least-once)."""
