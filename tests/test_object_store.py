"""Delta tables on S3 (moto's server on 127.0.0.1): streaming source and sink, batch reads and
writes, concurrent writers, restarts, credentials given as options and never written down.

The test process has no AWS_* credentials in its environment: every secret reaches delta-rs,
pyarrow and Spark's Python workers as options (or [storage] in headwater.toml)."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.object_store import MotoServer, use_credentials

import headwater
from headwater.conf import storage
from headwater.errors import HeadwaterError

pytestmark = pytest.mark.usefixtures("no_env_credentials")


def _ids(moto: MotoServer, uri: str) -> list[int]:
    table = DeltaTable(uri, storage_options=moto.options())
    return sorted(table.to_pyarrow_dataset().to_table(columns=["id"]).column("id").to_pylist())


def _append(moto: MotoServer, uri: str, ids: range) -> None:
    write_deltalake(uri, pa.table({"id": pa.array(list(ids), pa.int64()),
                                   "v": [f"v{i}" for i in ids]}),
                    mode="append", storage_options=moto.options())


def test_batch_write_and_read_on_s3_with_options(spark, moto):
    table = f"{moto.bucket()}/people"
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string")
    with headwater.translated():
        (df.write.format("delta").mode("append").options(**moto.options())
         .option("partitionBy", "name").save(table))
        df.limit(1).write.format("delta").mode("append").options(**moto.options()).save(table)
        back = spark.read.format("delta").options(**moto.options()).load(table)
        assert sorted(back.collect()) == sorted([(1, "a"), (2, "b"), (3, "c"), (1, "a")])
    keys = moto.keys(table)
    assert any(k.endswith("_delta_log/00000000000000000001.json") for k in keys)
    assert any("/name=a/" in k for k in keys)
    assert DeltaTable(table, storage_options=moto.options()).version() == 1


def _grep(secret: bytes, files: list[Path]) -> list[str]:
    return [str(f) for f in files if f.is_file() and secret in f.read_bytes()]


def test_s3_stream_restarts_exactly_once_and_never_writes_the_secret(spark, moto, tmp, capfd):
    bucket = moto.bucket()
    src, dst, cp = f"{bucket}/src", f"{bucket}/dst", tmp / "cp"
    _append(moto, src, range(0, 20))

    def run() -> dict:
        reader = spark.readStream.format("delta").options(**moto.options()).load(src)
        with headwater.translated():
            query = (reader.writeStream.format("delta").options(**moto.options())
                     .option("checkpointLocation", str(cp)).trigger(availableNow=True)
                     .start(dst))
            query.awaitTermination()
        reader.explain(True)  # Spark's plan strings name the options: they must be redacted
        return {"progress": str(query.recentProgress), "plan": str(reader)}

    first = run()
    _append(moto, src, range(20, 35))
    second = run()
    run()  # nothing new: no duplicate commit
    assert _ids(moto, dst) == list(range(35))
    assert DeltaTable(dst, storage_options=moto.options()).version() == 1

    secret = moto.secret.encode()
    out, err = capfd.readouterr()
    assert moto.secret not in out + err + str(first) + str(second)
    assert _grep(secret, list(tmp.rglob("*"))) == []  # checkpoint: offsets, commits, metadata
    leaked = [k for k in moto.keys(bucket) if secret in moto.read(f"{bucket}/{k}")]
    assert leaked == []
    assert "hwtestaccess" in str(storage.Credentials(dst, moto.options()).__getstate__())
    assert moto.secret not in repr(storage.Credentials(dst, moto.options()))


PIPELINE = """
import headwater
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

@headwater.table
def bronze():
    spark = SparkSession.active()
    return spark.readStream.format("delta").load("{src}").withColumn("n", F.col("id") * 2)
