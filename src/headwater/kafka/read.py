"""One task's work: read records [start, end) of a partition into Arrow batches.

Runs on executors. The consumer lives for one task only: a consumer kept assigned to a
partition whose topic is deleted and recreated crashed the process (SIGSEGV in librdkafka
2.16.1 against Tansu, 3 of 3 runs), so none outlives its range.
"""

from __future__ import annotations

import gc
import time
import uuid
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
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
# Records asked of one consume() call. Each list is turned into columns right away, and a
# small one still sits in the CPU's cache then: with lists of 20,000 messages (about 8 MB of
# Message, bytes and str objects) every pass over a list and its freeing missed the cache;
# consume() and those passes took 0.82 us a record, 0.35 us with lists of 2,000 (measured;
# 500 to 5,000 measured alike).
CONSUME_ROWS = 2_000
# librdkafka prefetches a partition until queued.min.messages (100,000) wait in its queue, then
# stops fetching for fetch.queue.backoff.ms, 1000 by default: a task reading faster than that
# sat idle 0.2 s at a time, 1.1-1.6 s per 400,000 records (measured). A task reads its range
# as fast as it can, so the fetcher looks again after 10 ms. kafka.* options win.
_FETCH_DEFAULTS = {"fetch.queue.backoff.ms": "10"}


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka row schema: every column nullable, as Spark declares it."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


# Message's accessors, mapped over a whole consume() list: one C-level pass per field instead
# of a Python-level step per record (the loop per record was most of the client's CPU).
_ERROR, _OFFSET, _KEY, _VALUE, _TIMESTAMP, _HEADERS = (
    Message.error, Message.offset, Message.key, Message.value, Message.timestamp,
    Message.headers)


