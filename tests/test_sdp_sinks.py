"""SDP sinks (``dp.create_sink`` + ``@dp.append_flow(target=sink)``) on headwater: a Delta sink
at a path and a file sink in a folder, each written from its own checkpoint under the
lakehouse, exactly once across runs; a format Spark cannot write as a stream named clearly."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from tests.pipelines import build, project, run

from headwater.pipeline.validate import validate_project

SINKS = """
from pyspark import pipelines as dp

@dp.table
def bronze():
    return spark.readStream.schema("id long, name string").json({inbox!r})

dp.create_sink("to_delta", "delta", {{"path": {delta!r}}})
dp.create_sink("to_files", format="parquet", options={{"path": {files!r}}})

@dp.append_flow(target="to_delta")
def delta_flow():
    return spark.readStream.table("bronze").where("id > 0")

@dp.append_flow(target="to_files")
def files_flow():
    return spark.readStream.table("bronze").select("id", F.upper("name").alias("name"))
"""


def _drop(inbox: Path, name: str, ids: range) -> None:
    inbox.mkdir(exist_ok=True)
    (inbox / name).write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n"
                                      for i in ids))


def test_sinks_receive_each_row_once_across_runs(spark, tmp_path):
    inbox, delta, files = tmp_path / "inbox", tmp_path / "out_delta", tmp_path / "out_files"
    _drop(inbox, "a.json", range(0, 4))
    root = project(tmp_path, {"p.py": SINKS.format(inbox=str(inbox), delta=str(delta),
                                                   files=str(files))})

    lake, results = run(spark, root)
    assert {k: r.status for k, r in results.items()} == {
        "bronze": "completed", "to_delta/delta_flow": "completed",
        "to_files/files_flow": "completed"}, {k: r.error for k, r in results.items()}
    assert results["to_files/files_flow"].rows_written == 4  # counted by the flow itself
    assert results["to_delta/delta_flow"].rows_written == 3
    assert sorted(DeltaTable(str(delta)).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
    got = spark.read.parquet(str(files)).orderBy("id").collect()
    assert [(r.id, r.name) for r in got] == [(i, f"N{i}") for i in range(4)]
    # The sinks are not lakehouse tables; their checkpoints live in the lakehouse.
    assert not lake.exists("to_delta") and not lake.exists("to_files")
    assert Path(lake.checkpoint("to_delta", "delta_flow"), "offsets").is_dir()
    assert Path(lake.checkpoint("to_files", "files_flow"), "offsets").is_dir()

    _drop(inbox, "b.json", range(4, 6))
    _, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    table = DeltaTable(str(delta))
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3, 4, 5]
    assert table.version() == 1  # one commit per batch: the second run added one, nothing else
    got = spark.read.parquet(str(files)).orderBy("id").collect()
    assert [r.id for r in got] == list(range(6))


def test_validate_lists_sinks_with_their_inputs(spark, tmp_path):
    inbox = tmp_path / "inbox"
    _drop(inbox, "a.json", range(2))
    root = project(tmp_path, {"p.py": SINKS.format(inbox=str(inbox), delta="d", files="f")})
    graph = build(spark, root, dry=True)
    try:
        assert graph.upstream("to_delta") == {"bronze"}
        assert graph.written() == ["bronze", "to_delta", "to_files"]
        # a relative sink path is fixed when the definitions load (the working directory then:
        # a spark-pipeline.yml project's folder, as SDP loads it)
        assert graph.registry.datasets["to_delta"].options["path"] == str(Path.cwd() / "d")
    finally:
        graph.close()
    report = validate_project(graph.registry, graph.lakehouse)
    assert not report.errors, report.errors
    assert any(line.startswith("sink") and "to_files" in line and "bronze" in line
               for line in report.lines), report.lines


BAD = """
from pyspark import pipelines as dp

dp.create_sink("to_db", "jdbc", {{"url": "jdbc:sqlite::memory:"}})
dp.create_sink("to_kafka", "kafka", {{"topic": "t"}})

@dp.append_flow(target="to_db")
def db_flow():
    return spark.readStream.schema("id long").json({inbox!r})

@dp.append_flow(target="to_kafka")
def kafka_flow():
    return spark.readStream.schema("id long").json({inbox!r})
"""


def test_a_format_without_a_streaming_writer_is_named(spark, tmp_path):
    inbox = tmp_path / "inbox"
    _drop(inbox, "a.json", range(2))
    root = project(tmp_path, {"p.py": BAD.format(inbox=str(inbox))})
    _, results = run(spark, root)
    db, kafka = results["to_db/db_flow"], results["to_kafka/kafka_flow"]
    assert db.status == kafka.status == "failed"
    assert "HW_PIPELINE_SINK_FORMAT" in db.error and "'jdbc'" in db.error \
        and "no streaming writer" in db.error, db.error
    # "kafka" without Spark's connector is headwater.kafka, which names its missing option
    assert "HW_OPTION_INVALID" in kafka.error and "kafka.bootstrap.servers" in kafka.error, \
        kafka.error


def test_expectations_and_batch_flows_into_a_sink_are_refused(spark, tmp_path):
    import pytest

    from headwater.errors import HeadwaterError

    expect = """
    from pyspark import pipelines as dp
    dp.create_sink("out", "json", {"path": "o"})

    @dp.append_flow(target="out")
    @headwater.expect_or_drop("positive", "id > 0")
    def f():
        return spark.readStream.format("rate").load().selectExpr("value AS id")
    """
    with pytest.raises(HeadwaterError) as info:
        build(spark, project(tmp_path / "a", {"p.py": expect}), dry=True)
    assert info.value.code == "HW_EXPECTATION_INVALID" and "sink 'out'" in str(info.value)

    batch = """
    from pyspark import pipelines as dp
    dp.create_sink("out", "json", {"path": "o"})

    @dp.append_flow(target="out")
    def f():
        return spark.range(3)
    """
    with pytest.raises(HeadwaterError) as info:
        build(spark, project(tmp_path / "b", {"p.py": batch}), dry=True)
    assert info.value.code == "HW_PIPELINE_NOT_A_STREAM" and "p.py:" in str(info.value)
