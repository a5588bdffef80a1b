"""Spark's Kafka options, parsed strictly (keys arrive lower-cased from Spark).

Source options (Spark's names):
- ``kafka.bootstrap.servers`` (required) and any other ``kafka.<librdkafka property>``: passed
  to confluent-kafka / librdkafka with the ``kafka.`` prefix removed (a task's consumer sets
  ``fetch.queue.backoff.ms`` to 10 unless given: see :mod:`headwater.kafka.read`).
- exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular
  expression matched against the whole topic name), ``assign`` (JSON ``{"t":[0,1]}``).
- ``startingOffsets``: ``earliest``, ``latest`` or JSON ``{"t":{"0":23,"1":-2}}`` (-2 earliest,
  -1 latest). Default ``latest`` for streams, ``earliest`` for batch reads.
- ``startingTimestamp`` (ms since epoch, all partitions) / ``startingOffsetsByTimestamp``
  (JSON ``{"t":{"0":ms}}``): win over ``startingOffsets``.
- ``endingOffsets`` (batch only): ``latest`` (default) or JSON (-1 latest); ``endingTimestamp``.
- ``maxOffsetsPerTrigger``: cap of records per micro-batch, spread over partitions by size.
- ``minPartitions``: split offset ranges so a batch has at least this many tasks.
- ``failOnDataLoss`` (default true): fail when offsets were deleted, truncated or reset.
- ``includeHeaders`` (default false): add the ``headers`` column.
- ``groupIdPrefix`` (default ``spark-kafka-source``): prefix of the generated consumer group.
- ``kafkaConsumer.pollTimeoutMs`` (default 120000): how long a task waits for records.
- ``fetchOffset.numRetries`` (default 3) / ``fetchOffset.retryIntervalMs`` (default 10): retries
  of the driver's offset and metadata requests; headwater adds ``fetchOffset.timeoutMs``
  (default 30000), the time one such request may take.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from headwater.conf.options import parse_bool, parse_int
from headwater.errors import HeadwaterError
from headwater.kafka.security import librdkafka_config

EARLIEST = -2
LATEST = -1

# Spark refuses these: the source manages offsets and bytes itself.
_SOURCE_FORBIDDEN = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "the checkpoint holds the offsets; nothing is committed to Kafka",
    "key.deserializer": "key and value are always returned as binary",
    "value.deserializer": "key and value are always returned as binary",
    "interceptor.classes": "Java interceptors do not exist in librdkafka",
}
_SINK_FORBIDDEN = {
    "key.serializer": "key and value are written as the bytes of the key/value columns",
    "value.serializer": "key and value are written as the bytes of the key/value columns",
}


# Spark's source options headwater does not implement: refused, never silently ignored.
_SOURCE_NOT_IMPLEMENTED = {
    "minoffsetspertrigger": ("minOffsetsPerTrigger", "headwater starts a micro-batch whenever "
                             "records are waiting; it never holds one back to gather more"),
    "maxtriggerdelay": ("maxTriggerDelay", "it only bounds how long minOffsetsPerTrigger "
                        "holds a batch back, which headwater does not do"),
    "maxrecordsperpartition": ("maxRecordsPerPartition", "offset ranges are split only by "
                               "minPartitions"),
}


def _not_implemented(option: str, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_KAFKA_OPTION_UNSUPPORTED",
        f"The Kafka option {option} is not supported by headwater's Kafka source.",
        f"It changes how Spark's own connector plans reads, and {why}.",
        f"Remove .option('{option}', ...) (minPartitions and maxOffsetsPerTrigger are "
        "supported).")


def _invalid(name: str, value: Any, why: str, fix: str) -> HeadwaterError:
    return HeadwaterError("HW_OPTION_INVALID", f"Kafka option {name}={value!r} is not valid.",
                          why, fix)


def parse_positive(name: str, value: str | None) -> int | None:
    """A positive whole number, or None when not set (conf/options.py does the parsing)."""
    return parse_int(name, value, None, minimum=1)


def client_config(options: dict[str, str], forbidden: dict[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix, for librdkafka."""
    config = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    if not config.get("bootstrap.servers"):
        raise HeadwaterError(
            "HW_OPTION_INVALID", "The Kafka option kafka.bootstrap.servers is missing.",
            "headwater needs to know which brokers to connect to.",
            "Add .option('kafka.bootstrap.servers', 'host1:9092,host2:9092').")
    for key, why in forbidden.items():
        if key in config:
            raise _invalid(f"kafka.{key}", config[key], f"It is not supported: {why}.",
                           f"Remove kafka.{key}.")
    return librdkafka_config(config)


