"""What a triggered run adds around Spark, cut: native flows list each batch's files on the
driver from the checkpoint's offset log, start alongside the streaming table they read, and
materialized views read lakehouse tables with Spark's parquet reader however they name them.
Real tables, real checkpoints; the event log is read back with deltalake."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from tests.pipelines import build, project
from tests.support import native, write

from headwater.conf.triggers import trigger_kwargs
from headwater.delta.log import DeltaLog
from headwater.delta.schema import spark_schema
from headwater.delta.source import Offset, SourceOptions, SourcePlanner
from headwater.pipeline.run import Runner
from headwater.pipeline.run.native import BatchFiles, read_through
from headwater.spark.plan import relations

PIPELINE = """
@headwater.table
def bronze():
    return headwater.read_stream("src", maxFilesPerTrigger=1)

@headwater.table
def silver():
    return spark.readStream.table("bronze").withColumn("twice", F.col("n") * 2)

@headwater.materialized_view
def total():
    return spark.table("silver").groupBy().agg(F.sum("twice").alias("total"))

@headwater.materialized_view
def total_sql():
    return spark.sql("SELECT sum(twice) AS total FROM silver")

@headwater.materialized_view
def first_version():
    return headwater.read("silver", versionAsOf=1).groupBy().count()
"""


def events(root: Path) -> list[dict]:
    table = DeltaTable(str(root / "_event_log")).to_pyarrow_dataset().to_table(use_threads=False)
    return sorted(table.to_pylist(), key=lambda e: e["ts"])


def land(root: Path, ids: range) -> None:
    for i in ids:  # one commit per id: bronze reads one file per batch
        write(root / "src", {"n": [i]})


def run(spark, proj: Path, trigger: str = "available-now"):
    graph = build(spark, proj)
    try:
        results = Runner(graph, trigger_kwargs(trigger), False, echo=lambda _: None).run()
    finally:
        graph.close()
    return graph, {r.key: r for r in results}


def test_a_native_flow_starts_alongside_its_input_and_reads_its_batches_from_the_offset_log(
        spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    root = proj / "lake"
    land(root, range(1, 5))
    graph, results = run(spark, proj)
    assert {r.status for r in results.values()} == {"completed"}, results
    assert results["silver"].kind == "streaming table, native read"
    lake = graph.lakehouse
    assert sorted(r.twice for r in lake.read("silver").collect()) == [2, 4, 6, 8]
    assert lake.read("total").collect()[0].total == lake.read("total_sql").collect()[0].total \
        == 20
    rows = events(root)
    started = [json.loads(e["details"] or "{}") for e in rows
               if e["event"] == "flow_status" and e["flow"] == "silver"
               and e["status"] == "running"]
    assert started == [{"native_read": "bronze", "alongside": "bronze"}]
    # every batch's files came from the driver's listing: its details say what it read
    silver = [e for e in rows if e["event"] == "progress" and e["flow"] == "silver"]
    read = [json.loads(e["details"]) for e in silver]
    assert silver and all(d["input_files"] >= 0 for d in read)
    assert sum(d["input_files"] for d in read) == 4  # bronze wrote one file per batch
    assert sum(e["input_rows"] for e in silver) == sum(d["input_rows"] for d in read) == 4

    land(root, range(5, 7))  # the next run goes on from the logged offsets
    graph, results = run(spark, proj)
    assert {r.status for r in results.values()} == {"completed"}, results
    assert sorted(r.twice for r in graph.lakehouse.read("silver").collect()) == \
        [2, 4, 6, 8, 10, 12]
    assert graph.lakehouse.read("total").collect()[0].total == 42
    assert graph.lakehouse.read("first_version").collect()[0]["count"] == \
        DeltaTable(str(root / "silver"), version=1).to_pyarrow_dataset().count_rows()


def test_a_trigger_once_run_keeps_its_flows_in_order(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    root = proj / "lake"
    land(root, range(1, 3))
    graph, results = run(spark, proj, "once")
    assert {r.status for r in results.values()} == {"completed"}, results
    running = [json.loads(e["details"] or "{}") for e in events(root)
               if e["event"] == "flow_status" and e["flow"] == "silver"
               and e["status"] == "running"]
    assert running == [{"native_read": "bronze"}]
    assert graph.lakehouse.read("silver").count() == 2  # after bronze ended: every row


def test_materialized_views_read_tables_natively_however_they_name_them(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    land(proj / "lake", range(1, 3))
    graph, _ = run(spark, proj)
    graph = build(spark, proj)
    try:
        for view in ("total", "total_sql"):
            assert native(graph.rebuild(graph.flows[view])), view
        # time travel too, at the version asked for
        planned = graph.rebuild(graph.flows["first_version"])
        assert native(planned) and [r.source for r in relations(planned)] == ["hw_silver"]
        assert planned.collect()[0]["count"] == DeltaTable(
            str(proj / "lake" / "silver"), version=1).to_pyarrow_dataset().count_rows()
    finally:
        graph.close()


def test_batch_zero_is_derived_where_the_options_make_it_certain(tmp_path):
    table = tmp_path / "t"
    for i in range(4):
        write(table, {"n": [i]})  # versions 0..3, one file each
    log = DeltaLog(str(table))
    meta = log.table().metadata()
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    # batch 0 of a stream that first saw version 1 ended after version 2: Spark logs only
    # the end, and a driver asked now sees version 3 as the latest
    end = Offset(meta.id, 3, -1, False)
    (checkpoint / "offsets" / "0").write_text(
        "v1\n{}\n" + json.dumps(end.to_dict()) + "\n")

    def planner(options: dict[str, str]) -> SourcePlanner:
        return SourcePlanner(log, spark_schema(log.table().schema().to_json()), [], meta.id,
                             SourceOptions.from_options(options))

    expected = planner({}).files_between(Offset(meta.id, 1, -1, True), end)
    got = BatchFiles(str(table), {}, str(checkpoint)).files(0)
    assert got is not None
    assert sorted(e.path for e in got) == sorted(e.path for e in expected)  # versions 0..2
    assert len(got) == 3
    versioned = BatchFiles(str(table), {"startingVersion": "2"}, str(checkpoint)).files(0)
    assert versioned is not None and [e.version for e in versioned] == [2]
    for uncertain in ({"startingVersion": "latest"}, {"ignoreDeletes": "true"},
                      {"startingTimestamp": "2020-01-01"}):
        assert BatchFiles(str(table), uncertain, str(checkpoint)).files(0) is None, uncertain
    assert BatchFiles(str(table), {}, str(checkpoint)).files(1) is None  # not logged
    # read through: a committed batch whose end is past the version
    assert not read_through(str(checkpoint), 2)  # batch 0 is not committed yet
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    assert read_through(str(checkpoint), 2) and not read_through(str(checkpoint), 3)
