"""The native Delta stream source (headwater.delta.native_source): which streams read through
Spark's parquet reader, what falls back to the Python data source, and checkpoints shared by
the two. The source's options and rules are test_delta_source's, which runs against it."""

from __future__ import annotations

import json
import logging
import shutil
import time

import pyarrow as pa
import pytest
from pyspark.sql.streaming import DataStreamReader
from tests.pipelines import project
from tests.pipelines import run as run_pipeline
from tests.support import golden, rows, write

import headwater
from headwater import Lakehouse
from headwater.spark import patches
from headwater.spark.jvm import analyzed_plan
from headwater.spark.plan import node_name, nodes, relations


def ids(start: int, stop: int, part: str = "a") -> dict:
    return {"id": pa.array(range(start, stop), pa.int64()), "part": [part] * (stop - start)}


def leaves(df) -> set[str]:
    return {node_name(n) for n in nodes(analyzed_plan(df)) if n.children().size() == 0}


def python_stream(spark, path: str, **options):
    """The same stream through headwater's Python data source (Spark's own ``load``)."""
    original = patches.original(DataStreamReader, "load")
    return original(spark.readStream.format("delta").options(**options), path)


def run(df, dst, cp, **trigger):
    with headwater.translated():
        query = (df.writeStream.format("delta").option("checkpointLocation", str(cp))
                 .trigger(**(trigger or {"availableNow": True})).start(str(dst)))
        query.awaitTermination()
    return query


def test_a_delta_stream_is_read_by_sparks_parquet_reader(spark, tmp):
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    write(src, ids(0, 10, "a"), partition_by=["part"])
    write(src, ids(10, 13, "b"), partition_by=["part"])
    df = spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(str(src))
    assert leaves(df) == {"StreamingExecutionRelation"}
    (relation,) = relations(df)
    assert (relation.source, relation.streaming, relation.path) == ("delta", True,
                                                                     str(src.resolve()))
    query = run(df, dst, cp)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    # numInputRows is the scan's own row count, one file per batch
    assert [p["numInputRows"] for p in progress] == [10, 3]
    assert progress[0]["sources"][0]["description"] == f"DeltaSource[{src.resolve()}]"
    assert rows(spark, str(dst)) == [(i, "a" if i < 10 else "b") for i in range(13)]


def test_two_queries_from_one_stream_dataframe_plan_each_on_its_own(spark, tmp):
    """One DataFrame written to two sinks while both run: each query has its own source
    (its own starting point), as with delta-spark; startingVersion=latest of the second
    query is the table's latest version when that query starts, not when the first did."""
    src = tmp / "src"
    write(src, ids(0, 3))
    df = spark.readStream.format("delta").option("startingVersion", "latest").load(str(src))
    assert leaves(df) == {"StreamingExecutionRelation"}

    def start(name: str):
        return (df.writeStream.format("delta").option("checkpointLocation", str(tmp / f"cp-{name}"))
                .trigger(processingTime="100 milliseconds").start(str(tmp / name)))

    with headwater.translated():
        one = start("one")
        try:
            one.processAllAvailable()
            write(src, ids(3, 5), mode="append")
            one.processAllAvailable()
            two = start("two")
            try:
                two.processAllAvailable()
                write(src, ids(5, 6), mode="append")
                one.processAllAvailable()
                two.processAllAvailable()
            finally:
                two.stop()
        finally:
            one.stop()
    assert rows(spark, str(tmp / "one")) == [(i, "a") for i in range(3, 6)]
    assert rows(spark, str(tmp / "two")) == [(5, "a")]


def test_the_change_feed_and_tables_spark_cannot_read_stay_on_the_python_source(spark, tmp):
    src = tmp / "src"
    write(src, ids(0, 3), configuration={"delta.enableChangeDataFeed": "true"})
    feed = spark.readStream.format("delta").option("readChangeFeed", "true").load(str(src))
    assert leaves(feed) == {"StreamingRelationV2"}
    dv = tmp / "dv"
    shutil.copytree(golden("dv-partitioned-with-checkpoint"), dv)
    assert leaves(spark.readStream.format("delta").load(str(dv))) == {"StreamingRelationV2"}
    given = spark.readStream.format("delta").schema("id long, part string").load(str(src))
    assert leaves(given) == {"StreamingRelationV2"}


