"""Liquid clustering in SQL (issue 37, item 5), as docs.delta.io's clustering page writes it:
CREATE TABLE / CTAS ... CLUSTER BY, ALTER TABLE ... CLUSTER BY (cols) | NONE, OPTIMIZE (only
what is not clustered yet) and OPTIMIZE FULL (every file), DESCRIBE DETAIL's
clusteringColumns, and delta-spark's refusals. Results are checked against the _delta_log's
JSON and the data files read with pyarrow; delta-rs must open every table."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from tests.support import commits, live_adds

from headwater import HeadwaterError


def of(actions: list[dict], kind: str) -> list[dict]:
    return [a[kind] for a in actions if kind in a]


def domain_columns(path: str | Path) -> list[list[str]] | None:
    """The clustering domain's columns from the last commit that wrote it (None: never)."""
    found = None
    for actions in commits(path):
        for d in of(actions, "domainMetadata"):
            if d["domain"] == "delta.clustering":
                found = json.loads(d["configuration"])["clusteringColumns"]
    return found


def protocol(path: str | Path) -> dict:
    found = {}
    for actions in commits(path):
        for p in of(actions, "protocol"):
            found = p
    return found


def rows_in_file(path: str | Path, add: dict) -> list[dict]:
    return pq.read_table(Path(path) / add["path"]).to_pylist()


def test_create_table_cluster_by_records_the_domain_and_the_features(lake, spark):
    spark.sql("CREATE TABLE table1(col0 int, col1 string) USING DELTA CLUSTER BY (col0)")
    path = lake.path("table1")
    assert domain_columns(path) == [["col0"]]
    p = protocol(path)
    assert (p["minReaderVersion"], p["minWriterVersion"]) == (1, 7)
    assert {"clustering", "domainMetadata"} <= set(p["writerFeatures"])
    detail = spark.sql("DESCRIBE DETAIL table1").first()
    assert detail.clusteringColumns == ["col0"] and detail.partitionColumns == []
    assert "CLUSTER BY" not in str(DeltaTable(path).schema())  # delta-rs opens it
    spark.sql("INSERT INTO table1 VALUES (2, 'b'), (1, 'a')")
    assert sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["col0"]) == [
        {"col0": 1, "col1": "a"}, {"col0": 2, "col1": "b"}]


def test_ctas_cluster_by_by_name_and_at_a_location(lake, spark, tmp_path):
    spark.sql("CREATE TABLE src (col0 INT, col1 STRING) USING delta")
    spark.sql("INSERT INTO src VALUES (3, 'c'), (1, 'a'), (2, 'b')")
    spark.sql("CREATE TABLE table2 CLUSTER BY (col0) AS SELECT * FROM src")
    where = tmp_path / "table_location"
    # docs.delta.io's CTAS example (Delta 3.3+): an external table, a comment in the text
    spark.sql(f"""CREATE EXTERNAL TABLE table3 CLUSTER BY (col1)  -- after the table name
                  LOCATION '{where}'
                  AS SELECT * FROM src""")
    for path, columns in ((lake.path("table2"), [["col0"]]), (str(where), [["col1"]])):
        assert domain_columns(path) == columns
        assert {"clustering", "domainMetadata"} <= set(protocol(path)["writerFeatures"])
        got = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
        assert sorted(r["col0"] for r in got) == [1, 2, 3]
    assert spark.sql("DESCRIBE DETAIL table3").first().clusteringColumns == ["col1"]
    # by path too
    spark.sql(f"CREATE TABLE delta.`{tmp_path / 'bypath'}` (a INT, b INT) CLUSTER BY (a, b)")
    assert domain_columns(tmp_path / "bypath") == [["a"], ["b"]]


def test_alter_table_cluster_by_changes_none_removes_and_an_unclustered_table_gets_it(
        lake, spark):
    spark.sql("CREATE TABLE t (a INT, b STRING, c DATE) USING delta")
    spark.sql("INSERT INTO t VALUES (1, 'x', DATE'2024-01-01')")
    path = lake.path("t")
    assert "writerFeatures" not in protocol(path)  # a legacy protocol: not clustered
    spark.sql("ALTER TABLE t CLUSTER BY NONE")  # on an unclustered table: nothing happens
    before = len(commits(path))
    assert len(commits(path)) == before and domain_columns(path) is None
    spark.sql("ALTER TABLE t CLUSTER BY (a)")  # Delta 3.3+: an existing unpartitioned table
    last = commits(path)[-1]
    assert of(last, "commitInfo")[0]["operation"] == "CLUSTER BY"
    assert of(last, "commitInfo")[0]["operationParameters"] == {
        "oldClusteringColumns": "", "newClusteringColumns": "a"}
    assert {"clustering", "domainMetadata"} <= set(of(last, "protocol")[0]["writerFeatures"])
    assert not of(last, "add") and not of(last, "remove")  # no data rewritten
    spark.sql("ALTER TABLE t CLUSTER BY (a, b)")
    assert domain_columns(path) == [["a"], ["b"]]
    assert spark.sql("DESCRIBE DETAIL t").first().clusteringColumns == ["a", "b"]
    assert not of(commits(path)[-1], "protocol")  # already clustered: no protocol change
    spark.sql("ALTER TABLE t CLUSTER BY NONE")
    assert domain_columns(path) == []
    assert spark.sql("DESCRIBE DETAIL t").first().clusteringColumns == []
    # the feature stays (protocols are not downgraded): OPTIMIZE still refuses ZORDER BY
    with pytest.raises(HeadwaterError, match="DELTA_CLUSTERING_WITH_ZORDER_BY"):
        spark.sql("OPTIMIZE t ZORDER BY (a)")
    assert DeltaTable(path).to_pyarrow_table().num_rows == 1  # delta-rs reads it


