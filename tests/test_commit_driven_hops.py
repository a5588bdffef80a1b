"""Commit-driven hops (pipeline/run/hops.py): in a continuous run, a flow streaming Delta
tables starts its micro-batch when its input commits, a flow reading a local folder's files
when a file lands, and materialized views are recomputed when a batch ends; the trigger
interval is only the floor.

The run's interval here is a minute: the landing folder's flow waits for new files up to its
own ``pipelines.trigger.interval`` (1 s); silver and doubled wait for their inputs' commits (2 s
at most per wait), and total is recomputed when a batch ends. No test times anything."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.types import IntegerType, StructField, StructType
from tests.pipelines import build, project

from headwater.conf.context import adding_stream_read_options
from headwater.conf.layout import COMMIT_WAIT_OPTION
from headwater.delta.log import DeltaLog
from headwater.delta.schema import spark_schema
from headwater.delta.source import DeltaStreamReader, Offset
from headwater.ingest.source import FilesDataSource
from headwater.monitor.observer import FlowStatus
from headwater.pipeline.run import Runner
from headwater.pipeline.run.hops import CommitSignal
from headwater.spark.plan import stream_leaf_options

DEFS = """
@headwater.table(spark_conf={{"pipelines.trigger.interval": "1 second"}})
def bronze():
    return headwater.read_files({landing!r}, format="json", schema="id INT, amount INT")

@headwater.table
@headwater.expect_or_drop("positive", "amount > 0")
def silver():
    return spark.readStream.table("bronze")

@headwater.table
def doubled():
    return headwater.read_stream("silver").select("id", (F.col("amount") * 2).alias("amount"))

@headwater.materialized_view
def total():
    return headwater.read("doubled").groupBy().agg(F.sum("amount").alias("amount"))
"""


def land(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    tmp.rename(folder / name)


def wait_for(check, what: str, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - a table not created yet
            pass
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {what}")


def total_amount(lake: Path) -> int | None:
    rows = DeltaTable(str(lake / "total")).to_pyarrow_table().to_pylist()
    return rows[0]["amount"] if rows else None


@contextlib.contextmanager
def continuous_run(graph):
    """``graph`` running continuously (60 s trigger) on a thread while the block runs; then
    stopped and joined. Yields (the run's messages, its results once it ended)."""
    messages: list[str] = []
    results: list = []
    runner = Runner(graph, {"processingTime": "60 seconds"}, True, echo=messages.append)
    thread = threading.Thread(target=lambda: results.extend(runner.run()), daemon=True)
    thread.start()
    try:
        yield messages, results
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the run said: {messages}") from None
    finally:
        runner.stop_requested.set()
        thread.join(180)
    assert not thread.is_alive()


def test_downstream_flows_and_views_follow_their_inputs_commits(spark, tmp_path):
    landing = tmp_path / "landing"
    land(landing, "a.json", [{"id": 1, "amount": 5}])
    root = project(tmp_path, {"p.py": DEFS.format(landing=str(landing))})
    lake = root / "lake"
    graph = build(spark, root)
    with continuous_run(graph) as (messages, results):
        wait_for(lambda: total_amount(lake) == 10, "the first landing in total")
        # a landing while the flows run
        land(landing, "b.json", [{"id": 2, "amount": 7}, {"id": 3, "amount": -1}])
        wait_for(lambda: total_amount(lake) == 24, "the second landing in total")
        wait_for(lambda: len(DeltaTable(str(lake / "silver__quarantine"))
                             .to_pyarrow_table()) == 1, "the bad row quarantined")
    by_key = {r.key: r for r in results}
    # the local folder's file stream waits for files; both Delta reads
    # (spark.readStream.table and headwater.read_stream, the second one native) wait for
    # their input's commits
    assert {k: r.commit_driven for k, r in by_key.items() if k != "total"} == \
        {"bronze": True, "silver": True, "doubled": True}
    assert all(r.status in (FlowStatus.STOPPED, FlowStatus.COMPLETED) for r in results), \
        [(r.key, r.status, r.error) for r in results]
    assert any("started   silver" in m and "batches on its input's commits" in m
               for m in messages), messages
    # stopped between batches: every planned batch committed, none replayed twice
    for flow in ("silver", "doubled"):
        checkpoint = lake / "_checkpoints" / flow / flow
        offsets = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir()
                         if p.name.isdigit())
        commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir()
                         if p.name.isdigit())
        assert offsets == commits, flow
    ids = sorted(r["id"] for r in DeltaTable(str(lake / "doubled")).to_pyarrow_table()
                 .to_pylist())
    assert ids == [1, 2]


