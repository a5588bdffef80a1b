"""AUTO CDC FROM SNAPSHOT (apply_changes_from_snapshot / create_auto_cdc_from_snapshot_flow /
SQL ``FROM SNAPSHOT``): real pipelines on the shared session, two incremental runs each; the
targets read back with deltalake. Sources: a function of the last version (as Databricks'
snapshot demo's pattern 2, hourly folders with string versions), a table read each run (pattern
1's shape), a SQL table and query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.pipelines import build, project, run, table_rows
from tests.support import write

from headwater import HeadwaterError
from headwater.conf.layout import SNAPSHOT_STATE
from headwater.monitor.state import DashboardState

COLUMNS = ("order_id", "status", "amount")
HISTORY = (*COLUMNS, "__START_AT", "__END_AT")

# The function gets the last version applied (None the first time) and returns the next
# hour's folder, or None when it is not there yet, as the published pattern-2 notebook does.
FUNCTION_SOURCE = """
import os
from datetime import datetime, timedelta
import headwater.dlt as dlt

ROOT = {root!r}
asked = []

def next_snapshot_and_version(latest):
    asked.append(latest)
    hour = "2024-01-01 00" if latest is None else (
        datetime.strptime(latest, "%Y-%m-%d %H") + timedelta(hours=1)).strftime("%Y-%m-%d %H")
    path = os.path.join(ROOT, hour)
    if not os.path.isdir(path):
        return None
    return spark.read.schema("order_id INT, status STRING, amount DOUBLE").json(path), hour

dlt.create_streaming_table("orders", comment="merged from hourly snapshots")
dlt.apply_changes_from_snapshot(target="orders", snapshot_and_version=next_snapshot_and_version,
                                keys=["order_id"], stored_as_scd_type=2,
                                track_history_column_list=["status"])

dlt.create_streaming_table("orders_latest")
dlt.create_auto_cdc_from_snapshot_flow(target="orders_latest", source=next_snapshot_and_version,
                                       keys=["order_id"], stored_as_scd_type=1)

@dlt.table
def status_counts():
    return (dlt.read("LIVE.orders").where("__END_AT IS NULL").groupBy("status").count())
"""


def hour(root: Path, name: str, rows: list[tuple]) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "part-0.json").write_text("\n".join(
        json.dumps(dict(zip(COLUMNS, r))) for r in rows) + "\n")


def test_snapshots_from_a_function_scd2_and_scd1_continue_from_the_saved_version(
        spark, keep_lakehouse, tmp_path):
    snapshots = tmp_path / "snapshots"
    hour(snapshots, "2024-01-01 00", [(1, "NEW", 10.0), (2, "NEW", 20.0)])
    hour(snapshots, "2024-01-01 01", [(1, "SHIPPED", 10.0), (2, "NEW", 25.0), (3, "NEW", 30.0)])
    root = project(tmp_path, {"orders.py": FUNCTION_SOURCE.format(root=str(snapshots))})
    lake_root = root / "lake"
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    assert results["orders"].batches == 2 and results["orders_latest"].batches == 2
    h0, h1, h2 = "2024-01-01 00", "2024-01-01 01", "2024-01-01 02"
    # SCD2: order 1's status change closes its row and opens one at the snapshot's version;
    # order 2's amount changed outside track_history_column_list: updated in place
    assert table_rows(lake_root / "orders", HISTORY) == [
        (1, "NEW", 10.0, h0, h1), (1, "SHIPPED", 10.0, h1, None), (2, "NEW", 25.0, h0, None),
        (3, "NEW", 30.0, h1, None)]
    assert table_rows(lake_root / "orders_latest", COLUMNS) == [
        (1, "SHIPPED", 10.0), (2, "NEW", 25.0), (3, "NEW", 30.0)]
    types = {f.name: f.type.type for f in DeltaTable(str(lake_root / "orders")).schema().fields}
    assert types["__START_AT"] == types["__END_AT"] == "string"  # the versions' type
    saved = json.loads((lake_root / "_checkpoints" / "orders" / "orders" / SNAPSHOT_STATE)
                       .read_text())
    assert saved == {"version": {"type": "string", "value": h1}, "count": 2}
    assert sorted((r.status, r["count"]) for r in lake.read("status_counts").collect()) == [
        ("NEW", 2), ("SHIPPED", 1)]

    # a run with no new snapshot changes nothing
    before = DeltaTable(str(lake_root / "orders")).version()
    lake, results = run(spark, root)
    assert results["orders"].ok and results["orders"].batches == 0
    assert DeltaTable(str(lake_root / "orders")).version() == before

    # the next run continues after the saved version: order 1 is gone (its row closed; SCD1:
    # deleted), order 2's status changed, order 4 is new
    hour(snapshots, h2, [(2, "SHIPPED", 25.0), (3, "NEW", 30.0), (4, "NEW", 40.0)])
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    assert results["orders"].batches == 1
    assert table_rows(lake_root / "orders", HISTORY) == [
        (1, "NEW", 10.0, h0, h1), (1, "SHIPPED", 10.0, h1, h2), (2, "NEW", 25.0, h0, h2),
        (2, "SHIPPED", 25.0, h2, None), (3, "NEW", 30.0, h1, None), (4, "NEW", 40.0, h2, None)]
    assert table_rows(lake_root / "orders_latest", COLUMNS) == [
        (2, "SHIPPED", 25.0), (3, "NEW", 30.0), (4, "NEW", 40.0)]
    assert results["orders_latest"].cdc == {"upserted": 2, "deleted": 1, "history_rows": 0}
    assert sorted((r.status, r["count"]) for r in lake.read("status_counts").collect()) == [
        ("NEW", 2), ("SHIPPED", 1)]

    # the saved progress lost (as after a crash between a commit and the save): every snapshot
    # is offered again from the start, each found committed by its txn, nothing written twice
    for target in ("orders", "orders_latest"):
        (lake_root / "_checkpoints" / target / target / SNAPSHOT_STATE).unlink()
    versions = {t: DeltaTable(str(lake_root / t)).version() for t in ("orders", "orders_latest")}
    lake, results = run(spark, root)
    assert results["orders"].ok and results["orders"].batches == 3
    assert results["orders"].rows_written == 0  # replays: applied before
    assert {t: DeltaTable(str(lake_root / t)).version() for t in versions} == versions
    assert len(table_rows(lake_root / "orders", HISTORY)) == 6


# Pattern 1's shape: the source is a table; each run takes its current rows as a snapshot,
# versioned by the run's time. The same flows in SQL, from a table and from a query.
TABLE_SOURCE = """
from pyspark import pipelines as dp

