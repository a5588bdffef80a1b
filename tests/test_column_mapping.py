"""Delta column mapping, name mode (issue 37, item 2), as docs.delta.io's "Delta column
mapping" page writes it: enabling it by property (ids and physical names for the existing
columns, the protocol upgrade, one commit), RENAME COLUMN and DROP COLUMN(S) as metadata
commits, and every headwater write on a mapped table putting physical names in its files
(batch INSERT / append / overwrite, a stream, DELETE / UPDATE / MERGE). Each table is read
back by Spark (headwater) and by delta-rs' own engine (its DataFusion reader maps the names;
its pyarrow reader refuses the table, naming the feature)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from tests.pipelines import project, run
from tests.support import cdc_apply, commits, golden, logged_schema

from headwater import HeadwaterError
from headwater.delta import dml
from headwater.delta.log import DeltaLog
from headwater.delta.schema import spark_schema
from headwater.delta.source import SourceOptions, SourcePlanner

MAPPING_ID = "delta.columnMapping.id"
PHYSICAL = "delta.columnMapping.physicalName"


def rs_rows(path: str | Path) -> list[dict]:
    """The rows delta-rs' DataFusion reader returns (by logical names), sorted by id."""
    table = DeltaTable(str(path))
    reader = QueryBuilder().register("t", table).execute("SELECT * FROM t ORDER BY id")
    return pa.table(reader.read_all()).to_pylist()


def spark_rows(spark, table: str) -> list[dict]:
    return [r.asDict(recursive=True) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id")
            .collect()]


