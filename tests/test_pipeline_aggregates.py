"""Streaming tables over an aggregation without a watermark (issue 25): DLT keeps the whole
aggregate up to date at each update, so headwater runs such a flow in complete mode; real
pipelines on the shared session, tables read back with deltalake."""

from __future__ import annotations

import pytest
from tests.pipelines import build, project, run, table_rows
from tests.support import write

from headwater import HeadwaterError
from headwater.conf.project_file import Project
from headwater.lakehouse import Lakehouse
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.run import run_project
from headwater.pipeline.validate import validate_project

PER_KIND = """
@headwater.table
@headwater.expect_or_drop("known_kind", "kind IS NOT NULL")
@headwater.expect("small", "total < 100")
def per_kind():
    # one file per micro-batch: a run has several batches, each the whole aggregate
    return (headwater.read_stream("src", maxFilesPerTrigger=1).groupBy("kind")
            .agg(F.count("*").alias("n"), F.sum("amount").alias("total")))

@headwater.table
def copied():
    return headwater.read_stream("src")
"""


def test_an_aggregate_without_watermark_keeps_the_whole_aggregate_across_runs(spark, tmp_path):
    root = project(tmp_path, {"p.py": PER_KIND})
    src = root / "lake" / "src"
    write(src, {"kind": ["a", "b", None], "amount": [1, 2, 3]})
    write(src, {"kind": ["a", None], "amount": [10, 4]})
    lines: list[str] = []
    outcome = run_project(root, echo=lines.append)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    graph = build(spark, root, dry=True)
    assert graph.flows["per_kind"].output_mode == "complete"
    assert graph.flows["copied"].output_mode == "append"  # only aggregates change mode
    graph.close()
    assert any("started   per_kind (complete: an aggregation without watermark" in x
               for x in lines), lines
    lake = root / "lake"
    columns = ("kind", "n", "total")
    assert table_rows(lake / "per_kind", columns) == [("a", 2, 11), ("b", 1, 2)]
    # the quarantine holds the rejected group as it is now, not one copy per batch
    assert table_rows(lake / "per_kind__quarantine", columns) == [(None, 2, 7)]
    result = {r.key: r for r in outcome.results}["per_kind"]
    assert result.batches == 2
    assert result.rows_written == 2 and result.quarantined == 1  # the table now, not a sum
    assert result.expectations["known_kind_failed"] == 1
    assert result.expectations["rows"] == 3

    # a second run: only the new file is read, the groups come from the checkpoint's state
    write(src, {"kind": ["b", "c", "a"], "amount": [5, 6, 100]})
    outcome = run_project(root, echo=lines.append)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert table_rows(lake / "per_kind", columns) == [("a", 3, 111), ("b", 2, 7), ("c", 1, 6)]
    assert table_rows(lake / "per_kind__quarantine", columns) == [(None, 2, 7)]
    result = {r.key: r for r in outcome.results}["per_kind"]
    assert result.batches == 1 and result.rows_written == 3
    assert result.expectations["small_failed"] == 1  # a warning: the row is kept
    assert len(table_rows(lake / "copied", ("kind",))) == 8

    # a full refresh rebuilds the aggregate from every input row
    outcome = run_project(root, full_refresh=["per_kind"], echo=lines.append)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert table_rows(lake / "per_kind", columns) == [("a", 3, 111), ("b", 2, 7), ("c", 1, 6)]
    assert table_rows(lake / "per_kind__quarantine", columns) == [(None, 2, 7)]
    assert {r.key: r for r in outcome.results}["per_kind"].batches == 3


def test_sql_streaming_table_over_an_unwatermarked_aggregate(spark, tmp_path):
    root = project(tmp_path, {"gold.sql": """
        CREATE STREAMING TABLE kinds
        AS SELECT kind, count(*) AS n FROM STREAM(src) GROUP BY kind;
    """}, globs=("defs/*.sql",))
    write(root / "lake" / "src", {"kind": ["a", "b", "a"]})
    lake, results = run(spark, root)
    assert results["kinds"].status == "completed", results["kinds"].error
    assert table_rows(root / "lake" / "kinds", ("kind", "n")) == [("a", 2), ("b", 1)]
    write(root / "lake" / "src", {"kind": ["b"]})
    lake, results = run(spark, root)
    assert table_rows(root / "lake" / "kinds", ("kind", "n")) == [("a", 2), ("b", 2)]


