"""delta-spark's DML surface of DeltaTable (issue 24): the argument checks delta-spark's Python
API makes, MERGE's result frame and immutable builder, schema evolution (withSchemaEvolution
and spark.databricks.delta.schema.autoMerge.enabled), DML from a user's thread, and commit
conflicts raised as delta-spark's exception classes by two real concurrent writers."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.pool import ThreadPool
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, TableFeatures
from deltalake import DeltaTable as RsTable
from deltalake import Transaction as RsTransaction
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from tests.support import write

from headwater import DeltaTable, HeadwaterError, Lakehouse
from headwater.conf.layout import DELTA_AUTO_MERGE_CONF
from headwater.delta import dml
from headwater.delta.commit import Transaction, check_conflicts
from headwater.delta.log import DeltaLog
from headwater.errors.delta import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)


def kv_table(path: Path, partitioned: bool = False) -> None:
    data = {"key": ["a", "b", "c", "d"], "value": [1, 2, 3, 4], "p": ["x", "x", "y", "y"]}
    write(path, data, partition_by=["p"] if partitioned else None)


def contents(path: Path) -> list[tuple]:
    rows = pa.table(RsTable(str(path)).to_pyarrow_table()).to_pylist()
    return sorted(tuple(r.values()) for r in rows)


def test_argument_mistakes_raise_what_delta_spark_raises(spark, tmp):
    kv_table(tmp / "t")
    dt = DeltaTable.forPath(spark, str(tmp / "t"))
    source = spark.createDataFrame([("a", 9)], "k string, v long")
    version = RsTable(str(tmp / "t")).version()

    with pytest.raises(TypeError, match="'condition' must be a Spark SQL Column or a string"):
        dt.delete(condition=1)
    with pytest.raises(ValueError, match="^'set' cannot be None$"):
        dt.update({"value": "200"})  # a dict given as the condition: set is missing
    with pytest.raises(TypeError, match="'set' must be a dict, found to be <class 'int'>"):
        dt.update(set=1)
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        dt.update(1, {})
    with pytest.raises(TypeError, match="Values of dict in 'set' must contain only Spark SQL"):
        dt.update(set={"value": 1})
    with pytest.raises(TypeError, match="Keys of dict in 'set' must contain only strings"):
        dt.update(set={1: ""})
    with pytest.raises(TypeError, match="^Type of 'source' in merge must be DataFrame.$"):
        dt.merge(1, "key = k")
    with pytest.raises(ValueError, match="'condition' in merge cannot be None"):
        dt.merge(source, None)
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        dt.merge(source, 1)
    builder = dt.merge(source, "key = k")
    with pytest.raises(ValueError, match="'set' in whenMatchedUpdate cannot be None"):
        builder.whenMatchedUpdate(condition="key = 'a'")
    with pytest.raises(TypeError, match="'set' in whenMatchedUpdate must be a dict"):
        builder.whenMatchedUpdate(set="k = 'a'", condition={"value": 1})
    with pytest.raises(ValueError, match="'values' in whenNotMatchedInsert cannot be None"):
        builder.whenNotMatchedInsert(1)
    with pytest.raises(TypeError, match="Keys of dict in 'values' in whenNotMatchedInsert"):
        builder.whenNotMatchedInsert(values={1: "value"})
    with pytest.raises(TypeError, match="Values of dict in 'set' in whenNotMatchedBySourceUpd"):
        builder.whenNotMatchedBySourceUpdate(set={"value": 1})
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        builder.whenNotMatchedBySourceDelete(1)
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        builder.whenMatchedDelete(1)
    # an unknown SET column is delta-spark's AnalysisException, and still a HeadwaterError
    with pytest.raises(HeadwaterError) as err:
        dt.update(set={"nope": "1"})
    assert err.value.code == "HW_DML_UNKNOWN_COLUMN"
    assert err.value.error_class == "DELTA_MISSING_SET_COLUMN"
    assert RsTable(str(tmp / "t")).version() == version  # nothing ran


def test_merge_returns_non_null_counts_and_its_builder_is_immutable(spark, tmp):
    kv_table(tmp / "t")
    dt = DeltaTable.forPath(spark, str(tmp / "t"))
    source = spark.createDataFrame([("a", -1), ("e", -5)], "key string, value long")
    base = dt.alias("t").merge(source.alias("s"), "t.key = s.key")
    base.whenMatchedDelete()  # as in delta-spark, a new builder: base is unchanged
    result = base.whenMatchedUpdate(set={"value": "s.value"}).whenNotMatchedInsert(
        values={"key": "s.key", "value": "s.value", "p": "'z'"}).execute()
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in result.schema.fields] == [
        ("num_affected_rows", "bigint", False), ("num_updated_rows", "bigint", False),
        ("num_deleted_rows", "bigint", False), ("num_inserted_rows", "bigint", False)]
    assert [tuple(r) for r in result.collect()] == [(2, 1, 0, 1)]
    assert contents(tmp / "t") == [("a", -1, "x"), ("b", 2, "x"), ("c", 3, "y"),
                                   ("d", 4, "y"), ("e", -5, "z")]


def test_schema_evolution_adds_a_source_column_named_in_set(spark, tmp):
    kv_table(tmp / "t")
    dt = DeltaTable.forPath(spark, str(tmp / "t"))
    source = spark.createDataFrame([("a", 10), ("e", 50)], "key string, extra long")
    (dt.alias("t").merge(source.alias("s"), "t.key = s.key")
     .whenMatchedUpdate(set={"extra": "-1"})
     .whenNotMatchedInsert(values={"key": "s.key", "t.extra": "s.extra"})
     .withSchemaEvolution().execute())
    got = DeltaTable.forPath(spark, str(tmp / "t")).toDF()
    assert got.schema["extra"].dataType.simpleString() == "bigint"
    assert sorted(tuple(r) for r in got.select("key", "value", "extra").collect()) == [
        ("a", 1, -1), ("b", 2, None), ("c", 3, None), ("d", 4, None), ("e", None, 50)]
    # without schema evolution the same SET is delta-spark's missing column error
    with pytest.raises(HeadwaterError) as err:
        dt.alias("t").merge(source.alias("s"), "t.key = s.key") \
            .whenMatchedUpdate(set={"other": "1"}).withSchemaEvolution().execute()
    assert err.value.code == "HW_DML_UNKNOWN_COLUMN"  # not in the source either


def test_auto_merge_conf_evolves_the_schema_of_sql_merge(spark, tmp, keep_lakehouse):
    lake = Lakehouse(tmp / "lake", spark)
    kv_table(lake.root / "t")
    spark.createDataFrame([("a", 10, "new"), ("e", 50, "ins")],
                          "key string, value long, note string").createOrReplaceTempView("src")
    spark.conf.set(DELTA_AUTO_MERGE_CONF, "true")
    try:
        spark.sql("MERGE INTO t USING src s ON t.key = s.key "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    finally:
        spark.conf.unset(DELTA_AUTO_MERGE_CONF)
        spark.catalog.dropTempView("src")
        lake.detach()
    assert contents(lake.root / "t") == [
        ("a", 10, "x", "new"), ("b", 2, "x", None), ("c", 3, "y", None), ("d", 4, "y", None),
        ("e", 50, None, "ins")]


def test_delta_writes_and_dml_run_from_a_users_thread(spark, tmp):
    path = str(tmp / "t")

    def work(session):
        session.range(3).withColumn("x", F.col("id")).write.mode("overwrite") \
            .format("delta").save(path)
        target = DeltaTable.forPath(session, path)
        source = session.range(5).withColumn("x", F.col("id") * 10).alias("s")
        target.alias("t").merge(source, "t.id = s.id").whenMatchedUpdate(
            set={"t.x": "t.x + 1"}).whenNotMatchedInsertAll().execute()
        return sorted(tuple(r) for r in session.read.format("delta").load(path).collect())

    with ThreadPool(1) as pool:
        assert pool.apply(work, (spark,)) == [(0, 1), (1, 2), (2, 3), (3, 30), (4, 40)]


def _gate(tmp: Path):
    """A UDF that says it started (a file) and holds its Spark job until ``go`` exists: the
    first writer is then between its read and its commit while the second one commits."""
    started, go = str(tmp / "started"), str(tmp / "go")

    def wait(value):
        open(started, "a").close()
        deadline = time.time() + 120
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.05)
        return True

    return F.udf(wait, "boolean"), started, go


def _race(tmp: Path, first, second):
    """Run ``first`` on a thread; once its job is held, ``second`` commits; then release."""
    gate, started, go = _gate(tmp)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(first, gate)
        deadline = time.time() + 120
        while not os.path.exists(started):
            assert time.time() < deadline and not future.done(), future.result()
            time.sleep(0.05)
        try:
            second()
        finally:
            open(go, "a").close()
        return future.result(timeout=300)


@pytest.mark.parametrize("winner, expected", [
    ("key = 'b'", ConcurrentAppendException),  # an UPDATE added data the first writer read
    ("p = 'x'", ConcurrentDeleteReadException),  # a DELETE removed a file it read, added none
])
def test_concurrent_writers_conflict_as_delta_spark_classes(spark, tmp, winner, expected):
    kv_table(tmp / "t", partitioned=True)
    path = str(tmp / "t")

    def first(gate):  # Spark copy-on-write: a Column condition
        try:
            DeltaTable.forPath(spark, path).update(gate(F.col("key")) & (F.col("key") == "a"),
                                                   {"value": F.lit(100)})
        except expected as exc:  # what a user's retry loop catches
            return exc
        return None

    def second():  # delta-rs on the driver (a small table, SQL text)
        other = DeltaTable.forPath(spark, path)
        if winner.startswith("key"):
            other.update(winner, {"value": "20"})
        else:
            other.delete(winner)

    caught = _race(tmp, first, second)
    assert isinstance(caught, expected), caught
    assert isinstance(caught, HeadwaterError) and isinstance(caught, PySparkException)
    assert caught.code == "HW_DML_CONCURRENT_CONFLICT"
    assert caught.error_class == expected.delta_error_class
    assert RsTable(path).version() == 1  # the winner's commit only
    assert not [r for r in contents(tmp / "t") if r[1] == 100]  # nothing of the loser
    assert not [p for p in os.listdir(path) if p.startswith("hw-")]  # its files are gone


def test_concurrent_writers_on_disjoint_partitions_both_commit(spark, tmp):
    kv_table(tmp / "t", partitioned=True)
    path = str(tmp / "t")

    def first(gate):  # reads partition x only (its condition prunes by partition)
        DeltaTable.forPath(spark, path).update(gate(F.col("key")) & (F.col("p") == "x"),
                                               {"value": F.lit(100)})

    def second():  # rewrites partition y's file while the first one runs
        DeltaTable.forPath(spark, path).update("key = 'd'", {"value": "40"})

    _race(tmp, first, second)  # as delta-spark's docs say: disjoint partitions never conflict
    assert contents(tmp / "t") == [("a", 100, "x"), ("b", 100, "x"), ("c", 3, "y"),
                                   ("d", 40, "y")]
    assert RsTable(path).version() == 2


def test_delta_rs_commit_conflict_is_delta_spark_class(spark, tmp):
    kv_table(tmp / "t")
    path = str(tmp / "t")

    def first(gate):  # delta-rs MERGE: the source is collected (held) after the snapshot
        source = spark.createDataFrame([("a", 7)], "key string, value long") \
            .where(gate(F.col("key"))).alias("s")
        merge = dml.MergeBuilder(spark, path, source, "t.key = s.key", target_alias="t")
        try:
            merge.when_matched_update({"value": "s.value"}).execute(engine="delta-rs")
        except MetadataChangedException as exc:
            return exc
        return None

    def second():
        RsTable(path).alter.set_table_properties({"delta.appendOnly": "false"})

    caught = _race(tmp, first, second)
    assert isinstance(caught, MetadataChangedException), caught
    assert "(delta-rs: Failed to commit transaction: Metadata changed" in str(caught)
    assert contents(tmp / "t")[0] == ("a", 1, "x")


def test_conflict_checks_follow_delta_spark_order_on_real_commits(tmp):
    kv_table(tmp / "t", partitioned=True)
    path = str(tmp / "t")
    files = [a["path"] for a in pa.table(RsTable(path).get_add_actions()).to_pylist()]
    write(tmp / "t", {"key": ["e"], "value": [5], "p": ["x"]})  # 1: a blind append
    RsTable(path).delete("p = 'y'")  # 2: removes a file, adds none
    write(tmp / "t", {"key": ["f"], "value": [6], "p": ["x"]}, commit_properties=
          CommitProperties(app_transactions=[RsTransaction("stream-1", 3)]))  # 3: a txn
    RsTable(path).alter.set_table_properties({"delta.appendOnly": "false"})  # 4: metadata
    RsTable(path).alter.add_feature(TableFeatures.TimestampWithoutTimezone,
                                    allow_protocol_versions_increase=True)  # 5: protocol
    log = DeltaLog(path)
    read_y = [f for f in files if "p=y" in f]

    def check(version: int, **kwargs) -> None:
        args = {"uri": path, "read_version": version - 1, "operation": "MERGE",
                "parameters": {}, "metrics": {}, "actions": [], **kwargs}
        check_conflicts(Transaction(**args), version, log.read_commit(version))

    check(1, read_paths=files)  # blind appends never conflict...
    with pytest.raises(ConcurrentAppendException):  # ...unless this one changes the metadata
        check(1, read_paths=files, actions=[{"metaData": {}}])
    check(1, actions=[{"metaData": {}}], reads_data=False)  # a metadata-only change reads none
    with pytest.raises(ConcurrentDeleteReadException):
        check(2, read_paths=read_y)
    with pytest.raises(ConcurrentDeleteDeleteException):
        check(2, actions=[{"remove": {"path": read_y[0]}}])
    check(2, read_paths=[f for f in files if "p=x" in f])  # other files: no conflict
    check(3, read_paths=files)
    with pytest.raises(ConcurrentTransactionException):
        check(3, app_id="stream-1")
    with pytest.raises(MetadataChangedException):
        check(4, reads_data=False)
    with pytest.raises(ProtocolChangedException) as err:
        check(5, reads_data=False)
    assert isinstance(err.value, DeltaConcurrentModificationException)
    assert err.value.getSqlState() == "2D521"