def last_actions(path: str | Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for a in commits(path)[-1]:
        for kind, body in a.items():
            out.setdefault(kind, []).append(body)
    return out


def physical(path: str | Path, *names: str) -> list[str]:
    """The physical names of the top-level columns ``names``."""
    fields = {f["name"]: f for f in logged_schema(path)["fields"]}
    return [fields[n]["metadata"][PHYSICAL] for n in names]


def file_columns(path: str | Path, relative: str) -> list[str]:
    return pq.read_schema(Path(path) / unquote(relative)).names


@pytest.fixture
def people(lake, spark):
    spark.sql("CREATE TABLE people (id INT, name STRING, s STRUCT<a: INT, b: STRING>, "
              "p STRING) USING delta PARTITIONED BY (p)")
    spark.sql("INSERT INTO people VALUES (1, 'ann', named_struct('a', 10, 'b', 'x'), 'p1'), "
              "(2, 'bob', named_struct('a', 20, 'b', 'y'), 'p2')")
    return lake.path("people")


def enable(spark, table: str = "people") -> None:
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")


def test_enabling_name_mode_maps_every_column_to_its_current_name(spark, people):
    files_before = {p.name for p in Path(people).rglob("*.parquet")}
    enable(spark)
    last = last_actions(people)
    assert last["commitInfo"][0]["operation"] == "SET TBLPROPERTIES"
    assert "add" not in last  # metadata only
    protocol = last["protocol"][0]
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (3, 7)
    assert "columnMapping" in protocol["readerFeatures"]
    assert "columnMapping" in protocol["writerFeatures"]
    config = last["metaData"][0]["configuration"]
    assert config["delta.columnMapping.mode"] == "name"
    schema = logged_schema(people)
    fields = {f["name"]: f["metadata"] for f in schema["fields"]}
    nested = {f["name"]: f["metadata"] for f in schema["fields"][2]["type"]["fields"]}
    assert {n: m[PHYSICAL] for n, m in fields.items()} == {n: n for n in fields}
    assert {n: m[PHYSICAL] for n, m in nested.items()} == {"a": "a", "b": "b"}
    ids = sorted([m[MAPPING_ID] for m in fields.values()] +
                 [m[MAPPING_ID] for m in nested.values()])
    assert ids == list(range(1, 7)) and config["delta.columnMapping.maxColumnId"] == "6"
    assert {p.name for p in Path(people).rglob("*.parquet")} == files_before
    expected = [{"id": 1, "name": "ann", "s": {"a": 10, "b": "x"}, "p": "p1"},
                {"id": 2, "name": "bob", "s": {"a": 20, "b": "y"}, "p": "p2"}]
    assert spark_rows(spark, "people") == expected
    assert rs_rows(people) == expected
    # deltalake's pyarrow reader cannot map columns: it refuses, naming the feature
    with pytest.raises(Exception, match="columnMapping"):
        DeltaTable(str(people)).to_pyarrow_table()


def test_docs_example_with_explicit_versions_keeps_them(spark, lake, people):
    spark.sql("ALTER TABLE people SET TBLPROPERTIES ('delta.minReaderVersion' = '2', "
              "'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')")
    protocol = last_actions(people)["protocol"][0]
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (2, 5)
    spark.sql("ALTER TABLE people RENAME COLUMN name TO full_name")
    assert rs_rows(people)[0]["full_name"] == "ann"
    assert spark_rows(spark, "people")[0]["full_name"] == "ann"


def test_rename_and_drop_need_column_mapping(spark, people):
    version = DeltaTable(str(people)).version()
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE people RENAME COLUMN name TO full_name")
    assert "DELTA_UNSUPPORTED_RENAME_COLUMN" in str(err.value)
    assert "delta.columnMapping.mode" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE people DROP COLUMN name")
    assert "DELTA_UNSUPPORTED_DROP_COLUMN" in str(err.value)
    assert DeltaTable(str(people)).version() == version


def test_other_modes_and_leaving_the_mode_are_refused(spark, people):
    before = str(DeltaTable(str(people)).protocol())
    spark.sql("ALTER TABLE people SET TBLPROPERTIES ('delta.columnMapping.mode' = 'none')")
    assert str(DeltaTable(str(people)).protocol()) == before  # nothing enabled
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE people SET TBLPROPERTIES ('delta.columnMapping.mode' = 'id')")
    assert "DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE" in str(err.value)
    enable(spark)
    version = DeltaTable(str(people)).version()
    for sql in ("ALTER TABLE people SET TBLPROPERTIES ('delta.columnMapping.mode' = 'none')",
                "ALTER TABLE people UNSET TBLPROPERTIES ('delta.columnMapping.mode')"):
        with pytest.raises(HeadwaterError) as err:
            spark.sql(sql)
        assert "DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE" in str(err.value)
    assert DeltaTable(str(people)).version() == version


def test_rename_columns_top_level_nested_and_partition(spark, people):
    enable(spark)
    files_before = {p.name for p in Path(people).rglob("*.parquet")}
    spark.sql("ALTER TABLE people RENAME COLUMN name TO full_name")
    last = last_actions(people)
    assert last["commitInfo"][0]["operation"] == "RENAME COLUMN"
    assert last["commitInfo"][0]["operationParameters"] == {
        "oldColumnPath": "name", "newColumnPath": "full_name"}
    assert set(last) == {"commitInfo", "metaData"}
    spark.sql("ALTER TABLE people RENAME COLUMN s.a TO amount")
    spark.sql("ALTER TABLE people RENAME COLUMN p TO part")
    assert last_actions(people)["metaData"][0]["partitionColumns"] == ["part"]
    assert physical(people, "full_name", "part") == ["name", "p"]
    assert {p.name for p in Path(people).rglob("*.parquet")} == files_before
    expected = [{"id": 1, "full_name": "ann", "s": {"amount": 10, "b": "x"}, "part": "p1"},
                {"id": 2, "full_name": "bob", "s": {"amount": 20, "b": "y"}, "part": "p2"}]
    assert spark_rows(spark, "people") == expected
    assert rs_rows(people) == expected
    assert [r[0] for r in spark.sql("SELECT id FROM people WHERE part = 'p2'").collect()] == [2]
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE people RENAME COLUMN id TO full_name")
    assert "DELTA_DUPLICATE_COLUMNS_FOUND" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE people RENAME COLUMN nope TO x")
    assert "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA" in str(err.value)


def test_drop_columns_then_a_new_column_of_the_same_name_reads_null(spark, people):
    enable(spark)
    spark.sql("ALTER TABLE people DROP COLUMN name")
    last = last_actions(people)
    assert last["commitInfo"][0]["operation"] == "DROP COLUMNS"
    assert set(last) == {"commitInfo", "metaData"}
    spark.sql("ALTER TABLE people DROP COLUMNS (s.b)")
    spark.sql("ALTER TABLE people DROP COLUMNS IF EXISTS (nope)")
    spark.sql("ALTER TABLE people ADD COLUMNS (name STRING)")
    new_physical = physical(people, "name")[0]
    assert new_physical != "name"  # the dropped column's data stays unseen
    expected = [{"id": 1, "s": {"a": 10}, "p": "p1", "name": None},
                {"id": 2, "s": {"a": 20}, "p": "p2", "name": None}]
    assert spark_rows(spark, "people") == expected
    assert rs_rows(people) == expected
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE people DROP COLUMN p")
    assert "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN" in str(err.value)


def test_writes_put_physical_names_in_files(spark, lake, people, tmp_path):
    enable(spark)
    spark.sql("ALTER TABLE people RENAME COLUMN name TO full_name")
    spark.sql("ALTER TABLE people RENAME COLUMN s.a TO amount")
    spark.sql("ALTER TABLE people ADD COLUMNS (extra STRING)")
    extra = physical(people, "extra")[0]
    # batch INSERT (Spark's parquet writer, headwater's commit)
    spark.sql("INSERT INTO people VALUES (3, 'cy', named_struct('amount', 30, 'b', 'z'), "
              "'p1', 'e3')")
    add = last_actions(people)["add"][0]
    assert set(file_columns(people, add["path"])) == {"id", "name", "s", extra}
    stats = json.loads(add["stats"])
    assert stats["minValues"]["name"] == "cy" and stats["minValues"]["s"]["a"] == 30
    assert stats["minValues"][extra] == "e3"
    assert add["partitionValues"] == {"p": "p1"}
    # df.write append, by DataFrame
    df = spark.createDataFrame(
        [(4, "dee", (40, "w"), "p3", "e4")],
        "id INT, full_name STRING, s STRUCT<amount: INT, b: STRING>, p STRING, extra STRING")
    df.write.format("delta").mode("append").save(str(people))
    add = last_actions(people)["add"][0]
    assert set(file_columns(people, add["path"])) == {"id", "name", "s", extra}
    # a stream (the native sink: foreachBatch's rows renamed)
    src = tmp_path / "src"
    df.withColumn("id", df.id + 1).write.format("delta").save(str(src))
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start(str(people)))
    query.awaitTermination()
    last = last_actions(people)
    assert last["commitInfo"][0]["operation"] == "STREAMING UPDATE"
    assert set(file_columns(people, last["add"][0]["path"])) == {"id", "name", "s", extra}
    expected = [
        {"id": 1, "full_name": "ann", "s": {"amount": 10, "b": "x"}, "p": "p1", "extra": None},
        {"id": 2, "full_name": "bob", "s": {"amount": 20, "b": "y"}, "p": "p2", "extra": None},
        {"id": 3, "full_name": "cy", "s": {"amount": 30, "b": "z"}, "p": "p1", "extra": "e3"},
        {"id": 4, "full_name": "dee", "s": {"amount": 40, "b": "w"}, "p": "p3", "extra": "e4"},
        {"id": 5, "full_name": "dee", "s": {"amount": 40, "b": "w"}, "p": "p3", "extra": "e4"}]
    assert spark_rows(spark, "people") == expected
    assert rs_rows(people) == expected
    # overwrite: every file replaced
    df.write.format("delta").mode("overwrite").save(str(people))
    assert rs_rows(people) == [expected[3]]
    assert spark_rows(spark, "people") == [expected[3]]


