"""The driver's questions to the brokers: which partitions exist, and their offsets.

Clients are created lazily, in the process that uses them, and never pickled: librdkafka starts
threads, and a process forked after that (Spark's worker daemon forks) inherits a broken copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from headwater.errors import HeadwaterError
from headwater.kafka.options import Subscription

TP = tuple[str, int]
T = TypeVar("T")

# Errors that mean "the brokers did not answer", as opposed to a wrong request.
_UNAVAILABLE = {"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_WAIT_COORD",
                "REQUEST_TIMED_OUT", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE",
                "_RESOLVE", "NETWORK_EXCEPTION", "BROKER_NOT_AVAILABLE"}


def broker_missing(exc: BaseException) -> bool:
    """Whether ``exc`` says the brokers did not answer. librdkafka also says it as _NOENT
    "Failed to query partition leaders: No leaders found" when its metadata lost every
    leader (a stopped broker, seen in CI), not only with the transport errors."""
    name = error_name(exc)
    return not name or name in _UNAVAILABLE or (name == "_NOENT" and "leader" in str(exc).lower())


def error_name(exc: BaseException) -> str:
    """The librdkafka error name (e.g. ``_TRANSPORT``) of a KafkaException, or ''."""
    args = getattr(exc, "args", ())
    err = args[0] if args else None
    name = getattr(err, "name", None)
    return name() if callable(name) else ""


def unanswered(offsets: dict[TP, int], by_timestamp: bool) -> list[TP]:
    """The partitions a ListOffsets answer has no offset for. librdkafka returns -1001
    (OFFSET_INVALID) for a partition whose broker went away mid-request, not an error (seen
    in CI with the broker killed): read as an offset, it looked like "offsets went back"
    (HW_KAFKA_DATA_LOSS). A timestamp lookup's -1 is an answer: no record at or after it."""
    return sorted(tp for tp, off in offsets.items() if off < 0 and not (by_timestamp and off == -1))


def unavailable(servers: str, exc: BaseException) -> HeadwaterError:
    return HeadwaterError(
        "HW_KAFKA_UNAVAILABLE",
        f"The Kafka brokers at {servers} did not answer: {exc}.",
        "The broker is down, unreachable, or slower than the timeout.",
        "Check kafka.bootstrap.servers and that the brokers run; restart the query from its "
        "checkpoint when they are back (it resumes where it stopped).")


def bad_config(exc: BaseException) -> HeadwaterError:
    return HeadwaterError(
        "HW_KAFKA_CLIENT_CONFIG",
        f"The Kafka client refused a kafka.* option: {exc}.",
        "kafka.* options go to librdkafka (confluent-kafka), whose property names differ from "
        "the Java client's in a few places (e.g. no sasl.jaas.config).",
        "Use librdkafka's property name (see its CONFIGURATION.md), or remove the option.")


def new_client(kind: Callable[[dict], T], config: dict[str, str]) -> T:
    """A Consumer/Producer/AdminClient, with librdkafka's config errors made readable."""
    try:
        return kind(dict(config))
    except (KafkaException, ValueError, TypeError) as exc:
        raise bad_config(exc) from exc


class KafkaBroker:
    """Metadata and offsets through one AdminClient, with Spark's retry options."""

    def __init__(self, config: dict[str, str], timeout_ms: int = 30_000, retries: int = 3,
                 retry_interval_ms: int = 10) -> None:
        self.config = config
        self.timeout = timeout_ms / 1000.0
        self.retries = max(0, retries)
        self.retry_interval = retry_interval_ms / 1000.0
        self._admin = None
        committed = config.get("isolation.level", "read_committed") == "read_committed"
        self._isolation = "READ_COMMITTED" if committed else "READ_UNCOMMITTED"

    def __getstate__(self) -> dict:  # clients never travel to another process
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    @property
    def admin(self):
        if self._admin is None:
            self._admin = new_client(AdminClient, self.config)
        return self._admin

    def _retrying(self, call: Callable[[], T]) -> T:
        for attempt in range(self.retries + 1):
            try:
                return call()
            except KafkaException as exc:
                if not broker_missing(exc):
                    raise
                if attempt == self.retries:
                    raise unavailable(self.config.get("bootstrap.servers", "?"), exc) from exc
                time.sleep(self.retry_interval)
        raise AssertionError("unreachable")

    def partitions(self, subscription: Subscription) -> list[TP]:
        """The topic-partitions the subscription reads now (assign: as given)."""
        if subscription.kind == "assign":
            return list(subscription.assigned)
        metadata = self._retrying(lambda: self.admin.list_topics(timeout=self.timeout))
        found = []
        for name, topic in metadata.topics.items():
            if topic.error is not None or not subscription.matches(name):
                continue
            found.extend((name, p) for p in topic.partitions)
        return sorted(found)

    def offsets(self, tps: Iterable[TP], spec: str | dict[TP, int]) -> dict[TP, int]:
        """Offsets of ``tps``: ``"earliest"``, ``"latest"``, or a timestamp (ms) per partition
        (the first offset whose timestamp is at or after it; the latest offset if none)."""
        tps = list(tps)
        if not tps:
            return {}

        def spec_of(tp: TP):
            if spec == "earliest":
                return OffsetSpec.earliest()
            if spec == "latest":
                return OffsetSpec.latest()
            return OffsetSpec.for_timestamp(int(spec[tp]))

        def ask() -> dict[TP, int]:
            request = {TopicPartition(t, p): spec_of((t, p)) for t, p in tps}
            futures = self.admin.list_offsets(
                request, isolation_level=getattr(IsolationLevel, self._isolation),
                request_timeout=self.timeout)
            result = {(tp.topic, tp.partition): fut.result().offset
                      for tp, fut in futures.items()}
            missing = unanswered(result, by_timestamp=isinstance(spec, dict))
            if missing:  # retried, then HW_KAFKA_UNAVAILABLE, as a transport error
                raise KafkaException(KafkaError(
                    KafkaError._TRANSPORT, f"no offsets returned for {missing}"))
            return result

        result = self._retrying(ask)
        if isinstance(spec, dict):  # no record at/after the timestamp: start at the end
            missing = [tp for tp, off in result.items() if off < 0]
            if missing:
                result.update(self.offsets(missing, "latest"))
        return result
