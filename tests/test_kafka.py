"""Kafka source and sink against a real broker (Tansu, in memory, 127.0.0.1).

The broker is the suite's ``broker`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json
import textwrap
import time
import uuid

import pyarrow as pa
import pytest
from tests.support import REPO, run_script

from headwater.errors import HeadwaterError, unwrap
from headwater.kafka.client import unanswered
from headwater.kafka.offsets import OffsetRange
from headwater.kafka.read import BATCH_ROWS, read_range
from kafka_broker import Broker

KAFKA = "headwater.kafka"


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def records(n: int, partitions: int, start: int = 0, prefix: str = "m"):
    return [(i % partitions, f"k{i}".encode(), f"{prefix}{i}".encode())
            for i in range(start, start + n)]


def read_stream(spark, broker, topic_option: dict, **options):
    reader = (spark.readStream.format(KAFKA)
              .option("kafka.bootstrap.servers", broker.servers))
    for key, value in {**topic_option, **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df, path, checkpoint):
    query = (df.writeStream.format("delta").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start(str(path)))
    query.awaitTermination(120)
    return query


def delta_values(spark, path) -> list[str]:
    return sorted(r.v for r in spark.read.format("delta").load(str(path))
                  .selectExpr("CAST(value AS STRING) AS v").collect())


def test_stream_several_partitions_restart_resumes_exactly(spark, broker, tmp):
    topic = topic_name()
    broker.create_topic(topic, 3)
    broker.produce(topic, records(30, 3))
    df = read_stream(spark, broker, {"subscribe": topic}, startingOffsets="earliest")
    run_available_now(df, tmp / "out", tmp / "cp")
    assert delta_values(spark, tmp / "out") == sorted(f"m{i}" for i in range(30))

    broker.produce(topic, records(15, 3, start=30))
    run_available_now(df, tmp / "out", tmp / "cp")
    rows = spark.read.format("delta").load(str(tmp / "out")).collect()
    assert sorted(r.value.decode() for r in rows) == sorted(f"m{i}" for i in range(45))
    assert len({(r.partition, r.offset) for r in rows}) == 45
    assert {r.topic for r in rows} == {topic}
    # The checkpoint's offsets are Spark's Kafka JSON: next offset per partition.
    last = max((p for p in (tmp / "cp" / "offsets").iterdir() if p.name.isdigit()),
               key=lambda p: int(p.name))
    offsets = json.loads(last.read_text().splitlines()[-1])
    assert offsets == {topic: {"0": 15, "1": 15, "2": 15}}


def run_to_memory(df, name: str, checkpoint, trigger: dict | None = None):
    query = (df.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(checkpoint))
             .trigger(**(trigger or {"availableNow": True})).start())
    return query


def test_available_now_honours_max_offsets_over_several_batches_from_json_start(
        spark, broker, tmp):
    topic = topic_name()
    broker.create_topic(topic, 3)
    broker.produce(topic, records(60, 3))  # 20 per partition
    start = json.dumps({topic: {"0": 5, "1": -2, "2": -1}})  # skip 5; from start; from end
    df = read_stream(spark, broker, {"subscribe": topic}, startingOffsets=start,
                     maxOffsetsPerTrigger=10)
    query = run_to_memory(df, "kafka_limit", tmp / "cp")
    query.awaitTermination(120)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(sizes) == 4 and max(sizes) <= 10 and sum(sizes) == 35, sizes
    got = spark.sql("SELECT partition, offset FROM kafka_limit").collect()
    expected = {(0, o) for o in range(5, 20)} | {(1, o) for o in range(20)}
    assert {(r.partition, r.offset) for r in got} == expected
    assert len(got) == len(expected)


def test_batch_read_offsets_range_headers_and_schema(spark, broker):
    topic = topic_name()
    broker.create_topic(topic, 2)
    broker.produce(topic, [(i % 2, None if i == 0 else b"k", b"v%d" % i,
                            [("h", b"x"), ("n", None)] if i % 2 else None) for i in range(20)])
    df = (spark.read.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
          .option("subscribe", topic).option("includeHeaders", "true")
          .option("startingOffsets", json.dumps({topic: {"0": 2, "1": -2}}))
          .option("endingOffsets", json.dumps({topic: {"0": 5, "1": -1}})).load())
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,"
        "headers:array<struct<key:string,value:binary>>>")
    rows = df.orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset) for r in rows] == \
        [(0, 2), (0, 3), (0, 4)] + [(1, o) for o in range(10)]
    odd = rows[3]
    assert odd.value == b"v1" and odd.key == b"k" and odd.timestampType == 0
    assert [(h.key, h.value) for h in odd.headers] == [("h", b"x"), ("n", None)]
    assert rows[0].headers is None and rows[0].timestamp.year >= 2024
    everything = (spark.read.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
                  .option("assign", json.dumps({topic: [0]})).load())
    assert everything.count() == 10
    assert everything.where("offset = 0").first().key is None
    empty = (spark.read.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
             .option("subscribe", topic).option("startingOffsets", json.dumps(
                 {topic: {"0": -1, "1": -1}})).load())
    assert empty.count() == 0  # nothing between latest and latest


def test_task_reader_cuts_batches_and_stops_inside_a_fetched_list(broker):
    """read_range turns whole consume() lists into columns: a range that starts and ends
    inside a list and spans more than one Arrow batch gives exactly its records, in order."""
    topic = topic_name()
    broker.create_topic(topic, 1)
    n = BATCH_ROWS + 5_000
    broker.produce(topic, ((0, b"k%d" % i, b"v%d" % i) for i in range(n)), batched=True,
                   **{"linger.ms": "20", "batch.size": "1000000"})
    broker.seal(topic, 1)
    start, end = 7, BATCH_ROWS + 4_003
    batches = list(read_range({"bootstrap.servers": broker.servers},
                              OffsetRange(topic, 0, start, end), False, True, 30_000, "t"))
    assert [b.num_rows for b in batches] == [BATCH_ROWS, end - start - BATCH_ROWS]
    rows = pa.Table.from_batches(batches)
    assert rows["offset"].to_pylist() == list(range(start, end))
    assert rows["value"].to_pylist() == [b"v%d" % i for i in range(start, end)]
    assert rows["key"][0].as_py() == b"k7" and set(rows["timestampType"].to_pylist()) == {0}
    assert set(rows["partition"].to_pylist()) == {0} and set(rows["topic"].to_pylist()) == {
        topic} and rows["timestamp"].null_count == 0


def test_task_reader_skips_transaction_markers_inside_a_range(broker):
    """Commit markers take offsets that are never delivered: a consume() list with gaps
    still gives exactly the records of [start, end), each with its own offset. A range
    ending at the high watermark, behind a marker, gets the end-of-partition event in the
    same list as records (such a list failed with SystemError: KafkaError's == raised)."""
    from confluent_kafka import Producer

    topic = topic_name()
    broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": broker.servers,
                         "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for t in range(3):  # offsets 0-4, 6-10, 12-16; markers at 5, 11, 17
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=b"v%d" % (t * 6 + i), partition=0)
        producer.commit_transaction(30)
    config = {"bootstrap.servers": broker.servers}
    for start, end in ((0, 18), (2, 14), (6, 11), (5, 6)):
        batches = list(read_range(config, OffsetRange(topic, 0, start, end), False, True,
                                  30_000, "t"))
        rows = pa.Table.from_batches(batches) if batches else None
        expected = [o for o in range(start, end) if o % 6 != 5]
        assert (rows["offset"].to_pylist() if rows else []) == expected, (start, end)
        assert (rows["value"].to_pylist() if rows else []) == [b"v%d" % o for o in expected]


