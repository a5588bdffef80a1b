"""Issue 24's review findings on the table builder and driver-written tables: NOT NULL on
clustered tables, a table's location compared before CREATE OR REPLACE / createIfNotExists,
non-deterministic generation expressions, metadata changes on tables deltalake cannot write,
and removes that carry the deletion vector. Real Spark, real Delta tables; each test failed
before its fix."""

from __future__ import annotations

import shutil

import pytest
from tests.support import collected, commits, golden

from headwater import DeltaTable, HeadwaterError
from headwater.delta.commit import delta_rs_conflict
from headwater.delta.update_mode import merge_batch
from headwater.lakehouse.delta_spark.delta_table import IdentityGenerator


def clustered(spark, name: str):
    return (DeltaTable.create(spark).tableName(name).addColumn("id", "INT", nullable=False)
            .addColumn("v", "STRING").clusterBy("v").execute())


def test_not_null_is_enforced_on_a_clustered_table(spark, lake):
    clustered(spark, "c")
    with pytest.raises(Exception, match="DELTA_NOT_NULL_CONSTRAINT_VIOLATED"):
        spark.sql("INSERT INTO c VALUES (NULL, 'a')")
    with pytest.raises(HeadwaterError, match="DELTA_MISSING_NOT_NULL_COLUMN_VALUE"):
        spark.createDataFrame([("b",)], "v string").write.format("delta").mode(
            "append").saveAsTable("c")
    spark.sql("INSERT INTO c VALUES (1, 'a')")
    assert collected(spark.table("c")) == [(1, "a")]


def test_create_or_replace_with_another_location_is_refused_before_writing(spark, lake, tmp_path):
    spark.sql("CREATE TABLE m (id INT) USING DELTA")
    spark.sql("INSERT INTO m VALUES (1)")
    new = tmp_path / "new"
    with pytest.raises(HeadwaterError, match="DELTA_TABLE_LOCATION_MISMATCH"):
        spark.sql(f"CREATE OR REPLACE TABLE m (id INT) USING DELTA LOCATION '{new}'")
    assert not new.exists() and collected(spark.table("m")) == [(1,)]

    old = tmp_path / "old"
    spark.sql(f"CREATE TABLE e (id INT) USING DELTA LOCATION '{old}'")
    with pytest.raises(HeadwaterError, match="DELTA_TABLE_LOCATION_MISMATCH"):
        spark.sql(f"CREATE OR REPLACE TABLE e (id INT) USING DELTA LOCATION '{new}'")
    assert not new.exists() and lake.path("e") == str(old)

    with pytest.raises(HeadwaterError, match="DELTA_TABLE_LOCATION_MISMATCH"):
        DeltaTable.createOrReplace(spark).tableName("m").location(str(new)).addColumn(
            "id", "INT").execute()
    assert not new.exists() and collected(spark.table("m")) == [(1,)]

    table = DeltaTable.createIfNotExists(spark).tableName("e").location(str(new)).addColumn(
        "id", "INT").execute()
    assert not new.exists() and lake.path("e") == str(old)
    assert table.toDF().columns == ["id"]
    # the same location is no mismatch
    DeltaTable.createOrReplace(spark).tableName("e").location(str(old)).addColumn(
        "id", "INT").addColumn("v", "STRING").execute()
    assert spark.table("e").columns == ["id", "v"] and lake.path("e") == str(old)