dp.create_streaming_table("customers")
dp.create_auto_cdc_from_snapshot_flow(target="customers", source="customers_snapshot",
                                      keys=["id"], stored_as_scd_type=1)
dp.create_streaming_table("customers_history")
dp.create_auto_cdc_from_snapshot_flow(target="customers_history", source="customers_snapshot",
                                      keys=["id"], stored_as_scd_type=2)
"""
# the published pattern-1 notebook's call: one (DataFrame, version) pair, a new version per run
PAIR_SOURCE = """
import time
import headwater.dlt as dlt

dlt.create_streaming_table(name="customers_pair")
dlt.apply_changes_from_snapshot(
    target="customers_pair",
    snapshot_and_version=(spark.read.table("customers_snapshot"), time.time_ns()),
    keys=["id"], stored_as_scd_type=1)
"""
SQL_SOURCE = """
CREATE STREAMING TABLE customers_sql;
CREATE FLOW customers_sql_flow AS AUTO CDC INTO customers_sql
  FROM SNAPSHOT customers_snapshot
  KEYS (id)
  STORED AS SCD TYPE 2
  TRACK HISTORY ON (city);

CREATE STREAMING TABLE vip;
CREATE FLOW vip AS AUTO CDC INTO vip
  FROM SNAPSHOT (SELECT id, name FROM customers_snapshot WHERE city = 'Paris')
  KEYS (id);
"""


def customers(lake_root: Path, rows: list[tuple]) -> None:
    write(lake_root / "customers_snapshot", {"id": [r[0] for r in rows],
                                             "name": [r[1] for r in rows],
                                             "city": [r[2] for r in rows]}, mode="overwrite")


def test_snapshots_of_a_table_each_run_python_and_sql(spark, keep_lakehouse, tmp_path):
    root = project(tmp_path, {"customers.py": TABLE_SOURCE, "pair.py": PAIR_SOURCE,
                              "customers.sql": SQL_SOURCE})
    lake_root = root / "lake"
    customers(lake_root, [(1, "Ann", "Paris"), (2, "Bob", "Oslo"), (3, "Cid", "Paris")])
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    assert table_rows(lake_root / "customers", ("id", "name", "city")) == [
        (1, "Ann", "Paris"), (2, "Bob", "Oslo"), (3, "Cid", "Paris")]
    first = table_rows(lake_root / "customers_history", ("id", "__START_AT", "__END_AT"))
    t1 = first[0][1]
    assert {r[1] for r in first} == {t1} and {r[2] for r in first} == {None}
    assert table_rows(lake_root / "vip", ("id", "name")) == [(1, "Ann"), (3, "Cid")]
    assert table_rows(lake_root / "customers_pair", ("id", "name", "city")) == \
        table_rows(lake_root / "customers", ("id", "name", "city"))

    # second run: Bob moved, Cid is gone, Dee is new; Ann renamed (SQL tracks only city)
    customers(lake_root, [(1, "Anne", "Paris"), (2, "Bob", "Rome"), (4, "Dee", "Paris")])
    lake, results = run(spark, root)
    assert all(r.ok for r in results.values()), results
    assert table_rows(lake_root / "customers", ("id", "name", "city")) == [
        (1, "Anne", "Paris"), (2, "Bob", "Rome"), (4, "Dee", "Paris")]
    assert results["customers"].cdc == {"upserted": 3, "deleted": 1, "history_rows": 0}
    history = table_rows(lake_root / "customers_history",
                         ("id", "name", "city", "__START_AT", "__END_AT"))
    t2 = next(r[3] for r in history if r[0] == 4)
    assert t2 > t1
    assert history == [(1, "Ann", "Paris", t1, t2), (1, "Anne", "Paris", t2, None),
                       (2, "Bob", "Oslo", t1, t2), (2, "Bob", "Rome", t2, None),
                       (3, "Cid", "Paris", t1, t2), (4, "Dee", "Paris", t2, None)]
    sql_history = table_rows(lake_root / "customers_sql", ("id", "name", "city", "__END_AT"))
    assert sql_history == [(1, "Anne", "Paris", None),  # a name change: updated in place
                           (2, "Bob", "Oslo", sql_history[1][3]), (2, "Bob", "Rome", None),
                           (3, "Cid", "Paris", sql_history[3][3]), (4, "Dee", "Paris", None)]
    assert sql_history[1][3] is not None and sql_history[3][3] is not None
    assert table_rows(lake_root / "vip", ("id", "name")) == [(1, "Anne"), (4, "Dee")]
    assert table_rows(lake_root / "customers_pair", ("id", "name", "city")) == \
        table_rows(lake_root / "customers", ("id", "name", "city"))
    assert results["customers_pair"].cdc == results["customers"].cdc
    # the event log says what each snapshot did
    events = sorted(DeltaTable(str(lake_root / "_event_log")).to_pyarrow_table().to_pylist(),
                    key=lambda e: e["ts"])
    done = [json.loads(e["details"]) for e in events if e["event"] == "flow_status"
            and e["flow"] == "customers" and e["status"] == "completed"]
    assert done[-1]["cdc"] == {"upserted": 3, "deleted": 1, "history_rows": 0}
    assert len(done[-1]["snapshots"]) == 1
    # the dashboard sums both runs' snapshots for the flow
    flows = {f["flow"]: f for f in DashboardState(lake_root).snapshot()["flows"]}
    assert flows["customers"]["cdc"] == {"upserted": 6, "deleted": 1, "history_rows": 0}


def test_snapshot_mistakes_are_named(spark, keep_lakehouse, tmp_path):
    duplicate = """
