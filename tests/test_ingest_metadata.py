"""The hidden ``_metadata`` column of file streams (read_files, format("cloudFiles"),
cloud_files / STREAM read_files in SQL pipelines): Spark's field names and types, the values
of the file each row came from (whatever path parsed it), and hidden from ``SELECT *`` and
``df.columns`` as Spark's own file sources hide it."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType
from tests.pipelines import project, run
from tests.test_ingest import land

import headwater
from headwater import HeadwaterError
from headwater.errors import unwrap
from headwater.ingest.file_metadata import METADATA_TYPE, file_uri
from headwater.ingest.parse import FileEntry, ParseSettings, RecordParser
from headwater.ingest.schema_hints import parse_ddl

# --- parsing, no Spark -------------------------------------------------------------------


def _parse(schema: str, files: dict[str, bytes], **settings) -> list[dict]:
    parser = RecordParser(parse_ddl(schema), ParseSettings(**settings), metadata=True)
    entries = [FileEntry(i, path, len(data), None, (1_700_000_000 + i) * 10**9)
               for i, (path, data) in enumerate(files.items())]
    batches = list(parser.parse(entries, lambda e: files[e.path]))
    return pa.Table.from_batches(batches, schema=parser.out_schema).to_pylist()


def test_each_row_carries_its_own_files_metadata_on_the_fast_and_the_record_path():
    files = {
        "/l/a.json": b'{"id": 1}\n{"id": 2}\n',        # one pyarrow call for a and c...
        "/l/b.json": b'{"id": 3}\n{"id": "x"}\n',      # ...b needs the per-record path
        "/l/c d.json": b'{"id": 4}\n',
    }
    rows = _parse("id bigint", files)
    got = sorted(((r["_metadata"]["file_name"], r["id"], r["_rescued_data"] is not None)
                  for r in rows), key=str)
    assert got == [("a.json", 1, False), ("a.json", 2, False), ("b.json", 3, False),
                   ("b.json", None, True), ("c%20d.json", 4, False)]
    first = next(r["_metadata"] for r in rows if r["id"] == 1)
    assert first == {"file_path": "file:/l/a.json", "file_name": "a.json", "file_size": 20,
                     "file_block_start": 0, "file_block_length": 20,
                     "file_modification_time": datetime.fromtimestamp(1_700_000_000, UTC)}


def test_paths_are_written_as_spark_writes_them():
    # Spark: file:/tmp/a%20b/x%20y.json (Hadoop's Path.toUri: reserved ASCII quoted)
    assert file_uri("/tmp/a b/x y#1.json") == "file:/tmp/a%20b/x%20y%231.json"
    assert file_uri("/tmp/caf\u00e9/a.json") == "file:/tmp/caf\u00e9/a.json"
    assert file_uri("s3://bucket/in/a b.json") == "s3://bucket/in/a%20b.json"


def test_csv_and_parquet_rows_carry_their_files_metadata(tmp):
    rows = _parse("id bigint, name string", {"/l/x.csv": b"id,name\n1,a\n2,b,extra\n"},
                  fmt="csv")
    assert [(r["id"], r["_metadata"]["file_name"]) for r in rows] == [(1, "x.csv"),
                                                                      (None, "x.csv")]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [5, 6]}), sink)
    data = sink.getvalue().to_pybytes()
    rows = _parse("id bigint", {"/l/p.parquet": data}, fmt="parquet")
    assert [(r["id"], r["_metadata"]["file_size"]) for r in rows] == [(5, len(data)),
                                                                      (6, len(data))]


# --- streams through Spark ---------------------------------------------------------------


def _collect(df, tmp: Path, name: str) -> list[dict]:
    query = (df.writeStream.format("delta").option("checkpointLocation", str(tmp / f"cp_{name}"))
             .trigger(availableNow=True).start(str(tmp / name)))
    try:
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001
        raise unwrap(exc) from exc
    return DeltaTable(str(tmp / name)).to_pyarrow_table().to_pylist()


def _expected(path: Path) -> dict:
    st = path.stat()
    return {"file_path": file_uri(str(path)), "file_name": path.name, "file_size": st.st_size,
            "file_block_start": 0, "file_block_length": st.st_size,
            "file_modification_time": datetime.fromtimestamp(st.st_mtime_ns // 1_000_000 / 1e3, UTC)}


def test_read_files_hides_metadata_from_star_and_resolves_it_by_name(spark, tmp):
    a = land(tmp / "landing", "a.json", '{"id": 1}\n{"id": 2}\n')
    b = land(tmp / "landing" / "sub", "b.json", '{"id": 3}\n')
    df = headwater.read_files(tmp / "landing", schema_location=tmp / "schema")
    assert df.columns == ["id", "_rescued_data"]
    assert "_metadata" not in df.select("*").columns
    assert df.select("_metadata").schema["_metadata"].dataType == METADATA_TYPE
    out = _collect(df.select("*", "_metadata", F.col("_metadata.file_name").alias("name"))
                   .where(F.col("_metadata.file_size") > 0), tmp, "py")
    assert sorted(r["id"] for r in out) == [1, 2, 3]
    for row in out:
        path = a if row["id"] < 3 else b
        assert row["_metadata"] == _expected(path), row
        assert row["name"] == path.name
    assert set(out[0]) == {"id", "_rescued_data", "_metadata", "name"}


def test_format_cloudfiles_has_metadata_too(spark, tmp):
    a = land(tmp / "landing", "a.json", '{"id": 1}\n')
    df = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
          .option("cloudFiles.schemaLocation", str(tmp / "schema")).load(str(tmp / "landing")))
    assert df.columns == ["id", "_rescued_data"]
    out = _collect(df.withColumn("path", df["_metadata"]["file_path"]), tmp, "cf")
    assert [(r["id"], r["path"]) for r in out] == [(1, _expected(a)["file_path"])]
    assert "_metadata" not in out[0]


def test_a_given_schema_keeps_the_metadata_column(spark, tmp):
    """Auto Loader with .schema(...): Spark never asks the source its schema, so headwater
    adds the hidden column to the given one (DDL or StructType, before or after format)."""
    a = land(tmp / "landing", "a.json", '{"id": 1}\n')
    ddl = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
           .option("cloudFiles.schemaLocation", str(tmp / "s1"))
           .schema("id BIGINT").load(str(tmp / "landing")))
    struct = (spark.readStream.schema(StructType([StructField("id", LongType())]))
              .format("cloudFiles").option("cloudFiles.format", "json")
              .option("cloudFiles.schemaLocation", str(tmp / "s2"))
              .load(str(tmp / "landing")))
    for name, df in (("ddl", ddl), ("struct", struct)):
        assert df.columns == ["id"], name
        out = _collect(df.select("*", F.col("_metadata.file_name").alias("file")), tmp, name)
        assert [(r["id"], r["file"]) for r in out] == [(1, a.name)], name


def test_a_data_column_named_metadata_is_the_files_own(spark, tmp):
    land(tmp / "landing", "a.json", '{"id": 1, "_metadata": "mine"}\n')
    df = headwater.read_files(tmp / "landing", schema_location=tmp / "schema")
    assert df.columns == ["id", "_metadata", "_rescued_data"] or \
        df.columns == ["_metadata", "id", "_rescued_data"]
    out = _collect(df, tmp, "own")
    assert [(r["id"], r["_metadata"]) for r in out] == [(1, "mine")]


def test_infer_column_types_false_is_refused(spark, tmp):
    land(tmp / "landing", "a.json", '{"id": 1}\n')
    with pytest.raises(Exception) as err:  # noqa: PT011 - Spark's error wraps headwater's
        (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
         .option("cloudFiles.inferColumnTypes", "false")
         .option("cloudFiles.schemaLocation", str(tmp / "schema")).load(str(tmp / "landing")))
    found = unwrap(err.value)
    assert isinstance(found, HeadwaterError)
    assert found.code == "HW_OPTION_INVALID" and "inferColumnTypes" in found.what
    # true is what headwater does anyway
    df = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
          .option("cloudFiles.inferColumnTypes", "true")
          .option("cloudFiles.schemaLocation", str(tmp / "schema")).load(str(tmp / "landing")))
    assert dict(df.dtypes)["id"] == "bigint"


SQL = """
SET spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles = 1;