def test_columns_take_the_records_of_a_range_from_lists_with_and_without_gaps():
    """_Columns.take on confluent-kafka Messages: consecutive offsets (no offset read per
    record) and gaps (each offset read) keep [position, end) alike, wherever the list starts
    and ends; the answer is ``end`` once a record at or past it came."""
    from confluent_kafka import Message
    from pyspark.sql.pandas.types import to_arrow_schema

    from headwater.kafka.read import _Columns, kafka_schema

    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")

    def messages(offsets):
        return [Message(topic="t", partition=0, offset=o, key=None if o % 3 else b"k%d" % o,
                        value=b"v%d" % o, timestamp=(o % 3, 1_700_000_000_000 + o))
                for o in offsets]

    for offsets in (range(10, 20), [10, 11, 13, 14, 17, 19]):
        for position, end in ((10, 20), (12, 16), (0, 11), (15, 40), (19, 20), (20, 30)):
            columns = _Columns(False)
            got = columns.take(messages(offsets), position, end)
            kept = [o for o in offsets if position <= o < end]
            assert got == (end if offsets[-1] >= end else (kept[-1] + 1 if kept else position))
            assert len(columns) == len(kept), (offsets, position, end)
            if not kept:
                continue
            rows = columns.batch(schema, "t", 0)
            assert rows["offset"].to_pylist() == kept
            assert rows["value"].to_pylist() == [b"v%d" % o for o in kept]
            assert rows["key"].to_pylist() == [None if o % 3 else b"k%d" % o for o in kept]
            assert rows["timestampType"].to_pylist() == [o % 3 - 1 for o in kept]
            assert rows["timestamp"].to_pylist() == [
                None if o % 3 == 0 else pa.scalar((1_700_000_000_000 + o) * 1000,
                                                 pa.timestamp("us", tz="UTC")).as_py()
                for o in kept]


