"""ALTER TABLE ... DROP FEATURE typeWidening TRUNCATE HISTORY (issue 37, item 4), as
delta-spark's TypeWideningPreDowngradeCommand runs it: the first call unsets
``delta.enableTypeWidening``, rewrites the files written before a type change (their parquet
footers then have the table's types: REORG, dataChange=false), removes ``delta.typeChanges``
from the schema and fails with DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD; once those
versions are older than ``delta.dropFeatureTruncateHistory.retentionDuration`` the call
truncates the history and drops the feature, and delta-rs (which refuses the feature) reads
the table. Without TRUNCATE HISTORY, and on a table whose row ids a rewrite would lose, the
drop is refused and the table left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from tests.support import commits, live_adds, logged_fields

from headwater import DeltaTable as HwTable
from headwater import HeadwaterError

RETENTION = "delta.dropFeatureTruncateHistory.retentionDuration"
TYPE_CHANGES = "delta.typeChanges"


def footer_types(path, column: str, field: str | None = None) -> list[pa.DataType]:
    """The parquet type of ``column`` (its struct ``field``, by the files' names) in every
    live data file, read from the footers."""
    types = []
    for name in live_adds(path):
        arrow = pq.read_schema(Path(path) / name).field(column).type
        types.append(arrow if field is None else arrow.field(field).type)
    return types


def table_rows(spark, name) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(name).collect())


def protocol(path) -> dict:
    return [a["protocol"] for actions in commits(path) for a in actions if "protocol" in a][-1]


def operations(path) -> list[str]:
    return [a["commitInfo"]["operation"] for actions in commits(path) for a in actions
            if "commitInfo" in a]


def has_type_changes(fields: dict) -> bool:
    return TYPE_CHANGES in json.dumps(fields)


def test_drop_type_widening_rewrites_old_files_then_truncates_history(spark, lake):
    spark.sql("CREATE TABLE tw_drop (id INT, v INT) USING DELTA "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql("INSERT INTO tw_drop VALUES (1, 10), (2, 20)")
    spark.sql("INSERT INTO tw_drop VALUES (3, 30)")
    spark.sql("ALTER TABLE tw_drop ALTER COLUMN v TYPE BIGINT")
    spark.sql("INSERT INTO tw_drop VALUES (4, 5000000000)")
    spark.sql(f"ALTER TABLE tw_drop SET TBLPROPERTIES ('{RETENTION}' = '1 hours')")
    path = lake.path("tw_drop")
    before = table_rows(spark, "tw_drop")
    assert before == [(1, 10), (2, 20), (3, 30), (4, 5000000000)]
    old_files = footer_types(path, "v").count(pa.int32())
    assert old_files >= 2 and footer_types(path, "v").count(pa.int64()) == 1
    wide_file = next(p for p in live_adds(path)
                     if pq.read_schema(Path(path) / p).field("v").type == pa.int64())
    version = len(commits(path))
    with pytest.raises(HeadwaterError, match="TRUNCATE HISTORY") as err:
        spark.sql("ALTER TABLE tw_drop DROP FEATURE typeWidening")  # needs checkpointProtection
    assert err.value.code == "HW_DELTA_UNSUPPORTED_FEATURE"
    assert len(commits(path)) == version and has_type_changes(logged_fields(path))
    # first call: property unset, old files rewritten, type changes removed, then the wait
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE tw_drop DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    assert operations(path)[version:] == ["UNSET TBLPROPERTIES", "REORG", "DROP FEATURE"]
    assert set(footer_types(path, "v")) == {pa.int64()}
    assert wide_file in live_adds(path)  # written after the change: not rewritten
    reorg = commits(path)[version + 1]
    assert all(a[k]["dataChange"] is False for a in reorg for k in ("add", "remove") if k in a)
    assert sum("remove" in a for a in reorg) == old_files
    fields = logged_fields(path)
    assert fields["v"]["type"] == "long" and not has_type_changes(fields)
    params = commits(path)[-1][0]["commitInfo"]["operationParameters"]
    assert [(c["name"], c["type"]) for c in json.loads(params["columns"])] == [("v", "long")]
    meta = [a["metaData"] for actions in commits(path) for a in actions if "metaData" in a][-1]
    assert "delta.enableTypeWidening" not in meta["configuration"]
    assert table_rows(spark, "tw_drop") == before
    # the type changes are still within the retention: their versions still need the feature
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE tw_drop DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST"
    spark.sql(f"ALTER TABLE tw_drop SET TBLPROPERTIES ('{RETENTION}' = '0 hours')")
    spark.sql("ALTER TABLE tw_drop DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert "typeWidening" not in json.dumps(protocol(path))
    assert not (Path(path) / "_delta_log" / f"{0:020d}.json").exists()  # history truncated
    info = commits(path)[-1][0]["commitInfo"]
    assert (info["operation"], info["operationParameters"]) == (
        "DROP FEATURE", {"featureName": "typeWidening", "truncateHistory": "true"})
    assert table_rows(spark, "tw_drop") == before
    rs = DeltaTable(str(path)).to_pyarrow_table()  # delta-rs opens the table again
    assert rs.schema.field("v").type == pa.int64()
    assert sorted((r["id"], r["v"]) for r in rs.to_pylist()) == before
    spark.sql("INSERT INTO tw_drop VALUES (5, 50)")  # headwater still writes it
    assert len(table_rows(spark, "tw_drop")) == 5


def test_drop_type_widening_of_a_nested_field_on_a_column_mapped_table(spark, lake):
    spark.sql("CREATE TABLE tw_nested (id INT, s STRUCT<x: INT, y: STRING>) USING DELTA "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true', "
              "'delta.columnMapping.mode' = 'name')")
    spark.sql(f"ALTER TABLE tw_nested SET TBLPROPERTIES ('{RETENTION}' = '0 hours')")
    spark.sql("INSERT INTO tw_nested VALUES (1, named_struct('x', 1, 'y', 'a'))")
    spark.sql("ALTER TABLE tw_nested ALTER COLUMN s.x TYPE BIGINT")
    spark.sql("INSERT INTO tw_nested VALUES (2, named_struct('x', 5000000000, 'y', 'b'))")
    spark.sql("ALTER TABLE tw_nested RENAME COLUMN s TO t")
    path = lake.path("tw_nested")
    before = table_rows(spark, "tw_nested")
    fields = logged_fields(path)
    column = fields["t"]["metadata"]["delta.columnMapping.physicalName"]
    nested = fields["t"]["type"]["fields"][0]["metadata"]["delta.columnMapping.physicalName"]
    assert column != "t" and set(footer_types(path, column, nested)) == {pa.int32(), pa.int64()}
    table = HwTable.forName(spark, "tw_nested")
    with pytest.raises(HeadwaterError) as err:
        table.dropFeatureSupport("typeWidening", True)
    assert err.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    assert set(footer_types(path, column, nested)) == {pa.int64()}
    assert not has_type_changes(logged_fields(path))
    assert table_rows(spark, "tw_nested") == before
    params = commits(path)[-1][0]["commitInfo"]["operationParameters"]
    assert [c["name"] for c in json.loads(params["columns"])] == ["t.x"]
    table.dropFeatureSupport("typeWidening", True)
    assert "typeWidening" not in json.dumps(protocol(path))
    assert "columnMapping" in json.dumps(protocol(path))
    reader = QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT * FROM t")
    rs = pa.table(reader.read_all())  # delta-rs' SQL engine reads column-mapped tables
    assert rs.schema.field("t").type.field("x").type == pa.int64()
    assert sorted((r["id"], (r["t"]["x"], r["t"]["y"])) for r in rs.to_pylist()) == before


def test_drop_type_widening_keeps_partition_values(spark, lake):
    spark.sql("CREATE TABLE tw_part (id INT, v SMALLINT, p STRING) USING DELTA "
              "PARTITIONED BY (p) TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"ALTER TABLE tw_part SET TBLPROPERTIES ('{RETENTION}' = '0 hours')")
    spark.sql("INSERT INTO tw_part VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, NULL)")
    spark.sql("ALTER TABLE tw_part ALTER COLUMN v TYPE INT")
    spark.sql("INSERT INTO tw_part VALUES (4, 70000, 'a')")
    path = lake.path("tw_part")
    before = table_rows(spark, "tw_part")
    values = sorted(json.dumps(a["partitionValues"]) for a in live_adds(path).values())
    with pytest.raises(HeadwaterError) as err:
        spark.sql("ALTER TABLE tw_part DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    assert set(footer_types(path, "v")) == {pa.int32()}
    assert sorted(json.dumps(a["partitionValues"]) for a in live_adds(path).values()) == values
    assert table_rows(spark, "tw_part") == before
    spark.sql("ALTER TABLE tw_part DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert "typeWidening" not in json.dumps(protocol(path))
    rs = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["v"], r["p"]) for r in rs) == before
    assert spark.sql("SELECT id FROM tw_part WHERE p = 'b'").collect()[0].id == 2


def test_drop_type_widening_refusals_and_a_table_never_widened(spark, lake):
    spark.sql("CREATE TABLE tw_rows (id INT, v INT) USING DELTA TBLPROPERTIES "
              "('delta.enableTypeWidening' = 'true', 'delta.enableRowTracking' = 'true')")
    spark.sql("INSERT INTO tw_rows VALUES (1, 10)")
    spark.sql("ALTER TABLE tw_rows ALTER COLUMN v TYPE BIGINT")
    path = lake.path("tw_rows")
    version = len(commits(path))
    with pytest.raises(HeadwaterError, match="rowTracking") as err:
        spark.sql("ALTER TABLE tw_rows DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    assert len(commits(path)) == version  # nothing committed: the property is still set
    # enabled, never used: the property unset and the feature dropped in one call
    spark.sql("CREATE TABLE tw_unused (id INT) USING DELTA TBLPROPERTIES "
              "('delta.enableTypeWidening' = 'true')")
    spark.sql("INSERT INTO tw_unused VALUES (1)")
    spark.sql("ALTER TABLE tw_unused DROP FEATURE typeWidening TRUNCATE HISTORY")
    unused = lake.path("tw_unused")
    assert operations(unused)[-2:] == ["UNSET TBLPROPERTIES", "DROP FEATURE"]
    assert "typeWidening" not in json.dumps(protocol(unused))
    assert DeltaTable(str(unused)).to_pyarrow_table().to_pylist() == [{"id": 1}]


def test_the_truncate_history_retention_property_in_create_table(spark, lake):
    """delta-rs cannot parse delta.dropFeatureTruncateHistory.retentionDuration: headwater
    checks it with delta-spark's rule and creates the table itself."""
    spark.sql("CREATE TABLE rh (id INT) TBLPROPERTIES "
              "('delta.dropFeatureTruncateHistory.retentionDuration' = '0 hours')")
    spark.sql("INSERT INTO rh VALUES (1)")
    assert DeltaTable(lake.path("rh")).metadata().configuration[
        "delta.dropFeatureTruncateHistory.retentionDuration"] == "0 hours"
    spark.sql("ALTER TABLE rh SET TBLPROPERTIES "
              "('delta.dropFeatureTruncateHistory.retentionDuration' = '-1 hours 2 days')")
    for bad in ("-1 hours", "soon", "1.5 days", "1 month"):
        with pytest.raises(HeadwaterError) as err:
            spark.sql("CREATE TABLE rh2 (id INT) TBLPROPERTIES "
                      f"('delta.dropFeatureTruncateHistory.retentionDuration' = '{bad}')")
        assert err.value.error_class == "DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED"
        with pytest.raises(HeadwaterError):
            spark.sql("ALTER TABLE rh SET TBLPROPERTIES "
                      f"('delta.dropFeatureTruncateHistory.retentionDuration' = '{bad}')")
    assert not lake.exists("rh2")
    assert spark.table("rh").count() == 1
