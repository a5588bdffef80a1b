"""A lakehouse whose root is on S3 (moto's server on 127.0.0.1): tables and the event log on
``s3://``, checkpoints, run files and ingest state in a local state folder.

The test process has no AWS_* credentials in its environment: they come from ``[storage]`` /
``spark_session(storage_options=...)`` only, and are never written down or printed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.object_store import MotoServer, use_credentials

from headwater import Lakehouse
from headwater.conf.location import ObjectPath, is_remote, location, remove_tree
from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.lakehouse.names import list_tables
from headwater.monitor.commands import history_lines, resolve_lake, status_lines
from headwater.monitor.events import read_events
from headwater.monitor.state import DashboardState, redact

pytestmark = pytest.mark.usefixtures("no_env_credentials")


def _grep(secret: bytes, files: list[Path]) -> list[str]:
    return [str(f) for f in files if f.is_file() and secret in f.read_bytes()]


def test_object_paths_list_tables_and_remove_trees_on_s3(moto):
    use_credentials(moto)
    root = f"{moto.bucket()}/lake"
    for rel in ("bronze", "sales/orders", "_event_log", "_hidden", "bronze_copy/x"):
        write_deltalake(f"{root}/{rel}", pa.table({"id": [1]}), storage_options=moto.options())
    lake = location(root + "/")
    assert isinstance(lake, ObjectPath) and str(lake) == root and is_remote(lake)
    assert (lake / "sales" / "orders").relative_to(root).parts == ("sales", "orders")
    assert (lake / "bronze").parent == lake and lake.name == "lake"
    assert (lake / "bronze" / "_delta_log").is_dir() and not (lake / "nothing").exists()
    # system tables first; _hidden is reserved; bronze_copy/x is a table in schema bronze_copy
    assert list_tables(root) == ["_event_log", "bronze", "bronze_copy.x", "sales.orders"]
    remove_tree(lake / "sales")
    assert list_tables(lake) == ["_event_log", "bronze", "bronze_copy.x"]
    remove_tree(lake / "sales")  # gone already: fine
    assert isinstance(location("rel/lake"), Path) and not is_remote("/tmp/x")


def test_a_root_on_s3_needs_a_local_state_folder(spark, moto, tmp, keep_lakehouse):
    use_credentials(moto)
    root = f"{moto.bucket()}/lake"
    with pytest.raises(HeadwaterError) as missing:
        Lakehouse(root, spark)
    assert missing.value.code == "HW_LAKEHOUSE_STATE_DIR_MISSING" and "state_dir" in missing.value.fix
    with pytest.raises(HeadwaterError) as remote:
        Lakehouse(root, spark, state_dir=f"{root}-state")
    assert remote.value.code == "HW_LAKEHOUSE_STATE_DIR_INVALID"
    (tmp / "headwater.toml").write_text(
        f'[pipeline]\nroot = "{root}"\nstate_dir = "state"\ndefinitions = ["*.py"]\n')
    project = Project.load(tmp)
    assert str(project.root) == root and project.state_dir == tmp / "state"
    (tmp / "headwater.toml").write_text(
        '[pipeline]\nroot = "lake"\nstate_dir = "s3://b/state"\ndefinitions = ["*.py"]\n')
    with pytest.raises(HeadwaterError, match="object store"):
        Project.load(tmp)


def test_tables_by_name_on_s3_with_local_checkpoints(spark, moto, tmp, keep_lakehouse):
    use_credentials(moto)
    root = f"{moto.bucket()}/lake"
    lake = Lakehouse(root, spark, state_dir=tmp / "state")
    try:
        lake.write(spark.createDataFrame([(i, i % 3) for i in range(10)], "id long, k long"),
                   "bronze")
        assert lake.tables() == ["bronze"] and lake.exists("bronze")
        assert spark.table("bronze").count() == 10
        query = lake.write_stream(lake.read_stream("bronze"), "sales.silver",
                                  trigger="available-now")
        query.awaitTermination(120)
        assert Path(lake.checkpoint("sales.silver")).is_relative_to(tmp / "state")
        assert (tmp / "state" / "_checkpoints" / "sales.silver" / "commits" / "0").is_file()
        lake.sql("CREATE OR REPLACE TABLE gold AS SELECT k, count(*) AS n FROM sales.silver "
                 "GROUP BY k")
        assert sorted(tuple(r) for r in spark.sql("SELECT k, n FROM gold").collect()) == \
            [(0, 4), (1, 3), (2, 3)]
        assert DeltaTable(f"{root}/gold", storage_options=moto.options()).version() == 0
        # a replace sets the new comment and properties in its one commit, as on a local root
        lake.sql("CREATE TABLE meta (a INT) COMMENT 'old' "
                 "TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 2 days')")
        lake.sql("CREATE OR REPLACE TABLE meta (b STRING) COMMENT 'new' "
                 "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
        meta = DeltaTable(f"{root}/meta", storage_options=moto.options())
        assert (meta.metadata().description, dict(meta.metadata().configuration)) == \
            ("new", {"delta.enableChangeDataFeed": "true"})
        assert meta.version() == 1 and [f.name for f in meta.schema().fields] == ["b"]
        lake.drop("meta")
        assert lake.tables() == ["bronze", "gold", "sales.silver"]
        lake.drop("gold")
        assert not lake.exists("gold") and lake.tables() == ["bronze", "sales.silver"]
        assert spark.conf.get("headwater.lakehouse.stateDir") == str(tmp / "state")
    finally:
        lake.detach()
    assert not any(p.name == "bronze" for p in (tmp / "state").iterdir())  # no table data here


PIPELINE = """
import headwater
from pyspark.sql import functions as F

@headwater.table
def bronze():
    return headwater.read_files({landing!r}, "json", schema="id long, k string")

