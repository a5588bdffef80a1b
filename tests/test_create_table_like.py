"""Issue 37, item 6: ``CREATE TABLE t LIKE source`` as delta-spark runs it (its
DeltaCreateTableLikeSuite's cases): a Delta source's protocol, schema (column mapping, NOT
NULL, generated columns), partitioning, description and properties copied in one commit with
no files; a view's or a parquet table's catalog definition; IF NOT EXISTS; targets by name,
LOCATION and path; refusals. Checked against the _delta_log JSON and read back with
deltalake (delta-rs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.support import commits, logged_schema

from headwater import HeadwaterError
from headwater.delta import row_tracking


def snapshot(path: str | Path) -> tuple[dict, dict, dict]:
    """(protocol, metaData, commitInfo) of a table's only commit."""
    (actions,) = commits(path)
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert not [a for a in actions if "add" in a]
    return protocol, meta, info


def latest(path: str | Path) -> tuple[dict, dict]:
    """(protocol, metaData) at a table's latest version (the last of each in its log)."""
    protocol = meta = None
    for actions in commits(path):
        for a in actions:
            protocol = a.get("protocol", protocol)
            meta = a.get("metaData", meta)
    return protocol, meta


def test_like_a_delta_table_copies_its_definition_and_no_rows(lake, spark):
    spark.sql("""CREATE TABLE src (id BIGINT NOT NULL COMMENT 'key', part STRING,
                 double_id BIGINT GENERATED ALWAYS AS (id * 2))
                 USING delta PARTITIONED BY (part) COMMENT 'the source'
                 TBLPROPERTIES ('delta.appendOnly' = 'false', 'team.owner' = 'ana')""")
    spark.sql("ALTER TABLE src ADD CONSTRAINT positive CHECK (id > 0)")
    spark.sql("INSERT INTO src (id, part) VALUES (1, 'a'), (2, 'b')")
    spark.sql("-- copy the definition\nCREATE TABLE dst LIKE src")
    src_protocol, src_meta = latest(lake.path("src"))
    protocol, meta, info = snapshot(lake.path("dst"))
    assert info["operation"] == "CREATE TABLE"
    assert protocol == src_protocol
    assert json.loads(meta["schemaString"]) == json.loads(src_meta["schemaString"])
    assert meta["partitionColumns"] == ["part"]
    assert meta["description"] == "the source"
    assert meta["configuration"] == src_meta["configuration"]
    assert meta["configuration"]["delta.constraints.positive"] == "id > 0"
    assert meta["id"] != src_meta["id"]
    assert spark.table("dst").count() == 0
    # the copied definition is enforced: NOT NULL, the CHECK constraint, the generated column
    spark.sql("INSERT INTO dst (id, part) VALUES (5, 'c')")
    assert spark.sql("SELECT double_id FROM dst").first()[0] == 10
    with pytest.raises(Exception, match="(?i)null"):
        spark.sql("INSERT INTO dst (id, part) VALUES (NULL, 'c')")
    with pytest.raises(Exception, match="positive"):
        spark.sql("INSERT INTO dst (id, part) VALUES (-1, 'c')")
    assert spark.table("dst").count() == 1
    rs = DeltaTable(lake.path("dst"))  # delta-rs opens it
    assert rs.metadata().partition_columns == ["part"]
    assert rs.to_pyarrow_table().num_rows == 1
    # the source is untouched
    assert spark.table("src").count() == 2