def test_new_topic_matching_pattern_is_picked_up_mid_stream(spark, broker, tmp):
    prefix = topic_name("pat")
    broker.create_topic(f"{prefix}-a", 2)
    broker.produce(f"{prefix}-a", records(4, 2))
    df = read_stream(spark, broker, {"subscribePattern": f"{prefix}-.*"},
                     startingOffsets="earliest")
    query = run_to_memory(df, "kafka_pattern", tmp / "cp", {"processingTime": "200 milliseconds"})
    try:
        wait_for(lambda: spark.sql("SELECT * FROM kafka_pattern").count() == 4)
        # Tansu has no CreatePartitions: new partitions arrive as a new matching topic.
        broker.create_topic(f"{prefix}-b", 3)
        broker.produce(f"{prefix}-b", records(6, 3, start=100))
        wait_for(lambda: spark.sql("SELECT * FROM kafka_pattern").count() == 10)
    finally:
        query.stop()
    got = spark.sql("SELECT topic, CAST(value AS STRING) v FROM kafka_pattern").collect()
    assert sorted((r.topic[-1], r.v) for r in got) == sorted(
        [("a", f"m{i}") for i in range(4)] + [("b", f"m{i}") for i in range(100, 106)])


def wait_for(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.2)


def test_fail_on_data_loss_for_a_recreated_topic_and_skip_when_false(spark, broker, tmp):
    topic = topic_name()
    broker.create_topic(topic, 2)
    broker.produce(topic, records(10, 2))
    df = read_stream(spark, broker, {"subscribe": topic}, startingOffsets="earliest")
    run_available_now(df, tmp / "out", tmp / "cp")
    assert len(delta_values(spark, tmp / "out")) == 10
    # Tansu cannot DeleteRecords (todo!() in 0.6.0): losing offsets = recreating the topic.
    broker.delete_topic(topic)
    broker.create_topic(topic, 2)
    broker.produce(topic, records(3, 2, prefix="new"))
    with pytest.raises(Exception) as failure:
        run_available_now(df, tmp / "out", tmp / "cp")
    err = unwrap(failure.value)
    assert isinstance(err, HeadwaterError) and err.code == "HW_KAFKA_DATA_LOSS", failure.value
    assert "offsets went back from 5 to" in str(err) and "failOnDataLoss" in str(err)
    assert len(delta_values(spark, tmp / "out")) == 10  # nothing written by the failed run

    lenient = read_stream(spark, broker, {"subscribe": topic}, startingOffsets="earliest",
                          failOnDataLoss="false")
    run_available_now(lenient, tmp / "out", tmp / "cp")
    assert delta_values(spark, tmp / "out") == sorted(
        [f"m{i}" for i in range(10)] + [f"new{i}" for i in range(3)])