def reader(path: Path, wait_ms: int) -> DeltaStreamReader:
    log = DeltaLog(str(path))
    table = log.table()
    schema = spark_schema(table.schema().to_json())
    return DeltaStreamReader(str(path), {COMMIT_WAIT_OPTION: str(wait_ms)}, schema, schema,
                             [], table.metadata().id)


def test_the_delta_source_answers_when_the_next_commit_lands(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"x": [1]}))
    source = reader(path, 120_000)
    start = source.initialOffset()
    first = source.latestOffset(start, None)
    assert first != start  # the snapshot's file
    source.commit(first)

    def commit_later() -> None:
        time.sleep(0.5)
        write_deltalake(str(path), pa.table({"x": [2]}), mode="append")

    writer = threading.Thread(target=commit_later)
    writer.start()
    try:
        # nothing new yet: the source waits for version 1 and answers with it (without
        # the wait it would answer ``first`` again, and after the wait too)
        nxt = Offset.from_dict(source.latestOffset(first, None))
    finally:
        writer.join()
    assert (nxt.version, nxt.index) == (2, -1)  # version 1 read whole
    assert [e.version for e in source.planner.files_between(Offset.from_dict(first), nxt)] \
        == [1]


def test_without_a_commit_the_source_answers_nothing_new_after_its_wait(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"x": [1]}))
    source = reader(path, 50)
    first = source.latestOffset(source.initialOffset(), None)
    assert source.latestOffset(first, None) == first
    # an available-now query never waits: its last version is fixed when it starts
    source.prepareForTriggerAvailableNow()
    assert source.latestOffset(first, None) == first


def files_reader(landing: Path, schema_location: Path, wait_ms: int | None, **more: str):
    options = {"path": str(landing), "cloudFiles.format": "json",
               "cloudFiles.schemaLocation": str(schema_location),
               "schema": StructType([StructField("id", IntegerType())]).json(),
               "schemaEvolutionMode": "none", **more}
    if wait_ms is not None:
        options[COMMIT_WAIT_OPTION] = str(wait_ms)
    source = FilesDataSource(options)
    return source.streamReader(source.schema())


def test_the_file_source_answers_when_a_file_lands(tmp_path):
    landing = tmp_path / "landing"
    land(landing, "a.json", [{"id": 1}])
    source = files_reader(landing, tmp_path / "schema", 120_000)
    start = source.initialOffset()
    first = source.latestOffset(start, source.getDefaultReadLimit())
    assert first["seq"] == 1  # a.json
    source.commit(first)
    lander = threading.Thread(target=lambda: (time.sleep(0.5),
                                              land(landing, "b.json", [{"id": 2}])))
    lander.start()
    try:
        # nothing new yet: the source looks for files until b.json lands and answers with
        # it (without the wait it would answer ``first`` again at once)
        nxt = source.latestOffset(first, source.getDefaultReadLimit())
    finally:
        lander.join()
    assert nxt["seq"] == 2
    assert [Path(f.path).name for f in source.index.files_between(1, 2)] == ["b.json"]


def test_a_file_landing_in_a_new_subfolder_ends_the_wait(tmp_path):
    landing = tmp_path / "landing"
    land(landing, "a.json", [{"id": 1}])
    source = files_reader(landing, tmp_path / "schema", 120_000)
    first = source.latestOffset(source.initialOffset(), source.getDefaultReadLimit())
    lander = threading.Thread(target=lambda: (time.sleep(0.3),
                                              land(landing / "2026" / "11", "b.json",
                                                   [{"id": 2}])))
    lander.start()
    try:
        nxt = source.latestOffset(first, source.getDefaultReadLimit())
    finally:
        lander.join()
    assert [Path(f.path).name for f in source.index.files_between(first["seq"], nxt["seq"])] \
        == ["b.json"]


def test_without_a_file_the_file_source_answers_nothing_new_after_its_wait(tmp_path):
    landing = tmp_path / "landing"
    land(landing, "a.json", [{"id": 1}])
    source = files_reader(landing, tmp_path / "schema", 50)
    first = source.latestOffset(source.initialOffset(), source.getDefaultReadLimit())
    assert source.waits_for_files
    assert source.latestOffset(first, source.getDefaultReadLimit()) == first
    assert not files_reader(landing, tmp_path / "schema2", None).waits_for_files


def test_an_available_now_file_source_never_waits(tmp_path):
    landing = tmp_path / "landing"
    land(landing, "a.json", [{"id": 1}])
    source = files_reader(landing, tmp_path / "schema", 600_000)
    source.prepareForTriggerAvailableNow()
    answers: list = []
    asker = threading.Thread(target=lambda: answers.append(
        source.latestOffset(source.latestOffset(source.initialOffset(),
                                                source.getDefaultReadLimit()),
                            source.getDefaultReadLimit())), daemon=True)
    asker.start()
    asker.join(120)  # a source that waited would still be asking (10 minutes)
    assert not asker.is_alive()
    assert answers == [{"seq": 1, "hw_file_index": source.opts.index_path}]