def test_like_keeps_column_mapping_and_gives_row_tracking_its_own_columns(lake, spark):
    spark.sql("""CREATE TABLE student (id INT, name STRING) USING delta TBLPROPERTIES (
                 'delta.columnMapping.mode' = 'name', 'delta.enableRowTracking' = 'true')""")
    spark.sql("INSERT INTO student VALUES (1, 'ana')")
    spark.sql("ALTER TABLE student RENAME COLUMN name TO full_name")
    spark.sql("CREATE TABLE graduate LIKE student")  # Delta's row-tracking page, as printed
    src_protocol, src_meta = latest(lake.path("student"))
    protocol, meta, _ = snapshot(lake.path("graduate"))
    assert protocol == src_protocol
    # ids and physical names
    assert json.loads(meta["schemaString"]) == json.loads(src_meta["schemaString"])
    config = meta["configuration"]
    assert config["delta.columnMapping.mode"] == "name"
    assert config["delta.columnMapping.maxColumnId"] == \
        src_meta["configuration"]["delta.columnMapping.maxColumnId"]
    for key in (row_tracking.ROW_ID_COLUMN_PROPERTY,
                row_tracking.COMMIT_VERSION_COLUMN_PROPERTY):
        assert config[key] and config[key] != src_meta["configuration"][key]
    spark.sql("INSERT INTO graduate VALUES (7, 'bo')")
    assert [tuple(r) for r in spark.sql(
        "SELECT id, full_name, _metadata.row_id FROM graduate").collect()] == [(7, "bo", 0)]
    fields = {f["name"]: f for f in logged_schema(lake.path("graduate"))["fields"]}
    assert fields["full_name"]["metadata"]["delta.columnMapping.physicalName"] != "full_name"