import headwater.dlt as dlt
dlt.create_streaming_table("t")
dlt.create_auto_cdc_from_snapshot_flow(
    target="t", source=lambda v: None if v else (spark.range(3).selectExpr("id % 2 AS k"), 1),
    keys=["k"])
"""
    root = project(tmp_path / "dup", {"p.py": duplicate})
    _, results = run(spark, root)
    assert results["t"].status == "failed"
    assert results["t"].error.startswith("[HW_CDC_SNAPSHOT_DUPLICATE_KEY] "
                                         "[APPLY_CHANGES_FROM_SNAPSHOT_ERROR.DUPLICATE_KEY_VIOLATION]")

    backwards = """
import headwater.dlt as dlt
dlt.create_streaming_table("t")
dlt.create_auto_cdc_from_snapshot_flow(
    target="t", source=lambda v: None if v == 1 else (spark.range(1), 2 if v is None else 1),
    keys=["id"])
"""
    _, results = run(spark, project(tmp_path / "back", {"p.py": backwards}))
    assert "[HW_CDC_SNAPSHOT_VERSION_ORDER]" in results["t"].error and "version 1 after " \
        "version 2" in results["t"].error

    cases = {
        "first_empty": ("dlt.create_auto_cdc_from_snapshot_flow(target='t', source=lambda v: "
                        "None, keys=['id'])", "HW_CDC_SNAPSHOT_FIRST_EMPTY"),
        "bad_return": ("dlt.create_auto_cdc_from_snapshot_flow(target='t', source=lambda v: "
                       "spark.range(1), keys=['id'])", "HW_CDC_SNAPSHOT_INVALID"),
        "bad_version": ("dlt.create_auto_cdc_from_snapshot_flow(target='t', source=lambda v: "
                        "(spark.range(1), [1]), keys=['id'])", "HW_CDC_SNAPSHOT_INVALID"),
        "two_flows": ("dlt.create_auto_cdc_from_snapshot_flow(target='t', source='src', "
                      "keys=['id'])\n@dlt.append_flow(target='t')\ndef more():\n"
                      "    return spark.readStream.table('src')", "HW_CDC_INVALID"),
    }
    for name, (code, expected) in cases.items():
        files = {"p.py": f"import headwater.dlt as dlt\ndlt.create_streaming_table('t')\n{code}\n"}
        proj = project(tmp_path / name, files)
        write(proj / "lake" / "src", {"id": [1]})
        with pytest.raises(HeadwaterError) as info:
            build(spark, proj, dry=True)
        assert info.value.code == expected, (name, info.value)
        assert "p.py" in str(info.value), name

    with_version = """
CREATE STREAMING TABLE t;
CREATE FLOW f AS AUTO CDC INTO t FROM SNAPSHOT (SELECT * FROM src)
  WITH VERSION (SELECT max(v) AS version FROM src) KEYS (id);
"""
    proj = project(tmp_path / "sql", {"p.sql": with_version}, globs=("defs/*.sql",))
    with pytest.raises(HeadwaterError) as info:
        build(spark, proj, dry=True)
    assert info.value.code == "HW_PIPELINE_UNSUPPORTED" and "p.sql:4" in str(info.value)
