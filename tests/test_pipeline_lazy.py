"""Building the graph creates no table (a run creates them when it first needs one), and
read_files finds its default schema location without importing the pipeline or lakehouse."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.conf.project_file import Project
from headwater.pipeline.graph import Graph
from headwater.pipeline.loader import load_definitions

DEFS = """
import headwater
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.active()

@headwater.table
def bronze():
    return spark.readStream.table("src")

@headwater.table
def silver():
    return spark.readStream.table("bronze").select("id", (F.col("id") * 10).alias("x"))

@headwater.materialized_view
def gold():
    return spark.table("silver").groupBy().agg(F.sum("x").alias("total"))
"""


def test_building_the_graph_creates_no_table(spark, tmp_path):
    root = tmp_path / "proj"
    (root / "defs").mkdir(parents=True)
    (root / "headwater.toml").write_text(
        '[pipeline]\nname = "t"\nroot = "lake"\ndefinitions = ["defs/*.py"]\n')
    (root / "defs" / "p.py").write_text(DEFS)
    write(root / "lake" / "src", {"id": [1, 2, 3]})
    proj = Project.load(root)
    lake = Lakehouse(proj.root, spark)
    graph = Graph(load_definitions(proj), lake).build()
    # downstream definitions resolved against their inputs' schemas, with nothing written
    assert graph.flows["gold"].df.columns == ["total"]
    assert graph.upstream("gold") == {"silver"} and graph.upstream("silver") == {"bronze"}
    assert sorted(p.name for p in (root / "lake").iterdir() if not p.name.startswith("_")) == ["src"]
    assert spark.table("silver").columns == ["id", "x"]  # known to the catalog already
    # a run needs gold: rebuilding it creates gold and its inputs, empty
    df = graph.rebuild(graph.flows["gold"])
    assert lake.exists("gold") and lake.exists("silver") and not lake.exists("bronze")
    assert df.collect()[0].total is None
    graph.store_for("bronze")
    assert lake.exists("bronze")
    graph.close()


def test_read_files_default_location_comes_from_the_definition_or_the_session_conf(spark,
                                                                                  tmp_path):
    import headwater
    from headwater.conf.context import (
        LAKEHOUSE_ROOT_CONF,
        LAKEHOUSE_STATE_CONF,
        DefinitionContext,
        current_definition,
        defining,
    )
    from headwater.ingest import schema_location as locations
    from headwater.spark.plan import relations

    source = textwrap.dedent(inspect.getsource(locations.default_location))
    imported = {node.module for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m and m.startswith(("headwater.pipeline",
                                                            "headwater.lakehouse"))}

    def schema_location() -> str:
        df = headwater.read_files(tmp_path / "landing", schema="id int")
        return dict(next(r for r in relations(df) if r.source == "cloudFiles").options)[
            "schemalocation"]

    (tmp_path / "landing").mkdir()
    # an earlier test's lakehouse may have left both confs set on the shared session
    previous = {conf: spark.conf.get(conf, None)
                for conf in (LAKEHOUSE_ROOT_CONF, LAKEHOUSE_STATE_CONF)}
    try:
        spark.conf.unset(LAKEHOUSE_STATE_CONF)
        spark.conf.set(LAKEHOUSE_ROOT_CONF, str(tmp_path / "elsewhere"))
        assert schema_location().startswith(str(tmp_path / "elsewhere" / "_ingest") + "/")
        spark.conf.set(LAKEHOUSE_STATE_CONF, str(tmp_path / "state"))  # an object-store root's
        assert schema_location().startswith(str(tmp_path / "state" / "_ingest") + "/")
        spark.conf.unset(LAKEHOUSE_STATE_CONF)
        with defining(DefinitionContext("bronze", str(tmp_path / "ckpt" / "_ingest"))):
            assert current_definition().dataset == "bronze"
            assert schema_location().startswith(str(tmp_path / "ckpt" / "_ingest") + "/")
        assert current_definition() is None
        spark.conf.unset(LAKEHOUSE_ROOT_CONF)  # neither: the caller must name one
        with pytest.raises(HeadwaterError, match="schema_location is missing"):
            schema_location()
    finally:
        for conf, value in previous.items():
            if value is None:
                spark.conf.unset(conf)
            else:
                spark.conf.set(conf, value)