def test_dml_on_a_mapped_table(spark, people):
    enable(spark)
    spark.sql("ALTER TABLE people RENAME COLUMN name TO full_name")
    spark.sql("DELETE FROM people WHERE id = 1")
    spark.sql("UPDATE people SET full_name = 'bobby' WHERE id = 2")
    add = last_actions(people)["add"][0]
    assert "name" in file_columns(people, add["path"])
    assert "full_name" not in file_columns(people, add["path"])
    spark.createDataFrame([(2, "b2", "p2"), (7, "gil", "p7")],
                          "id INT, full_name STRING, p STRING").createOrReplaceTempView("src")
    try:
        spark.sql("MERGE INTO people t USING src s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET full_name = s.full_name "
                  "WHEN NOT MATCHED THEN INSERT (id, full_name, p) "
                  "VALUES (s.id, s.full_name, s.p)")
    finally:
        spark.catalog.dropTempView("src")
    expected = [{"id": 2, "full_name": "b2", "s": {"a": 20, "b": "y"}, "p": "p2"},
                {"id": 7, "full_name": "gil", "s": None, "p": "p7"}]
    assert spark_rows(spark, "people") == expected
    assert rs_rows(people) == expected
    # Spark's copy-on-write engine maps the names too
    # (tests/test_column_mapping_rewrite.py: after drops and nested renames)
    assert dml.delete(spark, str(people), "id = 2", engine="spark").engine == "spark"
    assert spark_rows(spark, "people") == rs_rows(people) == expected[1:]


