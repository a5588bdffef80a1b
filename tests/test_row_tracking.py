"""Delta's row tracking: enabling it (CREATE, ALTER with backfill, session default), the row
ids and commit versions every headwater write assigns, and the rewrites refused."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.support import live_adds

from headwater import DeltaTable as HwTable
from headwater import HeadwaterError
from headwater.delta import row_tracking
from headwater.delta.log import DeltaLog

DEFAULT_CONF = "spark.databricks.delta.properties.defaults.enableRowTracking"


def _log(path: Path) -> list[list[dict]]:
    log = DeltaLog(str(path))
    return [log.read_commit(v) or [] for v in range(log.latest_version() + 1)]


def _mark(path: Path) -> int:
    log = DeltaLog(str(path))
    return row_tracking.state_at(log, log.latest_version()).high_water_mark


def _check_ids(path: Path) -> None:
    """Every live file has ids, unique and below the high-water mark, and a commit version
    at or before the latest; deltalake still opens and reads the table."""
    adds = list(live_adds(path).values())
    ranges = []
    for add in adds:
        rows = json.loads(add["stats"])["numRecords"]
        ranges.append((add["baseRowId"], add["baseRowId"] + rows))
        assert add["defaultRowCommitVersion"] <= DeltaLog(str(path)).latest_version()
    ranges.sort()
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    if ranges:
        assert max(end for _, end in ranges) - 1 <= _mark(path)
    table = DeltaTable(str(path))
    assert "rowTracking" in (table.protocol().writer_features or [])
    assert table.to_pyarrow_table().num_rows == sum(
        json.loads(a["stats"])["numRecords"] for a in adds)


def test_create_table_with_row_tracking_writes_delta_sparks_protocol(spark, lake):
    spark.sql("CREATE TABLE student (id INT, name STRING, age INT) "
              "TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    path = lake.path("student")
    protocol = next(a["protocol"] for a in _log(path)[0] if "protocol" in a)
    assert protocol == {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": [
        "appendOnly", "domainMetadata", "invariants", "rowTracking"]}
    config = next(a["metaData"] for a in _log(path)[0] if "metaData" in a)["configuration"]
    assert config["delta.enableRowTracking"] == "true"
    assert config[row_tracking.ROW_ID_COLUMN_PROPERTY].startswith("_row-id-col-")
    assert config[row_tracking.COMMIT_VERSION_COLUMN_PROPERTY].startswith(
        "_row-commit-version-col-")
    spark.sql("INSERT INTO student VALUES (1, 'a', 20), (2, 'b', 21)")
    spark.sql("INSERT INTO student VALUES (3, 'c', 22)")
    adds = sorted(live_adds(path).values(), key=lambda a: a["baseRowId"])
    firsts = [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds]
    counts = [json.loads(a["stats"])["numRecords"] for a in adds]
    # fresh ids for each insert: consecutive from 0, the second insert's above the first's
    assert firsts[0] == (0, 1) and sum(counts) == 3
    assert firsts[-1][1] == 2 and firsts[-1][0] == 3 - counts[-1]
    assert _mark(path) == 2
    _check_ids(path)


def test_enable_on_an_existing_table_backfills_every_file(spark, lake):
    spark.sql("CREATE TABLE grade (id INT, score INT)")
    spark.sql("INSERT INTO grade VALUES (1, 10), (2, 20)")
    spark.sql("INSERT INTO grade VALUES (3, 30)")
    path = lake.path("grade")
    before = DeltaLog(str(path)).latest_version()
    spark.sql("ALTER TABLE grade SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    commits = _log(path)[before + 1:]
    operations = [next(a["commitInfo"]["operation"] for a in c if "commitInfo" in a)
                  for c in commits]
    assert operations == ["SET TBLPROPERTIES", "ROW TRACKING BACKFILL", "SET TBLPROPERTIES"]
    backfill = commits[1]
    assert all(not a["add"]["dataChange"] for a in backfill if "add" in a)
    config = next(a["metaData"] for a in commits[2] if "metaData" in a)["configuration"]
    assert config["delta.enableRowTracking"] == "true"
    assert _mark(path) == 2
    _check_ids(path)
    spark.sql("INSERT INTO grade VALUES (4, 40)")
    assert _mark(path) == 3
    _check_ids(path)
    assert sorted(r.id for r in spark.table("grade").collect()) == [1, 2, 3, 4]


def test_backfilled_files_written_by_delta_rs_get_the_backfills_version(spark, lake):
    """delta-rs writes adds with explicit null ``baseRowId`` / ``defaultRowCommitVersion``:
    the backfill gives them both (the version: the backfill's), and an UPDATE's copied rows
    keep it (delta-spark's DefaultRowCommitVersion.assignIfMissing)."""
    spark.sql("CREATE TABLE rs_filled (id BIGINT)")
    path = Path(lake.path("rs_filled"))
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64())}),
                    mode="append")
    assert any("defaultRowCommitVersion" in a["add"] for c in _log(path) for a in c
               if "add" in a)  # the null keys this test is about
    spark.sql("ALTER TABLE rs_filled SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    backfill = DeltaLog(str(path)).latest_version() - 1
    before = _ids(spark, "rs_filled")
    assert {v for _, v in before.values()} == {backfill}
    _check_ids(path)
    spark.sql("UPDATE rs_filled SET id = id + 10 WHERE id = 1")
    update = DeltaLog(str(path)).latest_version()
    after = _ids(spark, "rs_filled")
    assert after[11][1] == update and after[2][1] == after[3][1] == backfill
    assert {k: r for k, (r, _) in after.items() if k != 11} == \
        {k: r for k, (r, _) in before.items() if k != 1}


def test_session_default_and_every_append_path_assign_ids(spark, lake, tmp):
    spark.conf.set(DEFAULT_CONF, "true")
    try:
        spark.range(5).write.format("delta").save(str(tmp / "t"))
        spark.sql("CREATE TABLE dflt (id BIGINT)")
    finally:
        spark.conf.unset(DEFAULT_CONF)
    path = tmp / "t"
    assert _mark(path) == 4
    _check_ids(path)
    assert "rowTracking" in DeltaTable(str(lake.path("dflt"))).protocol().writer_features
    spark.range(5, 8).write.format("delta").mode("append").save(str(path))
    spark.range(8, 10).write.format("delta").mode("overwrite").save(str(path))
    assert _mark(path) == 9  # an overwrite's rows are new rows: fresh ids
    # the removes repeat the ids of the adds they remove
    removes = [a["remove"] for a in _log(path)[-1] if "remove" in a]
    assert removes and all("baseRowId" in r and "defaultRowCommitVersion" in r for r in removes)
    spark.range(10, 14).write.parquet(str(tmp / "incoming"))
    stream = (spark.readStream.schema("id BIGINT").parquet(str(tmp / "incoming"))
              .writeStream.format("delta")
              .option("checkpointLocation", str(tmp / "cp")).trigger(availableNow=True)
              .start(str(path)))
    stream.awaitTermination(120)
    assert [a["commitInfo"]["operation"] for a in _log(path)[-1] if "commitInfo" in a] == \
        ["STREAMING UPDATE"]
    assert _mark(path) == 13  # the stream's 4 rows: fresh ids 10..13
    _check_ids(path)


def test_restore_keeps_the_restored_files_ids(spark, tmp):
    path = tmp / "r"
    spark.range(3).write.format("delta").option("delta.enableRowTracking", "true").save(
        str(path))
    assert "rowTracking" in DeltaTable(str(path)).protocol().writer_features  # the option
    first = {a["path"]: a["baseRowId"] for a in live_adds(path).values()}
    spark.range(3, 6).write.format("delta").mode("overwrite").save(str(path))
    HwTable.forPath(spark, str(path)).restoreToVersion(0)
    assert {a["path"]: a["baseRowId"] for a in live_adds(path).values()} == first
    assert _mark(path) == 5  # the mark never goes back
    _check_ids(path)


def _ids(spark, table: str) -> dict[int, tuple[int, int]]:
    rows = spark.sql(f"SELECT _metadata.row_id AS rid, _metadata.row_commit_version AS rcv, "
                     f"id FROM {table}").collect()
    return {r.id: (r.rid, r.rcv) for r in rows}


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_update_and_delete_keep_row_ids(spark, lake, mapping):
    spark.sql("CREATE TABLE st (id INT, v INT) TBLPROPERTIES ('delta.enableRowTracking' = 'true', "
              f"'delta.columnMapping.mode' = '{mapping}')")
    spark.sql("INSERT INTO st VALUES (1, 1), (2, 2), (3, 3)")
    spark.sql("INSERT INTO st VALUES (4, 4)")
    if mapping == "name":  # ids read through the physical names, across a rename
        spark.sql("ALTER TABLE st RENAME COLUMN v TO w")
        spark.sql("ALTER TABLE st RENAME COLUMN w TO v")
    path = Path(lake.path("st"))
    before = _ids(spark, "st")
    assert sorted(r for r, _ in before.values()) == [0, 1, 2, 3]
    spark.sql("UPDATE st SET v = v + 10 WHERE id IN (1, 4)")
    update_version = DeltaLog(str(path)).latest_version()
    after = _ids(spark, "st")
    assert {k: r for k, (r, _) in after.items()} == {k: r for k, (r, _) in before.items()}
    assert after[1][1] == after[4][1] == update_version  # updated: the update's version
    assert after[2][1] == before[2][1] and after[3][1] == before[3][1]  # copied: kept
    spark.sql("DELETE FROM st WHERE id = 2")
    kept = _ids(spark, "st")
    assert kept == {k: v for k, v in after.items() if k != 2}
    spark.sql("INSERT INTO st VALUES (5, 5)")
    fresh = _ids(spark, "st")
    assert fresh[5][0] > max(r for r, _ in after.values())
    assert len({r for r, _ in fresh.values()}) == len(fresh)  # unique
    assert sorted(r.v for r in spark.table("st").collect()) == [3, 5, 11, 14]
    if mapping == "none":  # (deltalake 1.6.6 reads no column-mapped table)
        assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("v").to_pylist()) == \
            [3, 5, 11, 14]  # delta-rs reads the rewritten files (their extra columns ignored)
        assert DeltaTable(str(path)).to_pyarrow_table().column_names == ["id", "v"]