def test_sink_stream_and_batch_write_exact_records(spark, broker, tmp):
    from tests.support import write

    topic, other = topic_name("sink"), topic_name("sink2")
    broker.create_topic(topic, 2)
    broker.create_topic(other, 1)
    write(tmp / "src", {"k": [f"k{i}" for i in range(6)], "v": [f"v{i}" for i in range(6)],
                        "p": [i % 2 for i in range(6)]})
    stream = (spark.readStream.format("delta").load(str(tmp / "src"))
              .selectExpr("k AS key", "v AS value", "CAST(p AS INT) AS partition",
                          "array(named_struct('key', 'src', 'value', CAST(k AS BINARY))) "
                          "AS headers")
              .writeStream.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
              .option("topic", topic).option("checkpointLocation", str(tmp / "cp"))
              .trigger(availableNow=True).start())
    stream.awaitTermination(120)
    assert stream.exception() is None
    got = broker.consume_all(topic, 2, expected=6)
    assert [(p, k, v, h) for p, _, k, v, h in got] == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("src", f"k{i}".encode())])
        for i in range(6))

    # Batch write: topic per row, no key, binary values; Spark's ErrorIfExists default
    # is refused by Spark for Python sinks, so mode("append") is needed.
    (spark.createDataFrame([(topic, "x"), (other, "y"), (other, "z")], "topic string, v string")
     .selectExpr("topic", "CAST(v AS BINARY) AS value")
     .write.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
     .mode("append").save())
    assert [(k, v) for _, _, k, v, _ in broker.consume_all(other, 1, expected=2)] == \
        [(None, b"y"), (None, b"z")]
    assert len(broker.consume_all(topic, 2, expected=7)) == 7


def test_sink_rejects_wrong_columns_clearly(spark, broker):
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception) as failure:
        (df.write.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
         .option("topic", "x").mode("append").save())
    err = unwrap(failure.value)
    assert getattr(err, "code", None) == "HW_KAFKA_SINK_SCHEMA", failure.value
    with pytest.raises(Exception) as failure:
        (spark.read.format(KAFKA).option("kafka.bootstrap.servers", broker.servers)
         .option("subscribe", "a").option("assign", '{"a":[0]}').load().collect())
    assert getattr(unwrap(failure.value), "code", None) == "HW_OPTION_CONFLICT"