def test_a_stream_across_a_rename_is_refused_as_delta_spark_does(spark, people, tmp_path):
    enable(spark)
    out, cp = tmp_path / "out", tmp_path / "cp"

    def run() -> None:
        query = (spark.readStream.format("delta").load(str(people)).writeStream
                 .format("delta").option("checkpointLocation", str(cp))
                 .trigger(availableNow=True).start(str(out)))
        query.awaitTermination()

    run()
    assert DeltaTable(str(out)).version() == 0
    spark.sql("ALTER TABLE people RENAME COLUMN name TO full_name")
    spark.sql("INSERT INTO people VALUES (3, 'cy', named_struct('a', 30, 'b', 'z'), 'p1')")
    with pytest.raises(Exception) as err:
        run()
    assert "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG" in str(err.value)
    assert "name renamed to full_name since" in str(err.value)
    assert DeltaTable(str(out)).version() == 0


def test_golden_column_mapped_table_takes_headwater_appends(spark, tmp_path):
    path = tmp_path / "cm"
    shutil.copytree(golden("table-with-columnmapping-mode-name"), path)
    before = spark.read.format("delta").load(str(path))
    count = before.count()
    before.limit(1).write.format("delta").mode("append").save(str(path))
    add = last_actions(path)["add"][0]
    assert all(c.startswith("col-") for c in file_columns(path, add["path"]))
    after = spark.read.format("delta").load(str(path))
    assert after.count() == count + 1
    rows = pa.table(QueryBuilder().register("t", DeltaTable(str(path)))
                    .execute("SELECT count(*) AS n FROM t").read_all()).to_pylist()
    assert rows == [{"n": count + 1}]


def test_a_running_stream_stops_at_a_drop(spark, people, tmp_path):
    """The commit that drops a column, read by a stream started before it (the planner
    meets its metaData action while walking the log): refused."""
    enable(spark)
    table = DeltaTable(str(people))
    planner = SourcePlanner(DeltaLog(str(people)), spark_schema(table.schema().to_json()),
                            ["p"], table.metadata().id, SourceOptions.from_options({}))
    start = planner.initial_offset()
    spark.sql("ALTER TABLE people DROP COLUMN name")
    with pytest.raises(HeadwaterError) as err:
        planner.latest_offset(start, None, None)
    assert "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG" in str(err.value)
    assert "name dropped" in str(err.value)


