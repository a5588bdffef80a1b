"""headwater's registry implements pyspark.pipelines' GraphElementRegistry: SDP's decorators
and headwater's register into the same model of frozen dataclasses."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from headwater import HeadwaterError, Lakehouse
from headwater.conf.project_file import Project
from headwater.pipeline import model
from headwater.pipeline.graph import Graph
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.registry import Registry, collecting


def project(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "proj"
    (root / "defs").mkdir(parents=True, exist_ok=True)
    (root / "headwater.toml").write_text(
        '[pipeline]\nname = "t"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n')
    (root / "defs" / "p.py").write_text(textwrap.dedent(text))
    return root


SDP = """\
from pyspark import pipelines as dp
from pyspark.sql import SparkSession, functions as F
import headwater

spark = SparkSession.active()


@dp.table(comment="raw rows", table_properties={"delta.appendOnly": "true"},
          partition_cols=["k"])
def bronze():
    return spark.readStream.format("rate").load().withColumn("k", F.col("value") % 3)


@dp.temporary_view
def evens():
    return spark.readStream.table("bronze").where("value % 2 = 0")


dp.create_streaming_table("merged", comment="two flows")


@dp.append_flow(target="merged")
def from_evens():
    return spark.readStream.table("evens").select("value")


@dp.append_flow(target="merged", name="odd_rows")
def from_odds():
    return spark.readStream.table("bronze").where("value % 2 = 1").select("value")


@dp.materialized_view(name="per_k", schema="k BIGINT, n BIGINT")
@headwater.expect_or_drop("has_k", "k IS NOT NULL")
def counts():
    return spark.table("bronze").groupBy("k").agg(F.count("*").alias("n"))


@headwater.table(output_mode="complete", keys=["k"])
def totals():
    return spark.readStream.table("bronze").groupBy("k").count()
"""


def test_sdp_decorators_register_into_headwaters_graph(spark, tmp_path):
    root = project(tmp_path, SDP)
    proj = Project.load(root)
    registry = load_definitions(proj)
    datasets = registry.datasets
    assert {n: d.kind for n, d in datasets.items()} == {
        "bronze": "table", "evens": "view", "merged": "table", "per_k": "materialized_view",
        "totals": "table"}
    bronze = datasets["bronze"]
    assert isinstance(bronze, model.StreamingTable)
    assert bronze.comment == "raw rows" and bronze.partition_by == ("k",)
    assert dict(bronze.properties) == {"delta.appendOnly": "true"}
    assert bronze.location.file.endswith("p.py") and bronze.location.line == 8  # the decorator
    assert datasets["per_k"].schema.simpleString() == "struct<k:bigint,n:bigint>"
    assert [e.name for e in datasets["per_k"].expectations] == ["has_k"]
    assert datasets["totals"].output_mode == "complete" and datasets["totals"].keys == ("k",)
    assert sorted(f.name for f in registry.flows_of("merged")) == ["from_evens", "odd_rows"]
    # frozen values carrying only their own fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        bronze.comment = "x"  # type: ignore[misc]
    assert "output_mode" not in {f.name for f in dataclasses.fields(model.MaterializedView)}
    assert "partition_by" not in {f.name for f in dataclasses.fields(model.View)}
    assert datasets["per_k"].output_mode == "complete"  # what the runner reads, fixed

    lake = Lakehouse(proj.root, spark)
    graph = Graph(registry, lake, dry=True).build()
    try:
        assert graph.upstream("merged") == {"bronze", "evens"}
        assert graph.upstream("per_k") == {"bronze"}
        assert set(graph.flows) == {"bronze", "evens", "merged/from_evens", "merged/odd_rows",
                                    "per_k", "totals"}
        assert graph.flows["per_k"].df.columns == ["k", "n"]
    finally:
        graph.close()
    assert not (root / "lake" / "bronze").exists()


@pytest.mark.parametrize("text, code, line, words", [
    ("@dp.table(cluster_by=['a'], partition_cols=['b'])\ndef t():\n    return None\n",
     "HW_PIPELINE_UNSUPPORTED", 4, "cluster_by"),
    ("@dp.materialized_view(format='parquet')\ndef t():\n    return None\n",
     "HW_PIPELINE_UNSUPPORTED", 4, "format='parquet'"),
    ("dp.create_sink('out', format='parquet')\n", "HW_PIPELINE_SINK_FORMAT", 4, "'path'"),
    ("dp.create_streaming_table('t')\n", "HW_PIPELINE_NO_FLOW", 4, "no flow"),
    ("@dp.append_flow(target='nowhere')\ndef f():\n    return None\n",
     "HW_PIPELINE_UNKNOWN_TABLE", 4, "nowhere"),
    ("@dp.table(name='t')\ndef a():\n    return None\n\n@headwater.table(name='t')\ndef b():\n"
     "    return None\n", "HW_PIPELINE_DUPLICATE", 8, "defined twice"),
])
def test_sdp_declarations_headwater_cannot_honour_are_refused_at_the_users_line(
        spark, tmp_path, text, code, line, words):
    root = project(tmp_path, "from pyspark import pipelines as dp\nimport headwater\n\n" + text)
    with pytest.raises(HeadwaterError) as info:
        load_definitions(Project.load(root))
    assert info.value.code == code
    assert f"p.py:{line}" in str(info.value) and words in str(info.value), str(info.value)


def test_the_active_registry_is_scoped_and_restored(spark):
    from pyspark.errors import PySparkRuntimeError
    from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry

    import headwater

    outer, inner = Registry(), Registry()
    with collecting(outer):
        assert get_active_graph_element_registry() is outer
        with collecting(inner):
            assert get_active_graph_element_registry() is inner

            @headwater.materialized_view
            def one():
                return spark.range(1)
        assert get_active_graph_element_registry() is outer
    assert list(inner.datasets) == ["one"] and not outer.datasets
    with pytest.raises(PySparkRuntimeError):
        get_active_graph_element_registry()
    with pytest.raises(HeadwaterError) as info:
        @headwater.table
        def outside():
            return spark.range(1)
    assert info.value.code == "HW_PIPELINE_NOT_LOADING" and "test_pipeline_registry.py:" in \
        str(info.value)


def test_auto_cdc_flows_register_as_headwater_cdc_flows(spark):
    # The registry method called as SDP calls it (with SQL columns; pyspark's own
    # dp.create_auto_cdc_flow, which builds Connect columns: tests/test_dlt_syntax.py).
    from pyspark.pipelines.flow import AutoCdcFlow
    from pyspark.pipelines.source_code_location import SourceCodeLocation
    from pyspark.sql import functions as F

    def sdp_flow(keys):
        return AutoCdcFlow(name=None, target="t", source="s", keys=keys,
                           sequence_by=F.col("seq"), apply_as_deletes=F.expr("op = 'D'"),
                           column_list=None, except_column_list=[F.col("op")],
                           stored_as_scd_type="2", track_history_column_list=None,
                           track_history_except_column_list=None, spark_conf={},
                           source_code_location=SourceCodeLocation("cdc.py", 7))

    registry = Registry()
    registry.register_auto_cdc_flow(sdp_flow([F.col("id")]))
    (flow,) = registry.flows
    assert flow.target == "t" and flow.is_default
    assert flow.cdc.keys == ("id",) and flow.cdc.stored_as_scd_type == 2
    assert flow.cdc.except_column_list == ("op",)
    with pytest.raises(HeadwaterError) as info:
        Registry().register_auto_cdc_flow(sdp_flow([]))
    assert info.value.code == "HW_CDC_INVALID" and "cdc.py:7" in str(info.value)