def parse_partition_json(name: str, text: str) -> dict[tuple[str, int], int]:
    """``{"t":{"0":23}}`` -> {("t", 0): 23}; the format of Spark's offsets and timestamps."""
    try:
        data = json.loads(text)
        result = {(str(topic), int(part)): int(value)
                  for topic, parts in data.items() for part, value in parts.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise _invalid(name, text, f"It is neither a keyword nor JSON per partition ({exc}).",
                       'Use earliest, latest or JSON like {"topic":{"0":23,"1":-2}}.'
                       ) from exc
    return result


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions a query reads: exactly one of the three strategies."""

    kind: str  # "subscribe" | "subscribepattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribepattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


def parse_subscription(options: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise HeadwaterError(
            "HW_OPTION_CONFLICT" if given else "HW_OPTION_INVALID",
            f"A Kafka read needs exactly one of subscribe, subscribePattern, assign; got "
            f"{given or 'none'}.",
            "They are three different ways to say which topics to read.",
            "Keep one, e.g. .option('subscribe', 'events').")
    kind = given[0]
    value = options[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise _invalid("subscribe", value, "No topic was named.", "Name a topic.")
        return Subscription(kind, topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise _invalid("subscribePattern", value, f"Not a regular expression: {exc}.",
                           "Use e.g. 'events-.*'.") from exc
        return Subscription(kind, pattern=value)
    try:
        data = json.loads(value)
        assigned = tuple(sorted((str(t), int(p)) for t, parts in data.items() for p in parts))
    except (ValueError, AttributeError, TypeError) as exc:
        raise _invalid("assign", value, f"It must be JSON of topics to partitions ({exc}).",
                       'Use e.g. {"events":[0,1]}.') from exc
    if not assigned:
        raise _invalid("assign", value, "No partition was named.", 'Use e.g. {"events":[0,1]}.')
    return Subscription(kind, assigned=assigned)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: a keyword, offsets per partition, or timestamps."""

    keyword: str | None = None  # "earliest" | "latest"
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamps: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None  # one timestamp for every partition


def _offset_spec(options: dict[str, str], prefix: str, default: str,
                 allowed: tuple[str, ...]) -> OffsetSpec:
    by_ts = options.get(f"{prefix}offsetsbytimestamp")
    one_ts = options.get(f"{prefix}timestamp")
    if by_ts:
        return OffsetSpec(timestamps=parse_partition_json(f"{prefix}OffsetsByTimestamp", by_ts))
    if one_ts:
        try:
            return OffsetSpec(timestamp=int(one_ts))
        except ValueError as exc:
            raise _invalid(f"{prefix}Timestamp", one_ts, "It is milliseconds since the epoch.",
                           "Use e.g. 1700000000000.") from exc
    value = options.get(f"{prefix}offsets", default).strip()
    if value.lower() in allowed:
        return OffsetSpec(keyword=value.lower())
    if value.lower() in ("earliest", "latest"):
        raise _invalid(f"{prefix}Offsets", value,
                       f"'{value}' makes no sense here (a batch read starts before it ends).",
                       f"Use one of {', '.join(allowed)} or JSON offsets.")
    offsets = parse_partition_json(f"{prefix}Offsets", value)
    return OffsetSpec(offsets=offsets)


@dataclass(frozen=True)
class SourceOptions:
    config: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    group_prefix: str
    poll_timeout_ms: int
    retries: int
    retry_interval_ms: int
    request_timeout_ms: int

    @classmethod
    def parse(cls, options: dict[str, str], streaming: bool) -> SourceOptions:
        options = {k.lower(): v for k, v in options.items()}
        for key, (name, why) in _SOURCE_NOT_IMPLEMENTED.items():
            if key in options:
                raise _not_implemented(name, why)
        strategy = options.get("startingoffsetsbytimestampstrategy", "latest").lower()
        if strategy != "latest":
            raise _invalid("startingOffsetsByTimestampStrategy", strategy,
                           "headwater starts a partition without a record at or after the "
                           "starting timestamp at its end, which is Spark's 'latest' strategy; "
                           "Spark's default 'error' (fail instead) is not implemented.",
                           "Set it to 'latest', or remove it.")
        ending = (_offset_spec(options, "ending", "latest", ("latest",)) if not streaming
                  else OffsetSpec(keyword="latest"))
        if streaming and any(k in options for k in ("endingoffsets", "endingtimestamp",
                                                     "endingoffsetsbytimestamp")):
            raise _invalid("endingOffsets", options.get("endingoffsets", "..."),
                           "A stream has no end.", "Remove endingOffsets, or use a batch read.")
        return cls(
            config=client_config(options, _SOURCE_FORBIDDEN),
            subscription=parse_subscription(options),
            starting=_offset_spec(options, "starting", "latest" if streaming else "earliest",
                                  ("earliest", "latest") if streaming else ("earliest",)),
            ending=ending,
            max_offsets=parse_positive("maxOffsetsPerTrigger",
                                       options.get("maxoffsetspertrigger")),
            min_partitions=parse_positive("minPartitions", options.get("minpartitions")),
            fail_on_data_loss=parse_bool("failOnDataLoss", options.get("failondataloss"), True),
            include_headers=parse_bool("includeHeaders", options.get("includeheaders"), False),
            group_prefix=options.get("groupidprefix", "spark-kafka-source"),
            poll_timeout_ms=parse_positive("kafkaConsumer.pollTimeoutMs",
                                           options.get("kafkaconsumer.polltimeoutms")) or 120_000,
            retries=int(options.get("fetchoffset.numretries", "3")),
            retry_interval_ms=int(options.get("fetchoffset.retryintervalms", "10")),
            request_timeout_ms=parse_positive("fetchOffset.timeoutMs",
                                              options.get("fetchoffset.timeoutms")) or 30_000,
        )


@dataclass(frozen=True)
class SinkOptions:
    config: dict[str, str]
    topic: str | None

    @classmethod
    def parse(cls, options: dict[str, str]) -> SinkOptions:
        options = {k.lower(): v for k, v in options.items()}
        config = client_config(options, _SINK_FORBIDDEN)
        # Idempotence removes duplicates from librdkafka's own retries (and keeps order).
        config.setdefault("enable.idempotence", "true")
        return cls(config=config, topic=options.get("topic") or None)