def test_like_with_properties_targets_and_if_not_exists(lake, spark, tmp_path):
    spark.sql("CREATE TABLE src (key STRING) USING delta TBLPROPERTIES ('this.is.my.key' = '14')")
    spark.sql("""CREATE TABLE t1 LIKE src USING DELTA
                 TBLPROPERTIES ('this.is.my.key3' = 'true', 'delta.enableDeletionVectors' = 'true')""")
    protocol, meta, _ = snapshot(lake.path("t1"))
    assert meta["configuration"] == {"this.is.my.key": "14", "this.is.my.key3": "true",
                                     "delta.enableDeletionVectors": "true"}
    assert "deletionVectors" in protocol.get("writerFeatures", [])
    assert "variantType" not in protocol.get("writerFeatures", [])
    # a named external table, and a table by path
    where = tmp_path / "ext"
    spark.sql(f"CREATE TABLE t2 LIKE src LOCATION '{where}'")
    assert lake.is_external("default.t2") and (where / "_delta_log").is_dir()
    by_path = tmp_path / "by_path"
    spark.sql(f"CREATE TABLE delta.`{by_path}` LIKE src")
    assert DeltaTable(str(by_path)).schema().fields[0].name == "key"
    # IF NOT EXISTS on an existing table is a no-op; without it, delta-spark's error
    spark.sql("CREATE TABLE IF NOT EXISTS t1 LIKE src")
    assert len(commits(lake.path("t1"))) == 1
    with pytest.raises(HeadwaterError) as err:
        spark.sql("CREATE TABLE t1 LIKE src")
    assert err.value.code == "HW_TABLE_EXISTS" and "TABLE_OR_VIEW_ALREADY_EXISTS" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        spark.sql("CREATE TABLE t3 LIKE src TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    assert "DELTA_UNSUPPORTED_COLUMN_MAPPING_OPERATIONS" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        spark.sql("CREATE TABLE t3 LIKE src TBLPROPERTIES ('delta.enableDeletionVectorz' = 'true')")
    assert "DELTA_UNKNOWN_CONFIGURATION" in str(err.value)
    assert not lake.exists("t3")


def test_like_a_view_or_a_parquet_table_with_using_delta(lake, spark, tmp_path):
    spark.sql("CREATE TABLE src (id INT, part STRING) USING delta PARTITIONED BY (part)")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW v AS SELECT id, upper(part) AS p FROM src")
    pq_dir = tmp_path / "pq"
    try:
        spark.sql("CREATE TABLE from_view LIKE v USING DELTA")
        assert [f.name for f in DeltaTable(lake.path("from_view")).schema().fields] == ["id", "p"]
        spark.sql(f"""CREATE TABLE pq_src (a INT, b STRING) USING parquet PARTITIONED BY (b)
                      LOCATION '{pq_dir}' TBLPROPERTIES ('owner.team' = 'x')""")
        spark.sql("CREATE TABLE from_pq LIKE pq_src USING DELTA")
        _, meta, _ = snapshot(lake.path("from_pq"))
        assert meta["partitionColumns"] == ["b"]
        assert meta["configuration"] == {"owner.team": "x"}
        # without USING DELTA, LIKE of a parquet table is Spark's own (a parquet table)
        spark.sql("CREATE TABLE pq_copy LIKE pq_src")
        assert not lake.exists("pq_copy")
        assert spark.sql("DESCRIBE TABLE EXTENDED pq_copy").where(
            "col_name = 'Provider'").first()[1].lower() == "parquet"
    finally:
        spark.sql("DROP VIEW IF EXISTS v")
        spark.sql("DROP TABLE IF EXISTS pq_copy")
        spark.sql("DROP TABLE IF EXISTS pq_src")


def test_a_new_delta_table_never_replaces_what_holds_the_name(lake, spark, tmp_path):
    spark.sql("CREATE TABLE src (id INT) USING delta")
    try:
        spark.sql("CREATE TABLE pq_own (a INT) USING parquet")
        spark.sql("INSERT INTO pq_own VALUES (7)")
        spark.sql("CREATE OR REPLACE VIEW vv AS SELECT 1 AS x")
        for statement in ("CREATE TABLE pq_own LIKE src", "CREATE TABLE vv LIKE src",
                          "CREATE TABLE pq_own (id INT) USING DELTA"):
            with pytest.raises(HeadwaterError) as err:
                spark.sql(statement)
            assert err.value.error_class == "TABLE_OR_VIEW_ALREADY_EXISTS"
        spark.sql("CREATE TABLE IF NOT EXISTS pq_own LIKE src")  # a no-op
        spark.sql("CREATE TABLE IF NOT EXISTS pq_own (id INT) USING DELTA")
        assert spark.table("pq_own").collect() == [(7,)]  # the user's rows are still there
        # a write by name: Spark's own table takes it (no format), or a clear refusal
        with pytest.raises(HeadwaterError) as err:
            spark.createDataFrame([(8,)], "a INT").write.format("delta").mode("append") \
                .saveAsTable("pq_own")
        assert err.value.error_class == "TABLE_OR_VIEW_ALREADY_EXISTS"
        spark.createDataFrame([(8,)], "a INT").write.mode("append").saveAsTable("pq_own")
        spark.createDataFrame([(9,)], "a INT").write.format("delta").mode("ignore") \
            .saveAsTable("pq_own")  # Spark's ignore: the table exists, nothing is written
        assert sorted(spark.table("pq_own").collect()) == [(7,), (8,)]
        assert spark.table("vv").collect() == [(1,)]
        assert not lake.exists("pq_own") and not lake.exists("vv")
        # a location holding a table already: delta-spark's DELTA_TABLE_ALREADY_EXISTS
        spark.sql(f"CREATE TABLE ext LIKE src LOCATION '{tmp_path / 'ext'}'")
        with pytest.raises(HeadwaterError) as err:
            spark.sql(f"CREATE TABLE IF NOT EXISTS ext2 LIKE src LOCATION '{tmp_path / 'ext'}'")
        assert err.value.error_class == "DELTA_TABLE_ALREADY_EXISTS"
        # a temporary view hides the table of its name, as Spark resolves names
        spark.sql("CREATE OR REPLACE TEMPORARY VIEW src AS SELECT 'a' AS `Comment`, 2 AS y")
        spark.sql("CREATE TABLE from_temp LIKE src USING DELTA")
        _, meta, _ = snapshot(lake.path("from_temp"))
        assert [f["name"] for f in json.loads(meta["schemaString"])["fields"]] == ["Comment", "y"]
        assert meta["description"] is None
        with pytest.raises(HeadwaterError) as err:
            spark.sql("CREATE TABLE t5 LIKE default.src TBLPROPERTIES "
                      "('delta.feature.deletionVectors' = 'supported')")
        assert "addFeatureSupport" in err.value.fix and not lake.exists("t5")
    finally:
        spark.sql("DROP VIEW IF EXISTS src")
        spark.sql("DROP VIEW IF EXISTS vv")
        spark.sql("DROP TABLE IF EXISTS pq_own")