@headwater.table
@headwater.expect_or_drop("positive", "id >= 0")
def silver():
    return headwater.read_stream("bronze").withColumn("twice", F.col("id") * 2)

@headwater.materialized_view
def gold():
    return headwater.read("silver").groupBy("k").agg(F.count("*").alias("n"))
"""


def _s3_project(moto, tmp: Path, landing: str) -> tuple[Path, str]:
    root = f"{moto.bucket()}/lake"
    proj = tmp / "proj"
    (proj / "defs").mkdir(parents=True)
    settings = "\n".join(f'{k} = "{v}"' for k, v in moto.options().items())
    (proj / "headwater.toml").write_text(
        f'[pipeline]\nname = "s3lake"\nroot = "{root}"\nstate_dir = "state"\n'
        f'definitions = ["defs/*.py"]\n\n[storage]\n{settings}\n')
    (proj / "defs" / "p.py").write_text(textwrap.dedent(PIPELINE.format(landing=landing)))
    return proj, root


def _land(folder: Path, start: int, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": i if i % 5 else -i - 1, "k": "ab"[i % 2]})
             for i in range(start, start + count)]
    (folder / f"part-{start}.json").write_text("\n".join(lines) + "\n")


def test_pipeline_run_with_the_lakehouse_on_s3(spark, moto, tmp, capfd, keep_lakehouse):
    from headwater.pipeline.run import run_project

    landing = tmp / "landing"
    _land(landing, 0, 10)
    proj, root = _s3_project(moto, tmp, str(landing))
    outcome = run_project(proj, echo=print)
    assert outcome.ok, outcome.results
    written = {r.key: r.rows_written for r in outcome.results}
    assert written["bronze"] == 10 and written["silver"] == 8  # from the S3 commits' stats
    _land(landing, 10, 10)
    again = run_project(proj, echo=print)
    assert again.ok, again.results
    assert str(again.root) == root

    lake = Lakehouse.of(spark)
    assert lake is not None and str(lake.root) == root
    ids = sorted(r.id for r in spark.table("silver").select("id").collect())
    assert ids == [i for i in range(20) if i % 5]  # each once; negatives dropped
    gold = {r.k: r.n for r in lake.sql("SELECT k, n FROM gold").collect()}
    assert gold == {"a": 8, "b": 8}
    state = proj / "state"
    assert (state / "_checkpoints" / "silver").is_dir() and (state / "_runs").is_dir()

    events = read_events(root, ["event", "flow"]).to_pylist()
    assert sum(1 for e in events if e["event"] == "run_started") == 2
    assert any(e["event"] == "progress" and e["flow"] == "silver" for e in events)
    assert "_event_log" in [k.split("/")[1] for k in moto.keys(root)]
    assert not (state / "_event_log").exists()

    lake_root, state_dir = resolve_lake(str(proj), None)
    assert str(lake_root) == root and state_dir == state
    status = "\n".join(status_lines(root, state))
    assert "nothing is running" in status and "silver" in status and "completed" in status
    assert "silver" in "\n".join(status_lines(root))  # no state folder: the event log only
    history = history_lines(location(root), "silver")
    assert history[2].split()[0] == str(
        DeltaTable(f"{root}/silver", storage_options=moto.options()).version())
    snapshot = DashboardState(root, state).snapshot()
    assert {t["name"] for t in snapshot["tables"]} >= {"bronze", "silver", "gold"}
    assert snapshot["lakehouse"] == "lake"
    assert redact(f"failed at {root}/silver/part-0.parquet and s3://other/x", root) == \
        "failed at silver/part-0.parquet and <path outside the lakehouse>"

    out, err = capfd.readouterr()
    secret = moto.secret.encode()
    assert moto.secret not in out + err + status
    assert moto.secret not in json.dumps(snapshot, default=str)  # what the dashboard serves
    files = [f for f in proj.rglob("*") if f.name != "headwater.toml"]
    assert _grep(secret, files) == []  # checkpoints, run files, ingest state
    bucket = root.rsplit("/", 1)[0]
    leaked = [k for k in moto.keys(root) if secret in moto.read(f"{bucket}/{k}")]
    assert leaked == []  # tables and the event log


def test_spark_hadoop_s3a_session_settings_are_credentials_for_s3_paths(spark, moto, tmp):
    import headwater
    from headwater.conf import storage

    # a server of its own: no worker of the shared session has seen its endpoint
    server = MotoServer(moto.binary, log=tmp / "moto.log").start()
    try:
        table = f"{server.bucket()}/t"
        write_deltalake(table, pa.table({"id": [1, 2, 3]}), storage_options=server.options())
        assert storage.options_for(table) is None
        with pytest.raises(Exception):  # noqa: B017 - AWS itself is asked, and cannot be reached
            spark.read.format("delta").load(table).count()
        opts = server.options()
        conf = {"spark.hadoop.fs.s3a.access.key": opts["AWS_ACCESS_KEY_ID"],
                "spark.hadoop.fs.s3a.secret.key": opts["AWS_SECRET_ACCESS_KEY"],
                "spark.hadoop.fs.s3a.endpoint": opts["AWS_ENDPOINT_URL"],
                "spark.hadoop.fs.s3a.endpoint.region": opts["AWS_REGION"],
                "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}  # Hadoop's
        headwater.spark_session(conf=conf)  # the running session: its Python side reads them
        assert storage.options_for(table) == {
            "aws_access_key_id": opts["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": server.secret, "aws_endpoint_url": server.endpoint,
            "aws_region": opts["AWS_REGION"], "aws_allow_http": "true"}
        assert spark.read.format("delta").load(table).count() == 3  # the workers have them
        assert server.secret not in repr(storage.Credentials.for_uri(table))
    finally:
        server.stop()
