"""delta-spark's maintenance and protocol surface of DeltaTable (issue 24): generate, convert,
vacuum, history, optimize, protocol features, restore and clone, with delta-spark's semantics,
messages and error classes."""

from __future__ import annotations

import json
import os

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructType

from headwater import DeltaTable
from headwater.errors import HeadwaterError

CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def save(spark, path, rows, mode=None, partition_by=None, columns=("key", "value")):
    writer = spark.createDataFrame(rows, list(columns)).write.format("delta")
    if partition_by:
        writer = writer.partitionBy(partition_by)
    if mode:
        writer = writer.mode(mode)
    writer.save(str(path))


def rows(spark, path):
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())


def log_files(path) -> set[str]:
    """Data files the latest snapshot names, as the log spells them."""
    return set(RsTable(str(path)).get_add_actions(flatten=True).column("path").to_pylist())


def test_generate_symlink_manifests(spark, tmp_path, lake):
    flat, part = tmp_path / "flat", tmp_path / "part"
    spark.range(20).repartition(3).write.format("delta").save(str(flat))
    DeltaTable.forPath(spark, str(flat)).generate("SYMLINK_FORMAT_MANIFEST")  # any case
    lines = (flat / "_symlink_format_manifest" / "manifest").read_text().splitlines()
    assert sorted(lines) == sorted(f"file:{flat}/{p}" for p in log_files(flat))

    save(spark, part, [("a", 1), ("b 2", 2)], partition_by="key")
    spark.sql(f"GENERATE symlink_format_manifest FOR TABLE delta.`{part}`")
    base = part / "_symlink_format_manifest"
    assert sorted(os.listdir(base)) == ["key=a", "key=b 2"]
    assert (base / "key=a" / "manifest").read_text().startswith(f"file:{part}/key=a/")
    DeltaTable.forPath(spark, str(part)).delete("key = 'a'")
    DeltaTable.forPath(spark, str(part)).generate("symlink_format_manifest")
    assert os.listdir(base) == ["key=b 2"]  # the emptied partition's manifest is gone
    with pytest.raises(HeadwaterError) as err:
        DeltaTable.forPath(spark, str(part)).generate("hive")
    assert err.value.error_class == "DELTA_MODE_NOT_SUPPORTED"


def test_convert_to_delta_with_a_partition_schema(spark, tmp_path):
    df = spark.createDataFrame([("a", 1), ("b", 2)], ["key", "value"])
    for name, schema in (("s", StructType().add("value", IntegerType())), ("d", "value int")):
        df.write.partitionBy("value").parquet(str(tmp_path / name))
        table = DeltaTable.convertToDelta(spark, f"parquet.`{tmp_path / name}`", schema)
        assert isinstance(table, DeltaTable)
        assert table.detail().first().partitionColumns == ["value"]
        assert rows(spark, tmp_path / name) == [("a", 1), ("b", 2)]
    with pytest.raises(HeadwaterError) as err:
        DeltaTable.convertToDelta(spark, f"json.`{tmp_path}`")
    assert err.value.error_class == "DELTA_CONVERT_NON_PARQUET_TABLE"


def test_vacuum_deletes_untracked_files_and_honours_the_retention_check(spark, tmp_path,
                                                                         lake):
    path = tmp_path / "t"
    save(spark, path, [("a", 1)])
    save(spark, path, [("b", 2)], mode="overwrite")
    (path / "abc.txt").write_text("abcde")
    (path / "_keep").mkdir()
    (path / "_keep" / "x.txt").write_text("hidden")
    table = DeltaTable.forPath(spark, str(path))
    assert table.vacuum().columns == []  # delta-spark's empty DataFrame
    assert (path / "abc.txt").exists()  # younger than the default 168 hours
    with pytest.raises(HeadwaterError) as err:
        table.vacuum(0)
    assert err.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
    spark.conf.set(CHECK, "false")
    try:
        out = spark.sql(f"VACUUM '{path}' RETAIN 0 HOURS").collect()
    finally:
        spark.conf.set(CHECK, "true")
    assert [r.path for r in out] == [f"file:{path}"]
    assert not (path / "abc.txt").exists() and (path / "_keep" / "x.txt").exists()
    assert {f for f in os.listdir(path) if f.endswith(".parquet")} == log_files(path)
    assert rows(spark, path) == [("b", 2)]


def test_vacuum_retention_check_uses_the_tables_retention(spark, tmp_path):
    path = tmp_path / "t"
    save(spark, path, [("a", 1)])
    RsTable(str(path)).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 2 hours"})
    DeltaTable.forPath(spark, str(path)).vacuum(3)  # below 168 hours, above the table's 2
    with pytest.raises(HeadwaterError) as err:
        DeltaTable.forPath(spark, str(path)).vacuum(1)
    assert "at least 2 hours" in str(err.value)


