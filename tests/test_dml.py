"""DELETE / UPDATE / MERGE on real Delta tables: rows checked through delta-rs and Spark, change
data checked with delta-rs's load_cdf after every DML."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F
from tests.support import golden, write

from headwater.delta import dml
from headwater.delta.commit import Transaction, commit
from headwater.errors import HeadwaterError

CDF = {"delta.enableChangeDataFeed": "true"}


def rs_rows(path) -> list[tuple]:
    """The table's rows as delta-rs reads them (sorted)."""
    table = pa.table(RsTable(str(path)).to_pyarrow_dataset().to_table())
    return sorted(tuple(r.values()) for r in table.to_pylist())


def spark_rows(spark, path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())


def changes(path, version) -> list[tuple]:
    """(id, value, _change_type) of one version's change data, via delta-rs's load_cdf."""
    table = pa.table(RsTable(str(path)).load_cdf(starting_version=version,
                                                 ending_version=version).read_all())
    return sorted((r["id"], r["v"], r["_change_type"]) for r in table.to_pylist())


def seed(path, partitioned=True, n=10, config=CDF):
    write(path, {"id": list(range(n)), "v": [f"v{i}" for i in range(n)],
                 "part": ["a" if i < n // 2 else "b" for i in range(n)]},
          partition_by=["part"] if partitioned else None, configuration=config)


def test_delete_update_with_strings_and_columns_and_cdf(spark, tmp):
    path = tmp / "t"
    seed(path)
    result = dml.delete(spark, str(path), "id = 3 OR id = 7")
    assert (result.num_affected_rows, result.num_deleted_rows, result.version) == (2, 2, 1)
    assert changes(path, 1) == [(3, "v3", "delete"), (7, "v7", "delete")]
    result = dml.update(spark, str(path), {"v": F.concat(F.col("v"), F.lit("!"))},
                        F.col("id") >= 8)
    assert result.num_updated_rows == 2
    assert changes(path, 2) == [(8, "v8", "update_preimage"), (8, "v8!", "update_postimage"),
                                (9, "v9", "update_preimage"), (9, "v9!", "update_postimage")]
    # partition pruning: a condition on part=a never reads part=b's files
    result = dml.update(spark, str(path), {"v": "upper(v)"}, "part = 'a' AND id < 2")
    assert result.metrics["numRemovedFiles"] == 1
    expected = [(0, "V0", "a"), (1, "V1", "a"), (2, "v2", "a"), (4, "v4", "a"), (5, "v5", "b"),
                (6, "v6", "b"), (8, "v8!", "b"), (9, "v9!", "b")]
    assert rs_rows(path) == expected == spark_rows(spark, path)
    # the rewritten files' folders hold data files only: no _SUCCESS marker VACUUM would
    # never remove (it skips names starting with "_")
    assert not list(path.rglob("_SUCCESS"))
    info = json.loads((path / "_delta_log" / f"{2:020d}.json").read_text().splitlines()[0])
    assert info["commitInfo"]["operation"] == "UPDATE"
    assert info["commitInfo"]["operationMetrics"]["numUpdatedRows"] == "2"
    # nothing matches: no commit
    assert dml.delete(spark, str(path), "id > 100").version is None
    # delete everything (no condition) still writes the change data
    result = dml.delete(spark, str(path))
    assert result.num_deleted_rows == 8 and rs_rows(path) == []
    assert len(changes(path, result.version)) == 8


def test_merge_every_clause_kind_in_order(spark, tmp):
    path = tmp / "t"
    seed(path, partitioned=False)
    source = spark.createDataFrame(
        [(1, "s1", "a", "upd"), (2, "s2", "a", "del"), (3, "s3", "a", "other"),
         (20, "s20", "b", "ins"), (21, "s21", "b", "skip")],
        "id long, v string, part string, op string").alias("s")
    result = (dml.MergeBuilder(spark, str(path), source, "t.id = s.id", target_alias="t")
              .when_matched_update({"v": "s.v"}, "s.op = 'upd'")
              .when_matched_delete(F.col("s.op") == "del")
              .when_matched_update({"v": "concat(t.v, '-kept')"})
              .when_not_matched_insert({"id": "s.id", "v": "s.v", "part": "s.part"},
                                       "s.op = 'ins'")
              .when_not_matched_by_source_delete("t.id >= 8")
              .when_not_matched_by_source_update({"v": "'untouched'"}, "t.id = 0")
              .execute(engine="spark"))
    assert (result.num_updated_rows, result.num_deleted_rows, result.num_inserted_rows) == \
        (3, 3, 1)
    assert result.num_affected_rows == 7
    expected = [(0, "untouched", "a"), (1, "s1", "a"), (3, "v3-kept", "a"), (4, "v4", "a"),
                (5, "v5", "b"), (6, "v6", "b"), (7, "v7", "b"), (20, "s20", "b")]
    assert rs_rows(path) == expected == spark_rows(spark, path)
    assert changes(path, 1) == sorted([
        (0, "v0", "update_preimage"), (0, "untouched", "update_postimage"),
        (1, "v1", "update_preimage"), (1, "s1", "update_postimage"),
        (3, "v3", "update_preimage"), (3, "v3-kept", "update_postimage"),
        (2, "v2", "delete"), (8, "v8", "delete"), (9, "v9", "delete"), (20, "s20", "insert")])


def test_merge_star_clauses_insert_only_and_schema_evolution(spark, tmp):
    path = tmp / "t"
    seed(path)
    # insert-only: rewrites no file
    new = spark.createDataFrame([(1, "x", "a"), (30, "y", "b")], "id long, v string, part string")
    result = (dml.MergeBuilder(spark, str(path), new.alias("s"), "t.id = s.id", "t")
              .when_not_matched_insert().execute(engine="spark"))
    assert result.num_inserted_rows == 1 and result.metrics["numRemovedFiles"] == 0
    assert changes(path, 1) == [(30, "y", "insert")]
    # UPDATE SET * / INSERT * with a new source column and schema evolution
    wide = spark.createDataFrame([(2, "w2", "a", 1.5), (40, "w40", "b", 2.5)],
                                 "id long, v string, part string, score double")
    (dml.MergeBuilder(spark, str(path), wide.alias("s"), "t.id = s.id", "t")
     .when_matched_update().when_not_matched_insert().with_schema_evolution()
     .execute(engine="spark"))
    got = spark.read.format("delta").load(str(path))
    assert got.columns == ["id", "v", "part", "score"]
    rows = {r["id"]: (r["v"], r["score"]) for r in got.collect()}
    assert rows[2] == ("w2", 1.5) and rows[40] == ("w40", 2.5) and rows[3] == ("v3", None)
    assert len(rs_rows(path)) == 12
    # without evolution a source lacking a target column is a clear error
    narrow = spark.createDataFrame([(2,)], "id long").alias("s")
    with pytest.raises(HeadwaterError) as err:
        (dml.MergeBuilder(spark, str(path), narrow, "t.id = s.id", "t")
         .when_matched_update().execute(engine="spark"))
    assert err.value.code == "HW_MERGE_SOURCE_COLUMN_MISSING"


def test_merge_multiple_source_rows_for_one_target_row_is_an_error(spark, tmp):
    path = tmp / "t"
    seed(path)
    before = rs_rows(path)
    dup = spark.createDataFrame([(1, "a"), (1, "b")], "id long, v string").alias("s")
    with pytest.raises(HeadwaterError) as err:
        (dml.MergeBuilder(spark, str(path), dup, "t.id = s.id", "t")
         .when_matched_update({"v": "s.v"}).execute(engine="spark"))
    assert err.value.code == "HW_MERGE_MULTIPLE_SOURCE_ROWS"
    assert "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in str(err.value)
    assert rs_rows(path) == before and RsTable(str(path)).version() == 0
    # one unconditional DELETE may match twice (delta-spark's exception): the row goes once
    result = (dml.MergeBuilder(spark, str(path), dup, "t.id = s.id", "t")
              .when_matched_delete().execute(engine="spark"))
    assert result.num_deleted_rows == 1 and len(rs_rows(path)) == 9
    # clause order rule
    with pytest.raises(HeadwaterError) as err:
        (dml.MergeBuilder(spark, str(path), dup, "t.id = s.id", "t")
         .when_matched_delete().when_matched_update({"v": "s.v"}).execute(engine="spark"))
    assert err.value.code == "HW_MERGE_CLAUSE_ORDER"


def _copy_golden(name, tmp):
    target = tmp / name
    shutil.copytree(golden(name), target)
    return target


def test_golden_id_mode_column_mapping_table_is_refused_unchanged(spark, tmp):
    """Spark's rewrite reads name mode (tests/test_column_mapping_rewrite.py), not id mode
    (files matched to columns by parquet field id)."""
    name = "table-with-columnmapping-mode-id"
    path = _copy_golden(name, tmp)
    version = RsTable(str(path)).version()
    for run in (lambda: dml.delete(spark, str(path), "true", engine="spark"),
                lambda: dml.update(spark, str(path), {}, None, engine="spark")):
        with pytest.raises(HeadwaterError) as err:
            run()
        assert err.value.code in ("HW_DML_UNSUPPORTED_FEATURE", "HW_DML_INVALID")
    with pytest.raises(HeadwaterError) as err:
        dml.delete(spark, str(path), "true", engine="spark")
    assert err.value.code == "HW_DML_UNSUPPORTED_FEATURE" and "id mode" in str(err.value)
    assert RsTable(str(path)).version() == version


def test_conflicting_concurrent_commit_fails_cleanly_blind_append_retries(spark, tmp):
    path = tmp / "t"
    seed(path, partitioned=False, config=None)
    table = RsTable(str(path))
    read = [a["path"] for a in pa.table(table.get_add_actions()).to_pylist()]
    cleaned = []

    def txn():
        return Transaction(uri=str(path), read_version=0, operation="DELETE", parameters={},
                           metrics={}, actions=[{"remove": {"path": read[0], "dataChange": True,
                                                            "deletionTimestamp": 1}}],
                           read_paths=read, cleanup=lambda: cleaned.append(True))

    write(path, {"id": [100], "v": ["x"], "part": ["c"]})  # version 1: a blind append
    assert commit(txn()) == 2  # retried past the append
    RsTable(str(path)).delete("id = 100")  # version 3 removes a file
    other = txn()
    other.read_version = 2
    other.read_paths = [a["path"] for a in pa.table(
        RsTable(str(path), version=2).get_add_actions()).to_pylist()]
    with pytest.raises(HeadwaterError) as err:
        commit(other)
    assert err.value.code == "HW_DML_CONCURRENT_CONFLICT" and cleaned == [True]
    assert RsTable(str(path)).version() == 3


def test_dml_while_a_stream_appends_to_the_same_table(spark, tmp):
    path, checkpoint = str(tmp / "t"), str(tmp / "chk")
    stream = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
              .select(F.col("value").alias("id"), F.lit("s").alias("v"))
              .writeStream.format("delta").option("checkpointLocation", checkpoint)
              .trigger(processingTime="300 milliseconds").start(path))
    deleted_below = []
    try:
        deadline = time.time() + 300
        while not RsTable.is_deltatable(path) or RsTable(path).version() < 1:
            assert time.time() < deadline and stream.isActive
            time.sleep(0.2)
        for _ in range(3):
            # a DELETE that matches no row commits nothing (as in Delta): under load the stream
            # may not have appended a multiple of 10 since the last round, so wait for one
            while (top := spark.read.format("delta").load(path).agg(F.max("id")).first()[0]) \
                    < (deleted_below[-1] + 10 if deleted_below else 0):
                assert time.time() < deadline and stream.isActive
                time.sleep(0.2)
            dml.delete(spark, path, f"id % 10 = 0 AND id <= {top}", engine="spark")
            deleted_below.append(top)
            dml.update(spark, path, {"v": "'u'"}, f"id % 10 = 1 AND id <= {top}",
                       engine="spark")
    finally:
        stream.stop()
    assert stream.exception() is None
    ids = [r[0] for r in rs_rows(path)]
    assert len(ids) == len(set(ids))
    top = max(deleted_below)
    expected = [i for i in range(max(ids) + 1) if not (i % 10 == 0 and i <= top)]
    assert ids == expected
    rows = dict((r[0], r[1]) for r in rs_rows(path))
    assert all(rows[i] == "u" for i in rows if i % 10 == 1 and i <= top)
    operations = [h["operation"] for h in RsTable(path).history()]
    assert operations.count("DELETE") == 3 and operations.count("UPDATE") == 3


def test_foreach_batch_upsert_example_is_exactly_once(spark, tmp):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "foreach_batch_upsert", Path(__file__).resolve().parents[1] / "examples"
        / "foreach_batch_upsert.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    latest = module.main(str(tmp), spark)
    assert latest == [("d1", 4, 12.0), ("d2", 3, 21.0), ("d3", 3, 30.0)]
    assert rs_rows(tmp / "latest") == latest
    # a restart re-delivering batch 1 changes no row and commits nothing
    before = RsTable(str(tmp / "latest")).version()
    batch = spark.createDataFrame([("d2", 3, 21.0), ("d3", 3, 30.0)],
                                  "device string, ts long, reading double")
    module.upsert(spark, str(tmp / "latest"))(batch, 1)
    assert rs_rows(tmp / "latest") == latest
    assert RsTable(str(tmp / "latest")).version() == before
    cdf = pa.table(RsTable(str(tmp / "latest")).load_cdf(starting_version=1).read_all())
    assert sorted(cdf.column("_change_type").to_pylist()).count("update_postimage") == 2
