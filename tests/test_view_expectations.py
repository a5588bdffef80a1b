"""Expectations on temporary views, with DLT's semantics: checked where the view is read, in
each flow reading it; warn keeps and counts, drop removes and counts, fail stops the reading
flow naming the rule and the row. Real pipelines on the shared session, two incremental runs,
the counts read back from the event log (deltalake) and the dashboard's state."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from tests.pipelines import project, run
from tests.support import write

from headwater.monitor.state import DashboardState

# @dlt.view with expectations above and below it, read by two streaming tables (one through
# dlt.read_stream, one through spark.readStream.table) and by a materialized view (SQL).
DLT_VIEW = """
import headwater.dlt as dlt

@dlt.table
def bronze():
    return headwater.read_stream("orders_in")

@dlt.expect("has_country", "country IS NOT NULL")
@dlt.view
@dlt.expect_or_drop("positive", "amount > 0")
@dlt.expect_or_fail("small", "amount < 1000")
def checked():
    return dlt.read_stream("bronze")

@dlt.table
def silver():
    return dlt.read_stream("checked")

@dlt.table(temporary=True)
@dlt.expect_or_drop("not_seven", "id % 7 != 0")
def silver_copy():
    return spark.readStream.table("checked")

@dlt.view
@dlt.expect_all_or_drop({"has_id": "id IS NOT NULL"})
def batch_checked():
    return dlt.read("bronze")
"""
TOTALS_SQL = """
CREATE MATERIALIZED VIEW totals AS
SELECT country, count(*) AS orders, sum(amount) AS amount FROM batch_checked GROUP BY country;
"""


def orders(path: Path, ids: range, big: int | None = None) -> None:
    write(path, {"id": list(ids), "country": [None if i % 5 == 0 else "fr" for i in ids],
                 "amount": [5000.0 if i == big else -1.0 if i % 4 == 0 else float(i)
                            for i in ids]})


def events(root: Path) -> list[dict]:
    rows = DeltaTable(str(root / "_event_log")).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda e: e["ts"])


def view_counts(rows: list[dict], flow: str, run_id: str) -> dict[str, dict[str, int]]:
    """The view rules' counts the event log holds for ``flow``'s batches of one run."""
    totals: dict[str, dict[str, int]] = {}
    for e in rows:
        if e["event"] != "progress" or e["flow"] != flow or e["run_id"] != run_id:
            continue
        for key, c in json.loads(e["expectations"] or "{}").items():
            if c.get("dataset") == "checked":
                entry = totals.setdefault(c["rule"], {"passed": 0, "failed": 0})
                entry["passed"] += c["passed"]
                entry["failed"] += c["failed"]
                assert key == f"checked.{c['rule']}"
    return totals


def test_view_expectations_warn_drop_and_fail_where_the_view_is_read(spark, keep_lakehouse,
                                                                     tmp_path):
    root = project(tmp_path, {"orders.py": DLT_VIEW, "totals.sql": TOTALS_SQL})
    lake_root = root / "lake"
    orders(lake_root / "orders_in", range(1, 41))
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    kept = [i for i in range(1, 41) if i % 4]
    assert sorted(r.id for r in lake.read("silver").collect()) == kept
    # the view has no quarantine: dropped rows are counted, never stored
    assert not lake.exists("checked__quarantine") and not lake.exists("silver__quarantine")
    # counted once per flow reading the view: both readers saw all 40 rows
    for flow in ("silver", "silver_copy"):
        counts = results[flow].expectations
        assert counts["checked.positive_failed"] == 10, counts
        assert counts["checked.has_country_failed"] == 8
        assert counts["checked.small_failed"] == 0
        assert counts["checked.rows"] == 40 and counts["checked.dropped"] == 10
    # the temporary table's own rule counts after the view's drop, under its own name
    assert results["silver_copy"].expectations["not_seven_failed"] == \
        len([i for i in kept if i % 7 == 0])
    assert sorted(r.id for r in lake.read("silver_copy").collect()) == \
        [i for i in kept if i % 7]
    # a materialized view reading a view: the view's rows checked in its refresh
    totals = {r.country: r.orders for r in lake.read("totals").collect()}
    assert sum(totals.values()) == 40
    assert results["totals"].expectations["batch_checked.has_id_failed"] == 0
    assert results["totals"].expectations["batch_checked.rows"] == 40

    logged = events(lake_root)
    first_run = logged[0]["run_id"]
    for flow in ("silver", "silver_copy"):
        assert view_counts(logged, flow, first_run) == {
            "positive": {"passed": 30, "failed": 10}, "has_country": {"passed": 32, "failed": 8},
            "small": {"passed": 40, "failed": 0}}
    completed = [e for e in logged if e["event"] == "flow_status" and e["flow"] == "silver"
                 and e["status"] == "completed"]
    assert "expectations failed: checked.has_country=8, checked.positive=10" in \
        completed[-1]["message"]
    refreshed = [json.loads(e["details"]) for e in logged if e["event"] == "flow_status"
                 and e["flow"] == "totals" and e["status"] == "completed"]
    assert refreshed[-1]["expectations"]["expectations:batch_checked"]["rows"] == 40

    # second run: only the new rows are read and counted
    orders(lake_root / "orders_in", range(41, 61))
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    assert sorted(r.id for r in lake.read("silver").collect()) == \
        [i for i in range(1, 61) if i % 4]
    assert results["silver"].expectations["checked.positive_failed"] == 5
    assert results["silver"].expectations["checked.rows"] == 20
    logged = events(lake_root)
    second_run = logged[-1]["run_id"]
    assert second_run != first_run
    assert view_counts(logged, "silver", second_run)["positive"] == {"passed": 15, "failed": 5}

    # the dashboard shows the view's rules under the view's name, summed over its readers
    state = DashboardState(lake_root).snapshot()
    assert state["expectations"]["checked"]["positive"] == {"passed": 90, "failed": 30}
    assert state["expectations"]["silver_copy"]["not_seven"]["failed"] > 0
    assert state["expectations"]["batch_checked"]["has_id"] == {"passed": 100, "failed": 0}

    # third run: a row failing the view's fail rule stops each reading flow, naming rule and row
    orders(lake_root / "orders_in", range(61, 64), big=62)
    before = lake.read("silver").count()
    lake, results = run(spark, root)
    for flow in ("silver", "silver_copy"):
        assert results[flow].status == "failed"
        error = results[flow].error or ""
        assert error.startswith("[HW_EXPECTATION_FAILED] View 'checked': expectation 'small'")
        assert '"id":62' in error and '"amount":5000.0' in error, error
    assert results["bronze"].ok
    assert lake.read("silver").count() == before  # nothing of the failing batch was written


CONSTRAINED_VIEW = """
CREATE STREAMING TABLE bronze AS SELECT * FROM STREAM(orders_in);

