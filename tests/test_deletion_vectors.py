"""Deletion vectors (issue 37, item 4) as docs.delta.io's "Deletion vectors" page shows them:
``delta.enableDeletionVectors = true`` in CREATE TABLE and ALTER TABLE SET TBLPROPERTIES
upgrades the protocol with that feature alone, and DELETE / UPDATE / MERGE / OPTIMIZE on
tables whose files have deletion vectors (written by delta-spark: the golden tables) read
them and rewrite the touched files without the deleted rows, removing each old file with
its vector. Rows are read back through headwater and through delta-rs (its SQL engine, which
applies deletion vectors; its pyarrow reader refuses the feature by name)."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from tests.support import commits, golden

from headwater import HeadwaterError
from headwater.delta import dml
from headwater.delta.optimize import optimize


def rs_rows(path) -> list[tuple]:
    """The table's rows as delta-rs reads them (deletion vectors applied), sorted."""
    table = DeltaTable(str(path))
    rows = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    return sorted(tuple(r.values()) for r in rows.to_pylist())


def hw_rows(spark, path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())


def protocol_actions(path) -> list[dict]:
    return [a["protocol"] for actions in commits(path) for a in actions if "protocol" in a]


def copy_golden(name, tmp):
    target = tmp / name
    shutil.copytree(golden(name), target)
    return target


def live_dv_files(path) -> int:
    """How many live files have a deletion vector (delta-rs lists them)."""
    return pa.table(DeltaTable(str(path)).deletion_vectors().read_all()).num_rows


DV_PROTOCOL = {"minReaderVersion": 3, "minWriterVersion": 7,
               "readerFeatures": ["deletionVectors"],
               "writerFeatures": ["appendOnly", "deletionVectors", "invariants"]}


