"""Stream-static joins inside a pipeline: a streaming table that joins its stream with a batch
read of another dataset of the same pipeline, as Databricks' pipelines allow
(https://docs.databricks.com/transform/join.html: new stream rows are joined with the current
version of the static table). A triggered run starts the joining flow once the static side's
dataset is done; a continuous run's micro-batches each read the static table's latest version.
A loop of reads (a batch read included) is a cycle."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.pipelines import build, project, run

from headwater.conf.triggers import trigger_kwargs
from headwater.errors import HeadwaterError
from headwater.pipeline.run import Runner
from headwater.spark.jvm import analyzed_plan
from headwater.spark.plan import node_name, nodes

SQL = """
CREATE OR REFRESH STREAMING TABLE customers
AS SELECT * FROM STREAM read_files("{land}/customers", format => "json");

CREATE OR REFRESH STREAMING TABLE orders_raw
AS SELECT * FROM STREAM read_files("{land}/orders", format => "json");

CREATE OR REFRESH STREAMING TABLE orders_sql
AS SELECT o.order_id, o.customer_id, c.city
  FROM STREAM(orders_raw) o
  LEFT JOIN LIVE.customers c ON c.customer_id = o.customer_id;
"""

PYTHON = """
@headwater.table
def orders_py():
    customers = headwater.read("customers").select("customer_id", "city")
    return headwater.read_stream("orders_raw").select("order_id", "customer_id") \\
        .join(customers, "customer_id", "left")
"""


def _land(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    tmp.rename(folder / name)  # whole files only: the stream never sees half a file


def _rows(lake_root: Path, table: str) -> list[tuple]:
    data = DeltaTable(str(lake_root / table)).to_pyarrow_table().to_pylist()
    return sorted((r["order_id"], r["customer_id"], r["city"]) for r in data)


def test_a_streaming_table_joins_a_table_of_the_run_after_it_is_done(spark, tmp_path):
    land = tmp_path / "land"
    _land(land / "customers", "c1.json", [{"customer_id": 1, "city": "Oslo"},
                                          {"customer_id": 2, "city": "Lima"}])
    _land(land / "orders", "o1.json", [{"order_id": 10, "customer_id": 1},
                                       {"order_id": 11, "customer_id": 2},
                                       {"order_id": 12, "customer_id": 3}])
    root = project(tmp_path, {"p.sql": SQL.format(land=land), "p.py": PYTHON})
    graph = build(spark, root)
    # the batch reads are edges: the joining flows wait for customers
    assert graph.upstream("orders_sql") == {"orders_raw", "customers"}
    assert graph.upstream("orders_py") == {"orders_raw", "customers"}

    lake, results = run(spark, root)
    assert {k: r.status.name for k, r in results.items()} == dict.fromkeys(results, "COMPLETED")
    first = [(10, 1, "Oslo"), (11, 2, "Lima"), (12, 3, None)]
    assert _rows(root / "lake", "orders_sql") == first
    assert _rows(root / "lake", "orders_py") == first

    # Run 2: customer 3 and an order of hers land together. The new order sees her (the join
    # starts after customers is done); order 12 keeps its NULL city, as in Databricks: a
    # stream-static join never revisits rows it wrote.
    _land(land / "customers", "c2.json", [{"customer_id": 3, "city": "Pune"}])
    _land(land / "orders", "o2.json", [{"order_id": 13, "customer_id": 3}])
    lake, results = run(spark, root)
    assert {k: r.status.name for k, r in results.items()} == dict.fromkeys(results, "COMPLETED")
    second = [*first, (13, 3, "Pune")]
    assert _rows(root / "lake", "orders_sql") == second
    assert _rows(root / "lake", "orders_py") == second


def _wait_for(check, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - the table may not exist yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_continuous_micro_batches_read_the_static_tables_latest_version(spark, tmp_path):
    land = tmp_path / "land"
    _land(land / "orders", "o0.json", [{"order_id": 9, "customer_id": 7}])
    _land(land / "customers", "c0.json", [{"customer_id": 7, "city": "Rome"}])
    root = project(tmp_path, {"p.sql": SQL.format(land=land), "p.py": PYTHON})
    # a triggered run first: the tables exist, so the static side is a read of a Delta table
    # (Spark's parquet reader over its log, for SQL), not of a table still to be created
    run(spark, root)
    _land(land / "customers", "c1.json", [{"customer_id": 1, "city": "Oslo"}])
    graph = build(spark, root)
    for name in ("orders_sql", "orders_py"):
        (flow,) = graph.flows_of(name)
        kinds = {node_name(n) for n in nodes(analyzed_plan(flow.df)) if not n.isStreaming()}
        assert "LogicalRelation" in kinds, (name, kinds)  # the native batch read
    runner = Runner(graph, trigger_kwargs({"processingTime": "500 ms"}), True,
                    echo=lambda _: None)
    results: list = []
    thread = threading.Thread(target=lambda: results.extend(runner.run()), daemon=True)
    thread.start()
    lake_root = root / "lake"
    try:
        # every stream runs from the start: an order lands once customer 1 is committed
        _wait_for(lambda: len(DeltaTable(str(lake_root / "customers")).to_pyarrow_table()) == 2,
                  "customer 1")
        _land(land / "orders", "o1.json", [{"order_id": 10, "customer_id": 1}])
        for table in ("orders_sql", "orders_py"):
            _wait_for(lambda t=table: (10, 1, "Oslo") in _rows(lake_root, t), f"{table} 10")
        # a new customer lands and is committed; then an order of hers
        _land(land / "customers", "c2.json", [{"customer_id": 2, "city": "Lima"}])
        _wait_for(lambda: len(DeltaTable(str(lake_root / "customers")).to_pyarrow_table()) == 3,
                  "customer 2")
        _land(land / "orders", "o2.json", [{"order_id": 11, "customer_id": 2}])
        for table in ("orders_sql", "orders_py"):
            _wait_for(lambda t=table: any(r[0] == 11 for r in _rows(lake_root, t)),
                      f"{table} 11")
    finally:
        runner.stop_requested.set()
        thread.join(120)
    assert not thread.is_alive()
    assert all(r.status.name != "FAILED" for r in results), [r.error for r in results]
    # the same streaming queries that joined order 10 saw customer 2 for order 11
    for table in ("orders_sql", "orders_py"):
        assert _rows(lake_root, table) == [(9, 7, "Rome"), (10, 1, "Oslo"), (11, 2, "Lima")], \
            table


@pytest.mark.parametrize("text", [
    # a reads b in batch, b streams a
    """
    @headwater.table
    def a():
        return spark.readStream.format("rate").load().join(headwater.read("b"), "value")

    @headwater.table
    def b():
        return headwater.read_stream("a").select("value")
    """,
    # a streaming table joining its own rows
    """
    @headwater.table
    def a():
        return spark.readStream.format("rate").load().join(headwater.read("a"), "value")
    """,
], ids=["through-another-table", "itself"])
def test_a_batch_read_that_closes_a_loop_is_a_cycle(spark, tmp_path, text):
    root = project(tmp_path, {"p.py": text})
    with pytest.raises(HeadwaterError) as info:
        build(spark, root, dry=True)
    assert info.value.code == "HW_PIPELINE_CYCLE"
    assert "p.py:" in str(info.value)