def test_history_records_writes_with_their_save_mode(spark, tmp_path):
    save(spark, tmp_path / "t", [("a", 1)])
    save(spark, tmp_path / "t", [("b", 2)], mode="overwrite")
    save(spark, tmp_path / "u", [("a", 1)], mode="append", partition_by="key")
    history = DeltaTable.forPath(spark, str(tmp_path / "t")).history().collect()
    assert [(h.operation, h.operationParameters["mode"]) for h in history] == [
        ("WRITE", "Overwrite"), ("WRITE", "ErrorIfExists")]
    first = DeltaTable.forPath(spark, str(tmp_path / "u")).history().first()
    assert (first.operation, first.operationParameters["mode"],
            first.operationParameters["partitionBy"]) == ("WRITE", "Append", '["key"]')


def test_optimize_compaction_metrics_errors_and_history(spark, tmp_path):
    path = tmp_path / "t"
    for key, values in (("a b%", (1, 2)), ("a b%", (3, 4)), ("b", (5, 6))):
        df = spark.createDataFrame([(key, v) for v in values], ["key", "value"]).repartition(1)
        df.write.partitionBy("key").format("delta").mode("append").save(str(path))
    table = DeltaTable.forPath(spark, str(path))
    with pytest.raises(HeadwaterError) as err:
        table.optimize().where("value = 1").executeCompaction()
    assert "Predicate references non-partition column 'value'. Only the partition columns " \
           "may be referenced: [key]" in str(err.value)
    result = table.optimize().where("key = 'a b%'").executeCompaction().first()
    assert result.path == f"file:{path}"
    assert (result.metrics.numFilesAdded, result.metrics.numFilesRemoved,
            result.metrics.totalConsideredFiles, result.metrics.numBatches) == (1, 2, 2, 1)
    last = table.history(1).first()
    assert (last.operation, last.operationParameters["predicate"],
            last.operationParameters["zOrderBy"]) == ("OPTIMIZE", '["(\'key = a b%)"]', "[]")
    assert json.loads(last.operationParameters["auto"]) is False
    assert rows(spark, path) == [("a b%", 1), ("a b%", 2), ("a b%", 3), ("a b%", 4), ("b", 5),
                                 ("b", 6)]
    again = table.optimize().executeCompaction().first().metrics
    assert (again.numFilesAdded, again.totalFilesSkipped) == (0, 2)  # nothing left to merge


def test_optimize_zorder_by(spark, tmp_path):
    path = tmp_path / "z"
    (spark.range(60).select(F.col("id").cast("int").alias("value"))
     .withColumn("c1", F.col("value") % 7).withColumn("c2", F.col("value") % 5)
     .withColumn("p", F.col("value") % 3).repartition(3)
     .write.partitionBy("p").format("delta").save(str(path)))
    before = len(log_files(path))
    table = DeltaTable.forPath(spark, str(path))
    with pytest.raises(HeadwaterError) as err:
        table.optimize().where("p = 1").executeZOrderBy(["p"])
    assert "p is a partition column. Z-Ordering can only be performed on data columns" \
        in str(err.value)
    with pytest.raises(TypeError, match="Z-order column must be str"):
        table.optimize().executeZOrderBy(["c1", 2])
    metrics = table.optimize().executeZOrderBy("c1", "c2").select("metrics.*").head()
    assert (metrics.numFilesAdded, metrics.numFilesRemoved, metrics.totalFilesSkipped) == \
        (3, before, 0)
    assert (metrics.zOrderStats.strategyName, metrics.zOrderStats.numOutputCubes) == ("all", 3)
    assert json.loads(table.history(1).first().operationParameters["zOrderBy"]) == ["c1", "c2"]
    assert sorted(r.value for r in spark.read.format("delta").load(str(path)).collect()) == \
        list(range(60))
    one = table.optimize().where("p = 2").executeZOrderBy("c1").select("metrics.*").head()
    assert (one.numFilesAdded, one.numFilesRemoved, one.zOrderStats.numOutputCubes) == (1, 1, 1)


def detail(table) -> tuple:
    d = table.detail().first()
    return d.minReaderVersion, d.minWriterVersion, sorted(d.tableFeatures)