def test_enabling_deletion_vectors_adds_only_that_feature(spark, lake):
    spark.sql("CREATE TABLE dv_new (id INT, v STRING) USING DELTA "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    assert protocol_actions(lake.path("dv_new")) == [DV_PROTOCOL]  # no variantType
    spark.sql("CREATE TABLE dv_later (id INT) USING DELTA")
    spark.sql("INSERT INTO dv_later VALUES (1), (2)")
    spark.sql("ALTER TABLE dv_later SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    last = commits(lake.path("dv_later"))[-1]
    assert {k for a in last for k in a} == {"commitInfo", "protocol", "metaData"}  # one commit
    assert protocol_actions(lake.path("dv_later"))[-1] == DV_PROTOCOL
    meta = next(a["metaData"] for a in last if "metaData" in a)
    assert meta["configuration"] == {"delta.enableDeletionVectors": "true"}
    # DML on both tables (no deletion vector in their files yet)
    spark.sql("INSERT INTO dv_new VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("DELETE FROM dv_new WHERE id = 2")
    spark.sql("UPDATE dv_new SET v = 'C' WHERE id = 3")
    spark.sql("MERGE INTO dv_later t USING (SELECT 2 AS id UNION ALL SELECT 5) s "
              "ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *")
    assert hw_rows(spark, lake.path("dv_new")) == [(1, "a"), (3, "C")]
    assert rs_rows(lake.path("dv_new")) == [(1, "a"), (3, "C")]
    assert hw_rows(spark, lake.path("dv_later")) == rs_rows(lake.path("dv_later")) == [(1,), (5,)]
    with pytest.raises(Exception, match="deletionVectors"):  # delta-rs' pyarrow reader
        DeltaTable(str(lake.path("dv_new"))).to_pyarrow_table()


@pytest.mark.parametrize("engine", ["auto", "spark"])
def test_delete_on_a_table_with_deletion_vectors(spark, tmp, engine):
    path = copy_golden("dv-partitioned-with-checkpoint", tmp)
    before = hw_rows(spark, path)
    assert before == rs_rows(path) and live_dv_files(path) > 0
    result = dml.delete(spark, str(path), "col1 < 20 OR col1 = 38", engine=engine)
    expected = [r for r in before if not (r[1] < 20 or r[1] == 38)]
    assert result.num_deleted_rows == len(before) - len(expected)
    assert hw_rows(spark, path) == rs_rows(path) == expected
    removes = [a["remove"] for a in commits(path)[-1] if "remove" in a]
    assert removes and any("deletionVector" in r for r in removes)  # removed with its vector
    # no condition: every live row goes, counted without the deleted ones
    result = dml.delete(spark, str(path), None, engine=engine)
    assert result.num_deleted_rows == len(expected)
    assert hw_rows(spark, path) == rs_rows(path) == []


def test_update_and_merge_on_a_table_with_deletion_vectors(spark, lake, tmp):
    path = copy_golden("dv-partitioned-with-checkpoint", tmp)
    before = hw_rows(spark, path)
    spark.sql(f"UPDATE delta.`{path}` SET col2 = upper(col2) WHERE col1 % 2 = 1")
    updated = sorted((p, c, v.upper() if c % 2 == 1 else v) for p, c, v in before)
    assert hw_rows(spark, path) == rs_rows(path) == updated
    source = spark.createDataFrame([(1, 1, "m1"), (0, 1000, "new"), (4, 44, "m44")],
                                   "part INT, col1 INT, col2 STRING")
    result = (dml.MergeBuilder(spark, str(path), source.alias("s"), "t.col1 = s.col1", "t")
              .when_matched_update({"col2": "s.col2"}).when_not_matched_insert()
              .execute(engine="spark"))
    assert (result.num_updated_rows, result.num_inserted_rows) == (2, 1)
    merged = sorted([(p, c, {1: "m1", 44: "m44"}.get(c, v)) for p, c, v in updated]
                    + [(0, 1000, "new")])
    assert hw_rows(spark, path) == rs_rows(path) == merged


def test_dml_on_rows_a_deletion_vector_deleted_finds_nothing(spark, tmp):
    path = copy_golden("log-replay-dv-key-cases", tmp)
    before = hw_rows(spark, path)
    gone = sorted(set(range(50)) - {r[0] for r in before})
    assert gone  # rows delta-spark deleted with a deletion vector
    version = DeltaTable(str(path)).version()
    result = dml.update(spark, str(path), {"id": "id + 1000"}, f"id = {gone[0]}",
                        engine="spark")
    assert result.num_updated_rows == 0 and DeltaTable(str(path)).version() == version
    dml.delete(spark, str(path), "id < 10", engine="spark")
    assert hw_rows(spark, path) == rs_rows(path) == [r for r in before if r[0] >= 10]


def test_optimize_rewrites_files_with_deletion_vectors(spark, tmp):
    path = copy_golden("dv-partitioned-with-checkpoint", tmp)
    before = hw_rows(spark, path)
    metrics = optimize(spark, str(path))
    assert metrics["numFilesRemoved"] > 0
    assert hw_rows(spark, path) == rs_rows(path) == before
    commit_info = commits(path)[-1][0]["commitInfo"]
    assert commit_info["operation"] == "OPTIMIZE"


# --- REORG TABLE ... APPLY (PURGE) and DROP FEATURE ----------------------------------------

def test_reorg_purge_rewrites_the_files_with_deletion_vectors(spark, lake, tmp):
    path = copy_golden("dv-partitioned-with-checkpoint", tmp)
    before = hw_rows(spark, path)
    with_dv = live_dv_files(path)
    result = spark.sql(f"REORG TABLE delta.`{path}` WHERE part = 8 APPLY (PURGE)").first()
    assert result.metrics.deletionVectorStats.numDeletionVectorsRemoved == 1
    assert live_dv_files(path) == with_dv - 1
    info = commits(path)[-1][0]["commitInfo"]
    assert (info["operation"], info["operationParameters"]["applyPurge"]) == ("REORG", "true")
    actions = commits(path)[-1]
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    result = spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)").first()
    assert result.metrics.numFilesRemoved == with_dv - 1 and live_dv_files(path) == 0
    assert hw_rows(spark, path) == rs_rows(path) == before
    version = DeltaTable(str(path)).version()
    spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)")  # nothing left: no commit
    assert DeltaTable(str(path)).version() == version
    with pytest.raises(HeadwaterError, match="UNIFORM"):
        spark.sql(f"REORG TABLE delta.`{path}` APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION=2))")


def test_drop_deletion_vectors_with_truncate_history(spark, lake, tmp):
    path = copy_golden("dv-partitioned-with-checkpoint", tmp)
    before = hw_rows(spark, path)
    table = f"delta.`{path}`"
    with pytest.raises(HeadwaterError, match="TRUNCATE HISTORY") as err:
        spark.sql(f"ALTER TABLE {table} DROP FEATURE deletionVectors")  # needs checkpointProtection
    assert err.value.code == "HW_DELTA_UNSUPPORTED_FEATURE" and live_dv_files(path) > 0
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES "
              "('delta.dropFeatureTruncateHistory.retentionDuration' = '1 hours')")
    assert "variantType" not in str(protocol_actions(path)[-1])  # headwater's own commit
    # first call: property off, files purged, then delta-spark's wait error
    with pytest.raises(HeadwaterError) as err:
        spark.sql(f"ALTER TABLE {table} DROP FEATURE deletionVectors TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    assert live_dv_files(path) == 0
    assert DeltaTable(str(path)).metadata().configuration["delta.enableDeletionVectors"] == \
        "false"
    # the purge is within the retention: the history still has deletion vectors
    with pytest.raises(HeadwaterError) as err:
        spark.sql(f"ALTER TABLE {table} DROP FEATURE deletionVectors TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST"
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES "
              "('delta.dropFeatureTruncateHistory.retentionDuration' = '0 hours')")
    spark.sql(f"ALTER TABLE {table} DROP FEATURE deletionVectors TRUNCATE HISTORY")
    assert protocol_actions(path)[-1] == {"minReaderVersion": 1, "minWriterVersion": 1}
    info = commits(path)[-1][0]["commitInfo"]
    assert info["operation"] == "DROP FEATURE"
    assert info["operationParameters"] == {"featureName": "deletionVectors",
                                           "truncateHistory": "true"}
    assert not (path / "_delta_log" / f"{0:020d}.json").exists()  # history truncated
    assert hw_rows(spark, path) == before
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()  # delta-rs' plain reader
    assert sorted(tuple(r[c] for c in ("part", "col1", "col2")) for r in rows) == before
    with pytest.raises(HeadwaterError) as err:
        spark.sql(f"ALTER TABLE {table} DROP FEATURE deletionVectors TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"


def test_drop_feature_in_sql_keeps_delta_spark_errors(spark, lake):
    spark.sql("CREATE TABLE feats (id INT) USING DELTA TBLPROPERTIES "
              "('delta.enableDeletionVectors' = true)")
    for statement, error_class in (
            ("ALTER TABLE feats DROP FEATURE appendOnly",
             "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE"),
            ("ALTER TABLE feats DROP FEATURE changeDataFeed",
             "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"),
            ("ALTER TABLE feats DROP FEATURE `nonsense`",
             "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
            ("ALTER TABLE feats DROP FEATURE invariants TRUNCATE HISTORY",
             "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE")):
        with pytest.raises(HeadwaterError) as err:
            spark.sql(statement)
        assert err.value.error_class == error_class, statement
    spark.sql("ALTER TABLE feats ADD CONSTRAINT positive CHECK (id > 0)")
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE feats DROP FEATURE checkConstraints")
    assert err.value.error_class == "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE"
    spark.sql("ALTER TABLE feats DROP CONSTRAINT positive")
    spark.sql("ALTER TABLE feats DROP FEATURE checkConstraints")
    assert "checkConstraints" not in spark.sql("DESCRIBE DETAIL feats").first().tableFeatures
