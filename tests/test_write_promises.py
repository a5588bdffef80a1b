"""Delta's promises on every write (issue 35): selective overwrites replace what they name and
never more, writer settings from options and from the session, refused forms refused. Every
test reads back a real table (Spark and delta-rs both) and its log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from headwater import HeadwaterError

EVENTS = [(1, "2016-12-30", "a"), (2, "2016-12-31", "b"), (3, "2017-01-01", "c"),
          (4, "2017-01-02", "d"), (5, "2017-01-03", "e")]


def _events(spark, rows=EVENTS):
    return spark.createDataFrame(rows, "id long, start_date string, name string")


def ids(spark, path) -> list[int]:
    spark_ids = sorted(r[0] for r in spark.read.format("delta").load(str(path))
                       .select("id").collect())
    rs_ids = sorted(DeltaTable(str(path)).to_pyarrow_table(columns=["id"])
                    .column("id").to_pylist())
    assert spark_ids == rs_ids, "Spark and delta-rs read different rows"
    return spark_ids


def last_commit(path) -> list[dict]:
    logs = sorted((p for p in (path / "_delta_log").glob("*.json")), key=lambda p: p.name)
    return [json.loads(line) for line in logs[-1].read_text().splitlines()]


def commit_info(path) -> dict:
    return next(a["commitInfo"] for a in last_commit(path) if "commitInfo" in a)


@pytest.mark.parametrize("partitioned", [False, True])
def test_replace_where_on_a_data_column_replaces_only_matching_rows(spark, tmp, partitioned):
    path = tmp / "events"
    writer = _events(spark).write.format("delta")
    (writer.partitionBy("name") if partitioned else writer).save(str(path))
    version = DeltaTable(str(path)).version()
    new = _events(spark, [(30, "2017-01-01", "x"), (40, "2017-02-01", "y")])
    (new.write.format("delta").mode("overwrite")
     .option("replaceWhere", "start_date >= '2017-01-01'").save(str(path)))
    assert ids(spark, path) == [1, 2, 30, 40]
    assert DeltaTable(str(path)).version() == version + 1  # one commit
    info = commit_info(path)
    assert info["operation"] == "WRITE"
    assert info["operationParameters"]["mode"] == "Overwrite"
    assert "start_date >= '2017-01-01'" in info["operationParameters"]["predicate"]


def test_replace_where_refuses_rows_outside_the_predicate_and_leaves_the_table(spark, tmp):
    path = tmp / "events"
    _events(spark).write.format("delta").save(str(path))
    version = DeltaTable(str(path)).version()
    bad = _events(spark, [(30, "2017-01-01", "x"), (99, "2015-01-01", "old")])
    with pytest.raises(HeadwaterError) as caught:
        (bad.write.format("delta").mode("overwrite")
         .option("replaceWhere", "start_date >= '2017-01-01'").save(str(path)))
    assert caught.value.code == "HW_REPLACE_WHERE_MISMATCH"
    assert caught.value.error_class == "DELTA_REPLACE_WHERE_MISMATCH"
    assert "id = 99" in str(caught.value)  # the row's values
    assert DeltaTable(str(path)).version() == version
    assert ids(spark, path) == [1, 2, 3, 4, 5]
    assert not [p for p in path.rglob("*.parquet") if "hw-" in str(p)]


def test_replace_where_on_partitions_removes_whole_partitions(spark, tmp):
    path = tmp / "events"
    _events(spark).write.format("delta").partitionBy("start_date").save(str(path))
    new = _events(spark, [(33, "2017-01-01", "x")])
    (new.write.format("delta").mode("overwrite")
     .option("replaceWhere", "start_date = '2017-01-01'").save(str(path)))
    assert ids(spark, path) == [1, 2, 4, 5, 33]


@pytest.mark.parametrize("how", ["option", "session"])
def test_dynamic_partition_overwrite_replaces_only_written_partitions(spark, tmp, how):
    path = tmp / "events"
    _events(spark).write.format("delta").partitionBy("start_date").save(str(path))
    new = _events(spark, [(31, "2017-01-01", "x"), (32, "2017-01-01", "y"),
                          (60, "2018-01-01", "z")])
    writer = new.write.format("delta").mode("overwrite")
    if how == "option":
        writer.option("partitionOverwriteMode", "dynamic").save(str(path))
    else:
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        try:
            writer.save(str(path))
        finally:
            spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert ids(spark, path) == [1, 2, 4, 5, 31, 32, 60]
    removed = [a["remove"] for a in last_commit(path) if "remove" in a]
    assert {r["partitionValues"]["start_date"] for r in removed} == {"2017-01-01"}


def test_dynamic_overwrite_of_an_unpartitioned_table_replaces_it_as_delta_spark(spark, tmp):
    path = tmp / "events"
    _events(spark).write.format("delta").save(str(path))
    (_events(spark, [(7, "2020-01-01", "q")]).write.format("delta").mode("overwrite")
     .option("partitionOverwriteMode", "dynamic").save(str(path)))
    assert ids(spark, path) == [7]


def test_dynamic_and_replace_where_together_are_refused(spark, tmp):
    path = tmp / "events"
    _events(spark).write.format("delta").partitionBy("start_date").save(str(path))
    with pytest.raises(HeadwaterError) as caught:
        (_events(spark).write.format("delta").mode("overwrite")
         .option("partitionOverwriteMode", "dynamic")
         .option("replaceWhere", "start_date = '2017-01-01'").save(str(path)))
    assert caught.value.error_class == "DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE"
    assert ids(spark, path) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("option", ["replaceUsing", "replaceOn"])
def test_databricks_replace_options_are_refused_not_widened(spark, tmp, option):
    path = tmp / "events"
    _events(spark).write.format("delta").save(str(path))
    with pytest.raises(HeadwaterError) as caught:
        (_events(spark, [(9, "2017-01-01", "z")]).write.format("delta").mode("overwrite")
         .option(option, "id").save(str(path)))
    assert caught.value.code == "HW_OPTION_UNSUPPORTED"
    assert ids(spark, path) == [1, 2, 3, 4, 5]


def test_selective_overwrites_by_table_name(spark, lake):
    _events(spark).write.format("delta").partitionBy("start_date").saveAsTable("ev")
    (_events(spark, [(50, "2017-01-03", "n")]).write.format("delta").mode("overwrite")
     .option("partitionOverwriteMode", "dynamic").saveAsTable("ev"))
    assert sorted(r[0] for r in spark.table("ev").collect()) == [1, 2, 3, 4, 50]
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        _events(spark, [(60, "2016-12-30", "m")]).write.insertInto("ev", overwrite=True)
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert sorted(r[0] for r in spark.table("ev").collect()) == [2, 3, 4, 50, 60]
    (_events(spark, [(70, "2017-01-01", "o")]).write.format("delta").mode("overwrite")
     .option("replaceWhere", "id >= 50").saveAsTable("ev"))
    assert sorted(r[0] for r in spark.table("ev").collect()) == [2, 3, 4, 70]


def test_session_txn_makes_a_retried_write_idempotent(spark, tmp):
    path = tmp / "t"
    spark.conf.set("spark.databricks.delta.write.txnAppId", "nightly")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "7")
    try:
        for _ in range(2):  # the retry of the same job: skipped
            spark.range(10).write.format("delta").mode("append").save(str(path))
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    assert ids(spark, path) == list(range(10))
    assert DeltaTable(str(path)).transaction_version("nightly") == 7


def test_session_txn_auto_reset_clears_the_version(spark, tmp):
    path = tmp / "t"
    spark.conf.set("spark.databricks.delta.write.txnAppId", "job")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "1")
    spark.conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
    try:
        spark.range(3).write.format("delta").save(str(path))
        assert spark.conf.get("spark.databricks.delta.write.txnVersion", None) is None
        with pytest.raises(HeadwaterError) as caught:  # an app id alone is refused
            spark.range(3).write.format("delta").mode("append").save(str(path))
        assert caught.value.error_class == "DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS"
    finally:
        for key in ("txnAppId", "txnVersion", "txnVersion.autoReset.enabled"):
            spark.conf.unset(f"spark.databricks.delta.write.{key}")
    assert ids(spark, path) == [0, 1, 2]


def test_data_change_false_marks_the_rewrite(spark, tmp):
    path = tmp / "t"
    spark.range(20).repartition(4).write.format("delta").save(str(path))
    (spark.read.format("delta").load(str(path)).repartition(1).write.format("delta")
     .mode("overwrite").option("dataChange", "false").save(str(path)))
    actions = last_commit(path)
    assert {a["add"]["dataChange"] for a in actions if "add" in a} == {False}
    assert {a["remove"]["dataChange"] for a in actions if "remove" in a} == {False}
    assert ids(spark, path) == list(range(20))
    with pytest.raises(HeadwaterError) as caught:  # it cannot create a table
        spark.range(1).write.format("delta").option("dataChange", "false").save(
            str(tmp / "new"))
    assert caught.value.error_class == "DELTA_DATA_CHANGE_FALSE"


def test_session_user_metadata_reaches_sql_inserts(spark, lake):
    spark.sql("CREATE TABLE um (id BIGINT) USING delta")
    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", "backfill-42")
    try:
        spark.sql("INSERT INTO um VALUES (1), (2)")
    finally:
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
    assert commit_info(Path(lake.path("um")))["userMetadata"] == "backfill-42"


def test_replace_where_mismatch_in_a_query_stops_before_any_commit(spark, tmp):
    path = tmp / "t"
    spark.range(10).withColumn("k", F.col("id") % 3).write.format("delta").save(str(path))
    with pytest.raises(HeadwaterError):
        (spark.range(5).withColumn("k", F.lit(None).cast("long")).write.format("delta")
         .mode("overwrite").option("replaceWhere", "k = 1").save(str(path)))
    assert DeltaTable(str(path)).version() == 0


# --- constraints ---------------------------------------------------------------------------


def test_not_null_is_recorded_and_enforced_on_every_write_path(spark, lake):
    spark.sql("CREATE TABLE people (id INT NOT NULL, age INT) USING delta")
    path = Path(lake.path("people"))
    schema = json.loads(DeltaTable(str(path)).schema().to_json())
    assert {f["name"]: f["nullable"] for f in schema["fields"]} == {"id": False, "age": True}
    spark.sql("INSERT INTO people VALUES (1, 30)")
    bad = spark.createDataFrame([(None, 5)], "id int, age int")
    attempts = [
        lambda: spark.sql("INSERT INTO people VALUES (NULL, 40)"),
        lambda: bad.write.format("delta").mode("append").saveAsTable("people"),
        lambda: bad.write.format("delta").mode("append").save(str(path)),
        lambda: bad.write.insertInto("people"),
    ]
    for attempt in attempts:
        with pytest.raises(HeadwaterError) as caught:
            attempt()
        assert caught.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
        assert "id" in str(caught.value)
    assert DeltaTable(str(path)).version() == 1
    assert [tuple(r) for r in spark.table("people").collect()] == [(1, 30)]


def test_check_constraint_added_checked_enforced_and_dropped(spark, lake, tmp):
    spark.sql("CREATE TABLE ages (id INT, age INT) USING delta")
    spark.sql("INSERT INTO ages VALUES (1, 30), (2, -1)")
    with pytest.raises(HeadwaterError) as caught:  # an existing row violates it
        spark.sql("ALTER TABLE ages ADD CONSTRAINT agepos CHECK (age > 0)")
    assert caught.value.error_class == "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION"
    spark.sql("DELETE FROM ages WHERE age <= 0")
    spark.sql("ALTER TABLE ages ADD CONSTRAINT agepos CHECK (age > 0)")
    path = Path(lake.path("ages"))
    table = DeltaTable(str(path))
    assert table.metadata().configuration["delta.constraints.agepos"] == "age > 0"
    protocol = table.protocol()
    assert protocol.min_writer_version >= 3 or "checkConstraints" in (
        protocol.writer_features or [])
    version = table.version()
    for bad in ("INSERT INTO ages VALUES (3, -5)", "INSERT INTO ages VALUES (4, NULL)"):
        with pytest.raises(HeadwaterError) as caught:
            spark.sql(bad)
        assert caught.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
        assert "agepos" in str(caught.value) and "age : " in str(caught.value)
    with pytest.raises(HeadwaterError):
        spark.createDataFrame([(5, 0)], "id int, age int").write.format("delta") \
            .mode("append").save(str(path))
    assert DeltaTable(str(path)).version() == version
    spark.sql("INSERT INTO ages VALUES (6, 60)")
    assert sorted(r[0] for r in spark.table("ages").collect()) == [1, 6]
    spark.sql("ALTER TABLE ages DROP CONSTRAINT agepos")
    spark.sql("ALTER TABLE ages DROP CONSTRAINT IF EXISTS agepos")
    spark.sql("INSERT INTO ages VALUES (7, -7)")
    assert sorted(r[0] for r in spark.table("ages").collect()) == [1, 6, 7]


def test_check_constraint_on_a_delta_path_and_a_stream_stops_on_a_violation(spark, lake, tmp):
    path = tmp / "t"
    spark.range(3).selectExpr("id", "id AS v").write.format("delta").save(str(path))
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT vsmall CHECK (v < 100)")
    src = tmp / "src"
    spark.range(3, 6).selectExpr("id", "id AS v").write.format("delta").save(str(src))
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True)
             .start(str(path)))
    query.awaitTermination()
    assert ids(spark, path) == [0, 1, 2, 3, 4, 5]
    spark.range(6, 8).selectExpr("id", "id * 100 AS v").write.format("delta") \
        .mode("append").save(str(src))
    version = DeltaTable(str(path)).version()
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True)
             .start(str(path)))
    with pytest.raises(Exception) as caught:
        query.awaitTermination()
    assert "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" in str(caught.value)
    assert DeltaTable(str(path)).version() == version  # the micro-batch committed nothing
    spark.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT vsmall")
    query = (spark.readStream.format("delta").load(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True)
             .start(str(path)))
    query.awaitTermination()  # restarted after the fix: on exactly once
    assert ids(spark, path) == [0, 1, 2, 3, 4, 5, 6, 7]


# --- schema evolution, names, properties, history --------------------------------------------


def test_column_names_take_the_tables_spelling(spark, lake, tmp):
    path = tmp / "t"
    spark.range(2).write.format("delta").save(str(path))
    spark.createDataFrame([(7,)], "ID long").write.format("delta").mode("append").save(str(path))
    assert [f.name for f in DeltaTable(str(path)).schema().fields] == ["id"]
    assert ids(spark, path) == [0, 1, 7]  # delta-rs reads the value too: the file says `id`
    spark.sql("CREATE TABLE named (id BIGINT, Amount INT) USING delta")
    spark.createDataFrame([(1, 5)], "ID long, amount int").write.format("delta") \
        .mode("append").saveAsTable("named")
    table = DeltaTable(lake.path("named"))
    assert [f.name for f in table.schema().fields] == ["id", "Amount"]
    assert table.to_pyarrow_table().to_pylist() == [{"id": 1, "Amount": 5}]


def test_schema_evolution_by_option_session_and_sql(spark, lake):
    spark.sql("CREATE TABLE evo (id INT) USING delta")
    spark.sql("INSERT INTO evo VALUES (1)")
    (spark.createDataFrame([(2, "x")], "id INT, extra STRING").write.format("delta")
     .mode("append").option("mergeSchema", "true").saveAsTable("evo"))
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        spark.createDataFrame([(3, "y", 7)], "id INT, extra STRING, more INT") \
            .write.format("delta").mode("append").saveAsTable("evo")
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    spark.sql("INSERT WITH SCHEMA EVOLUTION INTO evo SELECT 4 AS id, 'z' AS extra, 8 AS more, "
              "true AS newest")
    assert spark.table("evo").columns == ["id", "extra", "more", "newest"]
    assert sorted(tuple(r) for r in spark.table("evo").collect()) == [
        (1, None, None, None), (2, "x", None, None), (3, "y", 7, None), (4, "z", 8, True)]
    rs = DeltaTable(lake.path("evo")).to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in rs) == [1, 2, 3, 4]
    with pytest.raises(HeadwaterError) as caught:  # without evolution: refused, named
        spark.sql("INSERT INTO evo SELECT 5, 'q', 9, false, 'surplus'")
    assert caught.value.code == "HW_SINK_SCHEMA_MISMATCH"


@pytest.mark.parametrize(("key", "value", "error_class"), [
    ("delta.foo", "1", "DELTA_UNKNOWN_CONFIGURATION"),
    ("delta.enableInCommitTimestamps", "true", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
    ("delta.feature.rowTracking", "supported", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
])
def test_properties_headwater_cannot_honour_are_refused(spark, lake, key, value, error_class):
    spark.sql("CREATE TABLE props (id INT) USING delta")
    before = DeltaTable(lake.path("props")).version()
    with pytest.raises(HeadwaterError) as caught:
        spark.sql(f"ALTER TABLE props SET TBLPROPERTIES ('{key}' = '{value}')")
    assert caught.value.error_class == error_class
    with pytest.raises(HeadwaterError) as caught:
        spark.sql(f"CREATE TABLE props2 (id INT) USING delta TBLPROPERTIES ('{key}' = '{value}')")
    assert caught.value.error_class == error_class
    assert DeltaTable(lake.path("props")).version() == before
    spark.sql("ALTER TABLE props SET TBLPROPERTIES ('delta.enableRowTracking' = 'false', "
              "'team' = 'sales')")  # off, and the user's own keys: fine


def test_timestamps_from_describe_history_name_their_own_commit(spark, lake):
    spark.sql("CREATE TABLE tt (id INT) USING delta TBLPROPERTIES "
              "('delta.enableChangeDataFeed' = 'true')")
    for i in range(3):
        spark.sql(f"INSERT INTO tt VALUES ({i})")
    stamps = {r[0]: r[1] for r in spark.sql("DESCRIBE HISTORY tt").select(
        "version", "timestamp").collect()}
    at = stamps[2].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]  # milliseconds, as users copy them
    assert spark.read.option("timestampAsOf", at).table("tt").count() == 2
    assert spark.sql(f"SELECT count(*) FROM tt TIMESTAMP AS OF '{at}'").first()[0] == 2
    changes = (spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", 1).option("endingTimestamp", at).table("tt"))
    assert sorted(r["_commit_version"] for r in changes.collect()) == [1, 2]
    with pytest.raises(Exception, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT"):
        spark.read.option("timestampAsOf", "2999-01-01 00:00:00.000").table("tt").count()


def test_history_names_metrics_as_delta_spark(spark, lake):
    spark.sql("CREATE TABLE hm (id INT, v INT) USING delta")
    spark.sql("INSERT INTO hm VALUES (1, 1), (2, 2)")
    spark.sql("DELETE FROM hm WHERE id = 1")  # a small table: deltalake's DELETE
    history = {r["operation"]: r["operationMetrics"] for r in
               spark.sql("DESCRIBE HISTORY hm").collect()}
    assert history["WRITE"]["numOutputRows"] == "2" and history["WRITE"]["numFiles"] >= "1"
    assert history["DELETE"]["numDeletedRows"] == "1"
    assert not [k for m in history.values() for k in m if "_" in k]


def test_insert_overwrite_partition_clauses(spark, lake):
    spark.sql("CREATE TABLE pc (id INT, day STRING, kind STRING) USING delta "
              "PARTITIONED BY (day, kind)")
    spark.sql("INSERT INTO pc VALUES (1, 'd1', 'a'), (2, 'd2', 'a'), (3, 'd2', 'b')")
    spark.sql("INSERT INTO pc PARTITION (day = 'd3', kind = 'c') VALUES (4)")
    spark.sql("INSERT OVERWRITE pc PARTITION (day = 'd2', kind = 'a') SELECT 22")
    assert sorted(tuple(r) for r in spark.table("pc").collect()) == [
        (1, "d1", "a"), (3, "d2", "b"), (4, "d3", "c"), (22, "d2", "a")]
    with pytest.raises(HeadwaterError):  # static and dynamic columns mixed: refused
        spark.sql("INSERT OVERWRITE pc PARTITION (day = 'd2', kind) SELECT 9, 'z'")
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("INSERT INTO pc PARTITION (id = 1) SELECT 'd9', 'z'")
    assert caught.value.error_class == "PARTITIONS_NOT_FOUND"
    assert len(spark.table("pc").collect()) == 4


# --- review: what must never widen or slip through ------------------------------------------


def test_an_empty_replace_where_is_refused_not_a_whole_overwrite(spark, tmp):
    path = tmp / "t"
    spark.range(3).write.format("delta").save(str(path))
    with pytest.raises(HeadwaterError) as caught:
        spark.range(1).write.format("delta").mode("overwrite").option("replaceWhere", " ") \
            .save(str(path))
    assert caught.value.error_class == "DELTA_FAILED_RECOGNIZE_PREDICATE"
    assert ids(spark, path) == [0, 1, 2]


def test_partition_predicates_keep_sql_semantics(spark, tmp):
    """NULL partitions never match a comparison, and a number against a string partition is
    compared as Spark compares it (not as text)."""
    path = tmp / "t"
    spark.createDataFrame([(1, "a"), (2, None)], "id long, p string") \
        .write.format("delta").partitionBy("p").save(str(path))
    (spark.createDataFrame([(5, "b")], "id long, p string").write.format("delta")
     .mode("overwrite").option("replaceWhere", "p != 'a'").save(str(path)))
    assert ids(spark, path) == [1, 2, 5]  # the NULL partition stays (p != 'a' is NULL there)
    numbers = tmp / "n"
    spark.createDataFrame([(3, "9"), (4, "10")], "id long, p string").write.format("delta") \
        .partitionBy("p").save(str(numbers))
    (spark.createDataFrame([(40, "11")], "id long, p string").write.format("delta")
     .mode("overwrite").option("replaceWhere", "p > 10").save(str(numbers)))
    assert ids(spark, numbers) == [3, 4, 40]  # '9' > 10 is false in Spark, as '10' > 10


def test_overwrite_schema_keeps_properties_and_refuses_append_only(spark, lake, tmp):
    path = tmp / "t"
    spark.range(3).write.format("delta").save(str(path))
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT pos CHECK (id >= 0)")
    with pytest.raises(HeadwaterError) as caught:  # the replace cannot carry CHECKs: refused
        (spark.range(2).selectExpr("id", "'x' AS s").write.format("delta").mode("overwrite")
         .option("overwriteSchema", "true").save(str(path)))
    assert "pos" in str(caught.value)
    spark.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT pos")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.logRetentionDuration' = "
              "'interval 40 days')")
    (spark.range(2).selectExpr("id", "'x' AS s").write.format("delta").mode("overwrite")
     .option("overwriteSchema", "true").save(str(path)))
    assert DeltaTable(str(path)).metadata().configuration["delta.logRetentionDuration"] \
        == "interval 40 days"  # the table's properties stay, as in delta-spark
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    with pytest.raises(HeadwaterError) as caught:
        (spark.range(1).write.format("delta").mode("overwrite")
         .option("overwriteSchema", "true").save(str(path)))
    assert caught.value.error_class == "DELTA_CANNOT_MODIFY_APPEND_ONLY"
    assert ids(spark, path) == [0, 1]


def test_nested_not_null_is_enforced(spark, lake):
    spark.sql("CREATE TABLE nest (id INT, s STRUCT<x: INT NOT NULL, y: INT>) USING delta")
    spark.sql("INSERT INTO nest VALUES (1, named_struct('x', 1, 'y', NULL)), (2, NULL)")
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("INSERT INTO nest VALUES (3, named_struct('x', NULL, 'y', 1))")
    assert caught.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert "s.x" in str(caught.value)
    assert sorted(r[0] for r in spark.table("nest").collect()) == [1, 2]


def test_insert_with_schema_evolution_matches_by_position(spark, lake):
    spark.sql("CREATE TABLE pos (id INT, name STRING) USING delta")
    spark.sql("INSERT WITH SCHEMA EVOLUTION INTO pos SELECT 1 AS id, 'ann' AS full_name, "
              "7 AS extra")
    assert spark.table("pos").columns == ["id", "name", "extra"]
    assert [tuple(r) for r in spark.table("pos").collect()] == [(1, "ann", 7)]


def test_checks_deltalake_would_evaluate_are_refused(spark, lake, tmp):
    path = tmp / "t"
    spark.range(3).selectExpr("id", "id AS v").write.format("delta").save(str(path))
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT vpos CHECK (v >= 0)")
    with pytest.raises(HeadwaterError) as caught:
        spark.sql(f"UPDATE delta.`{path}` SET v = -1 WHERE id = 1")
    assert caught.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    spark.conf.set("headwater.dml.engine", "delta-rs")
    try:
        with pytest.raises(HeadwaterError) as caught:
            spark.sql(f"UPDATE delta.`{path}` SET v = 5 WHERE id = 1")
        assert caught.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    finally:
        spark.conf.unset("headwater.dml.engine")
    assert sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect()) == [
        (0, 0), (1, 1), (2, 2)]


def test_create_or_replace_keeps_the_declared_not_null(spark, lake):
    spark.sql("CREATE OR REPLACE TABLE rep (id INT NOT NULL, v INT) USING delta")
    spark.sql("CREATE OR REPLACE TABLE rep (id INT NOT NULL, v INT) USING delta")
    fields = json.loads(DeltaTable(lake.path("rep")).schema().to_json())["fields"]
    assert {f["name"]: f["nullable"] for f in fields} == {"id": False, "v": True}
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("INSERT INTO rep VALUES (NULL, 1)")
    assert caught.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


def test_pipeline_table_schemas_record_and_enforce_not_null(spark, tmp_path):
    from pipelines import project, run  # noqa: PLC0415 - the tests' pipeline helpers

    root = project(tmp_path, {"defs.sql": """
        CREATE OR REFRESH STREAMING TABLE st (id BIGINT NOT NULL, v STRING)
        AS SELECT id, CAST(id AS STRING) AS v FROM STREAM(range_src);
        CREATE OR REFRESH MATERIALIZED VIEW mv (id BIGINT NOT NULL, n BIGINT)
        AS SELECT id, count(*) AS n FROM st GROUP BY id;
        """, "src.py": """
        @headwater.table
        def range_src():
            return spark.readStream.format("rate").option("rowsPerSecond", 1).load() \\
                .selectExpr("value AS id").limit(0)
        """})
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    for name in ("st", "mv"):
        schema = json.loads(DeltaTable(lake.path(name)).schema().to_json())
        assert {f["name"]: f["nullable"] for f in schema["fields"]}["id"] is False, name
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("INSERT INTO st VALUES (NULL, 'x')")
    assert caught.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


def test_replace_where_naming_an_unknown_column_is_sparks_analysis_error(spark, tmp):
    """A typo in a data-column replaceWhere (delta-batch's docs example has ``start_data``)
    is the unresolved column, not a mismatch with a garbled row; the table is unchanged."""
    path = tmp / "events"
    _events(spark).write.format("delta").save(str(path))
    version = DeltaTable(str(path)).version()
    new = _events(spark, [(30, "2017-01-01", "x")])
    with pytest.raises(Exception) as caught:  # noqa: PT011 - checked below
        (new.write.format("delta").mode("overwrite")
         .option("replaceWhere", "start_data >= '2017-01-01'").save(str(path)))
    assert not isinstance(caught.value, HeadwaterError), str(caught.value)[:300]
    assert "UNRESOLVED_COLUMN" in str(caught.value)
    assert "start_data" in str(caught.value)
    assert DeltaTable(str(path)).version() == version
    assert ids(spark, path) == [1, 2, 3, 4, 5]