def test_validate_checks_such_a_flow_in_complete_mode(spark, tmp_path):
    root = project(tmp_path, {"p.py": """
        @headwater.table
        def counts():
            return headwater.read_stream("src").groupBy("kind").count()

        @headwater.table
        def windowed():
            return (headwater.read_stream("src").withColumn("ts", F.col("ts").cast("timestamp"))
                    .withWatermark("ts", "1 minute")
                    .groupBy(F.window("ts", "5 minutes")).count())
    """})
    write(root / "lake" / "src", {"kind": ["a"], "ts": ["2024-01-01 10:00:00"]})
    proj = Project.load(root)
    report = validate_project(load_definitions(proj), Lakehouse(proj.root, spark))
    assert report.errors == []
    assert any("counts: complete mode keeps one state row per group" in w
               for w in report.warnings), report.warnings
    graph = build(spark, root, dry=True)
    # a watermark closing its windows: Spark appends it, so it stays in append mode
    assert graph.flows["windowed"].output_mode == "append"
    assert graph.flows["counts"].output_mode == "complete"
    graph.close()


def test_a_declared_output_mode_is_kept(spark, tmp_path):
    root = project(tmp_path, {"p.py": """
        @headwater.table(output_mode="append")
        def counts():
            return headwater.read_stream("src").groupBy("kind").count()
    """})
    write(root / "lake" / "src", {"kind": ["a"]})
    lake, results = run(spark, root)
    assert results["counts"].status == "failed"
    assert "streaming aggregations without watermark" in results["counts"].error


def test_a_table_rewritten_whole_cannot_share_itself_with_another_flow(spark, tmp_path):
    root = project(tmp_path, {"p.py": """
        @headwater.table
        def counts():
            return headwater.read_stream("east").groupBy("kind").count()

        @headwater.append_flow(target="counts")
        def from_west():
            return headwater.read_stream("west").groupBy("kind").count()
    """})
    write(root / "lake" / "east", {"kind": ["a"]})
    write(root / "lake" / "west", {"kind": ["b"]})
    with pytest.raises(HeadwaterError) as refused:
        build(spark, root, dry=True)
    error = refused.value
    assert error.code == "HW_PIPELINE_COMPLETE_FLOW_SHARED"
    assert "p.py:" in str(error) and "from_west" in str(error)
    assert "stateful-processing" in str(error)  # Databricks' page, named
    assert not (root / "lake" / "counts").exists()


def test_one_append_flow_alone_may_rewrite_its_table(spark, tmp_path):
    """create_streaming_table + a single append flow aggregating: the flow is the table's
    only writer, so it may keep the whole aggregate; a second flow is refused, also when the
    table declares complete mode itself."""
    alone = project(tmp_path / "alone", {"p.py": """
        headwater.create_streaming_table("counts")

        @headwater.append_flow(target="counts")
        def from_east():
            return headwater.read_stream("east").groupBy("kind").count()
    """})
    write(alone / "lake" / "east", {"kind": ["a"]})
    graph = build(spark, alone, dry=True)
    assert graph.flows["counts/from_east"].output_mode == "complete"
    graph.close()

    declared = project(tmp_path / "declared", {"p.py": """
        headwater.create_streaming_table("counts", output_mode="complete")

        @headwater.append_flow(target="counts")
        def from_east():
            return headwater.read_stream("east").groupBy("kind").count()

        @headwater.append_flow(target="counts")
        def from_west():
            return headwater.read_stream("east").groupBy("kind").count()
    """})
    write(declared / "lake" / "east", {"kind": ["a"]})
    with pytest.raises(HeadwaterError) as refused:
        build(spark, declared, dry=True)
    assert refused.value.code == "HW_PIPELINE_COMPLETE_FLOW_SHARED"
    assert "Complete mode replaces the table" in str(refused.value)