CREATE OR REFRESH STREAMING TABLE raw
AS SELECT *, _metadata.file_name AS source_file, _metadata.file_size AS size
  FROM STREAM read_files("{land}", format => "json", inferColumnTypes => "true",
                         schemaEvolutionMode => "rescue");

CREATE OR REFRESH STREAMING TABLE aliased
AS SELECT f.id, f._metadata.file_path AS path
  FROM cloud_files("{land}", "json", map("cloudFiles.inferColumnTypes", "true")) AS f;

CREATE OR REFRESH STREAMING TABLE plain
AS SELECT * FROM STREAM read_files("{land}", format => "json");

CREATE OR REFRESH MATERIALIZED VIEW per_file
AS SELECT source_file, count(*) AS n FROM raw GROUP BY source_file;
"""


@pytest.fixture
def sample_setting(spark):
    """The SET of the SQL file stays on the shared session: removed after the test."""
    yield
    spark.conf.unset("spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles")


def test_sql_pipelines_read_metadata_and_star_leaves_it_out(spark, tmp_path, sample_setting):
    landing = tmp_path / "landing"
    first = land(landing, "2020-01-01.json", '{"id": 1}\n{"id": 2}\n')
    second = land(landing, "2020-01-02.json", '{"id": 3, "extra": "x"}\n')
    os.utime(first, ns=(10**18, 10**18))  # the oldest file: the one sampled
    os.utime(second, ns=(2 * 10**18, 2 * 10**18))
    root = project(tmp_path, {"p.sql": SQL.format(land=landing)}, globs=("defs/*.sql",))
    lake, results = run(spark, root)
    assert {r.status.name for r in results.values()} == {"COMPLETED"}, \
        {k: r.error for k, r in results.items()}
    # the schema came from one file (the SET), so in rescue mode "extra" is rescued, never a
    # column (sampling both files would have made it one)
    third = land(landing, "2020-01-03.json", '{"id": 4}\n')
    lake, results = run(spark, root)
    assert {r.status.name for r in results.values()} == {"COMPLETED"}, \
        {k: r.error for k, r in results.items()}
    lake_root = root / "lake"

    def rows(table: str) -> list[dict]:
        return DeltaTable(str(lake_root / table)).to_pyarrow_table().to_pylist()

    raw = rows("raw")
    assert set(raw[0]) == {"id", "_rescued_data", "source_file", "size"}
    assert sorted((r["id"], r["source_file"], r["size"]) for r in raw) == [
        (1, first.name, first.stat().st_size), (2, first.name, first.stat().st_size),
        (3, second.name, second.stat().st_size), (4, third.name, third.stat().st_size)]
    assert json.loads(next(r for r in raw if r["id"] == 3)["_rescued_data"])["extra"] == "x"
    assert sorted((r["id"], r["path"]) for r in rows("aliased")) == [
        (1, file_uri(str(first))), (2, file_uri(str(first))), (3, file_uri(str(second))),
        (4, file_uri(str(third)))]
    assert "_metadata" not in rows("plain")[0]
    assert sorted((r["source_file"], r["n"]) for r in rows("per_file")) == [
        (first.name, 2), (second.name, 1), (third.name, 1)]
