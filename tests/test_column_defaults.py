"""Column DEFAULT values (Delta's allowColumnDefaults writer feature, issue 35 item 2), as
docs.delta.io's "Delta default column values" shows them: enabling the feature, DEFAULT in
CREATE TABLE and ALTER COLUMN, the refused forms, and every write that leaves a column out
(INSERT column lists, the DEFAULT keyword, DataFrame appends, UPDATE, MERGE, streams)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from headwater import HeadwaterError

ENABLED = "TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'enabled')"


def rows(spark, name: str) -> list[tuple]:
    spark_rows = sorted(tuple(r) for r in spark.table(name).collect())
    return spark_rows


def log_actions(path: Path) -> list[dict]:
    out = []
    for log in sorted((path / "_delta_log").glob("*.json")):
        out += [json.loads(line) for line in log.read_text().splitlines()]
    return out


def protocol(path: Path) -> dict:
    return [a["protocol"] for a in log_actions(path) if "protocol" in a][-1]


def field_metadata(path: Path) -> dict[str, dict]:
    meta = [a["metaData"] for a in log_actions(path) if "metaData" in a][-1]
    return {f["name"]: f["metadata"] for f in json.loads(meta["schemaString"])["fields"]}


def test_create_with_defaults_records_the_feature_and_fills_every_insert(spark, lake):
    spark.sql(f"CREATE TABLE t (id INT, status STRING DEFAULT 'new', n INT NOT NULL DEFAULT 16) "
              f"USING delta {ENABLED}")
    path = Path(lake.path("t"))
    assert "allowColumnDefaults" in protocol(path)["writerFeatures"]
    meta = [a["metaData"] for a in log_actions(path) if "metaData" in a][-1]
    assert "delta.feature.allowColumnDefaults" not in meta["configuration"]  # protocol only
    assert field_metadata(path)["status"]["CURRENT_DEFAULT"] == "'new'"
    assert field_metadata(path)["n"]["CURRENT_DEFAULT"] == "16"
    spark.sql("INSERT INTO t (id) VALUES (1)")                       # a column list
    spark.sql("INSERT INTO t VALUES (2, DEFAULT, DEFAULT), (3, 'done', 4)")  # the keyword
    spark.sql("INSERT INTO t (id, n) VALUES (4, DEFAULT)")
    spark.sql("INSERT INTO t SELECT 5, 'x', DEFAULT")
    spark.createDataFrame([(6,)], "id int").write.format("delta").mode("append").saveAsTable("t")
    spark.createDataFrame([(7, "y")], "id int, status string").write.format("delta") \
        .mode("append").save(str(path))
    expected = [(1, "new", 16), (2, "new", 16), (3, "done", 4), (4, "new", 16), (5, "x", 16),
                (6, "new", 16), (7, "y", 16)]
    assert rows(spark, "t") == expected
    rs = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["status"], r["n"]) for r in rs) == expected  # in the files


def test_update_and_merge_take_the_default_keyword_and_merge_inserts_fill_defaults(spark, lake):
    spark.sql(f"CREATE TABLE m (id INT, status STRING DEFAULT 'new', note STRING) "
              f"USING delta {ENABLED}")
    spark.sql("INSERT INTO m VALUES (1, 'old', 'a'), (2, 'old', 'b')")
    spark.sql("UPDATE m SET status = DEFAULT, note = DEFAULT WHERE id = 1")  # note: NULL
    assert rows(spark, "m") == [(1, "new", None), (2, "old", "b")]
    spark.createDataFrame([(2, "z"), (3, "c"), (4, "d")], "id int, note string") \
        .createOrReplaceTempView("src")
    spark.sql("""MERGE INTO m USING src ON m.id = src.id
                 WHEN MATCHED THEN UPDATE SET status = DEFAULT
                 WHEN NOT MATCHED AND src.id = 3 THEN INSERT (id, note) VALUES (src.id, src.note)
                 WHEN NOT MATCHED THEN INSERT (id, status, note) VALUES (src.id, DEFAULT, 'k')""")
    spark.catalog.dropTempView("src")  # the shared session: later tests read a table src
    assert rows(spark, "m") == [(1, "new", None), (2, "new", "b"), (3, "new", "c"),
                                (4, "new", "k")]


def test_alter_column_set_and_drop_default_after_enabling_the_feature(spark, lake):
    spark.sql("CREATE TABLE a (id INT, c INT) USING delta")
    path = Path(lake.path("a"))
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("ALTER TABLE a ALTER COLUMN c SET DEFAULT 16")
    assert caught.value.error_class == "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"
    spark.sql("ALTER TABLE a SET TBLPROPERTIES ('delta.feature.allowColumnDefaults' = "
              "'enabled')")
    assert "allowColumnDefaults" in protocol(path)["writerFeatures"]
    spark.sql("INSERT INTO a (id) VALUES (1)")  # no default yet: NULL
    spark.sql("ALTER TABLE a ALTER COLUMN c SET DEFAULT 16")
    spark.sql("INSERT INTO a (id) VALUES (2)")
    spark.sql("ALTER TABLE a ALTER COLUMN c DROP DEFAULT")
    assert "CURRENT_DEFAULT" not in field_metadata(path)["c"]
    spark.sql("INSERT INTO a (id) VALUES (3)")
    assert rows(spark, "a") == [(1, None), (2, 16), (3, None)]


def test_refused_defaults_say_why_and_change_nothing(spark, lake, tmp):
    with pytest.raises(HeadwaterError) as caught:  # the feature is not enabled
        spark.sql("CREATE TABLE r (id INT, c INT DEFAULT 1) USING delta")
    assert caught.value.error_class == "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"
    assert not lake.exists("r")
    for bad in ("rand()", "id + 1", "'abc' || 1 + (SELECT 1)"):
        with pytest.raises(HeadwaterError) as caught:
            spark.sql(f"CREATE TABLE r (id INT, c INT DEFAULT {bad}) USING delta {ENABLED}")
        assert caught.value.code == "HW_COLUMN_DEFAULT_INVALID", bad
    assert not lake.exists("r")
    spark.sql(f"CREATE TABLE r (id INT) USING delta {ENABLED}")
    version = DeltaTable(lake.path("r")).version()
    with pytest.raises(HeadwaterError) as caught:  # as delta-spark: no ADD COLUMN ... DEFAULT
        spark.sql("ALTER TABLE r ADD COLUMN c INT DEFAULT 16")
    assert caught.value.error_class == \
        "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED"
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("ALTER TABLE r SET TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'off')")
    assert caught.value.error_class == "DELTA_UNSUPPORTED_FEATURE_STATUS"
    assert DeltaTable(lake.path("r")).version() == version
    one = spark.createDataFrame([(1,)], "id int")
    # a new table's delta.* writer options are its properties: by name the feature is enabled
    one.write.format("delta").option("delta.feature.allowColumnDefaults", "enabled") \
        .saveAsTable("r2")
    assert "allowColumnDefaults" in protocol(Path(lake.path("r2")))["writerFeatures"]
    one.write.format("delta").option("delta.feature.allowColumnDefaults", "enabled") \
        .save(str(tmp / "r3"))  # by path too, in the commit of the first rows
    assert "allowColumnDefaults" in protocol(tmp / "r3")["writerFeatures"]
    meta = [a["metaData"] for a in log_actions(tmp / "r3") if "metaData" in a][-1]
    assert meta["configuration"] == {}


def test_not_null_default_column_left_out_is_filled_and_explicit_null_is_refused(spark, lake):
    spark.sql(f"CREATE TABLE nn (id INT, n INT NOT NULL DEFAULT 0) USING delta {ENABLED}")
    spark.sql("INSERT INTO nn (id) VALUES (1)")
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("INSERT INTO nn VALUES (2, NULL)")
    assert caught.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert rows(spark, "nn") == [(1, 0)]


def test_a_stream_into_a_table_with_defaults_fills_them(spark, lake, tmp):
    spark.sql(f"CREATE TABLE s (id LONG, tag STRING DEFAULT 'streamed') USING delta {ENABLED}")
    source = tmp / "in"
    spark.range(3).write.parquet(str(source / "a"))
    query = (spark.readStream.schema("id long").parquet(str(source / "a"))
             .writeStream.format("delta").option("checkpointLocation", str(tmp / "ck"))
             .trigger(availableNow=True).toTable("s"))
    query.awaitTermination(120)
    assert rows(spark, "s") == [(0, "streamed"), (1, "streamed"), (2, "streamed")]


@pytest.mark.parametrize(("column", "error_class"), [
    ("c INT DEFAULT 'abc'", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ("c BOOLEAN DEFAULT 1", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ("c INT DEFAULT 5000000000", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ("c DATE DEFAULT 'garbage'", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ("c DECIMAL(5,2) DEFAULT 123456.789", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ("c DOUBLE DEFAULT rand()", "INVALID_DEFAULT_VALUE.NOT_CONSTANT"),
])
def test_a_default_of_the_wrong_type_is_refused_before_any_commit(spark, lake, column,
                                                                  error_class):
    plain, default = column.split(" DEFAULT ")
    spark.sql(f"CREATE TABLE keep (id INT, {plain}) USING delta {ENABLED}")
    spark.sql("INSERT INTO keep VALUES (1, NULL)")
    version = DeltaTable(lake.path("keep")).version()
    with pytest.raises(HeadwaterError) as caught:
        spark.sql(f"CREATE TABLE bad (id INT, {column}) USING delta {ENABLED}")
    assert caught.value.error_class == error_class
    assert not lake.exists("bad")
    with pytest.raises(HeadwaterError):  # a replace too: the table and its rows stay
        spark.sql(f"CREATE OR REPLACE TABLE keep (id INT, {column}) USING delta {ENABLED}")
    with pytest.raises(HeadwaterError):
        spark.sql(f"ALTER TABLE keep ALTER COLUMN c SET DEFAULT {default}")
    assert DeltaTable(lake.path("keep")).version() == version
    assert rows(spark, "keep") == [(1, None)]
    assert [f["name"] for f in spark.table("keep").schema.jsonValue()["fields"]] == ["id", "c"]


def test_default_keyword_in_select_lists_and_refused_elsewhere(spark, lake):
    spark.sql(f"CREATE TABLE d (id INT, s STRING DEFAULT 'd', n INT DEFAULT 7) USING delta "
              f"{ENABLED}")
    spark.createDataFrame([(1, 10)], "id int, n int").createOrReplaceTempView("srcv")
    spark.sql("INSERT INTO d SELECT id, DEFAULT, n FROM srcv")
    spark.sql("INSERT INTO d SELECT * FROM VALUES (2, DEFAULT, DEFAULT)")
    assert rows(spark, "d") == [(1, "d", 10), (2, "d", 7)]
    version = DeltaTable(lake.path("d")).version()
    for bad in ("INSERT INTO d VALUES (3, 'x', DEFAULT + 1)",
                "INSERT INTO d SELECT id, 'x', (SELECT DEFAULT) FROM srcv"):
        with pytest.raises(HeadwaterError) as caught:
            spark.sql(bad)
        assert caught.value.error_class == "DEFAULT_PLACEMENT_INVALID", bad
    assert DeltaTable(lake.path("d")).version() == version


def test_new_table_options_land_with_its_first_rows(spark, lake):
    df = spark.range(2)
    # one commit: created append-only with its rows (an overwrite of a new table is a create)
    df.write.format("delta").mode("overwrite").option("delta.appendOnly", "true") \
        .saveAsTable("ao")
    assert DeltaTable(lake.path("ao")).version() == 0
    assert sorted(r.id for r in spark.table("ao").collect()) == [0, 1]
    assert DeltaTable(lake.path("ao")).metadata().configuration["delta.appendOnly"] == "true"
    # a DataFrame's nullability is no declaration: enabling defaults keeps columns nullable
    df.write.format("delta").option("delta.feature.allowColumnDefaults", "enabled") \
        .saveAsTable("nr")
    schema = json.loads(DeltaTable(lake.path("nr")).schema().to_json())
    assert [f["nullable"] for f in schema["fields"]] == [True]
    spark.sql("INSERT INTO nr VALUES (NULL)")
    with pytest.raises(HeadwaterError):  # a refused option leaves no table behind
        df.write.format("delta").option("delta.foo", "1").saveAsTable("gone")
    assert not lake.exists("gone")


def test_update_mode_merge_checks_not_null_and_names_unsupported_features(spark, lake):
    from headwater.delta.update_mode import merge_batch  # noqa: PLC0415 - the engine under test

    spark.sql("CREATE TABLE u (id INT NOT NULL, v STRING) USING delta")
    bad = spark.createDataFrame([(None, "x")], "id int, v string")
    with pytest.raises(HeadwaterError) as caught:
        merge_batch(bad, lake.path("u"), ["v"], "app", 0)
    assert caught.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    spark.sql(f"CREATE TABLE uf (id INT, v STRING DEFAULT 'z') USING delta {ENABLED}")
    good = spark.createDataFrame([(1, "x")], "id int, v string")
    with pytest.raises(HeadwaterError) as caught:
        merge_batch(good, lake.path("uf"), ["id"], "app", 0)
    assert "allowColumnDefaults" in str(caught.value)
    assert caught.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