@pytest.mark.parametrize(("expression", "error_class"), [
    ("rand() > 0.5", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN"),
    ("uuid()", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN"),
    ("cast(current_timestamp() as string)", "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN"),
    ("cast(max(id) as string)", "DELTA_AGGREGATE_IN_GENERATED_COLUMN"),
    ("hw_review_udf(id)", "DELTA_UDF_IN_GENERATED_COLUMN"),
])
def test_non_deterministic_generation_expressions_are_refused(spark, tmp_path, expression,
                                                              error_class):
    spark.udf.register("hw_review_udf", lambda x: str(x), "string")
    path = tmp_path / "g"
    builder = (DeltaTable.create(spark).location(str(path)).addColumn("id", "INT")
               .addColumn("g", "BOOLEAN" if "rand" in expression else "STRING",
                          generatedAlwaysAs=expression))
    with pytest.raises(HeadwaterError, match=error_class):
        builder.execute()
    assert not (path / "_delta_log").exists()


def test_merge_checks_the_generated_values_it_is_given(spark, tmp_path):
    path = str(tmp_path / "gen")
    table = (DeltaTable.create(spark).location(path).addColumn("id", "INT")
             .addColumn("g", "INT", generatedAlwaysAs="id + 10").execute())
    spark.createDataFrame([(1,)], "id int").write.format("delta").mode("append").save(path)
    bad = spark.createDataFrame([(1, 99), (2, 12)], "id int, g int")
    for run in (
        lambda: table.alias("t").merge(bad.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"g": "s.g"}).execute(),
        lambda: table.alias("t").merge(bad.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(),
    ):
        with pytest.raises(Exception, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"):
            run()
    assert collected(table.toDF()) == [(1, 11)]
    good = spark.createDataFrame([(1, 11, 5), (3, 13, 3)], "id int, g int, n int")
    (table.alias("t").merge(good.alias("s"), "t.id = s.id")
     .whenMatchedUpdate(set={"id": "s.n"})  # g follows id, not checked: not assigned
     .whenNotMatchedInsert(values={"id": "s.id", "g": "s.g"}).execute())
    assert collected(table.toDF()) == [(3, 13), (5, 15)]


def test_clone_replace_onto_a_deletion_vector_table_is_refused_unchanged(spark, tmp_path):
    target = tmp_path / "dv"
    shutil.copytree(golden("dv-partitioned-with-checkpoint"), target)
    before = len(commits(target))
    source = str(tmp_path / "src")
    spark.createDataFrame([(1, "a", 1)], "col1 int, col2 string, part int").write.format(
        "delta").save(source)
    with pytest.raises(HeadwaterError, match="deletion vectors"):
        DeltaTable.forPath(spark, source).clone(str(target), isShallow=True, replace=True)
    assert len(commits(target)) == before


def test_update_mode_merge_into_a_clustered_table_is_refused_not_retried(spark, tmp_path):
    path = str(tmp_path / "c")
    (DeltaTable.create(spark).location(path).addColumn("id", "INT").addColumn("v", "STRING")
     .clusterBy("v").execute())
    batch = spark.createDataFrame([(1, "a")], "id int, v string")
    with pytest.raises(HeadwaterError) as err:
        merge_batch(batch, path, ["id"], "app", 0)
    assert err.value.code == "HW_DELTA_UNSUPPORTED_FEATURE" and "clustering" in str(err.value)
    refused = delta_rs_conflict(Exception("Unsupported table features required: "
                                          "[Clustering]"), "MERGE", path)
    assert refused.code == "HW_DELTA_UNSUPPORTED_FEATURE"


@pytest.mark.parametrize("kind", ["identity", "clustered"])
def test_alter_table_on_tables_deltalake_refuses_to_commit_to(spark, lake, kind):
    """deltalake refuses any commit to a table with identity columns or clustering; ALTER
    TABLE's metadata changes are committed by headwater instead, as delta-spark writes them,
    and the identity high-water mark survives them."""
    builder = DeltaTable.create(spark).tableName("t").addColumn("s", "STRING")
    if kind == "identity":
        builder = builder.addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator())
    else:
        builder = builder.addColumn("id", "BIGINT").clusterBy("s")
    builder.execute()
    spark.sql("INSERT INTO t (s, id) VALUES ('a', 1)" if kind == "clustered"
              else "INSERT INTO t (s) VALUES ('a')")
    spark.sql("ALTER TABLE t ADD COLUMNS (x INT)")
    spark.sql("ALTER TABLE t SET TBLPROPERTIES ('team' = 'core', 'comment' = 'hello')")
    spark.sql("COMMENT ON TABLE t IS 'facts'")
    spark.sql("ALTER TABLE t UNSET TBLPROPERTIES ('team')")
    spark.sql("INSERT INTO t (s, id, x) VALUES ('b', 2, 7)" if kind == "clustered"
              else "INSERT INTO t (s, x) VALUES ('b', 7)")
    assert collected(spark.table("t").select("s", "id", "x")) == [("a", 1, None), ("b", 2, 7)]
    ops = [r.operation for r in spark.sql("DESCRIBE HISTORY t").collect()][::-1]
    assert ops[2:] == ["ADD COLUMNS", "SET TBLPROPERTIES", "SET TBLPROPERTIES",
                       "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "WRITE"]
    detail = spark.sql("DESCRIBE DETAIL t").first()
    assert detail.description == "facts" and "team" not in detail.properties
    # a property that turns on a feature: protocol and property in one headwater commit
    spark.sql("ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    assert "deletionVectors" in spark.sql("DESCRIBE DETAIL t").first().tableFeatures
    # RESTORE: headwater's own commit (tests/test_delta_restore_own.py has the details)
    spark.sql("RESTORE TABLE t TO VERSION AS OF 1")
    assert spark.table("t").columns == ["s", "id"]  # version 1's schema, catalog too
    assert collected(spark.table("t")) == [("a", 1)]
    history = [r.operation for r in spark.sql("DESCRIBE HISTORY t").collect()]
    assert history[0] == "RESTORE" and len(history) == len(ops) + 2
    spark.sql("INSERT INTO t (s, id) VALUES ('c', 3)" if kind == "clustered"
              else "INSERT INTO t (s) VALUES ('c')")  # the high-water mark (2) was kept
    assert collected(spark.table("t")) == [("a", 1), ("c", 3)]
