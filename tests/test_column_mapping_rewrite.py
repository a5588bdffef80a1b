"""Spark's rewrites of a column-mapped table (name mode, issue 37 item 2): OPTIMIZE (compaction,
ZORDER BY, clustering with FULL), REORG ... APPLY (PURGE), the Spark engine's DELETE / UPDATE /
MERGE and replaceWhere / dynamic partition overwrite read the files by physical names and write
physical names again (files, partition folders and values, stats), after RENAME COLUMN and DROP
COLUMN. Each table is read back by headwater and by delta-rs' DataFusion reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from tests.support import golden, logged_schema
from tests.test_column_mapping import file_columns, last_actions, physical

from headwater import HeadwaterError
from headwater.delta import dml

CREATE = ("CREATE TABLE {name} (id INT, name STRING, s STRUCT<a: INT, b: STRING>, "
          "gone STRING, p STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES "
          "('delta.columnMapping.mode' = 'name'{extra})")


def rs_rows(path: str | Path, order: str = "id") -> list[dict]:
    table = DeltaTable(str(path))
    reader = QueryBuilder().register("t", table).execute(f"SELECT * FROM t ORDER BY {order}")
    return pa.table(reader.read_all()).to_pylist()


def hw_rows(spark, table: str, order: str = "id") -> list[dict]:
    return [r.asDict(recursive=True)
            for r in spark.sql(f"SELECT * FROM {table} ORDER BY {order}").collect()]


def renamed_table(spark, lake, name: str = "m", extra: str = "") -> Path:
    """A mapped table of several small files, then a rename (top-level, nested and the
    partition column), a drop and a new column: physical names differ from logical ones."""
    spark.sql(CREATE.format(name=name, extra=extra))
    for i in range(1, 7):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'n{i}', named_struct('a', {i * 10}, "
                  f"'b', 'b{i}'), 'g{i}', 'p{i % 2}')")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN name TO full_name")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN s.a TO amount")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN p TO part")
    spark.sql(f"ALTER TABLE {name} DROP COLUMN gone")
    spark.sql(f"ALTER TABLE {name} ADD COLUMNS (extra STRING)")
    spark.sql(f"INSERT INTO {name} VALUES (7, 'n7', named_struct('amount', 70, 'b', 'b7'), "
              "'p1', 'e7')")
    return lake.path(name)


def expected_rows() -> list[dict]:
    return [{"id": i, "full_name": f"n{i}", "s": {"amount": i * 10, "b": f"b{i}"},
             "part": f"p{i % 2}", "extra": "e7" if i == 7 else None} for i in range(1, 8)]


def assert_physical_files(path: Path, adds: list[dict]) -> None:
    """Every added file holds the data columns by physical name, keys its partition values
    and stats by physical names, and lies in a folder named by the partition's physical
    name (as delta-spark lays a mapped table out)."""
    id_, name, s, part, extra = physical(path, "id", "full_name", "s", "part", "extra")
    assert adds
    for add in adds:
        assert set(file_columns(path, add["path"])) == {id_, name, s, extra}
        assert set(add["partitionValues"]) == {part}
        assert add["path"].split("/")[-2].startswith(f"{part}=")
        stats = json.loads(add["stats"])
        assert set(stats["minValues"]) <= {id_, name, s, extra} and id_ in stats["minValues"]
        nested = {f["metadata"]["delta.columnMapping.physicalName"]
                  for f in next(f for f in logged_schema(path)["fields"]
                                if f["name"] == "s")["type"]["fields"]}
        if s in stats["minValues"]:  # (a file whose structs are all NULL has no stats)
            assert set(stats["minValues"][s]) == nested


def test_optimize_and_zorder_write_physical_names(spark, lake):
    path = renamed_table(spark, lake)
    assert hw_rows(spark, "m") == rs_rows(path) == expected_rows()
    metrics = spark.sql("OPTIMIZE m").first().metrics
    assert (metrics.numFilesRemoved, metrics.numFilesAdded) == (7, 2)  # two partitions
    last = last_actions(path)
    info = last["commitInfo"][0]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"]["zOrderBy"] == "[]"
    assert info["operationMetrics"]["numRemovedFiles"] == "7"
    assert all(not a["dataChange"] for a in last["add"] + last["remove"])
    part = physical(path, "part")[0]
    assert all(set(r["partitionValues"]) == {part} for r in last["remove"])
    assert_physical_files(path, last["add"])
    assert hw_rows(spark, "m") == rs_rows(path) == expected_rows()
    # ZORDER BY a renamed column, with a partition predicate on the renamed partition column
    metrics = spark.sql("OPTIMIZE m WHERE part = 'p1' ZORDER BY (full_name, id)").first().metrics
    assert metrics.numFilesRemoved == 1 and metrics.zOrderStats is not None
    info = last_actions(path)["commitInfo"][0]
    assert json.loads(info["operationParameters"]["zOrderBy"]) == ["full_name", "id"]
    assert_physical_files(path, last_actions(path)["add"])
    assert hw_rows(spark, "m") == rs_rows(path) == expected_rows()
    # data skipping by the (logical) stats still works on the rewritten files
    assert [r.id for r in spark.sql("SELECT id FROM m WHERE full_name = 'n3'").collect()] == [3]


def test_clustered_mapped_table_optimize_full(spark, lake):
    spark.sql("CREATE TABLE c (id INT, name STRING, gone INT) USING delta CLUSTER BY (id) "
              "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    for i in (3, 1, 2):
        spark.sql(f"INSERT INTO c VALUES ({i}, 'n{i}', {i})")
    spark.sql("ALTER TABLE c RENAME COLUMN name TO full_name")
    spark.sql("ALTER TABLE c DROP COLUMN gone")
    path = lake.path("c")
    expected = [{"id": i, "full_name": f"n{i}"} for i in (1, 2, 3)]
    metrics = spark.sql("OPTIMIZE c FULL").first().metrics
    assert metrics.numFilesRemoved == 3 and metrics.numFilesAdded == 1
    assert metrics.clusteringStats.numOutputZCubes == 1
    last = last_actions(path)
    info = last["commitInfo"][0]
    assert info["operation"] == "OPTIMIZE"
    assert (info["operationParameters"]["clusterBy"], info["operationParameters"]["isFull"]) \
        == ('["id"]', "true")
    add = last["add"][0]
    assert set(file_columns(path, add["path"])) == set(physical(path, "id", "full_name"))
    assert add["clusteringProvider"] == "liquid"
    assert hw_rows(spark, "c") == rs_rows(path) == expected


def test_reorg_purge_of_a_delta_spark_mapped_table(spark, lake, tmp_path):
    """delta-spark's table with deletion vectors and column mapping (partition folders by
    physical name): the purge reads the files by physical names, drops the deleted rows and
    writes physical names again."""
    path = tmp_path / "dvcm"
    shutil.copytree(golden("dv-with-columnmapping"), path)
    table = f"delta.`{path}`"
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN col2 TO text")
    before = hw_rows(spark, table, "col1")
    assert before == rs_rows(path, "col1") and before
    result = spark.sql(f"REORG TABLE {table} APPLY (PURGE)").first()
    assert result.metrics.deletionVectorStats.numDeletionVectorsRemoved > 0
    last = last_actions(path)
    assert last["commitInfo"][0]["operation"] == "REORG"
    assert not any(a.get("deletionVector") for a in last.get("add", []))
    part, col1, text = physical(path, "part", "col1", "text")
    for add in last["add"]:
        assert set(file_columns(path, add["path"])) == {col1, text}
        assert set(add["partitionValues"]) == {part}
        assert set(json.loads(add["stats"])["minValues"]) == {col1, text}
    assert all(set(r["partitionValues"]) == {part} for r in last["remove"])
    assert hw_rows(spark, table, "col1") == rs_rows(path, "col1") == before
    # the Spark engine's DML on the same table
    dml.delete(spark, str(path), "col1 % 2 = 0", engine="spark")
    kept = [r for r in before if r["col1"] % 2 != 0]
    assert hw_rows(spark, table, "col1") == rs_rows(path, "col1") == kept


def test_spark_engine_dml_on_a_mapped_table(spark, lake):
    path = renamed_table(spark, lake, extra=", 'delta.enableChangeDataFeed' = 'true'")
    expected = expected_rows()
    spark.sql("OPTIMIZE m")  # one file per partition: the DML below rewrites them
    version = DeltaTable(str(path)).version()
    result = dml.delete(spark, str(path), "full_name = 'n1' OR s.amount = 20", engine="spark")
    assert result.engine == "spark" and result.num_deleted_rows == 2
    info = last_actions(path)["commitInfo"][0]
    assert info["operation"] == "DELETE" and info["operationMetrics"]["numDeletedRows"] == "2"
    assert_physical_files(path, last_actions(path)["add"])
    expected = expected[2:]
    assert hw_rows(spark, "m") == rs_rows(path) == expected
    result = dml.update(spark, str(path), {"full_name": "upper(full_name)", "extra": "'u'"},
                        "part = 'p1'", engine="spark")
    assert result.engine == "spark" and result.num_updated_rows == 3
    last = last_actions(path)
    assert last["commitInfo"][0]["operationMetrics"]["numUpdatedRows"] == "3"
    assert_physical_files(path, last["add"])
    # change data files hold physical names too; table_changes reads them by logical name
    cdc_columns = set(file_columns(path, last["cdc"][0]["path"]))
    assert cdc_columns == set(physical(path, "id", "full_name", "s", "extra")) | {"_change_type"}
    changes = spark.sql(f"SELECT id, full_name, _change_type FROM table_changes('m', "
                        f"{version + 2}) WHERE _change_type = 'update_postimage' ORDER BY id")
    assert [tuple(r) for r in changes.collect()] == [(3, "N3", "update_postimage"),
                                                     (5, "N5", "update_postimage"),
                                                     (7, "N7", "update_postimage")]
    expected = [{**r, "full_name": r["full_name"].upper(), "extra": "u"}
                if r["part"] == "p1" else r for r in expected]
    assert hw_rows(spark, "m") == rs_rows(path) == expected
    source = spark.createDataFrame([(4, "m4", "p0"), (9, "n9", "p1")],
                                   "id INT, full_name STRING, part STRING")
    result = (dml.MergeBuilder(spark, str(path), source.alias("s"), "t.id = s.id", "t")
              .when_matched_update({"full_name": "s.full_name"})
              .when_not_matched_insert({"id": "s.id", "full_name": "s.full_name",
                                        "part": "s.part"})
              .execute(engine="spark"))
    assert (result.engine, result.num_updated_rows, result.num_inserted_rows) == \
        ("spark", 1, 1)
    assert_physical_files(path, last_actions(path)["add"])
    expected = [{**r, "full_name": "m4"} if r["id"] == 4 else r for r in expected] + [
        {"id": 9, "full_name": "n9", "s": None, "part": "p1", "extra": None}]
    assert hw_rows(spark, "m") == rs_rows(path) == expected
    # schema evolution would add columns without ids and physical names: refused, unchanged
    version = DeltaTable(str(path)).version()
    wider = source.withColumn("more", source.id)
    with pytest.raises(HeadwaterError) as err:
        (dml.MergeBuilder(spark, str(path), wider.alias("s"), "t.id = s.id", "t")
         .with_schema_evolution().when_not_matched_insert().execute(engine="spark"))
    assert err.value.code == "HW_DML_UNSUPPORTED_FEATURE" and "more" in str(err.value)
    assert DeltaTable(str(path)).version() == version


def test_replace_where_and_dynamic_overwrite_on_a_mapped_table(spark, lake):
    path = renamed_table(spark, lake)
    expected = expected_rows()
    schema = "id INT, full_name STRING, s STRUCT<amount: INT, b: STRING>, part STRING, " \
             "extra STRING"
    new = spark.createDataFrame([(10, "r10", (100, "x"), "p0", "e")], schema)
    # replaceWhere on the (renamed) partition column
    new.write.format("delta").mode("overwrite").option("replaceWhere", "part = 'p0'") \
        .save(str(path))
    last = last_actions(path)
    part = physical(path, "part")[0]
    assert {r["partitionValues"][part] for r in last["remove"]} == {"p0"}
    assert_physical_files(path, last["add"])
    expected = [r for r in expected if r["part"] != "p0"] + [
        {"id": 10, "full_name": "r10", "s": {"amount": 100, "b": "x"}, "part": "p0",
         "extra": "e"}]
    assert hw_rows(spark, "m") == rs_rows(path) == expected
    # replaceWhere on a renamed data column: the files are rewritten without the rows
    new2 = spark.createDataFrame([(11, "n3", (110, "y"), "p1", None)], schema)
    new2.write.format("delta").mode("overwrite").option("replaceWhere", "full_name = 'n3'") \
        .save(str(path))
    assert_physical_files(path, last_actions(path)["add"])
    expected = [r for r in expected if r["full_name"] != "n3"] + [
        {"id": 11, "full_name": "n3", "s": {"amount": 110, "b": "y"}, "part": "p1",
         "extra": None}]
    assert hw_rows(spark, "m") == rs_rows(path) == expected
    # rows outside the predicate: refused, nothing committed
    version = DeltaTable(str(path)).version()
    with pytest.raises(HeadwaterError) as err:
        new.write.format("delta").mode("overwrite").option("replaceWhere", "part = 'p1'") \
            .save(str(path))
    assert err.value.code == "HW_REPLACE_WHERE_MISMATCH"
    assert DeltaTable(str(path)).version() == version
    # dynamic partition overwrite: only partition p0 replaced
    new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic") \
        .save(str(path))
    last = last_actions(path)
    assert {r["partitionValues"][part] for r in last["remove"]} == {"p0"}
    assert hw_rows(spark, "m") == rs_rows(path) == expected


def test_a_mapped_table_is_read_by_sparks_parquet_reader(spark, lake):
    """A load of a name-mode table reads its files with Spark's parquet reader by physical
    names, renamed to logical ones (no Python reader); a DataFrame planned before a column
    was dropped fails instead of reading the dropped data."""
    path = renamed_table(spark, lake)
    df = spark.read.format("delta").load(str(path))
    plan = df._jdf.queryExecution().analyzed().toString()
    assert "DeltaFileIndex" in plan or "Relation" in plan and "PythonTable" not in plan
    assert "FileScan parquet" in df._jdf.queryExecution().executedPlan().toString()
    assert [r.asDict(recursive=True) for r in df.orderBy("id").collect()] == expected_rows()
    assert [r.id for r in df.where("part = 'p0' AND s.amount > 30").collect()] == [4, 6]
    spark.sql("ALTER TABLE m DROP COLUMN extra")
    with pytest.raises(Exception) as err:  # (raised in Spark's planning, through py4j)
        df.collect()
    assert "DELTA_SCHEMA_CHANGED" in str(err.value) and "extra dropped" in str(err.value)
    again = spark.read.format("delta").load(str(path))
    assert sorted(again.columns) == ["full_name", "id", "part", "s"]
    assert again.count() == 7