"""


def test_pipeline_with_storage_in_headwater_toml_keeps_the_secret_out_of_its_files(
        spark, moto, tmp, capfd, keep_lakehouse):
    from headwater.pipeline.run import run_project

    src = f"{moto.bucket()}/events"
    _append(moto, src, range(10))
    proj = tmp / "proj"
    (proj / "defs").mkdir(parents=True)
    settings = "\n".join(f'{k} = "{v}"' for k, v in moto.options().items())
    (proj / "headwater.toml").write_text(
        '[pipeline]\nname = "s3p"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n\n'
        f"[storage]\n{settings}\n")
    (proj / "defs" / "p.py").write_text(textwrap.dedent(PIPELINE.format(src=src)))
    outcome = run_project(proj, echo=print)
    assert outcome.ok, outcome.results
    table = DeltaTable(str(proj / "lake" / "bronze")).to_pyarrow_dataset().to_table()
    assert sorted(table.column("n").to_pylist()) == [2 * i for i in range(10)]
    assert (proj / "lake" / "_event_log" / "_delta_log").is_dir()
    out, err = capfd.readouterr()
    assert moto.secret not in out + err
    files = [f for f in proj.rglob("*") if f.name != "headwater.toml"]
    assert _grep(moto.secret.encode(), files) == []  # event log, run file, checkpoints, tables


def test_two_concurrent_appenders_lose_no_commit(moto):
    table = f"{moto.bucket()}/shared"
    _append(moto, table, range(1))
    errors: list[BaseException] = []

    def appender(start: int) -> None:
        try:
            for i in range(5):
                _append(moto, table, range(start + i * 10, start + i * 10 + 10))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(s,)) for s in (100, 1000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len(_ids(moto, table)) == 1 + 2 * 50
    assert DeltaTable(table, storage_options=moto.options()).version() == 10


def test_a_checkpoint_on_s3_without_hadoop_aws_is_a_clear_error(spark, moto):
    bucket = moto.bucket()
    _append(moto, f"{bucket}/src", range(3))
    reader = spark.readStream.format("delta").options(**moto.options()).load(f"{bucket}/src")
    with pytest.raises(HeadwaterError) as refused, headwater.translated():
        (reader.writeStream.format("delta").options(**moto.options())
         .option("checkpointLocation", f"{bucket}/cp").trigger(availableNow=True)
         .start(f"{bucket}/dst").awaitTermination())
    assert refused.value.code == "HW_HADOOP_FILESYSTEM_MISSING"
    assert "s3://" in refused.value.what and moto.secret not in str(refused.value)


def test_session_storage_options_reach_the_workers_without_reader_options(spark, moto):
    bucket = moto.bucket()
    _append(moto, f"{bucket}/t", range(4))
    session = headwater.spark_session(storage_options=moto.options())
    assert session is spark
    assert sorted(r.id for r in spark.read.format("delta").load(f"{bucket}/t").collect()) \
        == [0, 1, 2, 3]
    with pytest.raises(HeadwaterError) as refused, headwater.translated():
        spark.read.format("delta").option("fs.s3a.fast.upload", "true").load(f"{bucket}/t")
    assert refused.value.code == "HW_STORAGE_OPTION_UNKNOWN"


def test_storage_options_translate_s3a_names_redact_and_register_when_unpickled():
    import pickle

    opts, rest = storage.split_options({
        "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK", "AWS_REGION": "eu-west-1",
        "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint": "http://h:9",
        "maxFilesPerTrigger": "3"})
    assert opts == {"aws_access_key_id": "AK", "aws_secret_access_key": "SK",
                    "aws_region": "eu-west-1", "aws_allow_http": "true",
                    "aws_endpoint_url": "http://h:9"}
    assert rest == {"maxFilesPerTrigger": "3"}
    creds = storage.Credentials("s3://bkt/t", opts)
    assert "SK" not in repr(creds) and "SK" not in str(creds)
    assert storage.options_for("s3://other-bkt/x") is None
    pickle.loads(pickle.dumps(creds))  # what a Spark worker does with a reader
    assert storage.options_for("s3://bkt/elsewhere")["aws_secret_access_key"] == "SK"
    assert storage.options_for("/local/path") is None
    # s3a:// (a checkpoint's lease) is the same bucket as s3://
    assert storage.options_for("s3a://bkt/ckpt/_lease")["aws_secret_access_key"] == "SK"
    # two tables of one bucket with their own keys each keep their own
    storage.register("s3://bkt/t2", {"aws_access_key_id": "AK2", "aws_secret_access_key": "SK2"})
    assert storage.options_for("s3://bkt/t/_delta_log")["aws_secret_access_key"] == "SK"
    assert storage.options_for("s3://bkt/t2/part-0.parquet")["aws_secret_access_key"] == "SK2"
    assert storage.options_for("s3://bkt/t22")["aws_secret_access_key"] == "SK2"  # the bucket's
    storage.forget_registered()


def test_storage_section_of_headwater_toml(tmp):
    from headwater.conf.project_file import Project

    (tmp / "headwater.toml").write_text(
        '[pipeline]\nname = "p"\ndefinitions = ["*.py"]\n\n'
        '[storage]\nAWS_SECRET_ACCESS_KEY = "topsecret"\nAWS_ALLOW_HTTP = true\n')
    project = Project.load(tmp)
    assert project.storage == {"AWS_SECRET_ACCESS_KEY": "topsecret", "AWS_ALLOW_HTTP": "true"}
    assert "topsecret" not in repr(project)
    (tmp / "headwater.toml").write_text(
        '[pipeline]\nname = "p"\ndefinitions = ["*.py"]\n\n[storage]\nAWS_REGION = 5\n')
    with pytest.raises(HeadwaterError) as invalid:
        Project.load(tmp)
    assert invalid.value.code == "HW_STORAGE_INVALID"


def test_pipeline_writes_on_s3_auto_compact_and_count_their_batch(spark, moto):
    """A pipeline table on S3 goes through the Python writer: headwater run's auto_compact
    reaches it (as Spark's parquet path locally), and the rows a batch wrote are read from
    the commit carrying its txn, not from the newest commit (an OPTIMIZE may follow it); a
    replayed batch reports 0."""
    from headwater.ingest.registration import register_sources
    from headwater.pipeline.run.flow_writer import write_table

    use_credentials(moto)  # as [storage] in headwater.toml gives them to a run ...
    register_sources(spark)  # ... whose session's sources carry them to the workers
    uri = f"{moto.bucket()}/lake/t"
    _append(moto, uri, range(1))
    DeltaTable(uri, storage_options=moto.options()).alter.set_table_properties(
        {"headwater.autoCompact.minNumFiles": "2"}, raise_if_not_exists=False)
    reported = [write_table(spark.range(i, i + 2), uri, "append", ("app", i), auto_compact=True)
                for i in range(1, 4)]
    table = DeltaTable(uri, storage_options=moto.options())
    operations = [h["operation"] for h in reversed(table.history())]
    assert reported == [2, 2, 2]
    assert operations.count("OPTIMIZE") >= 1 and operations[-1] == "OPTIMIZE", operations
    assert write_table(spark.range(1, 3), uri, "append", ("app", 3), auto_compact=True) == 0
    assert _ids(moto, uri) == [0, 1, 2, 2, 3, 3, 4]


def test_secrets_are_redacted_in_every_spelling_the_dashboard_may_meet(tmp):
    from headwater.conf.project_file import Project
    from headwater.monitor.state import redact

    for text in ("aws_secret_access_key=SK1 failed",
                 "options {'aws_secret_access_key': 'SK1', 'aws_region': 'eu'}",
                 '{"AWS_SECRET_ACCESS_KEY": "SK1"}', "Map(fs.s3a.secret.key -> SK1)"):
        shown = redact(text, "s3://bkt/lake")
        assert "SK1" not in shown and "****" in shown, shown
    assert "'aws_region': 'eu'" in redact("{'aws_region': 'eu'}", "s3://bkt/lake")
    assert redact("password=SK1)x}y", "s3://bkt/lake") == "password=****"  # no tail shown
    for plain in ("flow bronze_tokens -> silver failed", "Kansas -> Texas"):
        assert redact(plain, "s3://bkt/lake") == plain  # ordinary arrows stay as they are
    (tmp / "headwater.toml").write_text(
        '[pipeline]\nname = "p"\ndefinitions = ["*.py"]\n\n'
        '[spark]\n"spark.hadoop.fs.s3a.secret.key" = "SK1"\n')
    assert "SK1" not in repr(Project.load(tmp))
