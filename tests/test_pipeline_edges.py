"""Pipeline edges come from each definition's analyzed plan: spark.readStream.table,
spark.table, SQL text, temporary views and delta paths give the same graph, waves, cascade
and skip behaviour as headwater.read*, and such flows still take the native path."""

from __future__ import annotations

from pathlib import Path

from tests import pipelines
from tests.support import write

from headwater.conf.triggers import trigger_kwargs
from headwater.pipeline.graph import Graph
from headwater.pipeline.run import Runner


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    """SQL files load first here: a SQL definition may name a Python one declared later."""
    return pipelines.project(tmp_path, files, globs=("defs/*.sql", "defs/*.py"))


# The same medallion, written two ways.
HEADWATER_STYLE = """
@headwater.table
@headwater.expect_or_fail("small", "n < {limit}")
def bronze():
    return headwater.read_stream("src")

@headwater.view
def recent():
    return headwater.read_stream("bronze").where("n > 0")

@headwater.table
def silver():
    return headwater.read_stream("bronze").withColumn("n2", F.col("n") * 2)

@headwater.table
def from_view():
    return headwater.read_stream("recent")

@headwater.materialized_view
def gold():
    return headwater.read("silver").groupBy().agg(F.sum("n2").alias("total"))

@headwater.materialized_view
def platinum():
    return headwater.read("gold").select("total")
"""

SPARK_STYLE = """
@headwater.table
@headwater.expect_or_fail("small", "n < {limit}")
def bronze():
    return spark.readStream.table("src")

@headwater.view
def recent():
    return spark.readStream.table("bronze").where("n > 0")

@headwater.table
def silver():
    return spark.readStream.table("bronze").withColumn("n2", F.col("n") * 2)

@headwater.table
def from_view():
    return spark.readStream.table("recent")

@headwater.materialized_view
def platinum():
    return spark.read.format("delta").load("{gold_path}").select("total")
"""

SPARK_STYLE_SQL = """
CREATE MATERIALIZED VIEW gold AS SELECT sum(n2) AS total FROM silver;
"""


def _projects(tmp_path: Path, limit: int = 1000) -> tuple[Path, Path]:
    hw = project(tmp_path / "hw", {"p.py": HEADWATER_STYLE.format(limit=limit)})
    gold_path = tmp_path / "sp" / "proj" / "lake" / "gold"
    sp = project(tmp_path / "sp", {"p.py": SPARK_STYLE.format(limit=limit, gold_path=gold_path),
                                   "gold.sql": SPARK_STYLE_SQL})
    for root in (hw, sp):
        write(root / "lake" / "src", {"n": [1, 2, 3, 4]})
    return hw, sp


def _shape(graph: Graph) -> dict:
    runner = Runner(graph, trigger_kwargs("available-now"), False, echo=lambda _: None)
    names = sorted(graph.registry.datasets)
    return {"upstream": {n: sorted(graph.upstream(n)) for n in names},
            "downstream": {n: sorted(graph.downstream(n)) for n in names},
            "streamed_by": {n: sorted(graph.downstream(n, streams_only=True)) for n in names},
            "waves": runner._depths()}


def test_spark_reads_sql_views_and_paths_give_the_same_graph(spark, tmp_path):
    hw, sp = _projects(tmp_path)
    graphs = []
    for root in (hw, sp):
        graphs.append(pipelines.build(spark, root))
    expected, got = _shape(graphs[0]), _shape(graphs[1])
    assert expected["waves"] == {"bronze": 0, "silver": 1, "from_view": 1, "gold": 2,
                                 "platinum": 3}
    assert got == expected
    order = graphs[1].stored()  # inputs first (any topological order)
    assert all(order.index(up) < order.index(name) for name in order
               for up in graphs[1].upstream(name) if up in order)
    # full refresh of bronze cascades to everything that reads it
    assert got["downstream"]["bronze"] == ["from_view", "gold", "platinum", "recent", "silver"]
    # a full refresh of bronze resets only what streams it (through the view too): the
    # materialized views keep no offsets
    assert got["streamed_by"]["bronze"] == ["from_view", "recent", "silver"]
    assert got["streamed_by"]["silver"] == []
    reads = {r.name: r for r in graphs[1].flows["silver"].reads}
    assert reads["bronze"].streaming and reads["bronze"].internal
    assert {r.name for r in graphs[1].flows["bronze"].reads} == {"src"}  # an existing table
    assert not reads["bronze"].options


def test_spark_style_pipeline_runs_in_waves_natively_and_skips_after_a_failure(spark, tmp_path):
    _, sp = _projects(tmp_path)
    graph = pipelines.build(spark, sp)
    lake = graph.lakehouse
    results = {r.key: r for r in Runner(graph, trigger_kwargs("available-now"), False,
                                        echo=lambda _: None).run()}
    assert {r.status for r in results.values()} == {"completed"}, results
    # silver ran after bronze ended (a later wave): it saw every row of this run
    assert lake.read("silver").count() == 4
    assert lake.read("platinum").collect()[0].total == 20
    # spark.readStream.table("bronze") is eligible for Spark's parquet reader
    assert results["silver"].kind == "streaming table, native read"
    assert sorted(r.n2 for r in lake.read("silver").collect()) == [2, 4, 6, 8]

    _, failing = _projects(tmp_path / "again", limit=3)
    graph = pipelines.build(spark, failing)
    results = {r.key: r for r in Runner(graph, trigger_kwargs("available-now"), False,
                                        echo=lambda _: None).run()}
    assert results["bronze"].status == "failed"
    assert {results[k].status for k in ("silver", "from_view", "gold", "platinum")} == \
        {"skipped"}