def test_a_stream_started_before_mapping_stops_at_a_drop_and_a_rename(spark, people, tmp_path):
    """A stream whose schema has no column ids (started before the mode was turned on):
    its columns are known by their physical names, as delta-spark upgrades the old schema.
    Dropping a column and adding one of the same name must stop it, never read NULLs."""
    out, cp = tmp_path / "out", tmp_path / "cp"

    def run() -> None:
        query = (spark.readStream.table("people").select("id", "name").writeStream
                 .format("delta").option("checkpointLocation", str(cp))
                 .trigger(availableNow=True).start(str(out)))
        query.awaitTermination()

    run()
    assert spark.read.format("delta").load(str(out)).count() == 2
    enable(spark)
    spark.sql("INSERT INTO people VALUES (3, 'cy', named_struct('a', 30, 'b', 'z'), 'p1')")
    run()  # turning the mode on renames nothing: the stream carries on
    assert spark.read.format("delta").load(str(out)).count() == 3
    spark.sql("ALTER TABLE people DROP COLUMN name")
    spark.sql("ALTER TABLE people ADD COLUMN name STRING")
    spark.sql("INSERT INTO people VALUES (4, named_struct('a', 40, 'b', 'w'), 'p1', 'dee')")
    with pytest.raises(Exception) as err:
        run()
    assert "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG" in str(err.value)
    assert "name dropped" in str(err.value)
    assert spark.read.format("delta").load(str(out)).count() == 3  # no NULL names appended
    # the planner on its own, across a rename of a column it knew by name
    table = DeltaTable(str(people))
    planner = SourcePlanner(DeltaLog(str(people)), spark_schema(table.schema().to_json()),
                            ["p"], table.metadata().id, SourceOptions.from_options({}))
    start = planner.initial_offset()
    spark.sql("ALTER TABLE people RENAME COLUMN id TO key")
    with pytest.raises(HeadwaterError) as renamed:
        planner.latest_offset(start, None, None)
    assert "id renamed to key" in str(renamed.value)