def test_example_kafka_events_bronze_then_windowed_aggregate(spark, broker, tmp):
    import importlib.util

    spec = importlib.util.spec_from_file_location("kafka_events",
                                                  REPO / "examples" / "kafka_events.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    topic = topic_name("events")
    broker.create_topic(topic, 2)
    example.produce_sample(broker.servers, topic)
    rows = example.main(broker.servers, topic, str(tmp), spark=spark)
    assert rows == [("10:00", "a", 2, 21.0), ("10:00", "b", 1, 30.0),
                    ("10:01", "a", 1, 24.0), ("10:01", "b", 1, 31.0), ("10:02", "c", 1, 5.0)]
    bronze = spark.read.format("delta").load(str(tmp / "bronze"))
    assert bronze.count() == 6 and bronze.where("device IS NULL").count() == 0


DRIVER = textwrap.dedent("""
    import headwater
    spark = headwater.spark_session("local[1]", conf={"spark.ui.enabled": "false"})
    servers, topic, dst, cp = {args}
    (spark.readStream.format("headwater.kafka").option("kafka.bootstrap.servers", servers)
     .option("subscribe", topic).option("startingOffsets", "earliest")
     .option("maxOffsetsPerTrigger", "10").load()
     .writeStream.format("delta").option("checkpointLocation", cp)
     .trigger(availableNow=True).start(dst).awaitTermination())
    print("DONE")
""")


@pytest.mark.procs  # a driver process killed with SIGKILL, then restarted
def test_driver_killed_mid_stream_then_restart_gives_every_message_once(spark, broker, tmp):
    topic = topic_name("crash")
    broker.create_topic(topic, 3)
    broker.produce(topic, records(30, 3))
    code = DRIVER.replace("{args}", repr((broker.servers, topic, str(tmp / "dst"),
                                          str(tmp / "cp"))))
    # SIGKILL of the driver (JVM and Python) right after the Delta commit of batch 0, before
    # Spark records the batch as done: the hardest point for exactly-once.
    crashed = run_script(code, env={"HEADWATER_FAULT": "sink_after_commit"}, timeout=240)
    assert crashed.returncode == -9, (crashed.returncode, crashed.stderr[-2000:])
    assert "DONE" not in crashed.stdout
    # batch 0 is in the table: 10 spread over 3 partitions by size is 3 each, as Spark does
    assert len(delta_values(spark, tmp / "dst")) == 9

    broker.produce(topic, records(12, 3, start=30))
    again = run_script(code, env={"HEADWATER_FAULT": ""}, timeout=240)
    assert "DONE" in again.stdout, again.stderr[-3000:]
    rows = spark.read.format("delta").load(str(tmp / "dst")).collect()
    assert sorted(r.value.decode() for r in rows) == sorted(f"m{i}" for i in range(42))
    assert len({(r.partition, r.offset) for r in rows}) == 42


def test_broker_stopped_while_stream_runs_errors_clearly_then_resumes(spark, broker, tmp):
    # A second broker of our own, so stopping it touches no other test. Tansu keeps its log
    # in memory: after the restart the test re-produces the same log (same offsets), standing
    # in for a broker with durable storage.
    own = Broker(broker.binary, log=tmp / "broker.log").start()
    try:
        topic = topic_name("restart")
        log = records(10, 2)
        own.create_topic(topic, 2)
        own.produce(topic, log)
        df = read_stream(spark, own, {"subscribe": topic}, startingOffsets="earliest",
                         **{"fetchOffset.timeoutMs": "2000", "fetchOffset.numRetries": "1",
                            "kafkaConsumer.pollTimeoutMs": "5000"})
        query = (df.writeStream.format("delta").option("checkpointLocation", str(tmp / "cp"))
                 .trigger(processingTime="200 milliseconds").start(str(tmp / "out")))
        wait_for(lambda: (tmp / "out" / "_delta_log").exists()
                 and len(delta_values(spark, tmp / "out")) == 10)
        own.stop()
        with pytest.raises(Exception) as failure:
            query.awaitTermination(90)
        err = unwrap(failure.value)
        assert getattr(err, "code", None) == "HW_KAFKA_UNAVAILABLE", failure.value
        assert own.servers in str(err)

        own.start()
        own.create_topic(topic, 2)
        own.produce(topic, log + records(6, 2, start=10))
        run_available_now(df, tmp / "out", tmp / "cp")
        assert delta_values(spark, tmp / "out") == sorted(f"m{i}" for i in range(16))
    finally:
        own.stop()


def test_benchmark_smoke_every_variant_reads_every_message(spark, broker, tmp):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "kafka_throughput", REPO / "benchmarks" / "kafka_throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.run(spark, broker, 400, 1, tmp, warm_up=False)
    expected = 400 + bench.PARTITIONS  # one seal record per partition
    assert results["kafka"]["rows"] == results["memory limit"]["rows"] == expected
    assert results["client alone"]["rows"] == expected
    assert "vs limit" in bench.report(results)


def test_planning_rules_without_a_broker():
    from headwater.kafka.offsets import rate_limit, reconcile, split_ranges
    from headwater.kafka.options import SourceOptions

    a0, a1, b0 = ("a", 0), ("a", 1), ("b", 0)
    # Spark's proration: shares of the limit by backlog, at least 1 for a tiny backlog.
    assert rate_limit({a0: 0, a1: 0, b0: 0}, {a0: 100, a1: 10, b0: 1}, 10) == \
        {a0: 9, a1: 1, b0: 1}  # 9.0, 0.9 -> 1, 0.09 -> 1 (Spark rounds up below 1)
    assert rate_limit({a0: 5}, {a0: 8}, None) == {a0: 8}
    # New partitions start at earliest; gone / truncated / reset ones are data loss.
    assert reconcile({a0: 4}, [a0, b0], {a0: 0, b0: 2}, {a0: 9, b0: 5}, True) == {a0: 4, b0: 2}
    for start, earliest, latest in (({a0: 4}, {a0: 6}, {a0: 9}), ({a0: 4}, {a0: 0}, {a0: 2})):
        with pytest.raises(HeadwaterError) as lost:
            reconcile(start, [a0], earliest, latest, True)
        assert lost.value.code == "HW_KAFKA_DATA_LOSS"
        assert reconcile(start, [a0], earliest, latest, False) == {a0: earliest[a0]}
    with pytest.raises(HeadwaterError, match="no longer exists"):
        reconcile({a1: 3}, [a0], {a0: 0}, {a0: 1}, True)
    ranges = split_ranges({a0: 0, a1: 5}, {a0: 100, a1: 5}, 4)
    assert [(r.partition, r.start, r.end) for r in ranges] == \
        [(0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100)]
    for bad, code in (({"subscribe": "a"}, "HW_OPTION_INVALID"),
                      ({"kafka.bootstrap.servers": "x"}, "HW_OPTION_INVALID"),
                      ({"kafka.bootstrap.servers": "x", "subscribe": "a",
                        "kafka.auto.offset.reset": "earliest"}, "HW_OPTION_INVALID"),
                      ({"kafka.bootstrap.servers": "x", "subscribe": "a",
                        "maxoffsetspertrigger": "0"}, "HW_OPTION_INVALID"),
                      ({"kafka.bootstrap.servers": "x", "subscribe": "a",
                        "startingoffsets": "{nope"}, "HW_OPTION_INVALID")):
        with pytest.raises(HeadwaterError) as wrong:
            SourceOptions.parse(bad, streaming=True)
        assert wrong.value.code == code, bad
    batch = SourceOptions.parse({"kafka.bootstrap.servers": "x", "subscribe": "a"}, False)
    assert batch.starting.keyword == "earliest" and batch.ending.keyword == "latest"


def test_no_leaders_found_after_retries_is_the_brokers_being_unavailable():
    """librdkafka answers ListOffsets for a stopped broker with _NOENT "No leaders found" once
    its metadata lost the leaders (seen in CI): retried, then HW_KAFKA_UNAVAILABLE, like the
    transport errors; other _NOENT errors stay as they are."""
    from confluent_kafka import KafkaError, KafkaException

    from headwater.kafka.client import KafkaBroker

    broker = KafkaBroker({"bootstrap.servers": "127.0.0.1:9"}, retries=2, retry_interval_ms=1)
    calls = []

    def failing(reason: str):
        def call():
            calls.append(reason)
            raise KafkaException(KafkaError(KafkaError._NOENT, reason))
        return call

    with pytest.raises(HeadwaterError) as gone:
        broker._retrying(failing("Failed to query partition leaders: No leaders found"))
    assert gone.value.code == "HW_KAFKA_UNAVAILABLE" and len(calls) == 3
    with pytest.raises(KafkaException):
        broker._retrying(failing("No such entry"))
    assert len(calls) == 4


def test_offsets_a_lost_broker_did_not_return_are_no_answer_not_data_loss():
    """librdkafka gives -1001 (OFFSET_INVALID) for a partition whose broker was killed
    mid-request (seen in CI): no answer (retried, then HW_KAFKA_UNAVAILABLE), never an offset
    that "went back"; a timestamp lookup's -1 (no record at or after it) is an answer."""
    a0, a1 = ("a", 0), ("a", 1)
    assert unanswered({a0: 5, a1: -1001}, by_timestamp=False) == [a1]
    assert unanswered({a0: 0, a1: -1}, by_timestamp=False) == [a1]
    assert unanswered({a0: 0, a1: -1}, by_timestamp=True) == []
    assert unanswered({a0: -1001, a1: 3}, by_timestamp=True) == [a0]


def test_spark_kafka_writers_without_the_connector_write_through_headwater(spark, broker, tmp):
    """``writeStream.format("kafka")`` and ``write.format("kafka")``, as Spark's docs write
    them (no mode: Spark's Kafka sink takes its default errorifexists as append)."""
    from tests.support import write

    topic = topic_name("alias")
    broker.create_topic(topic, 2)
    write(tmp / "src", {"id": list(range(8)), "name": [f"n{i}" for i in range(8)]})
    query = (spark.readStream.format("delta").load(str(tmp / "src"))
             .selectExpr("CAST(id AS STRING) AS key", "to_json(struct(*)) AS value")
             .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.servers)
             .option("topic", topic).option("checkpointLocation", str(tmp / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    (spark.createDataFrame([(topic, "late", 1)], "topic string, value string, p int")
     .selectExpr("topic", "value", "CAST(p AS INT) AS partition")
     .write.format("kafka").option("kafka.bootstrap.servers", broker.servers).save())
    got = broker.consume_all(topic, 2, expected=9)
    assert sorted((k or b"", v) for _, _, k, v, _ in got) == sorted(
        [(str(i).encode(), json.dumps({"id": i, "name": f"n{i}"},
                                      separators=(",", ":")).encode()) for i in range(8)]
        + [(b"", b"late")])
    assert [k for p, _, k, v, _ in got if v == b"late"] == [None]
    # and read back through the reader alias, the way DLT notebooks read Kafka (the sink
    # batches records: Tansu's latest offset needs a seal, see tests/kafka_broker.py)
    broker.seal(topic, 2)
    back = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.servers)
            .option("subscribe", topic).load())
    assert back.where("CAST(value AS STRING) != 'seal'").count() == 9
    for mode in ("overwrite", "ignore"):
        with pytest.raises(HeadwaterError) as refused:
            (spark.createDataFrame([("x",)], "value string").write.format("kafka")
             .option("kafka.bootstrap.servers", broker.servers).option("topic", topic)
             .mode(mode).save())
        assert refused.value.code == "HW_KAFKA_SAVE_MODE" and mode in str(refused.value)
    with pytest.raises(HeadwaterError) as refused:  # save(format=..., mode=...) spelling
        spark.createDataFrame([("x",)], "value string").write.save(
            format="kafka", mode="overwrite", topic=topic,
            **{"kafka.bootstrap.servers": broker.servers})
    assert refused.value.code == "HW_KAFKA_SAVE_MODE"
    assert len(broker.consume_all(topic, 2, expected=11)) == 11  # nothing written by them


def test_options_dlt_notebooks_set_for_hosted_clusters():
    """K-DLT-Python (Confluent Cloud) and the financial-services notebooks: Java JAAS lines
    become librdkafka's user name and password; what cannot be translated is a clear error."""
    from headwater.kafka.options import SinkOptions, SourceOptions

    base = {"kafka.bootstrap.servers": "x:9092", "subscribe": "fitness-tracker"}
    jaas = ("kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required "
            "username='KEY' password='S3CRET';")
    confluent = SourceOptions.parse({
        **base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": jaas,
        "kafka.ssl.endpoint.identification.algorithm": "https", "kafka.sasl.mechanism": "PLAIN",
        "failOnDataLoss": "false", "startingOffsets": "earliest"}, streaming=True)
    assert confluent.config == {
        "bootstrap.servers": "x:9092", "security.protocol": "SASL_SSL",
        "ssl.endpoint.identification.algorithm": "https", "sasl.mechanism": "PLAIN",
        "sasl.username": "KEY", "sasl.password": "S3CRET"}
    assert not confluent.fail_on_data_loss and confluent.starting.keyword == "earliest"
    scram = SinkOptions.parse({
        "kafka.bootstrap.servers": "x:9092", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                  'required username="u" password="p";',
        "kafka.ssl.endpoint.identification.algorithm": "", "topic": "t"})
    assert (scram.config["sasl.username"], scram.config["sasl.password"]) == ("u", "p")
    assert scram.config["ssl.endpoint.identification.algorithm"] == "none"
    assert "sasl.jaas.config" not in scram.config
    ssl = SourceOptions.parse({**base, "kafka.security.protocol": "SSL"}, streaming=True)
    assert ssl.config["security.protocol"] == "SSL"
    for options, code, words in (
            ({"kafka.sasl.jaas.config": "kafkashaded.org.apache.kafka.common.security."
              "oauthbearer.OAuthBearerLoginModule required clientId='a' clientSecret='b';"},
             "HW_KAFKA_CLIENT_CONFIG", "sasl.oauthbearer"),
            ({"kafka.sasl.jaas.config": jaas.replace("plain.PlainLoginModule",
                                                     "scram.ScramLoginModule")},
             "HW_KAFKA_CLIENT_CONFIG", "SCRAM-SHA-512"),
            ({"kafka.sasl.jaas.config": "username=x"}, "HW_KAFKA_CLIENT_CONFIG", "JAAS"),
            ({"minOffsetsPerTrigger": "100"}, "HW_KAFKA_OPTION_UNSUPPORTED", "minOffsets"),
            ({"maxTriggerDelay": "5m"}, "HW_KAFKA_OPTION_UNSUPPORTED", "maxTriggerDelay"),
            ({"maxRecordsPerPartition": "10"}, "HW_KAFKA_OPTION_UNSUPPORTED", "minPartitions"),
            ({"startingOffsetsByTimestampStrategy": "error"}, "HW_OPTION_INVALID", "latest")):
        with pytest.raises(HeadwaterError) as wrong:
            SourceOptions.parse({**base, **options}, streaming=True)
        assert wrong.value.code == code and words in str(wrong.value), (options, wrong.value)
        assert "S3CRET" not in str(wrong.value)


def test_writer_alias_holds_with_and_without_a_lakehouse(spark, lake):
    """The lakehouse hooks wrap the writers' format while a lakehouse is attached and put
    the methods back when it is detached: "kafka" stays headwater's sink both ways."""
    from headwater import kafka

    def refused() -> str:
        with pytest.raises(HeadwaterError) as wrong:
            (spark.createDataFrame([("x",)], "value string").write.format("kafka")
             .option("kafka.bootstrap.servers", "127.0.0.1:9").option("topic", "t")
             .mode("ignore").save())
        return wrong.value.code

    def stream_source() -> str:
        writer = spark.readStream.format("rate").load().writeStream.format("KAFKA")
        field = writer._jwrite.getClass().getDeclaredField("source")
        field.setAccessible(True)
        return str(field.get(writer._jwrite))

    assert refused() == "HW_KAFKA_SAVE_MODE" and stream_source() == KAFKA
    lake.detach()
    assert refused() == "HW_KAFKA_SAVE_MODE" and stream_source() == KAFKA
    kafka.register_message_sources(spark)  # installing again adds nothing that breaks it
    lake.attach()
    assert refused() == "HW_KAFKA_SAVE_MODE" and stream_source() == KAFKA
