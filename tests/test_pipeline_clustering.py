"""Liquid clustering on pipeline tables (issue 38 item 6): ``cluster_by=`` in Python (SDP's
``dp``, DLT's ``dlt``) and ``CLUSTER BY`` in SQL, on streaming tables and materialized views,
run twice with new rows landing between the runs; clustering with partitioning refused."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from headwater import HeadwaterError
from headwater.delta.clustering import clustering_columns
from pipelines import project, run


def _events(spark, folder, ids):
    spark.createDataFrame([(i, f"k{i % 3}") for i in ids], "id long, k string") \
        .write.mode("append").parquet(str(folder))


def test_cluster_by_on_streaming_tables_and_materialized_views(spark, tmp_path):
    landing = tmp_path / "landing"
    _events(spark, landing, range(0, 6))
    root = project(tmp_path, globs=("defs/*.py", "defs/*.sql"), files={
        "defs.py": f"""
        from pyspark import pipelines as dp

        @dp.table(cluster_by=["k"])
        def raw():
            return spark.readStream.schema("id long, k string").parquet({str(landing)!r})

        @dp.materialized_view(cluster_by=["k"])
        def per_key():
            return spark.read.table("raw").groupBy("k").count()
        """,
        "defs.sql": """
        CREATE OR REFRESH STREAMING TABLE copied CLUSTER BY (id)
        AS SELECT id, k FROM STREAM(raw);
        """})
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    _events(spark, landing, range(6, 9))
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    expected = {"raw": ["k"], "per_key": ["k"], "copied": ["id"]}
    for name, columns in expected.items():
        path = lake.path(name)
        assert clustering_columns(path, DeltaTable(path)) == columns, name
    assert sorted(r.id for r in lake.read("copied").collect()) == list(range(9))
    counts = {r.k: r["count"] for r in lake.read("per_key").collect()}
    assert counts == {"k0": 3, "k1": 3, "k2": 3}
    spark.sql("OPTIMIZE raw")  # clusters by k
    assert sorted(r.id for r in lake.read("raw").collect()) == list(range(9))


def test_cluster_by_with_partitioning_is_refused(spark, tmp_path):
    root = project(tmp_path, globs=("defs/*.py",), files={"defs.py": """
        @headwater.materialized_view(partition_by=["k"], cluster_by=["id"])
        def both():
            return spark.sql("SELECT 1 AS id, 'a' AS k")
        """})
    with pytest.raises(HeadwaterError) as caught:
        run(spark, root)
    assert caught.value.error_class == "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY"



def test_a_failing_refresh_of_a_clustered_view_keeps_its_rows(spark, lake):
    from pyspark.sql import functions as F  # noqa: PLC0415 - only this test builds a failure

    lake.replace("mv", spark.range(5), cluster_by=["id"])
    version = DeltaTable(lake.path("mv")).version()
    failing = spark.range(5).withColumn("x", F.raise_error(F.lit("boom")))
    with pytest.raises(Exception):  # noqa: B017 - Spark's own error: any will do
        lake.replace("mv", failing, cluster_by=["id"])
    assert DeltaTable(lake.path("mv")).version() == version
    assert lake.read("mv").count() == 5


def test_a_changed_clustering_of_a_streaming_table_is_refused(spark, lake):
    lake.create_table("st", spark.range(1).schema, cluster_by=["id"])
    lake.create_table("st", spark.range(1).schema, cluster_by=["id"])  # the same: fine
    with pytest.raises(HeadwaterError) as caught:
        lake.create_table("st", spark.range(1).schema, cluster_by=[])
    assert "full refresh" in str(caught.value).lower() or "full-refresh" in str(caught.value)