@pytest.mark.parametrize("statement", [
    "MERGE INTO rt USING (SELECT 1 AS id, 5 AS v) s ON rt.id = s.id "
    "WHEN MATCHED THEN UPDATE SET v = s.v",
    "OPTIMIZE rt",
])
def test_rewrites_of_rows_are_refused_naming_the_feature(spark, lake, statement):
    spark.sql("CREATE TABLE rt (id INT, v INT) TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    spark.sql("INSERT INTO rt VALUES (1, 1), (2, 2)")
    spark.sql("INSERT INTO rt VALUES (3, 3)")
    before = DeltaLog(str(lake.path("rt"))).latest_version()
    with pytest.raises(HeadwaterError) as caught:
        spark.sql(statement)
    assert caught.value.code == "HW_DELTA_UNSUPPORTED_FEATURE"
    assert "rowTracking" in str(caught.value)
    assert DeltaLog(str(lake.path("rt"))).latest_version() == before
    _check_ids(lake.path("rt"))


def test_feature_property_alone_is_refused(spark, lake):
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("CREATE TABLE ft (id INT) TBLPROPERTIES "
                  "('delta.feature.rowTracking' = 'supported')")
    assert caught.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    assert "delta.enableRowTracking" in caught.value.fix


def test_row_ids_and_commit_versions_are_readable(spark, lake, tmp):
    spark.sql("CREATE TABLE rd (id INT) TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    spark.sql("INSERT INTO rd VALUES (10), (11)")
    spark.sql("INSERT INTO rd VALUES (12)")
    path = lake.path("rd")
    expected = {}
    for add in live_adds(path).values():  # the spec: baseRowId + the row's index in the file
        values = pq.read_table(Path(path) / add["path"]).column("id").to_pylist()
        for index, value in enumerate(values):
            expected[value] = (add["baseRowId"] + index, add["defaultRowCommitVersion"])
    assert sorted(v[0] for v in expected.values()) == [0, 1, 2]
    queries = [
        spark.sql("SELECT _metadata.row_id, _metadata.row_commit_version, * FROM rd"),
        spark.sql("SELECT rd._metadata.row_id, rd._metadata.row_commit_version, id FROM rd "
                  "WHERE id >= 10"),
        spark.table("rd").select("_metadata.row_id", "_metadata.row_commit_version", "id"),
        spark.read.format("delta").load(str(path)).select(
            "_metadata.row_id", "_metadata.row_commit_version", "id"),
    ]
    for df in queries:
        assert {r[2]: (r[0], r[1]) for r in df.collect()} == expected
    assert spark.table("rd").columns == ["id"]  # nothing of the row tracking shows
    assert spark.sql("SELECT * FROM rd").columns == ["id"]
    df = spark.table("rd")
    spark.sql("INSERT INTO rd VALUES (13)")  # a DataFrame reads the latest version each time
    assert sorted(r.row_id for r in df.select("_metadata.row_id").collect()) == [0, 1, 2, 3]
    # time travel: the version's own files and ids
    old = spark.read.format("delta").option("versionAsOf", 1).load(str(path))
    assert sorted(r.row_id for r in old.select("_metadata.row_id").collect()) == sorted(
        v[0] for v in expected.values() if v[1] == 1)


def test_drop_feature_removes_row_tracking(spark, lake):
    spark.sql("CREATE TABLE dr (id INT) TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    spark.sql("INSERT INTO dr VALUES (1), (2)")
    path = lake.path("dr")
    spark.sql("ALTER TABLE dr DROP FEATURE rowTracking")
    table = DeltaTable(str(path))
    assert "rowTracking" not in (table.protocol().writer_features or [])
    config = table.metadata().configuration
    assert not any(k.lower().startswith("delta.rowtracking") or k == "delta.enableRowTracking"
                   for k in config)
    assert all("baseRowId" not in a for a in live_adds(path).values())
    domain = [a["domainMetadata"] for a in _log(path)[-1] if "domainMetadata" in a]
    assert domain and domain[0]["domain"] == "delta.rowTracking" and domain[0]["removed"]
    spark.sql("INSERT INTO dr VALUES (3)")  # a plain table again: no ids given
    assert all("baseRowId" not in a for a in live_adds(path).values())
    spark.sql("UPDATE dr SET id = 4 WHERE id = 3")  # and DML runs
    assert sorted(r.id for r in spark.table("dr").collect()) == [1, 2, 4]
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == [1, 2]  # v at open
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 4]


def test_delta_rs_reads_but_refuses_to_write_a_row_tracking_table(spark, tmp):
    path = tmp / "rs"
    spark.range(3).write.format("delta").option("delta.enableRowTracking", "true").save(
        str(path))
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 3
    with pytest.raises(Exception, match="RowTracking"):
        write_deltalake(str(path), pa.table({"id": pa.array([9], pa.int64())}), mode="append")
    _check_ids(path)


def test_the_docs_create_forms(spark, lake):
    """docs.delta.io's "Enable row tracking" examples: CTAS, DEEP CLONE (CREATE TABLE LIKE is
    not supported by headwater's catalog at all)."""
    spark.sql("CREATE TABLE course_old (id INT, name STRING)")
    spark.sql("INSERT INTO course_old VALUES (1, 'math'), (2, 'art')")
    spark.sql("CREATE TABLE course_new TBLPROPERTIES ('delta.enableRowTracking' = 'true') "
              "AS SELECT * FROM course_old")
    path = Path(lake.path("course_new"))
    assert _mark(path) == 1
    _check_ids(path)
    spark.sql("CREATE TABLE cloned DEEP CLONE course_new")  # (CLONE alone: Databricks)
    cloned = Path(lake.path("cloned"))
    _check_ids(cloned)  # the clone's own ids, from 0 in its own history
    assert _mark(cloned) == 1
    ids = spark.sql("SELECT _metadata.row_id AS rid, id FROM cloned").collect()
    assert sorted(r.rid for r in ids) == [0, 1]


def test_update_of_a_table_with_generated_columns_is_refused(spark, lake):
    spark.sql("CREATE TABLE gt (id INT, twice INT GENERATED ALWAYS AS (id * 2)) "
              "TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    spark.sql("INSERT INTO gt (id) VALUES (1), (2)")
    before = DeltaLog(str(lake.path("gt"))).latest_version()
    with pytest.raises(HeadwaterError) as caught:
        spark.sql("UPDATE gt SET id = 3 WHERE id = 1")
    assert "rowTracking" in str(caught.value)
    assert DeltaLog(str(lake.path("gt"))).latest_version() == before
    spark.sql("DELETE FROM gt WHERE id = 1")  # DELETE copies rows as they are: ids kept
    assert [r.twice for r in spark.table("gt").collect()] == [4]
    _check_ids(Path(lake.path("gt")))