CREATE TEMPORARY VIEW checked (
  CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW,
  CONSTRAINT has_country EXPECT (country IS NOT NULL),
  CONSTRAINT small EXPECT (amount < 1000) ON VIOLATION FAIL UPDATE
) AS SELECT * FROM STREAM(bronze);

CREATE STREAMING TABLE silver AS SELECT id, amount FROM STREAM(checked);
"""


# SDP's temporary view, headwater's expectation decorator next to the def (SDP's decorators
# return None, so expectations go below them)
SDP_VIEW = """
from pyspark import pipelines as dp

@dp.temporary_view
@headwater.expect_or_drop("even", "id % 2 = 0")
def evens():
    return spark.readStream.table("bronze")

@dp.table
def even_rows():
    return spark.readStream.table("evens")
"""


def test_sql_and_sdp_temporary_view_expectations(spark, keep_lakehouse, tmp_path):
    root = project(tmp_path, {"orders.sql": CONSTRAINED_VIEW, "evens.py": SDP_VIEW})
    orders(root / "lake" / "orders_in", range(1, 21))
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    assert sorted(r.id for r in lake.read("silver").collect()) == [i for i in range(1, 21) if i % 4]
    counts = results["silver"].expectations
    assert (counts["checked.positive_failed"], counts["checked.has_country_failed"]) == (5, 4)
    assert sorted(r.id for r in lake.read("even_rows").collect()) == list(range(2, 21, 2))
    assert results["even_rows"].expectations["evens.even_failed"] == 10

    orders(root / "lake" / "orders_in", range(21, 24), big=23)
    lake, results = run(spark, root)
    assert results["silver"].status == "failed"
    assert "expectation 'small'" in results["silver"].error and '"id":23' in results["silver"].error
    assert lake.read("silver").count() == 15
