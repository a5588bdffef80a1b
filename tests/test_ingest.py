"""File ingestion with real files: schema inference and evolution, rescued data, limits,
archiving, and every input record accounted for (table rows, rescued or malformed)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

import headwater
from headwater import HeadwaterError
from headwater.conf.layout import FILE_INDEX
from headwater.errors import unwrap
from headwater.ingest.index import FileIndex
from headwater.ingest.landing import FileFilter
from headwater.ingest.parse import FileEntry, ParseSettings, RecordParser
from headwater.ingest.schema_hints import parse_ddl
from headwater.ingest.schemas import SchemaStore
from headwater.spark.listener import add_json_listener, remove_json_listener

# --- parsing, no Spark -------------------------------------------------------------------


def parse(schema: str, files: dict[str, bytes], **settings) -> tuple[list[dict], RecordParser]:
    parser = RecordParser(parse_ddl(schema), ParseSettings(**settings))
    entries = [FileEntry(i, path, len(data)) for i, (path, data) in enumerate(files.items())]
    batches = list(parser.parse(entries, lambda e: files[e.path]))
    out = pa.Table.from_batches(batches, schema=parser.out_schema).to_pylist() if batches else []
    return out, parser


def rescued(row: dict) -> dict:
    return json.loads(row["_rescued_data"]) if row["_rescued_data"] else {}


def test_type_mismatches_unknown_and_case_mismatched_fields_are_rescued_with_their_file():
    out, parser = parse("id bigint, name string, price double, tags array<string>", {
        "/l/a.json": b'{"id": 1, "name": "a", "price": 2, "tags": ["x"]}\n'
                     b'{"id": "two", "name": 7, "Price": 3.5, "tags": "x", "extra": {"k": 1}}\n',
    }, evolution="rescue")
    assert out[0] == {"id": 1, "name": "a", "price": 2.0, "tags": ["x"], "_rescued_data": None}
    # a number in a string column is kept as its text, as Spark does
    assert (out[1]["id"], out[1]["name"], out[1]["price"], out[1]["tags"]) == (None, "7", None, None)
    assert rescued(out[1]) == {"id": "two", "Price": 3.5, "tags": "x", "extra": {"k": 1},
                               "_file_path": "/l/a.json", "_line": 2}
    assert (parser.rows, parser.rescued_rows, parser.malformed) == (2, 1, 0)
    assert parser.observed.fields == []  # rescue mode does not collect new columns


def test_malformed_truncated_empty_non_utf8_and_a_10mb_line_are_all_accounted_for():
    big = "x" * (10 << 20)
    files = {
        "/l/good.json": b'{"id": 1, "name": "a"}\n{"id": 2, "name": "b"}\n',
        "/l/empty.json": b"",
        "/l/blank.json": b"\n  \n",
        "/l/broken.json": b'{"id": 3, "name": "c"}\n{"id": 4, "na\n[1, 2]\n',
        "/l/truncated.json": b'{"id": 5, "name": "e"}\n{"id": 6, "name": "f',
        "/l/latin1.json": b'{"id": 7, "name": "caf\xe9"}\n{"id": 8, "name": "ok"}\n',
        "/l/big.json": json.dumps({"id": 9, "name": big}).encode() + b"\n",
        "/l/bom.json": b'\xef\xbb\xbf{"id": 10, "name": "windows"}\r\n',
    }
    out, parser = parse("id bigint, name string", files)
    assert len(out) == 11 == parser.rows  # 7 good records, 4 malformed lines, none dropped
    good = sorted(r["id"] for r in out if r["id"] is not None)
    assert good == [1, 2, 3, 5, 8, 9, 10]
    bad = [rescued(r) for r in out if r["_rescued_data"]]
    assert {(b["_file_path"], b["_line"], b["_error"]) for b in bad} == {
        ("/l/broken.json", 2, "not valid JSON"), ("/l/broken.json", 3, "not a JSON object"),
        ("/l/truncated.json", 2, "not valid JSON"), ("/l/latin1.json", 1, "not UTF-8")}
    latin = next(b for b in bad if b["_file_path"] == "/l/latin1.json")
    assert "caf\\xe9" in latin["_corrupt_record"]  # the bad byte stays visible
    assert next(r for r in out if r["id"] == 9)["name"] == big
    assert parser.malformed == 4 == parser.rescued_rows


def test_a_line_holding_an_array_of_objects_is_one_record_per_element():
    # pandas' to_json(orient="records") writes one line: Spark reads a row per element
    from headwater.ingest.infer import infer_schema  # noqa: PLC0415 - the inference under test

    data = b'[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]\n[1, 2]\n[]\n'
    schema = infer_schema([("/l/records.json", data)], ParseSettings())
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields][:2] == [
        ("id", "bigint"), ("name", "string")]
    out, parser = parse("id bigint, name string", {"/l/records.json": data})
    assert [(r["id"], r["name"]) for r in out if r["id"] is not None] == [(1, "a"), (2, "b")]
    assert parser.malformed == 1  # an array of numbers is no record, as in Spark


def test_the_fast_path_never_accepts_what_the_record_path_would_rescue():
    # grouped together these would reach pyarrow's one-call parser: each answer must be the
    # per-record one (pyarrow alone joins objects across lines and files, takes 19000 as a
    # date, crashes on a bare null line)
    files = {
        "/l/a.json": b'{"id": 1, "d": "2026-01-02"}\n',
        "/l/b.json": b'{"id":\n',               # truncated mid-object ...
        "/l/c.json": b'2, "d": "2026-01-03"}\n',  # ... and the next file's first line
        "/l/d.json": b"null\n",
        "/l/e.json": b'{"id": 5}{"id": 6}\n',
        "/l/f.json": b'{"id": 7, "d": 19000}\n',
        "/l/g.json": b'{"id": 8, "s": "\\ud800"}\n',
    }
    out, parser = parse("id bigint, d date, s string", files)
    assert [r["id"] for r in out] == [1, None, None, None, None, 7, None]
    assert str(out[0]["d"]) == "2026-01-02"
    assert rescued(out[5])["d"] == 19000 and out[5]["d"] is None
    assert parser.malformed == 5
    assert {rescued(r)["_error"] for r in out if r["id"] is None} == {
        "not valid JSON", "not a JSON object", "a lone surrogate escape"}


def test_parquet_values_are_cast_only_when_nothing_is_lost(tmp):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "n": ["12", "x"],
                             "s": [{"x": 1, "y": 2}, None]}), tmp / "a.parquet")
    entry = FileEntry(1, str(tmp / "a.parquet"), 0)
    parser = RecordParser(parse_ddl("id bigint, n bigint, s struct<x: int>"),
                          ParseSettings(fmt="parquet", evolution="rescue"))
    out = pa.Table.from_batches(list(parser.parse([entry], lambda e: Path(e.path).read_bytes())))
    got = out.to_pylist()
    assert [r["id"] for r in got] == [1, 2]
    assert [r["n"] for r in got] == [None, None]  # text is not a number: rescued, not cast
    assert rescued(got[0])["n"] == "12" and rescued(got[0])["s"] == {"x": 1, "y": 2}


def test_decimals_keep_every_digit_or_are_rescued():
    out, _ = parse("a decimal(38,18), b decimal(10,2)", {
        "/l/a.json": b'{"a": 12345678901.5, "b": 1.25}\n{"a": "7", "b": 1.234}\n'})
    assert str(out[0]["a"]) == "12345678901.500000000000000000" and str(out[0]["b"]) == "1.25"
    assert out[1]["b"] is None and rescued(out[1])["b"] == 1.234  # would need rounding


def test_csv_wrong_column_count_and_bad_values_are_rescued_with_their_line():
    data = b'id,name,price,Notes\n1,a,2.5,x\n2,b\n3,"c, d",oops,y\n4,d,1,z,extra\n'
    out, parser = parse("id int, name string, price double", {"/l/a.csv": data},
                        fmt="csv", evolution="rescue")
    assert [r["id"] for r in out] == [1, None, 3, None]
    assert rescued(out[0]) == {"Notes": "x", "_file_path": "/l/a.csv", "_line": 2}
    assert rescued(out[1])["_error"] == "2 fields where the header has 4"
    assert rescued(out[1])["_corrupt_record"] == "2,b"
    assert (out[2]["name"], rescued(out[2])["price"]) == ("c, d", "oops")
    assert rescued(out[3])["_line"] == 5
    assert (parser.rows, parser.malformed) == (4, 2)


def test_multiline_documents_and_arrays():
    out, _ = parse("id int, name string", {
        "/l/one.json": b'{\n "id": 1,\n "name": "a"\n}\n',
        "/l/many.json": b'[{"id": 2}, {"id": 3, "name": "c"}]',
        "/l/bad.json": b'{"id": 4,\n',
        "/l/lines.json": b'{"id": 5}\n{"id": 6}\n{"id"\n',  # JSON lines: read as lines
        "/l/broken_first.json": b'{"id": 7, "na\n{"id": 8}\n{"id": 9}\n',  # still lines
    }, multi_line=True)
    assert [r["id"] for r in out] == [1, 2, 3, None, 5, 6, None, None, 8, 9]
    assert rescued(out[3])["_error"] == "not valid JSON"
    assert rescued(out[6])["_line"] == 3 and rescued(out[7])["_line"] == 1


def test_nested_new_fields_and_new_columns_are_collected_for_evolution():
    _, parser = parse("id int, s struct<a: int>", {
        "/l/a.json": b'{"id": 1, "s": {"a": 1, "b": "new"}, "n": [1.5]}\n'})
    from headwater.ingest.infer import add_new_fields

    evolved, added = add_new_fields(parse_ddl("id int, s struct<a: int>"), parser.observed)
    assert added == ["s.b", "n"]
    assert evolved.simpleString() == "struct<id:int,s:struct<a:int,b:string>,n:array<double>>"
    assert parser.new_in == "/l/a.json"


def test_schema_hint_and_schema_text_errors_name_the_problem():
    with pytest.raises(HeadwaterError) as err:
        parse_ddl("a bigint, b strang")
    assert err.value.code == "HW_INGEST_BAD_SCHEMA" and "strang" in str(err.value)
    assert parse_ddl("`a b` decimal(10,2), m map<string, array<int>>").simpleString() == \
        "struct<a b:decimal(10,2),m:map<string,array<int>>>"


# --- file index, no Spark ----------------------------------------------------------------


def test_index_lists_only_changed_folders_and_numbers_files_in_arrival_order(tmp, monkeypatch):
    land = tmp / "land"
    for day in ("d1", "d2"):
        (land / day).mkdir(parents=True)
    (land / "d1" / "a.json").write_text("{}")
    (land / "d1" / "_tmp.json").write_text("{}")     # hidden: never listed
    (land / "d1" / ".part").write_text("{}")
    (land / "d2" / "b.csv").write_text("x")          # filtered by the glob
    index = FileIndex(str(tmp / "idx.sqlite"), str(land), FileFilter("*.json"))
    assert index.discover() == 1
    # folders changed in the last 2 s are listed again next time (coarse timestamps)
    assert index.db.execute("SELECT count(*) FROM dirs WHERE mtime_ns IS NULL").fetchone()[0] == 3
    monkeypatch.setattr("headwater.ingest.index._RACY_SECONDS", 0.0)
    assert index.discover() == 1
    assert index.db.execute("SELECT count(*) FROM dirs WHERE mtime_ns IS NULL").fetchone()[0] == 0
    listed = []
    monkeypatch.setattr("headwater.ingest.index.os.scandir",
                        lambda d, real=os.scandir: listed.append(d) or real(d))
    assert index.discover() == 1 and listed == []  # nothing changed: no folder is read
    (land / "d2" / "c.json").write_text("{}")
    (land / "d3").mkdir()
    (land / "d3" / "d.json").write_text("{}")
    assert index.discover() == 3
    assert sorted(Path(d).name for d in listed) == ["d2", "d3", "land"]  # d1 is not read
    assert [Path(f.path).name for f in index.files_between(0, 3)] == ["a.json", "c.json", "d.json"]
    assert index.end_for(0, None, 2, None) == 2
    assert index.end_for(0, None, None, 1) == 1  # a byte limit still takes one file
    # the file already seen is not found again, even when its folder changes
    (land / "d1" / "e.json").write_text("{}")
    assert index.discover() == 4
    assert index.count() == 4


# --- streams through Spark ---------------------------------------------------------------


def land(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def ingest(spark, tmp: Path, df=None, name: str = "out", **options):
    options.setdefault("schema_location", tmp / "schema")
    df = df if df is not None else headwater.read_files(tmp / "landing", **options)
    query = (df.writeStream.format("delta").option("mergeSchema", "true")
             .option("checkpointLocation", str(tmp / f"cp_{name}"))
             .trigger(availableNow=True).start(str(tmp / name)))
    try:
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001
        raise unwrap(exc) from exc
    return query


def table(spark, tmp: Path, name: str = "out") -> list[dict]:
    return [r.asDict() for r in spark.read.format("delta").load(str(tmp / name)).collect()]


def input_records(*folders: Path, fmt: str = "json", multi_line: bool = False) -> int:
    """Records in the landed files as a reader would count them: each non-blank JSON line or
    CSV row (good or malformed) is one, each element of a multi-line document is one."""
    total = 0
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.name.startswith((".", "_")):
                continue
            data = path.read_bytes()
            if multi_line:
                try:
                    doc = json.loads(data)
                    total += len(doc) if isinstance(doc, list) else 1
                except ValueError:
                    total += 1
                continue
            lines = [ln for ln in data.split(b"\n") if ln.strip()]
            total += len(lines) - (1 if fmt == "csv" and lines else 0)
    return total


def assert_accounted(rows: list[dict], records: int) -> None:
    """Table rows = input records, and every row either fits or says what did not."""
    assert len(rows) == records, (len(rows), records)


def test_inferred_schema_is_kept_and_a_restart_does_not_infer_again(spark, tmp):
    land(tmp / "landing", "a.json", '{"id": 1, "amount": 2.5, "ts": "2026-01-01 10:00:00"}\n')
    ingest(spark, tmp, schema_hints="ts timestamp")
    store = SchemaStore(str(tmp / "schema"))
    assert store.versions() == [0]
    assert store.read(0).simpleString() == "struct<id:bigint,amount:double,ts:timestamp>"
    # a file that would infer amount as string: the kept schema wins, the value is rescued
    land(tmp / "landing", "b.json", '{"id": 2, "amount": "n/a", "ts": "2026-01-02T00:00:00Z"}\n')
    ingest(spark, tmp, schema_hints="ts timestamp")
    assert store.versions() == [0]
    got = sorted(table(spark, tmp), key=lambda r: r["id"])
    assert [(r["id"], r["amount"]) for r in got] == [(1, 2.5), (2, None)]
    assert rescued(got[1])["amount"] == "n/a"
    assert str(got[1]["ts"]) == "2026-01-02 00:00:00"


def test_seed_style_explicit_schema_rescues_what_does_not_fit(spark, tmp):
    schema = StructType([
        StructField("order_id", StringType()),
        StructField("customer", StructType([StructField("customer_id", IntegerType())]))])
    land(tmp / "landing", "day1.json",
         '[{"order_id": "o1", "customer": {"customer_id": 7}},'
         ' {"order_id": "o2", "customer": {"customer_id": "x"}, "coupon": "SAVE"}]')
    ingest(spark, tmp, schema=schema, multi_line=True)
    got = sorted(table(spark, tmp), key=lambda r: r["order_id"])
    assert_accounted(got, input_records(tmp / "landing", multi_line=True))
    assert got[0]["customer"]["customer_id"] == 7 and got[0]["_rescued_data"] is None
    assert got[1]["customer"] is None
    assert rescued(got[1]) == {"customer": {"customer_id": "x"}, "coupon": "SAVE",
                               "_file_path": str(tmp / "landing" / "day1.json")}
    assert SchemaStore(str(tmp / "schema")).versions() == []  # an explicit schema is not stored


def test_add_new_columns_stops_with_the_new_schema_saved_then_the_restart_has_them(spark, tmp):
    land(tmp / "landing", "1.json", '{"id": 1}\n')
    ingest(spark, tmp)
    land(tmp / "landing", "2.json", '{"id": 2, "color": "red", "size": 3}\n')
    with pytest.raises(HeadwaterError) as err:
        ingest(spark, tmp)
    assert err.value.code == "HW_INGEST_SCHEMA_EVOLVED"
    assert "color, size" in str(err.value)
    assert [r["id"] for r in table(spark, tmp)] == [1]  # nothing of the failed batch
    ingest(spark, tmp)
    got = sorted(table(spark, tmp), key=lambda r: r["id"])
    assert [(r["id"], r["color"], r["size"]) for r in got] == [(1, None, None), (2, "red", 3)]
    assert all(r["_rescued_data"] is None for r in got)
    assert_accounted(got, input_records(tmp / "landing"))
    assert SchemaStore(str(tmp / "schema")).versions() == [0, 1]


def test_rescue_mode_never_changes_the_schema(spark, tmp):
    land(tmp / "landing", "1.json", '{"id": 1}\n{"id": 2, "color": "red"}\n')
    land(tmp / "landing", "2.json", '{"id": 3, "color": "blue"}\n')
    ingest(spark, tmp, schema="id bigint", schema_evolution_mode="rescue")
    got = sorted(table(spark, tmp), key=lambda r: r["id"])
    assert list(got[0]) == ["id", "_rescued_data"]
    assert [rescued(r).get("color") for r in got] == [None, "red", "blue"]
    assert_accounted(got, input_records(tmp / "landing"))


def test_fail_on_new_columns_lists_them(spark, tmp):
    land(tmp / "landing", "1.json", '{"id": 1, "Color": "red", "shape": "round"}\n')
    with pytest.raises(HeadwaterError) as err:
        ingest(spark, tmp, schema="id bigint", schema_evolution_mode="failOnNewColumns")
    assert err.value.code == "HW_INGEST_NEW_COLUMNS"
    assert "Color, shape" in str(err.value) and "1.json" in str(err.value)


def test_a_messy_feed_accounts_for_every_record_and_counts_them(spark, tmp):
    landing = tmp / "landing"
    land(landing, "a.json", '{"id": 1, "v": 1.5}\n{"id": 2, "v": "bad"}\n')
    land(landing, "b.json", b'{"id": 3, "v": 1}\n{"id": 4, "v": 2\n\xff\xfe\n')
    land(landing, "c.json", "")
    land(landing, "d.csv", "not json at all\n")
    land(landing, "e.json", '{"id": 5, "v": 1}\n{"id": 6, "v": 2.')  # truncated mid-write
    land(landing, "f.json", json.dumps({"id": 7, "v": 3, "blob": "y" * (10 << 20)}) + "\n")
    query = ingest(spark, tmp, schema="id bigint, v double", max_files_per_trigger=2)
    got = table(spark, tmp)
    assert len(got) == 9  # 5 records (two with rescued values) + 4 malformed lines
    assert_accounted(got, input_records(landing))
    assert sorted(r["id"] for r in got if r["id"] is not None) == [1, 2, 3, 5, 7]
    big = next(r for r in got if r["id"] == 7)
    assert len(rescued(big)["blob"]) == 10 << 20  # the 10 MB field, kept whole
    metrics = {}
    for progress in query.recentProgress:
        for _key, row in progress.observedMetrics.items():
            for k, v in row.asDict().items():
                metrics[k] = metrics.get(k, 0) + v
    assert metrics == {"rows": 9, "rescued_rows": 6, "malformed_rows": 4}
    assert len([p for p in query.recentProgress if p.numInputRows]) == 3  # 6 files, 2 per batch


def test_csv_stream_with_a_wrong_column_count(spark, tmp):
    land(tmp / "landing", "a.csv", "id,name\n1,a\n2\n3,c,extra\n")
    ingest(spark, tmp, format="csv", schema="id int, name string")
    got = sorted(table(spark, tmp), key=lambda r: rescued(r).get("_line", 0))
    assert [r["id"] for r in got] == [1, None, None]
    assert [rescued(r).get("_corrupt_record") for r in got[1:]] == ["2", "3,c,extra"]
    assert_accounted(got, input_records(tmp / "landing", fmt="csv"))


def test_limits_existing_files_and_glob(spark, tmp):
    landing = tmp / "landing"
    for i in range(5):
        land(landing, f"f{i}.json", json.dumps({"id": i, "pad": "x" * 100}) + "\n")
    land(landing, "skip.txt", '{"id": 99}\n')
    q = ingest(spark, tmp, schema="id int, pad string", max_files_per_trigger=None,
               max_bytes_per_trigger=250, path_glob_filter="*.json")
    assert [p.numInputRows for p in q.recentProgress if p.numInputRows] == [2, 2, 1]
    assert sorted(r["id"] for r in table(spark, tmp)) == [0, 1, 2, 3, 4]
    new_only = dict(name="new_only", schema="id int, pad string", include_existing_files=False,
                    schema_location=tmp / "schema_new", path_glob_filter="*.json")
    ingest(spark, tmp, **new_only)
    land(landing, "f9.json", '{"id": 9}\n')
    ingest(spark, tmp, **new_only)
    assert [r["id"] for r in table(spark, tmp, "new_only")] == [9]
    with pytest.raises(HeadwaterError) as err:  # one schema location, one stream
        ingest(spark, tmp, name="other", schema="id int", schema_location=tmp / "schema_new")
    assert err.value.code == "HW_OPTION_INVALID" and "another stream" in str(err.value)


def test_without_existing_files_an_available_now_run_neither_reads_nor_cleans_them(spark, tmp):
    landing = tmp / "landing"
    for i in range(3):
        land(landing, f"old{i}.json", json.dumps({"id": i}) + "\n")
    options = dict(schema="id int", include_existing_files=False, clean_source="delete")
    ingest(spark, tmp, **options)
    land(landing, "new.json", '{"id": 9}\n')
    ingest(spark, tmp, **options)
    assert [r["id"] for r in table(spark, tmp)] == [9]
    # new.json is deleted by the time the run returns, the others never
    assert sorted(p.name for p in landing.iterdir()) == ["old0.json", "old1.json", "old2.json"]


@pytest.mark.parametrize("mode", ["archive", "delete"])
def test_clean_source_moves_files_only_after_their_batch_commits(spark, tmp, mode):
    landing = tmp / "landing"
    for i in range(4):
        land(landing, f"day{i % 2}/f{i}.json", json.dumps({"id": i}) + "\n")
    options = dict(schema="id int", max_files_per_trigger=1, clean_source=mode,
                   archive_dir=tmp / "archive" if mode == "archive" else None)
    records = input_records(landing)
    ingest(spark, tmp, **options)
    assert_accounted(table(spark, tmp), records)
    # an availableNow query's reader cleans the last batch too before the query returns
    assert not list(landing.rglob("*.json"))
    archived = sorted(str(p.relative_to(tmp / "archive")) for p in (tmp / "archive").rglob("*")
                      if p.is_file()) if mode == "archive" else []
    assert archived == (["day0/f0.json", "day0/f2.json", "day1/f1.json", "day1/f3.json"]
                        if mode == "archive" else [])
    assert sorted(r["id"] for r in table(spark, tmp)) == [0, 1, 2, 3]
    # a file landing again under an archived name is new data, and archived beside it
    land(landing, "day0/f0.json", json.dumps({"id": 10}) + "\n")
    ingest(spark, tmp, **options)
    assert sorted(r["id"] for r in table(spark, tmp)) == [0, 1, 2, 3, 10]
    if mode == "archive":
        assert len(list((tmp / "archive").rglob("f0.json*"))) == 2


def test_a_query_that_ended_cleans_nothing_afterwards(spark, tmp):
    """Spark delivers listener events after awaitTermination() has returned: cleaning run from
    them acted after its query ended, with the cleaning settings the file index had by then (a
    later run's; here, written as one would), not its query's. A listener holding Spark's bus
    on the query's progress makes that delivery late for certain (the bus calls listeners one
    event at a time, in order: the last one seeing the end means all earlier ones did)."""
    landing = tmp / "landing"
    for i in range(2):
        land(landing, f"f{i}.json", json.dumps({"id": i}) + "\n")
    release = threading.Event()
    ended: list[str] = []
    hold = add_json_listener(spark, lambda progress: release.wait(60),
                             lambda event: ended.append(str(event.get("runId"))))
    try:
        query = ingest(spark, tmp, schema="id int")  # cleanSource off
        run_id = str(query.runId)
        index = FileIndex(str(tmp / "schema" / FILE_INDEX), str(landing))
        with index.transaction():
            index.put("clean_source", "delete")
        index.close()
        assert run_id not in ended  # the query returned before its end reached the listeners
        release.set()
        deadline = time.monotonic() + 30
        while run_id not in ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run_id in ended
    finally:
        release.set()
        remove_json_listener(spark, hold)
    assert sorted(p.name for p in landing.iterdir()) == ["f0.json", "f1.json"]
    assert sorted(r["id"] for r in table(spark, tmp)) == [0, 1]


def test_option_mistakes_are_clear(spark, tmp, no_lakehouse):
    (tmp / "landing").mkdir()
    # with no lakehouse attached (earlier tests attach theirs), the location is required
    with pytest.raises(HeadwaterError) as err:
        headwater.read_files(tmp / "landing", schema="id int")
    assert err.value.code == "HW_OPTION_INVALID" and "schema_location" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        headwater.read_files(tmp / "landing", schema_location=tmp / "s")
    assert err.value.code == "HW_INGEST_NO_FILES"
    with pytest.raises(HeadwaterError) as err:
        headwater.read_files(tmp / "landing", schema="id int", schema_location=tmp / "s",
                             clean_source="archive", archive_dir=tmp / "landing" / "done")
    assert "inside the landing folder" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        headwater.read_files(tmp / "landing", schema="id int", schema_location=tmp / "s",
                             schema_evolution_mode="addColumns")
    assert "addNewColumns" in str(err.value)


# --- in a pipeline -----------------------------------------------------------------------

PIPELINE = """
LANDING = {landing!r}

