"""One task's work: read records [start, end) of a partition into Arrow batches.

Runs on executors. The consumer lives for one task only: a consumer kept assigned to a
partition whose topic is deleted and recreated crashed the process (SIGSEGV in librdkafka
2.16.1 against Tansu, 3 of 3 runs), so none outlives its range.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from headwater.errors import HeadwaterError
from headwater.kafka.client import error_name, new_client, unavailable
from headwater.kafka.offsets import OffsetRange, data_loss

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))
BATCH_ROWS = 20_000
# confluent-kafka's timestamp types -> Kafka's TimestampType ids, which Spark shows.
_TS_TYPE = {0: -1, 1: 0, 2: 1}


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka row schema: every column nullable, as Spark declares it."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class _Columns:
    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.clear()

    def clear(self) -> None:
        self.key, self.value, self.offset, self.ts, self.ts_type, self.headers = \
            [], [], [], [], [], []

    def add(self, msg) -> None:
        self.key.append(msg.key())
        self.value.append(msg.value())
        self.offset.append(msg.offset())
        kind, stamp = msg.timestamp()
        self.ts.append(stamp * 1000 if kind else None)
        self.ts_type.append(_TS_TYPE.get(kind, -1))
        if self.include_headers:
            self.headers.append(msg.headers() or None)  # Spark: null when there are none

    def batch(self, schema: pa.Schema, topic: str, partition: int) -> pa.RecordBatch:
        n = len(self.offset)
        arrays = [
            pa.array(self.key, pa.binary()), pa.array(self.value, pa.binary()),
            pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
            pa.array(self.offset, pa.int64()), pa.array(self.ts, schema.field("timestamp").type),
            pa.array(self.ts_type, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, schema.field("headers").type))
        self.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(config: dict[str, str], r: OffsetRange, include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int, group_prefix: str
               ) -> Iterator[pa.RecordBatch]:
    """Arrow batches of records [r.start, r.end) of one partition, in offset order."""
    schema = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
    consumer_config = dict(config)
    consumer_config.setdefault("group.id", f"{group_prefix}-{uuid.uuid4()}")
    consumer_config.update({"enable.auto.commit": "false", "auto.offset.reset": "error",
                            "enable.partition.eof": "true"})
    consumer = new_client(Consumer, consumer_config)
    tp = TopicPartition(r.topic, r.partition, r.start)
    columns = _Columns(include_headers)
    position = r.start
    deadline = time.monotonic() + poll_timeout_ms / 1000.0
    try:
        consumer.assign([tp])
        while position < r.end:
            messages = consumer.consume(num_messages=min(BATCH_ROWS, r.end - position),
                                        timeout=0.2)
            if not messages and time.monotonic() > deadline:
                raise _stalled(config, r, position, poll_timeout_ms)
            for msg in messages:
                err = msg.error()
                if err is None:
                    if msg.offset() >= r.end:
                        position = r.end
                        break
                    if msg.offset() < position:
                        continue
                    columns.add(msg)
                    position = msg.offset() + 1
                    continue
                code = err.code()
                if code == KafkaError._PARTITION_EOF:
                    # At the high watermark: offsets up to r.end that never came are gaps
                    # (compaction, transaction markers), unless the log was truncated.
                    if msg.offset() >= r.end:
                        position = r.end
                    continue
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low, _ = consumer.get_watermark_offsets(tp, timeout=10)
                    problem = (f"{r.topic}-{r.partition} offsets {position}..{low - 1} were "
                               f"deleted before this task read them")
                    if fail_on_data_loss or low <= position:
                        raise data_loss([problem])
                    position = low
                    consumer.assign([TopicPartition(r.topic, r.partition, low)])
                    continue
                raise _client_error(config, err)
            if len(columns.offset) >= BATCH_ROWS:
                yield columns.batch(schema, r.topic, r.partition)
            if messages:
                deadline = time.monotonic() + poll_timeout_ms / 1000.0
        if columns.offset:
            yield columns.batch(schema, r.topic, r.partition)
    finally:
        consumer.close()


def _stalled(config: dict, r: OffsetRange, position: int, timeout_ms: int) -> HeadwaterError:
    return HeadwaterError(
        "HW_KAFKA_UNAVAILABLE",
        f"No record of {r.topic}-{r.partition} arrived for {timeout_ms} ms; offsets "
        f"{position}..{r.end - 1} are still to be read from {config.get('bootstrap.servers')}.",
        "The broker is down or unreachable, or it reported offsets it cannot serve.",
        "Check the brokers; the query resumes from its checkpoint when restarted. Raise "
        "kafkaConsumer.pollTimeoutMs if the brokers are merely slow.")


def _client_error(config: dict, err) -> BaseException:
    exc = KafkaException(err)
    if error_name(exc).startswith("_") or err.retriable():
        return unavailable(config.get("bootstrap.servers", "?"), exc)
    return exc