def test_protocol_upgrade_and_features(spark, tmp_path):
    path = tmp_path / "t"
    save(spark, path, [("a", 1)])
    table = DeltaTable.forPath(spark, str(path))
    table.upgradeTableProtocol(1, 3)
    table.upgradeTableProtocol(1, 2)  # never a downgrade
    assert detail(table) == (1, 3, ["appendOnly", "checkConstraints", "invariants"])
    with pytest.raises(ValueError, match="readerVersion"):
        table.upgradeTableProtocol("abc", 3)
    with pytest.raises(HeadwaterError) as err:
        table.addFeatureSupport("abc")
    assert err.value.error_class == "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"
    with pytest.raises(ValueError, match="featureName needs to be a string"):
        table.addFeatureSupport(12345)
    table.addFeatureSupport("appendOnly")  # implied by (1, 3): nothing changes
    assert detail(table)[:2] == (1, 3)
    table.addFeatureSupport("deletionVectors")
    assert detail(table) == (3, 7, ["appendOnly", "checkConstraints", "deletionVectors",
                                    "invariants"])
    save(spark, path, [("b", 2)], mode="append")  # headwater still writes the table
    assert rows(spark, path) == [("a", 1), ("b", 2)]
    with pytest.raises(HeadwaterError) as err:
        table.addFeatureSupport("icebergCompatV1")  # headwater does not write it
    assert err.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    for name, truncate, error_class in (
            ("__invalid__", None, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
            ("changeDataFeed", None, "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"),
            ("appendOnly", None, "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE"),
            ("checkConstraints", True, "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED")):
        with pytest.raises(HeadwaterError) as err:
            table.dropFeatureSupport(name, truncate)
        assert err.value.error_class == error_class, name
    with pytest.raises(ValueError, match="truncateHistory needs to be a boolean"):
        table.dropFeatureSupport("checkConstraints", 12345)
    table.dropFeatureSupport("checkConstraints")
    assert detail(table) == (3, 7, ["appendOnly", "deletionVectors", "invariants"])
    last = table.history(1).first()
    assert (last.operation, last.operationParameters["featureName"]) == \
        ("DROP FEATURE", "checkConstraints")


def test_restore_to_timestamp_and_argument_errors(spark, tmp_path):
    path = str(tmp_path / "t")
    save(spark, path, [("a", 1)])
    table = DeltaTable.forPath(spark, path)
    when = table.history().head().timestamp.strftime("%Y-%m-%d %H:%M:%S.%f")
    save(spark, path, [("b", 2)], mode="overwrite")
    table.restoreToTimestamp(when)
    assert rows(spark, path) == [("a", 1)]
    with pytest.raises(HeadwaterError, match=r"The provided timestamp \('05/04/1999'\) cannot "
                       "be converted to a valid timestamp"):
        table.restoreToTimestamp("05/04/1999")
    with pytest.raises(ValueError, match="timestamp needs to be a string but got "
                                         "'<class 'int'>'"):
        table.restoreToTimestamp(12342323232)
    with pytest.raises(ValueError, match="version needs to be an int but got '<class 'str'>'"):
        table.restoreToVersion("0")


def test_clone_shallow_deep_and_replace(spark, tmp_path, lake):
    src = tmp_path / "src"
    save(spark, src, [("a", 1), ("b", 2)])
    save(spark, src, [("d", 4)], mode="overwrite")
    table = DeltaTable.forPath(spark, str(src))
    shallow = table.clone(str(tmp_path / "s"), True, False, {"foo": "bar"})
    assert rows(spark, tmp_path / "s") == [("d", 4)]
    assert not [f for f in os.listdir(tmp_path / "s") if f.endswith(".parquet")]
    props = spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path / 's'}`('foo')").collect()
    assert [tuple(r) for r in props] == [("foo", "bar")]
    last = shallow.history(1).first()
    assert (last.operation, last.operationParameters["sourceVersion"]) == ("CLONE", "1")

    table.cloneAtVersion(0, str(tmp_path / "v"), True)
    assert rows(spark, tmp_path / "v") == [("a", 1), ("b", 2)]
    with pytest.raises(HeadwaterError) as err:
        table.clone(str(tmp_path / "v"), True)
    assert err.value.error_class == "DELTA_TABLE_ALREADY_EXISTS"
    table.clone(str(tmp_path / "v"), True, True)  # replace
    assert rows(spark, tmp_path / "v") == [("d", 4)]

    deep = table.cloneAtTimestamp(
        table.history().collect()[-1].timestamp.strftime("%Y-%m-%d %H:%M:%S.%f"),
        str(tmp_path / "d"))
    assert rows(spark, tmp_path / "d") == [("a", 1), ("b", 2)]
    assert log_files(tmp_path / "d") <= set(os.listdir(tmp_path / "d"))  # copied
    assert deep.history(1).first().operationMetrics["numCopiedFiles"] == \
        str(len(log_files(tmp_path / "d")))
    for call, message in (
            (lambda: table.clone(10), "target needs to be a string"),
            (lambda: table.clone("x", isShallow=10), "isShallow needs to be a boolean"),
            (lambda: table.clone("x", False, replace=10), "replace needs to be a boolean"),
            (lambda: table.clone("x", False, False, properties=10),
             "properties needs to be a dict"),
            (lambda: table.clone("x", False, False, properties={"k": 10}),
             "All property values including 10 needs to be a string"),
            (lambda: table.cloneAtVersion("0", "x"), "version needs to be an int"),
            (lambda: table.cloneAtTimestamp(10, "x"), "timestamp needs to be a string")):
        with pytest.raises(ValueError, match=message):
            call()