@headwater.table(comment="raw files")
def bronze():
    return headwater.read_files(LANDING, schema_hints="v double", clean_source="archive",
                                archive_dir={archive!r})

@headwater.table
def silver():
    return headwater.read_stream("bronze").where("_rescued_data IS NULL")
"""


def test_a_pipeline_ingests_evolves_by_itself_and_archives(spark, tmp_path):
    from tests.pipelines import project, run

    landing, archive = tmp_path / "landing", tmp_path / "archive"
    land(landing, "1.json", '{"id": 1, "v": 1.0}\n{"id": 2, "v": "oops"}\n')
    root = project(tmp_path, {"p.py": PIPELINE.format(landing=str(landing),
                                                        archive=str(archive))})
    lake, results = run(spark, root)
    assert results["bronze"].status == "completed", results["bronze"].error
    assert (results["bronze"].rescued, results["bronze"].malformed) == (1, 0)
    assert lake.exists("bronze")
    schema_dir = Path(lake.checkpoint("bronze")) / "_ingest"
    assert len(list(schema_dir.glob("*/_schemas/0.json"))) == 1  # in the pipeline's storage
    assert not list(landing.rglob("*.json")) and len(list(archive.rglob("*.json"))) == 1

    land(landing, "2.json", '{"id": 3, "v": 2.0, "color": "red"}\n')
    lake, results = run(spark, root)
    assert results["bronze"].status == "completed", results["bronze"].error
    assert results["bronze"].schema_changes == 1
    bronze = sorted((r.asDict() for r in lake.read("bronze").collect()), key=lambda r: r["id"])
    assert [(r["id"], r["color"]) for r in bronze] == [(1, None), (2, None), (3, "red")]
    silver = sorted((r.asDict() for r in lake.read("silver").collect()), key=lambda r: r["id"])
    assert [(r["id"], r["color"]) for r in silver] == [(1, None), (3, "red")]
    assert not list(landing.rglob("*.json")) and len(list(archive.rglob("*.json"))) == 2


# --- a driver killed mid-batch -----------------------------------------------------------

DRIVER = """
import sys, headwater
spark = headwater.spark_session("local[1]", conf={{"spark.ui.enabled": "false"}})
df = headwater.read_files({landing!r}, schema="id int, day string", max_files_per_trigger=2,
                          schema_location={schema!r}, clean_source={mode!r},
                          archive_dir={archive!r})
