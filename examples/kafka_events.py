"""JSON events from Kafka -> bronze Delta table -> windowed aggregate (gold Delta table).

    python examples/kafka_events.py --servers 127.0.0.1:9092 --topic events --root /tmp/kev \
        [--sample]

Spark's documented Kafka code with headwater's format name (``headwater.kafka``: Spark 4.3 keeps
the name ``kafka`` for its JVM connector, which pyspark does not ship). Parsing the value is the
user's, with ``from_json``, as with Spark's connector. ``--sample`` first produces a few events.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql import functions as F

import headwater

EVENT_SCHEMA = "device STRING, temp DOUBLE, ts TIMESTAMP"
SAMPLE = [("a", 20.0, "2024-05-01T10:00:05Z"), ("b", 30.0, "2024-05-01T10:00:40Z"),
          ("a", 22.0, "2024-05-01T10:00:50Z"), ("a", 24.0, "2024-05-01T10:01:10Z"),
          ("b", 31.0, "2024-05-01T10:01:20Z"), ("c", 5.0, "2024-05-01T10:02:00Z")]


def produce_sample(servers: str, topic: str) -> None:
    # One record per batch: Tansu (the test broker) reports a wrong end offset after a
    # multi-record batch; real Kafka brokers need no such setting.
    producer = Producer({"bootstrap.servers": servers, "batch.num.messages": 1})
    for device, temp, ts in SAMPLE:
        producer.produce(topic, key=device, value=json.dumps(
            {"device": device, "temp": temp, "ts": ts}))
    producer.flush(30)


def main(servers: str, topic: str, root: str, spark=None) -> list[tuple]:
    spark = spark or headwater.spark_session("local[2]")
    root_path = Path(root)
    bronze, gold = str(root_path / "bronze"), str(root_path / "gold")

    events = (spark.readStream
              .format("headwater.kafka")
              .option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .load())
    parsed = (events
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
                      "topic", "partition", "offset")
              .select("e.*", "topic", "partition", "offset"))
    (parsed.writeStream.format("delta")
     .option("checkpointLocation", str(root_path / "_checkpoints" / "bronze"))
     .trigger(availableNow=True)
     .start(bronze)
     .awaitTermination())

    per_minute = (spark.readStream.format("delta").load(bronze)
                  .withWatermark("ts", "10 minutes")
                  .groupBy(F.window("ts", "1 minute"), "device")
                  .agg(F.count("*").alias("events"), F.avg("temp").alias("avg_temp")))
    (per_minute.writeStream.format("delta").outputMode("complete")
     .option("checkpointLocation", str(root_path / "_checkpoints" / "gold"))
     .trigger(availableNow=True)
     .start(gold)
     .awaitTermination())

    rows = (spark.read.format("delta").load(gold)
            .selectExpr("date_format(window.start, 'HH:mm') AS minute", "device", "events",
                        "avg_temp")
            .orderBy("minute", "device").collect())
    return [tuple(r) for r in rows]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", required=True)
    parser.add_argument("--topic", default="events")
    parser.add_argument("--root", required=True)
    parser.add_argument("--sample", action="store_true", help="produce sample events first")
    args = parser.parse_args()
    if args.sample:
        produce_sample(args.servers, args.topic)
    for row in main(args.servers, args.topic, args.root):
        print(row)
