"""Column DDL in SQL (issue 37, item 3), as docs.delta.io's "Update table schema" section
writes it and delta-spark runs it: ADD COLUMNS with FIRST / AFTER and nested fields,
ALTER | CHANGE COLUMN (comment, position, nested, SET / DROP NOT NULL, the same type),
REPLACE COLUMNS where delta-spark allows it, and delta-spark's refusals with its error
classes. Each change must be one metadata commit (checked in the _delta_log's JSON) that
leaves the data files alone; rows are read back through Spark (its parquet reader), delta-rs
and a stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.support import commits, logged_schema

from headwater import HeadwaterError
from headwater.delta.log import open_table
from headwater.delta.native_read import natively_readable


def last_commit(path: str | Path) -> dict[str, dict]:
    return {kind: a[kind] for a in commits(path)[-1] for kind in a}


def shape(schema: dict) -> list:
    """Field names, nested ones as (name, [...])."""
    out: list = []
    for f in schema["fields"]:
        t = f["type"]
        out.append((f["name"], shape(t)) if isinstance(t, dict) and t["type"] == "struct"
                   else f["name"])
    return out


def rs_shape(path: str | Path) -> list:
    """The same from delta-rs' reading of the table."""
    return shape(json.loads(DeltaTable(str(path)).schema().to_json()))


def data_files(path: str | Path) -> set[str]:
    return {p.name for p in Path(path).rglob("*.parquet")}


def rows(df) -> list[dict]:
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=json.dumps)


def rs_rows(path: str | Path) -> list[dict]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=json.dumps)


@pytest.fixture
def boxes(lake, spark):
    """docs.delta.io's example table: colA, colB STRUCT<field1, field2>."""
    spark.sql("CREATE TABLE boxes (colA STRING, colB STRUCT<field1: STRING, field2: STRING>) "
              "USING delta")
    spark.sql("INSERT INTO boxes VALUES ('a', named_struct('field1', 'f1', 'field2', 'f2'))")
    return lake.path("boxes")


# --- ADD COLUMNS ----------------------------------------------------------------------------

def test_add_nested_column_after_a_field_as_the_docs_show_it(spark, boxes):
    files = data_files(boxes)
    spark.sql("ALTER TABLE boxes ADD COLUMNS (colB.nested STRING AFTER field1)")
    assert shape(logged_schema(boxes)) == ["colA", ("colB", ["field1", "nested", "field2"])]
    assert rs_shape(boxes) == shape(logged_schema(boxes))
    commit = last_commit(boxes)
    assert set(commit) == {"commitInfo", "metaData"}  # one metadata commit, no file touched
    assert commit["commitInfo"]["operation"] == "ADD COLUMNS"
    assert json.loads(commit["commitInfo"]["operationParameters"]["columns"]) == [
        {"column": {"name": "colB.nested", "type": "string", "nullable": True,
                    "metadata": {}}, "position": "AFTER field1"}]
    assert data_files(boxes) == files
    old = {"colA": "a", "colB": {"field1": "f1", "nested": None, "field2": "f2"}}
    assert rows(spark.table("boxes")) == [old]  # old files read the new field as NULL
    assert spark.table("boxes").schema["colB"].dataType.names == ["field1", "nested", "field2"]
    spark.sql("INSERT INTO boxes VALUES ('b', named_struct('field1', 'g1', 'nested', 'n', "
              "'field2', 'g2'))")
    new = {"colA": "b", "colB": {"field1": "g1", "nested": "n", "field2": "g2"}}
    assert rows(spark.table("boxes")) == [old, new]
    assert rs_rows(boxes) == [old, new]


def test_add_columns_first_after_with_comments(spark, lake, boxes):
    spark.sql("ALTER TABLE boxes ADD COLUMNS (id BIGINT FIRST, note STRING COMMENT 'a note' "
              "AFTER colA, tail INT)")
    assert shape(logged_schema(boxes)) == ["id", "colA", "note", ("colB", ["field1", "field2"]),
                                           "tail"]
    note = logged_schema(boxes)["fields"][2]
    assert note == {"name": "note", "type": "string", "nullable": True,
                    "metadata": {"comment": "a note"}}
    assert spark.table("boxes").columns == ["id", "colA", "note", "colB", "tail"]
    described = {r.col_name: r.comment for r in spark.sql("DESCRIBE boxes").collect()}
    assert described["note"] == "a note"
    spark.sql("INSERT INTO boxes VALUES (7, 'b', 'n', named_struct('field1', 'x', 'field2', "
              "'y'), 3)")
    got = [(r.id, r.colA, r.note, r.tail) for r in spark.table("boxes").orderBy("colA")
           .collect()]
    assert got == [(None, "a", None, None), (7, "b", "n", 3)]
    assert sorted((r["id"] or 0, r["note"]) for r in rs_rows(boxes)) == [(0, None), (7, "n")]
    assert natively_readable(open_table(boxes))  # Spark's parquet reader, by column name