(df.writeStream.format("delta").option("checkpointLocation", {cp!r})
 .trigger(availableNow=True).start({out!r}).awaitTermination())
print("DONE")
"""


@pytest.mark.parametrize("mode,fault", [("archive", "sink_before_commit"),
                                        ("delete", "sink_after_commit")])
@pytest.mark.procs
def test_killed_driver_then_restart_ingests_and_cleans_each_file_exactly_once(spark, tmp, mode,
                                                                                fault):
    from tests.support import run_script

    landing = tmp / "landing"
    for i in range(6):
        land(landing, f"day{i % 2}/f{i}.json", json.dumps({"id": i, "day": f"day{i % 2}"}) + "\n")
    code = DRIVER.format(landing=str(landing), schema=str(tmp / "schema"), mode=mode,
                         archive=str(tmp / "archive") if mode == "archive" else None,
                         cp=str(tmp / "cp"), out=str(tmp / "out"))
    crashed = run_script(code, env={"HEADWATER_FAULT": fault}, timeout=240)
    assert crashed.returncode == -9, (crashed.returncode, crashed.stderr[-2000:])
    committed = [] if fault == "sink_before_commit" else table(spark, tmp)
    assert len(committed) == (0 if fault == "sink_before_commit" else 2)
    assert len(list(landing.rglob("*.json"))) == 6  # nothing cleaned before a commit

    again = run_script(code, env={"HEADWATER_FAULT": ""}, timeout=240)
    assert "DONE" in again.stdout, again.stderr[-3000:]
    assert sorted(r["id"] for r in table(spark, tmp)) == list(range(6))  # each exactly once
    assert not list(landing.rglob("*.json"))
    archived = list((tmp / "archive").rglob("*.json")) if mode == "archive" else []
    assert len(archived) == (6 if mode == "archive" else 0)


def test_auto_loader_code_runs_unchanged(spark, tmp):
    land(tmp / "landing", "a.json", '{"id": 1, "name": "a"}\n{"id": "x", "name": "b"}\n')
    df = (spark.readStream.format("cloudFiles")
          .option("cloudFiles.format", "json")
          .option("cloudFiles.schemaLocation", str(tmp / "schema"))
          .option("cloudFiles.schemaHints", "id bigint")
          .load(str(tmp / "landing")))
    assert df.columns == ["id", "name", "_rescued_data"]
    ingest(spark, tmp, df=df)
    got = sorted(table(spark, tmp), key=lambda r: r["name"])
    assert [(r["id"], r["name"]) for r in got] == [(1, "a"), (None, "b")]
    assert rescued(got[1])["id"] == "x"
    assert_accounted(got, input_records(tmp / "landing"))
    # a user schema without the rescued column: a misfit stops the stream, naming the file
    df = (spark.readStream.format("cloudFiles").schema("id bigint, name string")
          .option("cloudFiles.format", "json")
          .option("cloudFiles.schemaLocation", str(tmp / "schema2")).load(str(tmp / "landing")))
    with pytest.raises(HeadwaterError) as err:
        ingest(spark, tmp, df=df, name="strict")
    assert err.value.code == "HW_INGEST_BAD_RECORD" and "a.json:2" in str(err.value)


def test_glob_patterns_match_as_hadoop_globs():
    from headwater.ingest.landing import split_glob  # noqa: PLC0415 - the helper under test

    assert split_glob("/in/2024-*/orders-?.json") == ("/in", "2024-*/orders-?.json")
    assert split_glob("s3://b/in/*.csv") == ("s3://b/in", "*.csv")
    assert split_glob("/in/plain") == ("/in/plain", None)
    assert split_glob("in-*/x.json") == (".", "in-*/x.json")  # relative: the working folder
    assert split_glob("/*.json") == ("/", "*.json")
    taken = FileFilter(path_glob="{2024,2025}-*/orders-[0-9].json")
    assert taken.matches("2024-01/orders-1.json") and taken.matches("2025-12/orders-7.json")
    assert not taken.matches("2023-01/orders-1.json")
    assert not taken.matches("2024-01/sub/orders-1.json")  # * stays within one level
    assert not taken.matches("2024-01/orders-x.json")
    assert FileFilter(path_glob="2024-*").matches("2024-01/deep/a.json")  # a matched folder
    assert not FileFilter(path_glob="[^a]*.json").matches("a.json")
    assert FileFilter("*.json", "d*").matches("d1/x.json")
    assert not FileFilter("*.json", "d*").matches("d1/x.csv")


def test_auto_loader_and_read_files_take_globs_in_the_path(spark, tmp):
    land(tmp / "landing" / "2024-01", "a.json", '{"id": 1, "name": "a"}\n')
    land(tmp / "landing" / "2024-02", "b.json", '{"id": 2, "name": "b"}\n')
    land(tmp / "landing" / "2023-12", "c.json", '{"id": 3, "name": "c"}\n')
    land(tmp / "landing" / "2024-02", "d.csv", "id,name\n4,d\n")
    df = (spark.readStream.format("cloudFiles")
          .option("cloudFiles.format", "json")
          .option("cloudFiles.schemaLocation", str(tmp / "schema"))
          .load(str(tmp / "landing" / "2024-*" / "*.json")))
    ingest(spark, tmp, df=df)
    assert sorted(r["id"] for r in table(spark, tmp)) == [1, 2]


def test_source_errors_reach_the_user_as_headwater_errors_first(spark, tmp):
    (tmp / "empty").mkdir()
    with pytest.raises(HeadwaterError) as err:  # raised in Spark's Python worker
        (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
         .option("cloudFiles.schemaLocation", str(tmp / "schema")).load(str(tmp / "empty")))
    assert err.value.code == "HW_INGEST_NO_FILES"
    assert str(err.value).startswith("[HW_INGEST_NO_FILES]")
