"""Issue 37, item 6: CREATE TABLE ... SHALLOW CLONE (a new log naming the source's files by
absolute path; VACUUM of the clone never deletes them), VACUUM ... LITE, SHOW PARTITIONS,
and CONVERT TO DELTA by table name. Checked against the _delta_log JSON and the files on
disk."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from tests.support import commits

from headwater import HeadwaterError


def data_files(path: str | Path) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*.parquet")
            if "_delta_log" not in p.parts}


def ids(spark, name: str) -> list[int]:
    return sorted(r[0] for r in spark.sql(f"SELECT id FROM {name}").collect())


def test_shallow_clone_names_the_source_files_and_vacuum_never_deletes_them(lake, spark):
    spark.sql("CREATE TABLE src (id INT, part STRING) USING delta PARTITIONED BY (part)")
    spark.sql("INSERT INTO src VALUES (1, 'a'), (2, 'b')")
    spark.sql("INSERT INTO src VALUES (3, 'a')")
    source = Path(lake.path("src"))
    source_files = data_files(source)
    out = spark.sql("""-- a test copy of production
        CREATE TABLE my_test SHALLOW CLONE src VERSION AS OF 1""").first()
    assert out.source_num_of_files == 2 and out.num_copied_files == 0
    clone = Path(lake.path("my_test"))
    (actions,) = commits(clone)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "CLONE"
    assert info["operationParameters"]["isShallow"] in (True, "true")
    adds = [a["add"] for a in actions if "add" in a]
    # absolute paths into the source folder, nothing copied
    assert all(a["path"].startswith("file:") and str(source) in a["path"] for a in adds)
    assert not data_files(clone)
    assert ids(spark, "my_test") == [1, 2]  # version 1 of the source
    # the clone changes independently: the source keeps its rows
    spark.sql("DELETE FROM my_test WHERE id = 1")
    spark.sql("INSERT INTO my_test VALUES (9, 'z')")
    assert ids(spark, "my_test") == [2, 9] and ids(spark, "src") == [1, 2, 3]
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        time.sleep(1)
        for mode in ("LITE", ""):
            spark.sql(f"VACUUM my_test RETAIN 0 HOURS {mode}")
            assert data_files(source) == source_files  # the source's files all stay
            assert ids(spark, "src") == [1, 2, 3] and ids(spark, "my_test") == [2, 9]
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    # CREATE OR REPLACE ... CLONE at the latest version; IF NOT EXISTS is a no-op
    spark.sql("CREATE OR REPLACE TABLE my_test SHALLOW CLONE src")
    assert ids(spark, "my_test") == [1, 2, 3]
    before = len(commits(clone))
    assert spark.sql("CREATE TABLE IF NOT EXISTS my_test SHALLOW CLONE src").count() == 0
    assert len(commits(clone)) == before


def test_clone_by_path_timestamp_properties_and_refusals(lake, spark, tmp_path):
    spark.sql("CREATE TABLE s (id INT) USING delta")
    spark.sql("INSERT INTO s VALUES (1)")
    time.sleep(1.2)
    spark.sql("INSERT INTO s VALUES (2)")
    target = tmp_path / "target"
    spark.sql(f"CREATE TABLE delta.`{target}` SHALLOW CLONE s TBLPROPERTIES ('team' = 'qa')")
    meta = next(a["metaData"] for a in commits(target)[0] if "metaData" in a)
    assert meta["configuration"]["team"] == "qa"
    assert sorted(r["id"] for r in spark.read.format("delta").load(str(target)).collect()) \
        == [1, 2]
    # TIMESTAMP AS OF: the version committed at or before it (version 1: the first insert).
    # A version's time is its commit file's modification time, as delta-spark and DESCRIBE
    # HISTORY date it; the commitInfo's timestamp is taken before that file is written (on a
    # loaded machine, sometimes in the second before).
    commit_file = Path(lake.path("s")) / "_delta_log" / f"{1:020d}.json"
    first_insert = commit_file.stat().st_mtime_ns // 1_000_000
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(math.ceil(first_insert / 1000)))
    spark.sql("SET spark.sql.session.timeZone = UTC")
    try:
        spark.sql(f"CREATE TABLE at_time SHALLOW CLONE s TIMESTAMP AS OF '{stamp}'")
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    assert ids(spark, "at_time") == [1]
    with pytest.raises(HeadwaterError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.sql("CREATE TABLE at_time SHALLOW CLONE s")
    with pytest.raises(HeadwaterError, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("REPLACE TABLE nope SHALLOW CLONE s")
    with pytest.raises(HeadwaterError, match="HW_TABLE_NOT_FOUND"):
        spark.sql("CREATE TABLE c2 SHALLOW CLONE missing_source")


def test_vacuum_lite_deletes_what_the_log_removed_and_keeps_unknown_files(lake, spark):
    spark.sql("CREATE TABLE v (id INT) USING delta")
    spark.sql("INSERT INTO v VALUES (1), (2)")
    path = Path(lake.path("v"))
    old = data_files(path)
    spark.sql("INSERT OVERWRITE v VALUES (3)")  # removes the first files in the log
    stray = path / "not-in-the-log.parquet"
    pq.write_table(pa.table({"id": [7]}), stray)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        time.sleep(1)
        dry = {Path(r.path).name for r in spark.sql("VACUUM v LITE RETAIN 0 HOURS DRY RUN")
               .collect()}
        assert dry == {Path(f).name for f in old}  # the removed files, not the stray one
        spark.sql("VACUUM v RETAIN 0 HOURS LITE")  # modifiers in any order
        assert not (old & data_files(path)) and stray.exists()
        spark.sql("VACUUM v RETAIN 0 HOURS FULL")  # FULL also lists the folder
        assert not stray.exists()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert ids(spark, "v") == [3]


def test_show_partitions_typed_columns_and_a_filter(lake, spark):
    spark.sql("CREATE TABLE eventsTable (id INT, date DATE, region STRING) USING delta "
              "PARTITIONED BY (date, region)")
    spark.sql("INSERT INTO eventsTable VALUES (1, DATE'2024-01-01', 'us'), "
              "(2, DATE'2024-01-02', 'eu'), (3, DATE'2024-01-01', 'us')")
    got = spark.sql("SHOW PARTITIONS eventsTable")
    assert got.columns == ["date", "region"]
    assert [(str(r.date), r.region) for r in got.collect()] == [
        ("2024-01-01", "us"), ("2024-01-02", "eu")]
    # the answer read independently: the partition values of the log's add actions
    adds = [a["add"] for c in commits(lake.path("eventsTable")) for a in c if "add" in a]
    assert {(a["partitionValues"]["date"], a["partitionValues"]["region"]) for a in adds} == {
        ("2024-01-01", "us"), ("2024-01-02", "eu")}
    one = spark.sql("SHOW PARTITIONS eventsTable PARTITION (date = '2024-01-01')").collect()
    assert [(str(r.date), r.region) for r in one] == [("2024-01-01", "us")]
    by_path = spark.sql(f"SHOW PARTITIONS delta.`{lake.path('eventsTable')}`").count()
    assert by_path == 2
    spark.sql("CREATE TABLE flat (id INT) USING delta")
    with pytest.raises(HeadwaterError, match="not partitioned"):
        spark.sql("SHOW PARTITIONS flat")


def test_convert_to_delta_by_table_name(lake, spark, tmp_path):
    folder = tmp_path / "legacy"
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, day STRING").write \
        .partitionBy("day").format("parquet").option("path", str(folder)) \
        .saveAsTable("legacy_events")
    spark.sql("CONVERT TO DELTA legacy_events")
    table = DeltaTable(str(folder))  # delta-rs opens the converted folder
    assert table.metadata().partition_columns == ["day"]
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == [1, 2]
    assert lake.exists("legacy_events")
    assert ids(spark, "legacy_events") == [1, 2]
    spark.sql("CONVERT TO DELTA legacy_events")  # already Delta: a no-op
    assert DeltaTable(str(folder)).version() == table.version()
    spark.createDataFrame([(1,)], "id INT").write.format("parquet").saveAsTable("managed_pq")
    try:
        with pytest.raises(HeadwaterError, match="managed parquet table"):
            spark.sql("CONVERT TO DELTA managed_pq")
    finally:
        spark.sql("DROP TABLE managed_pq")


def test_symlink_manifest_property_is_refused_and_generate_works(lake, spark):
    spark.sql("CREATE TABLE m (id INT) USING delta")
    spark.sql("INSERT INTO m VALUES (1)")
    for statement in (
            "ALTER TABLE m SET TBLPROPERTIES "
            "(delta.compatibility.symlinkFormatManifest.enabled = true)",
            "CREATE TABLE m2 (id INT) USING delta TBLPROPERTIES "
            "('delta.compatibility.symlinkFormatManifest.enabled' = 'true')"):
        with pytest.raises(HeadwaterError, match="GENERATE symlink_format_manifest") as caught:
            spark.sql(statement)
        assert caught.value.code == "HW_DELTA_UNSUPPORTED_FEATURE"
    assert not lake.exists("m2")
    spark.sql("GENERATE symlink_format_manifest FOR TABLE m")
    manifest = Path(lake.path("m")) / "_symlink_format_manifest" / "manifest"
    listed = [Path(line.removeprefix("file:")).name for line in manifest.read_text().split()]
    assert sorted(listed) == sorted(Path(f).name for f in data_files(lake.path("m")))