def test_create_table_and_ctas_in_name_mode(spark, lake):
    spark.sql("CREATE TABLE made (id INT, name STRING, s STRUCT<a: INT>) USING delta "
              "PARTITIONED BY (name) TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    path = lake.path("made")
    first = last_actions(path)
    assert first["commitInfo"][0]["operation"] == "CREATE TABLE"
    assert first["protocol"][0]["readerFeatures"] == ["columnMapping"]
    assert first["metaData"][0]["configuration"]["delta.columnMapping.maxColumnId"] == "4"
    names = physical(path, "id", "name", "s")
    assert all(n.startswith("col-") for n in names)
    spark.sql("INSERT INTO made VALUES (1, 'x', named_struct('a', 5))")
    add = last_actions(path)["add"][0]
    assert set(add["partitionValues"]) == {names[1]}
    assert set(file_columns(path, add["path"])) == {names[0], names[2]}
    assert spark_rows(spark, "made") == [{"id": 1, "name": "x", "s": {"a": 5}}]
    assert rs_rows(path) == [{"id": 1, "name": "x", "s": {"a": 5}}]
    spark.createDataFrame([(2, "y", (6,))], "id INT, name STRING, s STRUCT<a: INT>") \
        .write.format("delta").mode("overwrite").save(str(path))
    overwrite = last_actions(path)
    assert [set(r["partitionValues"]) for r in overwrite["remove"]] == [{names[1]}]
    assert rs_rows(path) == [{"id": 2, "name": "y", "s": {"a": 6}}]
    spark.sql("CREATE TABLE copied TBLPROPERTIES ('delta.columnMapping.mode' = 'name') "
              "AS SELECT id, name FROM made")
    spark.sql("ALTER TABLE copied RENAME COLUMN name TO nm")
    assert spark_rows(spark, "copied") == [{"id": 2, "nm": "y"}]
    assert rs_rows(lake.path("copied")) == [{"id": 2, "nm": "y"}]
    with pytest.raises(HeadwaterError) as err:
        spark.sql("CREATE TABLE by_id (id INT) USING delta "
                  "TBLPROPERTIES ('delta.columnMapping.mode' = 'id')")
    assert err.value.code == "HW_DELTA_UNSUPPORTED_FEATURE"


def test_auto_cdc_into_a_mapped_target(spark, lake):
    """AUTO CDC's MERGE (delta-rs) into a target created in name mode and renamed since:
    physical names in its files, the rows by logical name."""
    spark.sql("CREATE TABLE target (id INT, name STRING, city STRING) USING delta "
              "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    path = lake.path("target")
    done = {"except_column_list": ["op", "seq"]}
    cdc_apply(spark, path, [(1, "ann", "oslo", 1, "U"), (2, "bob", "rome", 1, "U")], 0, **done)
    cdc_apply(spark, path, [(1, "ann", "bergen", 2, "U"), (2, None, None, 2, "D")], 1, **done)
    add = last_actions(path)["add"][0]
    assert set(file_columns(path, add["path"])) == set(physical(path, "id", "name", "city"))
    assert spark_rows(spark, "target") == [{"id": 1, "name": "ann", "city": "bergen"}]
    assert rs_rows(path) == [{"id": 1, "name": "ann", "city": "bergen"}]


def test_optimize_and_cdf_on_a_mapped_table(spark, lake):
    """OPTIMIZE rewrites the files with physical names (Spark's rewrite; more in
    tests/test_column_mapping_rewrite.py). UPDATE with the change data feed on (a protocol
    listing generatedColumns through writer 4's features) runs on delta-rs and table_changes
    reads its change files by logical name."""
    spark.sql("CREATE TABLE o (id INT, name STRING) USING delta TBLPROPERTIES "
              "('delta.columnMapping.mode' = 'name', 'delta.enableChangeDataFeed' = 'true')")
    for i in range(3):
        spark.sql(f"INSERT INTO o VALUES ({i}, 'n{i}')")
    spark.sql("ALTER TABLE o RENAME COLUMN name TO nm")
    path = lake.path("o")
    assert spark.sql("OPTIMIZE o").first().metrics.numFilesRemoved == 3
    add = last_actions(path)["add"][0]
    assert set(file_columns(path, add["path"])) == set(physical(path, "id", "nm"))
    version = DeltaTable(str(path)).version()
    spark.sql("UPDATE o SET nm = 'u' WHERE id = 1")
    changes = spark.sql(f"SELECT id, nm, _change_type FROM table_changes('o', {version + 1}) "
                        "ORDER BY _change_type").collect()
    assert [tuple(r) for r in changes] == [(1, "u", "update_postimage"),
                                           (1, "n1", "update_preimage")]
    assert rs_rows(path) == [{"id": 0, "nm": "n0"}, {"id": 1, "nm": "u"},
                             {"id": 2, "nm": "n2"}]


# (a streaming table in name mode; a materialized view's refresh is refused)
PIPELINE = """
from pyspark import pipelines as dp

MAPPED = {{"delta.columnMapping.mode": "name"}}


@dp.table(table_properties=MAPPED)
def mapped_stream():
    return spark.readStream.format("delta").load({src!r})


@dp.materialized_view(table_properties=MAPPED)
def mapped_view():
    return spark.read.format("delta").load({src!r}).groupBy("name").count()
"""


def test_a_pipeline_writes_its_mapped_tables_with_physical_names(spark, tmp_path,
                                                                 keep_lakehouse):
    src = tmp_path / "src"
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "id INT, name STRING") \
        .write.format("delta").save(str(src))
    lake, results = run(spark, project(tmp_path, {"p.py": PIPELINE.format(src=str(src))}))
    # a materialized view's refresh replaces its table: not yet with column mapping
    assert results["mapped_view"].error is not None
    assert "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE" in results["mapped_view"].error
    assert "column mapping" in results["mapped_view"].error
    path = lake.path("mapped_stream")
    names = physical(path, "id", "name")
    assert all(n.startswith("col-") for n in names)
    adds = [a for actions in commits(path) for b in actions for k, a in b.items() if k == "add"]
    assert adds and all(set(file_columns(path, a["path"])) == set(names) for a in adds)
    assert rs_rows(path) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"},
                             {"id": 3, "name": "a"}]


def test_schema_tracking_location_is_refused(spark, people, tmp_path):
    """delta-spark's schema log option is refused, never ignored."""
    enable(spark)
    query = (spark.readStream.format("delta")
             .option("schemaTrackingLocation", str(tmp_path / "cp" / "_schema"))
             .load(str(people)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start(str(tmp_path / "out")))
    with pytest.raises(Exception) as err:
        query.awaitTermination()
    assert "HW_OPTION_UNSUPPORTED" in str(err.value)
    assert "schemaTrackingLocation" in str(err.value)
