"""Declarative pipelines through the API on the shared session: graph, runs, expectations."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from tests.pipelines import HEADER, build, project, run
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.conf.project_file import Project
from headwater.delta.log import DeltaLog
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.validate import validate_project


def count(lake: Lakehouse, name: str) -> int:
    return lake.read(name).count() if lake.exists(name) else 0


ORDERS = """
@headwater.table(comment="raw")
def bronze():
    return headwater.read_stream("orders_in")

@headwater.table
@headwater.expect("has_country", "country IS NOT NULL")
@headwater.expect_or_drop("positive", "amount > 0")
def silver():
    return headwater.read_stream("bronze").withColumn("amount2", F.col("amount") * 2)

@headwater.materialized_view
def revenue():
    return headwater.read("silver").groupBy("country").agg(F.sum("amount").alias("revenue"))
"""


def orders(path: Path, ids: range) -> None:
    write(path, {"id": list(ids), "country": [None if i % 5 == 0 else "fr" if i % 2 else "de"
                                              for i in ids],
                 "amount": [-1.0 if i % 4 == 0 else float(i) for i in ids]})


def test_triggered_run_expectations_quarantine_and_incremental_rerun(spark, tmp_path):
    root = project(tmp_path, {"orders.py": ORDERS})
    orders(root / "lake" / "orders_in", range(1, 41))
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    assert count(lake, "bronze") == 40
    assert count(lake, "silver") + count(lake, "silver__quarantine") == 40
    quarantined = lake.read("silver__quarantine").collect()
    assert {r.id for r in quarantined} == {i for i in range(1, 41) if i % 4 == 0}
    assert all("positive" in r._failed_rules and r._batch_id == 0 for r in quarantined)
    assert results["silver"].expectations["positive_failed"] == 10
    assert results["silver"].expectations["has_country_failed"] == 8
    revenue = {r.country: r.revenue for r in lake.read("revenue").collect()}
    assert revenue["fr"] == sum(float(i) for i in range(1, 41) if i % 2 and i % 5 and i % 4)
    # the lakehouse tables are in Spark's catalog by name
    assert spark.sql("SELECT count(*) AS n FROM silver").collect()[0].n == count(lake, "silver")

    orders(root / "lake" / "orders_in", range(41, 61))
    lake, results = run(spark, root)
    assert count(lake, "bronze") == 60
    assert count(lake, "silver") + count(lake, "silver__quarantine") == 60
    assert results["bronze"].rows_written == 20  # only the new rows
    assert results["silver"].rows_written + results["silver"].quarantined == 20
    assert sum(r.revenue for r in lake.read("revenue").collect()) == pytest.approx(
        sum(float(i) for i in range(1, 61) if i % 4))  # null country is a group too


def test_quarantine_committed_after_the_table_only_when_a_batch_drops_rows(spark, tmp_path):
    root = project(tmp_path, {"orders.py": ORDERS})
    orders(root / "lake" / "orders_in", range(1, 9))  # 4 and 8 dropped
    lake, results = run(spark, root)
    assert (results["silver"].rows_written, results["silver"].quarantined) == (6, 2)
    quarantine = DeltaLog(lake.path("silver__quarantine"))
    silver = DeltaLog(lake.path("silver"))
    before = quarantine.latest_version(), silver.latest_version()

    orders(root / "lake" / "orders_in", range(9, 12))  # nothing to drop
    lake, results = run(spark, root)
    assert (results["silver"].rows_written, results["silver"].quarantined) == (3, 0)
    assert results["silver"].expectations["positive_failed"] == 0
    assert quarantine.latest_version() == before[0]  # no commit, no empty file
    assert silver.latest_version() > before[1]

    orders(root / "lake" / "orders_in", range(12, 14))  # 12 dropped
    lake, results = run(spark, root)
    assert (results["silver"].rows_written, results["silver"].quarantined) == (1, 1)
    assert sorted(r.id for r in lake.read("silver__quarantine").collect()) == [4, 8, 12]
    assert count(lake, "silver") == 10


def test_sql_definitions_append_flows_and_update_mode(spark, tmp_path):
    root = project(tmp_path, {
        "flows.py": """
            @headwater.table
            def events():
                return headwater.read_stream("east")

            @headwater.append_flow(target="events")
            def from_west():
                return headwater.read_stream("west")

            @headwater.table(output_mode="update")
            def per_kind():
                return headwater.read_stream("events").groupBy("kind").count()

            @headwater.view
            def small_events():
                return headwater.read_stream("events").where("n < 10")

            @headwater.table
            def small_copy():
                return headwater.read_stream("small_events")
        """,
        "gold.sql": """
            -- streaming SQL table with a constraint that drops rows
            CREATE STREAMING TABLE big_events (
              CONSTRAINT big EXPECT (n >= 10) ON VIOLATION DROP ROW
            ) COMMENT 'big ones'
            AS SELECT kind, n FROM STREAM(events);

            /* a stateless SQL table; the comment has "as" and a ; in it */
            CREATE STREAMING TABLE plain_copy COMMENT 'rows as they came; unchanged'
            AS SELECT * FROM STREAM(events);

            CREATE MATERIALIZED VIEW kinds AS
            SELECT kind, count(*) AS c FROM big_events GROUP BY kind;
        """,
    })
    write(root / "lake" / "east", {"kind": ["a", "b", "a"], "n": [1, 20, 30]})
    write(root / "lake" / "west", {"kind": ["b", "c"], "n": [40, 5]})
    lake, results = run(spark, root)
    assert {r.status for r in results.values()} == {"completed"}, results
    assert set(results) == {"events", "events/from_west", "per_kind", "big_events", "kinds",
                            "small_copy", "plain_copy"}
    assert count(lake, "plain_copy") == 5
    from deltalake import DeltaTable

    assert DeltaTable(lake.path("plain_copy")).metadata().description == \
        "rows as they came; unchanged"
    assert sorted(r.n for r in lake.read("small_copy").collect()) == [1, 5]
    assert not lake.exists("small_events")  # a view is not stored
    # stateless Delta-to-Delta flows read their micro-batches with Spark's parquet reader
    assert results["events"].kind == results["events/from_west"].kind == \
        "streaming table, native read"
    assert results["big_events"].kind == "streaming table"  # expectations: streaming plan
    assert count(lake, "events") == 5
    assert {r.kind: r["count"] for r in lake.read("per_kind").collect()} == {"a": 2, "b": 2, "c": 1}
    assert count(lake, "big_events") == 3 and count(lake, "big_events__quarantine") == 2
    assert {r.kind: r.c for r in lake.read("kinds").collect()} == {"a": 1, "b": 2}
    write(root / "lake" / "west", {"kind": ["a"], "n": [50]})
    lake, _ = run(spark, root)
    assert {r.kind: r["count"] for r in lake.read("per_kind").collect()} == {"a": 3, "b": 2, "c": 1}
    assert count(lake, "events") == 6
    assert count(lake, "plain_copy") == 6


def test_a_failing_flow_stops_itself_and_its_downstream_only(spark, tmp_path):
    root = project(tmp_path, {"p.py": """
        @headwater.table
        @headwater.expect_or_fail("small", "n < 100")
        def strict():
            return headwater.read_stream("src")

        @headwater.table
        def after_strict():
            return headwater.read_stream("strict")

        @headwater.table
        def relaxed():
            return headwater.read_stream("src")
    """})
    write(root / "lake" / "src", {"n": [1, 500, 3]})
    lake, results = run(spark, root)
    assert results["strict"].status == "failed"
    assert "HW_EXPECTATION_FAILED" in results["strict"].error and '"n":500' in results["strict"].error
    assert results["after_strict"].status == "skipped"
    assert results["relaxed"].status == "completed" and count(lake, "relaxed") == 3


def test_select_runs_part_of_the_graph(spark, tmp_path):
    root = project(tmp_path, {"orders.py": ORDERS})
    orders(root / "lake" / "orders_in", range(1, 11))
    lake, results = run(spark, root, select=["bronze"])
    assert set(results) == {"bronze"}
    assert count(lake, "bronze") == 10 and count(lake, "silver") == 0


def test_changed_output_mode_needs_a_full_refresh(spark, tmp_path):
    definition = """
        @headwater.table(output_mode="{mode}")
        def counts():
            return headwater.read_stream("src").groupBy("k").count()
    """
    root = project(tmp_path, {"p.py": definition.format(mode="complete")})
    write(root / "lake" / "src", {"k": ["a", "b", "a"]})
    lake, results = run(spark, root)
    assert results["counts"].status == "completed"
    (root / "defs" / "p.py").write_text(HEADER + textwrap.dedent(definition.format(mode="update")))
    lake, results = run(spark, root)
    assert results["counts"].status == "failed"
    assert "HW_CHECKPOINT_INCOMPATIBLE" in results["counts"].error
    assert "--full-refresh counts" in results["counts"].error


def test_graph_errors_point_at_the_users_file_and_line(spark, tmp_path):
    cases = {
        "HW_PIPELINE_CYCLE": """
            @headwater.table
            def a():
                return headwater.read_stream("b")

            @headwater.table
            def b():
                return headwater.read_stream("a")
        """,
        "HW_PIPELINE_UNKNOWN_TABLE": """
            @headwater.table
            def a():
                return headwater.read_stream("nowhere")
        """,
        "HW_PIPELINE_NOT_A_STREAM": """
            @headwater.table
            def a():
                return spark.range(3)
        """,
        "HW_PIPELINE_DUPLICATE": """
            @headwater.table
            def a():
                return spark.readStream.format("rate").load()

            @headwater.table(name="a")
            def a2():
                return spark.readStream.format("rate").load()
        """,
    }
    for code, text in cases.items():
        root = project(tmp_path / code, {"p.py": text})
        with pytest.raises(HeadwaterError) as info:
            build(spark, root, dry=True)
        assert info.value.code == code
        assert "p.py:" in str(info.value), str(info.value)
        assert not (root / "lake" / "a").exists()  # validation never writes the lakehouse


def test_validate_reports_unsupported_stream_operations_by_table(spark, tmp_path):
    root = project(tmp_path, {"p.py": """
        @headwater.table
        def sorted_rows():
            return spark.readStream.format("rate").load().orderBy("value")

        @headwater.table
        def deduped():
            return spark.readStream.format("rate").load().dropDuplicates(["value"])
    """})
    proj = Project.load(root)
    report = validate_project(load_definitions(proj), Lakehouse(proj.root, spark))
    assert len(report.errors) == 1 and "sorted_rows" in str(report.errors[0])
    assert any("deduped" in w for w in report.warnings)
    assert len(report.lines) == 2