def test_optimize_clusters_new_files_only_and_full_reclusters_everything(lake, spark):
    spark.sql("CREATE TABLE events (id INT, kind STRING) USING delta CLUSTER BY (id)")
    path = lake.path("events")
    for batch in ([5, 1, 9], [3, 7, 2], [8, 4, 6]):
        spark.sql("INSERT INTO events VALUES " + ", ".join(f"({i}, 'k{i % 2}')" for i in batch))
    written = list(live_adds(path).values())
    assert all(not a.get("tags") for a in written)  # writes do not cluster
    result = spark.sql("OPTIMIZE events").first()
    assert result.metrics.numFilesRemoved == len(written) and result.metrics.numFilesAdded >= 1
    assert result.metrics.clusteringStats.inputOtherFiles.numFiles == len(written)
    info = of(commits(path)[-1], "commitInfo")[0]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"]["clusterBy"] == '["id"]'
    assert info["operationParameters"]["isFull"] in (False, "false")
    first = list(live_adds(path).values())
    cubes = {a["tags"]["ZCUBE_ID"] for a in first}
    assert len(cubes) == 1 and all(a["clusteringProvider"] == "liquid" for a in first)
    assert all(json.loads(a["tags"]["ZCUBE_ZORDER_BY"]) == ["id"] for a in first)
    assert all(a["dataChange"] is False for a in of(commits(path)[-1], "add"))
    # the rows of the new ZCube are in clustering order within each file
    for add in first:
        ids = [r["id"] for r in rows_in_file(path, add)]
        assert ids == sorted(ids)
    # nothing new: OPTIMIZE is a no-op (one ZCube, nothing unclustered)
    version = len(commits(path))
    assert spark.sql("OPTIMIZE events").first().metrics.numFilesRemoved == 0
    assert len(commits(path)) == version
    # new data: only the new file and the (small) matching ZCube are merged
    spark.sql("INSERT INTO events VALUES (0, 'k0')")
    spark.sql("OPTIMIZE events")
    assert len({a["tags"]["ZCUBE_ID"] for a in list(live_adds(path).values())}) == 1
    # a change of columns: OPTIMIZE leaves files clustered by the old ones, FULL takes them
    spark.sql("ALTER TABLE events CLUSTER BY (kind)")
    spark.sql("INSERT INTO events VALUES (10, 'k1')")
    spark.sql("OPTIMIZE events")
    by_cols = sorted(a["tags"]["ZCUBE_ZORDER_BY"] for a in list(live_adds(path).values()))
    assert '["id"]' in by_cols and '["kind"]' in by_cols
    spark.sql("OPTIMIZE events FULL")
    final = list(live_adds(path).values())
    assert {a["tags"]["ZCUBE_ZORDER_BY"] for a in final} == {'["kind"]'}
    assert of(commits(path)[-1], "commitInfo")[0]["operationParameters"]["isFull"] in (
        True, "true")
    got = sorted(r["id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist())
    assert got == list(range(11))  # delta-rs reads the clustered files, every row once


def test_refusals_name_delta_spark_error_classes(lake, spark, tmp_path):
    spark.sql("CREATE TABLE plain (a INT, b INT) USING delta")
    spark.sql("CREATE TABLE parted (a INT, d STRING) USING delta PARTITIONED BY (d)")
    spark.sql("CREATE TABLE clustered (a INT, b INT) USING delta CLUSTER BY (a)")
    cases = [
        ("OPTIMIZE plain FULL", "DELTA_OPTIMIZE_FULL_NOT_SUPPORTED"),
        ("OPTIMIZE clustered ZORDER BY (b)", "DELTA_CLUSTERING_WITH_ZORDER_BY"),
        ("OPTIMIZE clustered WHERE a > 1", "DELTA_CLUSTERING_WITH_PARTITION_PREDICATE"),
        ("ALTER TABLE parted CLUSTER BY (a)",
         "DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED"),
        ("CREATE TABLE five (a INT, b INT, c INT, d INT, e INT) USING delta "
         "CLUSTER BY (a, b, c, d, e)", "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS"),
        ("CREATE TABLE m (a INT, m MAP<STRING, INT>) USING delta CLUSTER BY (m)",
         "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),
        ("CREATE TABLE s (a INT, b INT) USING delta CLUSTER BY (b) "
         "TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1')",
         "DELTA_CLUSTERING_COLUMN_MISSING_STATS"),
        ("ALTER TABLE plain SET TBLPROPERTIES ('delta.feature.clustering' = 'supported')",
         "DELTA_ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED"),
        ("CREATE TABLE f (a INT) USING delta TBLPROPERTIES "
         "('delta.feature.clustering' = 'supported')",
         "DELTA_CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED"),
        ("ALTER TABLE clustered CLUSTER BY (nope)", "HW_TABLE_DEFINITION_INVALID"),
    ]
    for statement, expected in cases:
        with pytest.raises(HeadwaterError, match=expected) as caught:
            spark.sql(statement)
        assert caught.value.fix, statement  # what, why and how
    for name in ("five", "m", "s", "f"):
        assert not lake.exists(name)
    assert domain_columns(lake.path("clustered")) == [["a"]]  # unchanged by the refusals
    assert "writerFeatures" not in protocol(lake.path("plain"))
