"""read_files on an S3 landing folder (moto's server on 127.0.0.1): listing, reading, exactly
once across restarts, cleanSource archive and delete (copy then delete), a crash between the
copy and the delete, credentials given only as options and never written down.

The test process has no AWS_* variables: every secret reaches pyarrow in the driver and in
Spark's Python workers as read_files(storage_options=...) / reader options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.object_store import MotoServer

import headwater
from headwater.conf import storage
from headwater.conf.layout import FILE_INDEX
from headwater.errors import HeadwaterError, unwrap
from headwater.ingest import landing
from headwater.ingest.clean import clean_through
from headwater.ingest.index import FileIndex

pytestmark = pytest.mark.usefixtures("no_env_credentials")


def put(moto: MotoServer, uri: str, text: str) -> None:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    moto.client().put_object(Bucket=bucket, Key=key, Body=text.encode())


def ingest(spark, moto: MotoServer, tmp: Path, landing_uri: str, **options) -> None:
    options.setdefault("schema_location", tmp / "schema")
    df = headwater.read_files(landing_uri, storage_options=moto.options(), spark=spark,
                              **options)
    query = (df.writeStream.format("delta").option("checkpointLocation", str(tmp / "cp"))
             .trigger(availableNow=True).start(str(tmp / "out")))
    try:
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001
        raise unwrap(exc) from exc


def rows(spark, tmp: Path) -> list[dict]:
    return [r.asDict() for r in spark.read.format("delta").load(str(tmp / "out")).collect()]


def _grep(secret: bytes, root: Path) -> list[str]:
    return [str(f) for f in root.rglob("*") if f.is_file() and secret in f.read_bytes()]


def test_json_on_s3_ingested_exactly_once_across_restarts_and_the_secret_never_written(
        spark, moto, tmp, capfd):
    src = f"{moto.bucket()}/landing"
    for i in range(3):
        put(moto, f"{src}/day{i % 2}/f{i}.json", json.dumps({"id": i, "name": f"n{i}"}) + "\n")
    put(moto, f"{src}/_tmp/skip.json", '{"id": 100}\n')  # hidden folder: never listed
    put(moto, f"{src}/.partial.json", '{"id": 101}\n')
    ingest(spark, moto, tmp, src, max_files_per_trigger=2)  # inferred schema: read from S3
    assert sorted(r["id"] for r in rows(spark, tmp)) == [0, 1, 2]
    ingest(spark, moto, tmp, src)  # restart, nothing new: nothing twice
    assert sorted(r["id"] for r in rows(spark, tmp)) == [0, 1, 2]
    put(moto, f"{src}/day1/f3.json", '{"id": 3, "name": "n3"}\n')
    ingest(spark, moto, tmp, src)
    out = rows(spark, tmp)
    assert sorted(r["id"] for r in out) == [0, 1, 2, 3]
    assert all(r["_rescued_data"] is None for r in out)
    index = FileIndex(str(tmp / "schema" / FILE_INDEX), src)
    try:
        assert index.count() == index.max_seq() == 4  # each file numbered once
    finally:
        index.close()

    out_text, err_text = capfd.readouterr()
    assert moto.secret not in out_text + err_text
    assert _grep(moto.secret.encode(), tmp) == []  # checkpoint, file index, schema, table


def test_csv_on_s3_with_credentials_only_as_reader_options(spark, moto, tmp):
    src = f"{moto.bucket()}/csv"
    put(moto, f"{src}/a.csv", "id,city\n1,Oslo\n2,Rome\n")
    put(moto, f"{src}/b.csv", "id,city\n3,Lima\n")
    reader = spark.readStream.format("cloudFiles").option("cloudFiles.format", "csv") \
        .option("cloudFiles.schemaLocation", str(tmp / "schema")) \
        .option("cloudFiles.schemaHints", "id int").option("cloudFiles.cleanSource", "delete") \
        .option("cloudFiles.maxFilesPerTrigger", 5)
    for key, value in moto.options().items():
        reader = reader.option(key, value)
    with headwater.translated():
        query = (reader.load(src).writeStream.format("delta")
                 .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True)
                 .start(str(tmp / "out")))
        query.awaitTermination()
    assert sorted((r["id"], r["city"]) for r in rows(spark, tmp)) == \
        [(1, "Oslo"), (2, "Rome"), (3, "Lima")]
    assert moto.secret not in str(query.recentProgress)
    assert _grep(moto.secret.encode(), tmp) == []
    assert moto.keys(f"{src}/") == []  # cleaned by the reader, which has the options
    # This process (the driver) never saw the options: its cleaning leaves files to the
    # stream reader rather than reach for ambient credentials.
    assert storage.options_for(src) is None
    put(moto, f"{src}/c.csv", "id,city\n4,Kiev\n")
    index_path = str(tmp / "schema" / FILE_INDEX)
    storage.register(src, storage.normalize(moto.options()))
    index = FileIndex(index_path, src)
    seq = index.discover()
    index.close()
    storage.forget_registered()
    assert clean_through(index_path, seq) == 0
    assert moto.keys(f"{src}/") == ["csv/c.csv"]
    storage.register(src, storage.normalize(moto.options()))
    assert clean_through(index_path, seq) == 1
    assert moto.keys(f"{src}/") == []


@pytest.mark.parametrize("mode", ["archive", "delete"])
def test_clean_source_on_s3_archives_or_deletes_after_commit(spark, moto, tmp, mode):
    bucket = moto.bucket()
    src, archive = f"{bucket}/in", f"{bucket}/done"
    for i in range(4):
        put(moto, f"{src}/d{i % 2}/f{i}.json", json.dumps({"id": i}) + "\n")
    options = dict(schema="id int", max_files_per_trigger=1, clean_source=mode,
                   archive_dir=archive if mode == "archive" else None)
    ingest(spark, moto, tmp, src, **options)
    assert sorted(r["id"] for r in rows(spark, tmp)) == [0, 1, 2, 3]
    assert moto.keys(f"{bucket}/in/") == []  # the last batch too, before the run returned
    archived = sorted(k.removeprefix("done/") for k in moto.keys(f"{bucket}/done/"))
    assert archived == (["d0/f0.json", "d0/f2.json", "d1/f1.json", "d1/f3.json"]
                        if mode == "archive" else [])
    # the same name landing again is new data; archived beside the first one
    put(moto, f"{src}/d0/f0.json", json.dumps({"id": 10}) + "\n")
    ingest(spark, moto, tmp, src, **options)
    assert sorted(r["id"] for r in rows(spark, tmp)) == [0, 1, 2, 3, 10]
    if mode == "archive":
        assert len(moto.keys(f"{bucket}/done/d0/f0.json")) == 2
        assert moto.read(f"{bucket}/done/d0/f0.json") == b'{"id": 0}\n'


def test_a_crash_between_copy_and_delete_neither_reingests_nor_loses_the_file(
        spark, moto, tmp, monkeypatch):
    bucket = moto.bucket()
    src, archive = f"{bucket}/in", f"{bucket}/done"
    put(moto, f"{src}/a.json", '{"id": 1}\n')
    put(moto, f"{src}/b.json", '{"id": 2}\n')
    ingest(spark, moto, tmp, src, schema="id int")  # no cleaning yet: the crash comes below
    index_path = str(tmp / "schema" / FILE_INDEX)
    index = FileIndex(index_path, src)
    with index.transaction():
        index.put("clean_source", "archive")
        index.put("archive_dir", archive)
    index.close()

    def crash(uri: str) -> None:
        raise OSError("simulated crash between copy and delete")

    real_delete = landing.delete
    monkeypatch.setattr(landing, "delete", crash)
    with pytest.raises(OSError, match="simulated crash"):
        clean_through(index_path, 2)
    monkeypatch.setattr(landing, "delete", real_delete)
    # the first file is in both places; its archive target is recorded, its row still live
    assert sorted(moto.keys(f"{bucket}/")) == ["done/a.json", "in/a.json", "in/b.json"]
    index = FileIndex(index_path, src)
    try:
        assert index.discover() == 2  # listing again records nothing new
        assert index.get("cleaned_through") is None
    finally:
        index.close()
    put(moto, f"{src}/c.json", '{"id": 3}\n')
    options = dict(schema="id int", clean_source="archive", archive_dir=archive)
    ingest(spark, moto, tmp, src, **options)  # restart: only c is new
    assert sorted(r["id"] for r in rows(spark, tmp)) == [1, 2, 3]
    assert sorted(moto.keys(f"{bucket}/")) == ["done/a.json", "done/b.json", "done/c.json"]
    assert moto.read(f"{bucket}/done/a.json") == b'{"id": 1}\n'


def test_s3_option_mistakes_are_clear(spark, moto, tmp):
    src = f"{moto.bucket()}/in"
    put(moto, f"{src}/a.json", '{"id": 1}\n')
    with pytest.raises(HeadwaterError) as err:
        headwater.read_files(src, schema="id int", schema_location=f"{src}/_schema",
                             storage_options=moto.options(), spark=spark)
    assert err.value.code == "HW_OPTION_INVALID" and "schema_location" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        headwater.read_files(src, schema="id int", schema_location=tmp / "s",
                             clean_source="archive", archive_dir=f"{src}/done",
                             storage_options=moto.options(), spark=spark)
    assert "inside the landing folder" in str(err.value)
    assert moto.secret not in str(err.value)