@pytest.mark.parametrize("first, second", [("python", "native"), ("native", "python")])
def test_a_checkpoint_moves_between_the_python_and_the_native_source(spark, tmp, first,
                                                                     second):
    """A query stopped after some micro-batches (offsets inside a version and at its end) and
    restarted on the other source reads every row exactly once."""
    src, dst, cp = tmp / "src", tmp / "dst", tmp / "cp"
    for i in range(3):  # three commits of two files (partitions a and b) each
        write(src, {"id": pa.array([10 * i, 10 * i + 1], pa.int64()), "part": ["a", "b"]},
              partition_by=["part"])

    def stream(kind: str):
        if kind == "python":
            return python_stream(spark, str(src), maxFilesPerTrigger="1")
        return spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(str(src))

    df = stream(first)
    assert leaves(df) == ({"StreamingRelationV2"} if first == "python"
                          else {"StreamingExecutionRelation"})
    with headwater.translated():
        query = (df.writeStream.format("delta").option("checkpointLocation", str(cp))
                 .trigger(processingTime="1 hour").start(str(dst)))
        # batch 0 only (the next trigger is an hour away): one file of version 2's snapshot
        deadline = time.monotonic() + 120
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()
    assert len(rows(spark, str(dst))) == 1
    write(src, {"id": pa.array([30, 31], pa.int64()), "part": ["a", "b"]},
          partition_by=["part"])
    later = run(stream(second), dst, cp)
    assert [p["numInputRows"] for p in later.recentProgress if p["numInputRows"]] == [1] * 7
    assert [r[0] for r in rows(spark, str(dst))] == [0, 1, 10, 11, 20, 21, 30, 31]


def test_a_lakehouse_table_streamed_by_name_is_read_natively(spark, tmp, keep_lakehouse):
    lake = Lakehouse(tmp / "lake", spark)
    try:
        spark.createDataFrame([(1, "a"), (2, "b")], "id long, part string") \
            .write.saveAsTable("events")
        df = spark.readStream.table("events").select("events.id")  # the table's alias too
        assert leaves(df) == {"StreamingExecutionRelation"}
        assert relations(df)[0].identifier == ("events",)  # pipelines see the read
        run(df, tmp / "dst", tmp / "cp")
        assert [r[0] for r in rows(spark, str(tmp / "dst"))] == [1, 2]
        feed = spark.readStream.option("readChangeFeed", "true").table("events")
        assert leaves(feed) == {"StreamingRelationV2"}
    finally:
        lake.detach()


AGGREGATE = """
CREATE OR REFRESH STREAMING TABLE readings
AS SELECT * FROM STREAM read_files("{land}", format => "json");

CREATE OR REFRESH STREAMING TABLE totals
AS SELECT device, sum(value) AS total FROM STREAM(readings) GROUP BY device;
"""


def test_a_pipelines_stateful_flow_streams_its_input_natively(spark, tmp_path, caplog,
                                                               keep_lakehouse):
    """An aggregate's flow cannot be re-applied batch by batch (pipeline/run/native.py): its
    stream of the upstream table is the native Delta source when the query starts, and two
    runs on the same checkpoint count every reading once."""
    land = tmp_path / "land"
    land.mkdir()

    def land_file(name: str, records: list[tuple[str, int]]) -> None:
        (land / name).write_text("".join(
            json.dumps({"device": d, "value": v}) + "\n" for d, v in records))

    land_file("1.json", [("a", 1), ("b", 2), ("a", 3)])
    root = project(tmp_path, {"p.sql": AGGREGATE.format(land=land)}, globs=("defs/*.sql",))
    caplog.set_level(logging.DEBUG, logger="headwater.delta.native")
    lake, results = run_pipeline(spark, root)
    assert {r.status.name for r in results.values()} == {"COMPLETED"}
    readings = str((root / "lake" / "readings").resolve())
    assert f"stream of {readings}: Spark's parquet reader (a native Delta source)" \
        in caplog.text
    land_file("2.json", [("b", 10)])
    lake, results = run_pipeline(spark, root)
    totals = sorted(tuple(r) for r in lake.read("totals").collect())
    assert totals == [("a", 4), ("b", 12)]
    lake.detach()