class _Columns:
    """Records of one partition gathered column by column, cut into Arrow batches.

    Each consume() list becomes Arrow/numpy columns at once, while its Message objects are
    still in the CPU's cache (see CONSUME_ROWS); a batch concatenates those chunks. A list of
    consecutive offsets (the common case) needs no per-record offset at all."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.clear()

    def __len__(self) -> int:
        return self.rows

    def clear(self) -> None:
        self.rows = 0
        self.key: list[pa.Array] = []
        self.value: list[pa.Array] = []
        self.offset: list[np.ndarray] = []
        self.times: list[np.ndarray] = []  # (confluent-kafka's timestamp type, ms) pairs
        self.headers: list = []

    def take(self, records: list, position: int, end: int) -> int:
        """Add the records of ``records`` (error-free, in offset order) at offsets
        [position, end); return the next position (``end`` once a record at or past it
        came)."""
        n = len(records)
        if not n:
            return position
        first, last = _OFFSET(records[0]), _OFFSET(records[-1])
        if last - first == n - 1:
            # Consecutive offsets, as offsets only go up in a partition's list (the bisect
            # below relies on it too): the range is known without reading every offset.
            lo = min(max(position - first, 0), n)
            hi = min(max(end - first, lo), n)
            taken = np.arange(first + lo, first + hi, dtype=np.int64)
        else:  # gaps (compaction, transaction markers)
            offsets = list(map(_OFFSET, records))
            lo = bisect_left(offsets, position)
            hi = bisect_left(offsets, end, lo)
            taken = np.array(offsets[lo:hi], np.int64)
        if lo < hi:
            if lo or hi < n:
                records = records[lo:hi]
            self.offset.append(taken)
            self.key.append(pa.array(list(map(_KEY, records)), pa.binary()))
            self.value.append(pa.array(list(map(_VALUE, records)), pa.binary()))
            self.times.append(np.fromiter(chain.from_iterable(map(_TIMESTAMP, records)),
                                          np.int64, 2 * (hi - lo)))
            if self.include_headers:  # Spark: null when there are none
                self.headers.extend(h or None for h in map(_HEADERS, records))
            self.rows += hi - lo
            position = int(taken[-1]) + 1
        return end if hi < n else position

    def batch(self, schema: pa.Schema, topic: str, partition: int) -> pa.RecordBatch:
        times = np.concatenate(self.times).reshape(-1, 2)
        batch = record_batch(
            schema, topic, partition, pa.concat_arrays(self.key), pa.concat_arrays(self.value),
            np.concatenate(self.offset), times[:, 0], times[:, 1],
            self.headers if self.include_headers else None)
        self.clear()
        return batch


def record_batch(schema: pa.Schema, topic: str, partition: int, key: pa.Array,
                 value: pa.Array, offset: np.ndarray, kind: np.ndarray, ms: np.ndarray,
                 headers: list | None) -> pa.RecordBatch:
    """Kafka rows as an Arrow batch of ``schema``; ``kind`` is confluent-kafka's timestamp
    type per record, ``ms`` its timestamp in ms. confluent-kafka's types (0 none, 1 create,
    2 log append) are Kafka's TimestampType ids (-1, 0, 1), which Spark shows, plus one; a
    record without a timestamp (type 0) has a null one."""
    n = len(offset)
    known = np.where(kind <= 2, kind, 0)
    arrays = [
        key, value, pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offset, pa.int64()),
        pa.array(ms * 1000, pa.int64(), mask=kind == 0).cast(schema.field("timestamp").type),
        pa.array((known - 1).astype(np.int32), pa.int32()),
    ]
    if headers is not None:
        arrays.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a consume() list is turned into columns.

    consume() makes one GC-tracked Message per record and timestamp() a tuple per record;
    those allocations set off collections that walk every live Message again (measured: the
    timestamp pass took 0.96 us a record with the collector on, 0.14 us with it off). Nothing
    here makes reference cycles; the collector runs as usual between calls."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _split_at_events(messages: list) -> list[tuple[list, object]]:
    """``messages`` as (records, the event after them or None): events (end of partition,
    offset reset, errors) are rare, so the common answer is the whole list and None."""
    # A KafkaError is true, and is never compared: its == raises for anything but an int
    # (errors.count(None) failed with SystemError on every list holding an event).
    if not any(map(_ERROR, messages)):
        return [(messages, None)]
    errors = list(map(_ERROR, messages))
    parts, start = [], 0
    for i, err in enumerate(errors):
        if err is not None:
            parts.append((messages[start:i], messages[i]))
            start = i + 1
    parts.append((messages[start:], None))
    return parts


def read_range(config: dict[str, str], r: OffsetRange, include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int, group_prefix: str
               ) -> Iterator[pa.RecordBatch]:
    """Arrow batches of records [r.start, r.end) of one partition, in offset order."""
    schema = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
    consumer_config = dict(config)
    consumer_config.setdefault("group.id", f"{group_prefix}-{uuid.uuid4()}")
    for name, value in _FETCH_DEFAULTS.items():
        consumer_config.setdefault(name, value)
    consumer_config.update({"enable.auto.commit": "false", "auto.offset.reset": "error",
                            "enable.partition.eof": "true"})
    consumer = new_client(Consumer, consumer_config)
    columns = _Columns(include_headers)
    position = r.start
    deadline = time.monotonic() + poll_timeout_ms / 1000.0
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        while position < r.end:
            with _collector_paused():
                wanted = min(CONSUME_ROWS, BATCH_ROWS - len(columns), r.end - position)
                messages = consumer.consume(num_messages=wanted, timeout=0.2)
                if messages:
                    position = _add(messages, columns, position, consumer, config, r,
                                    fail_on_data_loss)
            if messages:
                deadline = time.monotonic() + poll_timeout_ms / 1000.0
            elif time.monotonic() > deadline:
                raise _stalled(config, r, position, poll_timeout_ms)
            if len(columns) >= BATCH_ROWS:
                yield columns.batch(schema, r.topic, r.partition)
        if len(columns):
            yield columns.batch(schema, r.topic, r.partition)
    finally:
        consumer.close()


def _add(messages: list, columns: _Columns, position: int, consumer: Consumer,
         config: dict[str, str], r: OffsetRange, fail_on_data_loss: bool) -> int:
    """Add one consume() answer's records in [position, r.end) to ``columns``, acting on its
    events; return the next position (r.end when the range is done)."""
    for records, event in _split_at_events(messages):
        position = columns.take(records, position, r.end)
        if position >= r.end:
            return position
        if event is None:
            continue
        err = event.error()
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            # At the high watermark: offsets up to r.end that never came are gaps
            # (compaction, transaction markers), unless the log was truncated.
            if event.offset() >= r.end:
                return r.end
            continue
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            tp = TopicPartition(r.topic, r.partition, position)
            low, _ = consumer.get_watermark_offsets(tp, timeout=10)
            problem = (f"{r.topic}-{r.partition} offsets {position}..{low - 1} were "
                       f"deleted before this task read them")
            if fail_on_data_loss or low <= position:
                raise data_loss([problem])
            position = low
            consumer.assign([TopicPartition(r.topic, r.partition, low)])
            continue
        raise _client_error(config, err)
    return position


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