def test_a_stream_skipping_existing_files_still_finds_new_ones(tmp_path):
    """includeExistingFiles=false with as many existing files as maxFilesPerTrigger: the
    skipped files are no backlog to read, so the source still lists the folder."""
    landing = tmp_path / "landing"
    for name in ("a.json", "b.json"):
        land(landing, name, [{"id": 1}])
    source = files_reader(landing, tmp_path / "schema", None, includeExistingFiles="false",
                          maxFilesPerTrigger="2")
    start = source.initialOffset()
    assert source.latestOffset(start, source.getDefaultReadLimit()) == start  # both skipped
    land(landing, "c.json", [{"id": 3}])
    end = source.latestOffset(start, source.getDefaultReadLimit())
    assert [Path(f.path).name for f in source.index.files_between(0, end["seq"])] \
        == ["c.json"]


def test_only_a_local_folders_stream_in_a_run_gets_the_wait(spark, tmp_path):
    """The run's commit wait reaches a file stream of a local folder read inside the run's
    context, never one outside it nor one of an object store (a look per 50 ms would be a
    request each)."""
    schema = "id INT"
    wait = {COMMIT_WAIT_OPTION: "1000"}

    def leaf_options(path: str) -> dict[str, str]:
        df = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
              .option("cloudFiles.schemaLocation", str(tmp_path / "schemas" / path[-1]))
              .schema(schema).load(path))
        [options] = stream_leaf_options(df)
        assert options is not None
        return options

    (tmp_path / "in").mkdir()
    assert COMMIT_WAIT_OPTION not in leaf_options(str(tmp_path / "in"))
    with adding_stream_read_options(wait):
        assert leaf_options(str(tmp_path / "in"))[COMMIT_WAIT_OPTION] == "1000"
        assert COMMIT_WAIT_OPTION not in leaf_options("s3://bucket/landing/a")


def test_the_runner_wakes_when_a_views_input_commits(spark, tmp_path):
    """Between passes the continuous runner waits up to its interval; a view's input that
    commits meanwhile ends the wait (its next commit file seen), before any batch's progress
    reaches the listener: here no query runs at all."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"x": [1]}))
    log = DeltaLog(str(path))
    version = log.latest_version()
    assert log.local and not log.committed_after(version)
    signal = CommitSignal(spark)
    stop = threading.Event()
    woke = threading.Event()

    def wait() -> None:
        signal.wait(600, stop, lambda: log.committed_after(version))
        woke.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    try:
        assert not woke.wait(0.3)  # nothing committed: still waiting
        write_deltalake(str(path), pa.table({"x": [2]}), mode="append")
        assert woke.wait(120)  # the commit, not the 600 s interval, ended the wait
    finally:
        stop.set()
        waiter.join(10)
        signal.close()
    assert log.committed_after(version)


USERS_SPELLINGS = {
    "sdp.sql": """
CREATE OR REFRESH STREAMING TABLE by_sql
AS SELECT * FROM STREAM read_files('{landing}', format => 'json', schema => 'id INT');
""",
    "dlt.py": """
@headwater.table
def by_cloudfiles():
    return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
            .schema("id INT").load({landing!r}))
""",
}


def test_databricks_spellings_of_a_file_stream_are_commit_driven(spark, tmp_path):
    """Auto Loader as Databricks users write it (SQL STREAM read_files, and
    spark.readStream.format("cloudFiles") in Python) waits for files in a continuous run."""
    landing = tmp_path / "landing"
    land(landing, "a.json", [{"id": 1}])
    root = project(tmp_path, {name: text.format(landing=str(landing))
                              for name, text in USERS_SPELLINGS.items()})
    lake = root / "lake"
    graph = build(spark, root)

    def rows(table: str) -> int:
        return len(DeltaTable(str(lake / table)).to_pyarrow_table())

    with continuous_run(graph) as (_, results):
        wait_for(lambda: rows("by_sql") == 1 and rows("by_cloudfiles") == 1, "the first file")
        land(landing, "b.json", [{"id": 2}])
        # a 60 s trigger: only the wait for files brings b.json in before the test's bound
        wait_for(lambda: rows("by_sql") == 2 and rows("by_cloudfiles") == 2, "the second file",
                 seconds=45)
    assert {r.key: r.commit_driven for r in results} == \
        {"by_sql": True, "by_cloudfiles": True}