def test_add_columns_to_a_table_by_path_and_a_later_column_after_an_earlier(spark, lake,
                                                                           tmp_path):
    path = str(tmp_path / "t")
    spark.range(2).selectExpr("id", "struct(id AS x) AS s").write.format("delta").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (a INT AFTER id, b INT AFTER a, "
              "s.y STRING FIRST)")
    assert shape(logged_schema(path)) == ["id", "a", "b", ("s", ["y", "x"])]
    got = rows(spark.read.format("delta").load(path))
    assert got == [{"id": 0, "a": None, "b": None, "s": {"y": None, "x": 0}},
                   {"id": 1, "a": None, "b": None, "s": {"y": None, "x": 1}}]
    assert rs_rows(path) == got


@pytest.mark.parametrize("statement, error_class", [
    ("ALTER TABLE boxes ADD COLUMNS (x INT NOT NULL)", "DELTA_OPERATION_NOT_ALLOWED"),
    ("ALTER TABLE boxes ADD COLUMNS (colA.x INT)", "DELTA_ADD_COLUMN_PARENT_NOT_STRUCT"),
    ("ALTER TABLE boxes ADD COLUMNS (colb.FIELD1 INT)", "DELTA_DUPLICATE_COLUMNS_FOUND"),
    ("ALTER TABLE boxes ADD COLUMNS (COLA INT)", "DELTA_DUPLICATE_COLUMNS_FOUND"),
    ("ALTER TABLE boxes ADD COLUMNS (x INT AFTER nothing)", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
    ("ALTER TABLE boxes ADD COLUMNS (nothing.x INT)", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
    ("ALTER TABLE boxes ADD COLUMNS (`a b` INT)", "DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES"),
    ("ALTER TABLE boxes ADD COLUMNS (x INT DEFAULT 1)",
     "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED"),
])
def test_add_columns_refusals_name_delta_sparks_error_class(spark, boxes, statement,
                                                           error_class):
    version = DeltaTable(boxes).version()
    with pytest.raises(HeadwaterError) as err:
        spark.sql(statement)
    assert error_class in str(err.value), str(err.value)
    assert "Why:" in str(err.value) and "Fix:" in str(err.value)
    assert DeltaTable(boxes).version() == version
    assert spark.table("boxes").columns == ["colA", "colB"]


def test_add_a_field_to_an_array_of_structs_element_and_refuse_the_array(spark, lake,
                                                                          tmp_path):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, a ARRAY<STRUCT<x: INT>>, m MAP<STRING, "
              "INT>) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, array(named_struct('x', 1)), "
              "map('k', 1))")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (a.element.y STRING)")
    element = logged_schema(path)["fields"][1]["type"]["elementType"]
    assert [f["name"] for f in element["fields"]] == ["x", "y"]
    assert rows(spark.read.format("delta").load(path))[0]["a"] == [{"x": 1, "y": None}]
    assert rs_rows(path)[0]["a"] == [{"x": 1, "y": None}]
    with pytest.raises(HeadwaterError, match="DELTA_ADD_COLUMN_PARENT_NOT_STRUCT"):
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (a.z INT)")
    with pytest.raises(HeadwaterError, match="DELTA_ADD_COLUMN_PARENT_NOT_STRUCT"):
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (m.value.z INT)")


# --- ALTER | CHANGE COLUMN ------------------------------------------------------------------

def test_change_nested_column_position_as_the_docs_show_it(spark, boxes):
    files = data_files(boxes)
    spark.sql("ALTER TABLE boxes CHANGE COLUMN colB.field2 field2 STRING FIRST")
    assert shape(logged_schema(boxes)) == ["colA", ("colB", ["field2", "field1"])]
    assert rs_shape(boxes) == shape(logged_schema(boxes))
    commit = last_commit(boxes)
    assert set(commit) == {"commitInfo", "metaData"}
    assert commit["commitInfo"]["operation"] == "CHANGE COLUMN"
    assert commit["commitInfo"]["operationParameters"]["position"] == "FIRST"
    assert json.loads(commit["commitInfo"]["operationParameters"]["column"])["name"] == \
        "colB.field2"
    assert data_files(boxes) == files
    want = [{"colA": "a", "colB": {"field2": "f2", "field1": "f1"}}]
    assert rows(spark.table("boxes")) == want  # struct fields matched by name, not position
    assert [f.name for f in spark.table("boxes").schema["colB"].dataType.fields] == \
        ["field2", "field1"]
    assert rs_rows(boxes) == want


def test_alter_column_comment_position_and_type_unchanged(spark, boxes):
    spark.sql("ALTER TABLE boxes ALTER COLUMN colA COMMENT 'the a'")
    spark.sql("ALTER TABLE boxes ALTER COLUMN colA AFTER colB")
    spark.sql("ALTER TABLE boxes ALTER COLUMN colB.field1 COMMENT 'inner'")
    spark.sql("ALTER TABLE boxes ALTER COLUMN colA TYPE STRING")  # the same type: a no-op
    schema = logged_schema(boxes)
    assert shape(schema) == [("colB", ["field1", "field2"]), "colA"]
    assert schema["fields"][1]["metadata"] == {"comment": "the a"}
    assert schema["fields"][0]["type"]["fields"][0]["metadata"] == {"comment": "inner"}
    assert spark.table("boxes").columns == ["colB", "colA"]
    assert rows(spark.table("boxes")) == [{"colB": {"field1": "f1", "field2": "f2"},
                                           "colA": "a"}]
    assert rs_rows(boxes) == rows(spark.table("boxes"))


def test_set_not_null_checks_every_row_and_drop_not_null(spark, lake):
    spark.sql("CREATE TABLE n (id INT, v STRING, s STRUCT<x: INT>) USING delta")
    spark.sql("INSERT INTO n VALUES (1, 'a', named_struct('x', 1)), (2, NULL, NULL)")
    path = lake.path("n")
    version = DeltaTable(path).version()
    with pytest.raises(HeadwaterError, match="DELTA_NEW_NOT_NULL_VIOLATION") as err:
        spark.sql("ALTER TABLE n ALTER COLUMN v SET NOT NULL")
    assert "1 rows" in str(err.value)
    with pytest.raises(HeadwaterError, match="DELTA_NEW_NOT_NULL_VIOLATION"):
        spark.sql("ALTER TABLE n ALTER COLUMN s.x SET NOT NULL")  # s NULL: s.x NULL too
    assert DeltaTable(path).version() == version
    spark.sql("ALTER TABLE n ALTER COLUMN id SET NOT NULL")
    assert [f["nullable"] for f in logged_schema(path)["fields"]] == [False, True, True]
    assert last_commit(path)["commitInfo"]["operation"] == "CHANGE COLUMN"
    with pytest.raises(Exception, match="NOT NULL|null"):
        spark.sql("INSERT INTO n VALUES (NULL, 'c', NULL)")
    spark.sql("ALTER TABLE n CHANGE COLUMN id DROP NOT NULL")
    assert [f["nullable"] for f in logged_schema(path)["fields"]] == [True, True, True]
    spark.sql("INSERT INTO n VALUES (NULL, 'c', NULL)")
    assert sorted(r["v"] or "" for r in rs_rows(path)) == ["", "a", "c"]


@pytest.mark.parametrize("statement, error_class, named", [
    ("ALTER TABLE boxes ALTER COLUMN colA TYPE INT",
     "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP", "typeWidening"),
    ("ALTER TABLE boxes CHANGE COLUMN colA colA BIGINT",
     "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP", "typeWidening"),
    ("ALTER TABLE boxes ALTER COLUMN colB TYPE STRUCT<field1: STRING>",
     "DELTA_CANNOT_UPDATE_STRUCT_FIELD", "colB"),
    ("ALTER TABLE boxes ALTER COLUMN nothing COMMENT 'x'",
     "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA", "nothing"),
    ("ALTER TABLE boxes ALTER COLUMN colB.nothing COMMENT 'x'",
     "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA", "colB.nothing"),
    ("ALTER TABLE boxes ALTER COLUMN colA AFTER nothing",
     "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA", "nothing"),
    ("ALTER TABLE boxes ALTER COLUMN colA SET DEFAULT 'x'",
     "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED", "allowColumnDefaults"),
])
def test_alter_column_refusals_name_delta_sparks_error_class(spark, boxes, statement,
                                                            error_class, named):
    version = DeltaTable(boxes).version()
    with pytest.raises(HeadwaterError) as err:
        spark.sql(statement)
    assert error_class in str(err.value) and named in str(err.value), str(err.value)
    assert DeltaTable(boxes).version() == version


def test_map_and_array_element_changes_as_delta_spark_allows_them(spark, lake, tmp_path):
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (m MAP<INT, INT>, a ARRAY<INT>) USING delta")
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN m.key SET NOT NULL")  # no-ops
    spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN a.element DROP NOT NULL")
    with pytest.raises(HeadwaterError, match="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"):
        spark.sql(f"ALTER TABLE delta.`{path}` CHANGE COLUMN m.key DROP NOT NULL")
    with pytest.raises(HeadwaterError, match="DELTA_UNSUPPORTED_COMMENT_MAP_ARRAY"):
        spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN a.element COMMENT 'x'")
    with pytest.raises(HeadwaterError, match="DELTA_CANNOT_UPDATE_ARRAY_FIELD"):
        spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN a TYPE ARRAY<BIGINT>")


def test_reordering_a_partition_column_reads_the_same_rows(spark, lake):
    spark.sql("CREATE TABLE p (id INT, day STRING, v DOUBLE) USING delta PARTITIONED BY (day)")
    spark.sql("INSERT INTO p VALUES (1, 'd1', 1.5), (2, 'd2', 2.5)")
    path = lake.path("p")
    spark.sql("ALTER TABLE p ALTER COLUMN day FIRST")
    spark.sql("ALTER TABLE p ALTER COLUMN id AFTER v")
    assert spark.table("p").columns == ["day", "v", "id"]
    assert DeltaTable(path).metadata().partition_columns == ["day"]
    want = [{"day": "d1", "v": 1.5, "id": 1}, {"day": "d2", "v": 2.5, "id": 2}]
    assert rows(spark.table("p")) == want
    assert rows(spark.sql("SELECT * FROM p WHERE day = 'd2'")) == want[1:]
    assert rs_rows(path) == want
    spark.sql("INSERT INTO p VALUES ('d3', 3.5, 3)")  # by position: the new order
    assert rows(spark.table("p").where("id = 3")) == [{"day": "d3", "v": 3.5, "id": 3}]


# --- REPLACE COLUMNS ------------------------------------------------------------------------

def test_replace_columns_as_the_docs_show_it(spark, boxes):
    spark.sql("ALTER TABLE boxes ALTER COLUMN colA COMMENT 'keep me'")
    files = data_files(boxes)
    spark.sql("ALTER TABLE boxes REPLACE COLUMNS (colC STRING, colB STRUCT<field2:STRING, "
              "nested:STRING, field1:STRING>, colA STRING)")
    schema = logged_schema(boxes)
    assert shape(schema) == ["colC", ("colB", ["field2", "nested", "field1"]), "colA"]
    assert schema["fields"][2]["metadata"] == {"comment": "keep me"}  # metadata kept
    assert rs_shape(boxes) == shape(schema)
    commit = last_commit(boxes)
    assert set(commit) == {"commitInfo", "metaData"}
    assert commit["commitInfo"]["operation"] == "REPLACE COLUMNS"
    assert [c["name"] for c in json.loads(
        commit["commitInfo"]["operationParameters"]["columns"])] == ["colC", "colB", "colA"]
    assert data_files(boxes) == files
    want = [{"colC": None, "colB": {"field2": "f2", "nested": None, "field1": "f1"},
             "colA": "a"}]
    assert rows(spark.table("boxes")) == want
    assert rs_rows(boxes) == want


@pytest.mark.parametrize("columns, reason", [
    ("colA STRING", "dropping column(s) [colB]"),
    ("colA STRING, colB STRUCT<field1: STRING>", "dropping column(s) [field2] from colB"),
    ("colA INT, colB STRUCT<field1: STRING, field2: STRING>", "changing data type of colA"),
    ("colA STRING, colB STRUCT<field1: STRING, field2: STRING, x: INT NOT NULL>",
     "adding non-nullable column colB.x"),
    ("colA STRING, colB STRUCT<field1: STRING, other: STRING>", "ambiguous"),
])
def test_replace_columns_refusals(spark, boxes, columns, reason):
    version = DeltaTable(boxes).version()
    with pytest.raises(HeadwaterError) as err:
        spark.sql(f"ALTER TABLE boxes REPLACE COLUMNS ({columns})")
    assert "DELTA_UNSUPPORTED_ALTER_TABLE_REPLACE_COL_OP" in str(err.value)
    assert reason in str(err.value), str(err.value)
    assert DeltaTable(boxes).version() == version


def test_replace_columns_tightening_nullability_is_refused_loosening_allowed(spark, lake):
    # (Spark's parser refuses NOT NULL on REPLACE COLUMNS' top-level columns; nested fields
    # and the columns' current nullability are delta-spark's to judge)
    spark.sql("CREATE TABLE r (id INT NOT NULL, s STRUCT<a: INT>) USING delta")
    with pytest.raises(HeadwaterError, match="tightening nullability of s.a"):
        spark.sql("ALTER TABLE r REPLACE COLUMNS (id INT, s STRUCT<a: INT NOT NULL>)")
    spark.sql("ALTER TABLE r REPLACE COLUMNS (s STRUCT<a: INT>, id INT)")
    assert [(f["name"], f["nullable"]) for f in logged_schema(lake.path("r"))["fields"]] == [
        ("s", True), ("id", True)]
    spark.sql("INSERT INTO r VALUES (NULL, NULL)")
    assert rs_rows(lake.path("r")) == [{"s": None, "id": None}]


# --- streams across the changes -------------------------------------------------------------

def test_a_stream_reads_the_table_across_added_and_reordered_columns(spark, boxes, tmp_path):
    checkpoint = str(tmp_path / "cp")
    seen: list[dict] = []

    def run():
        (spark.readStream.format("delta").load(boxes).writeStream
         .foreachBatch(lambda df, _: seen.extend(r.asDict(recursive=True)
                                                 for r in df.collect()))
         .option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start().awaitTermination())

    run()
    assert seen == [{"colA": "a", "colB": {"field1": "f1", "field2": "f2"}}]
    spark.sql("ALTER TABLE boxes ADD COLUMNS (colB.nested STRING AFTER field1, n INT FIRST)")
    spark.sql("ALTER TABLE boxes CHANGE COLUMN colB.field2 field2 STRING FIRST")
    spark.sql("ALTER TABLE boxes ALTER COLUMN colA COMMENT 'a comment'")
    spark.sql("INSERT INTO boxes VALUES (5, 'b', named_struct('field2', 'g2', 'field1', 'g1', "
              "'nested', 'n'))")
    run()  # restarted: reads the versions in between with its (newest) schema, by name
    assert seen[1:] == [{"n": 5, "colA": "b",
                         "colB": {"field2": "g2", "field1": "g1", "nested": "n"}}]
    # a new stream from the start reads every version with the newest schema
    fresh = (spark.readStream.format("delta").load(boxes).writeStream.format("memory")
             .queryName("column_ddl_fresh").trigger(availableNow=True).start())
    fresh.awaitTermination()
    assert sorted(rows(spark.table("column_ddl_fresh")), key=lambda r: r["colA"]) == [
        {"n": None, "colA": "a", "colB": {"field2": "f2", "field1": "f1", "nested": None}},
        {"n": 5, "colA": "b", "colB": {"field2": "g2", "field1": "g1", "nested": "n"}}]


# --- tables headwater commits to itself; column mapping -------------------------------------

def test_identity_column_tables_take_column_ddl_but_not_on_the_identity_column(spark, lake):
    spark.sql("CREATE TABLE ids (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING) USING delta")
    spark.sql("INSERT INTO ids (v) VALUES ('a')")
    path = lake.path("ids")
    spark.sql("ALTER TABLE ids ADD COLUMNS (w INT AFTER id)")
    spark.sql("ALTER TABLE ids ALTER COLUMN id COMMENT 'the key'")
    spark.sql("ALTER TABLE ids ALTER COLUMN v FIRST")
    schema = logged_schema(path)
    assert shape(schema) == ["v", "id", "w"]
    assert schema["fields"][1]["metadata"]["comment"] == "the key"
    assert "delta.identity.start" in schema["fields"][1]["metadata"]  # kept
    with pytest.raises(HeadwaterError, match="DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED"):
        spark.sql("ALTER TABLE ids ALTER COLUMN id DROP NOT NULL")
    with pytest.raises(HeadwaterError,
                       match="DELTA_IDENTITY_COLUMNS_REPLACE_COLUMN_NOT_SUPPORTED"):
        spark.sql("ALTER TABLE ids REPLACE COLUMNS (v STRING, id BIGINT, w INT)")
    spark.sql("INSERT INTO ids (v, w) VALUES ('b', 2)")
    got = sorted((r.v, r.w) for r in spark.table("ids").collect())
    assert got == [("a", None), ("b", 2)]
    assert sorted(r["id"] for r in rs_rows(path)) == [1, 2]


def test_new_fields_of_a_column_mapped_schema_get_ids_and_physical_names():
    from headwater.delta import column_ddl

    schema = {"type": "struct", "fields": [
        {"name": "a", "type": "integer", "nullable": True, "metadata": {
            "delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-a"}}]}
    new = column_ddl.add_columns(schema, [column_ddl.NewColumn(
        ["s"], {"name": "s", "type": {"type": "struct", "fields": [
            {"name": "x", "type": "long", "nullable": True, "metadata": {}}]},
            "nullable": True, "metadata": {}}, "FIRST")], "t")
    config = column_ddl.assign_column_mapping(new, {"delta.columnMapping.maxColumnId": "1"})
    assert config["delta.columnMapping.maxColumnId"] == "3"
    s, a = new["fields"]
    assert (s["name"], s["metadata"]["delta.columnMapping.id"]) == ("s", 2)
    assert s["type"]["fields"][0]["metadata"]["delta.columnMapping.id"] == 3
    assert s["metadata"]["delta.columnMapping.physicalName"].startswith("col-")
    assert a["metadata"]["delta.columnMapping.physicalName"] == "col-a"  # untouched
    # REPLACE COLUMNS drops columns only where column mapping keeps the files readable
    replaced = column_ddl.replace_columns(new, [a], "t", column_mapping=True,
                                          partition_columns=[])
    assert [f["name"] for f in replaced["fields"]] == ["a"]
    with pytest.raises(HeadwaterError, match="dropping column"):
        column_ddl.replace_columns(new, [a], "t", column_mapping=False, partition_columns=[])


def test_writes_after_a_reorder_take_the_table_order(spark, lake, boxes):
    spark.sql("ALTER TABLE boxes CHANGE COLUMN colB.field2 field2 STRING FIRST")
    spark.sql("ALTER TABLE boxes ALTER COLUMN colA AFTER colB")
    spark.table("boxes").where("false").unionByName(spark.createDataFrame(
        [({"field2": "w2", "field1": "w1"}, "w")], "colB struct<field2: string, "
        "field1: string>, colA string")).write.format("delta").mode("append").save(boxes)
    spark.sql("INSERT INTO boxes SELECT named_struct('field2', 'i2', 'field1', 'i1'), 'i'")
    got = {r["colA"]: r["colB"] for r in rs_rows(boxes)}
    assert got == {"a": {"field2": "f2", "field1": "f1"}, "w": {"field2": "w2", "field1": "w1"},
                   "i": {"field2": "i2", "field1": "i1"}}
    assert {r["colA"]: r["colB"] for r in rows(spark.table("boxes"))} == got


def test_the_constraints_pages_drop_not_null_example_runs_as_printed(spark, lake):
    spark.sql("""CREATE TABLE default.people10m (
        id INT NOT NULL,
        firstName STRING,
        middleName STRING NOT NULL,
        lastName STRING,
        gender STRING,
        birthDate TIMESTAMP,
        ssn STRING,
        salary INT
    ) USING DELTA;""")
    spark.sql("ALTER TABLE default.people10m CHANGE COLUMN middleName DROP NOT NULL;")
    nullable = {f["name"]: f["nullable"] for f in logged_schema(lake.path("people10m"))["fields"]}
    assert nullable["middleName"] and not nullable["id"]
    assert {f.name: f.nullable for f in DeltaTable(lake.path("people10m")).schema().fields}[
        "middleName"]
