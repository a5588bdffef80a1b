"""headwater's own DLT notebooks (tests/fixtures/dlt_notebooks), written in Databricks' export
format with the features Databricks' published DLT notebooks use (``bash dev.sh corpus PATH``
runs those; they have no license, so CI runs these instead): ``COMMAND`` cells and ``MAGIC``
lines, SQL cells without semicolons, ``LIVE.`` names, ``STREAMING LIVE TABLE``, ``SET`` and
``${...}`` parameters, ``cloud_files()`` and Auto Loader without a schema location,
expectations on views, temporary tables, ``create_target_table``, APPLY CHANGES,
``apply_changes_from_snapshot``, ``format("kafka")`` on readers, a Kafka sink
(``dlt.create_sink(name, "kafka", ...)``), ``read_kafka`` in SQL, a streaming aggregate
without a watermark (kept whole, as DLT recomputes it) and the ``event_log`` table function.

Each notebook runs as a user runs it: in a spark-pipeline.yml project whose configuration
holds the pipeline parameters, with the ``import dlt`` line as the only edit, twice (the
second run after more data arrived), and its tables are compared with rows worked out by hand.
"""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from deltalake import DeltaTable

from headwater.pipeline.run import run_project

FIXTURES = Path(__file__).parent / "fixtures" / "dlt_notebooks"

ORDERS = [
    [{"order_id": 1, "customer_id": "a", "amount": 10.0, "status": "NEW"},
     {"order_id": 2, "customer_id": "b", "amount": -5.0, "status": "PAID"},   # warned, kept
     {"customer_id": "a", "amount": 3.0, "status": "NEW"},                    # no id: dropped
     {"order_id": 3, "customer_id": "a", "amount": 7.5, "status": "LOST"}],
    [{"order_id": 4, "customer_id": "b", "amount": 2.0, "status": "SHIPPED"}],
]
CHANGES = [
    [{"customer_id": 1, "name": "Ann", "op": "UPSERT", "seq": 1},
     {"customer_id": 2, "name": "Bob", "op": "UPSERT", "seq": 1},
     {"customer_id": 1, "name": "Anne", "op": "UPSERT", "seq": 3},
     {"customer_id": 1, "name": "Old", "op": "UPSERT", "seq": 2},       # out of order
     {"customer_id": 2, "op": "DELETE", "seq": 2}],
    [{"customer_id": 2, "name": "Bobby", "op": "UPSERT", "seq": 1},     # older than the delete
     {"customer_id": 3, "name": "Cy", "op": "UPSERT", "seq": 4}],
]


def notebook_project(tmp_path: Path, notebook: str, configuration: dict[str, str]) -> Path:
    """A spark-pipeline.yml project holding the notebook, its ``import dlt`` line the only
    change."""
    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    text = (FIXTURES / notebook).read_text()
    edited = text.replace("\nimport dlt\n", "\nimport headwater.dlt as dlt\n")
    assert notebook.endswith(".sql") or edited != text
    (root / "notebooks" / notebook).write_text(edited)
    spec = {"name": notebook.split(".")[0], "storage": "storage",
            "configuration": configuration,
            "libraries": [{"glob": {"include": f"notebooks/{notebook}"}}]}
    (root / "spark-pipeline.yml").write_text(yaml.safe_dump(spec))
    return root


def land(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def rows(root: Path, table: str, columns: tuple[str, ...]) -> list[tuple]:
    data = DeltaTable(str(root / "storage" / table)).to_pyarrow_table().to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in data),
                  key=lambda r: tuple((v is None, v) for v in r))


def run_ok(root: Path) -> None:
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, [(r.key, r.status, r.error) for r in outcome.failed]


def orders_round(landing: Path, n: int) -> None:
    land(landing / "orders", f"orders-{n}.json", ORDERS[n])
    land(landing / "customers", f"changes-{n}.json", CHANGES[n])


def test_our_python_notebook_runs_and_runs_again_incrementally(spark, keep_lakehouse, tmp_path):
    landing = tmp_path / "landing"
    root = notebook_project(tmp_path, "orders_python.py", {"corpus.landing": str(landing)})
    orders_round(landing, 0)
    run_ok(root)
    assert len(rows(root, "orders_raw", ("amount",))) == 4
    # the view dropped the row without an id, the temporary table the unknown status
    assert rows(root, "orders_clean", ("order_id", "amount")) == [(1, 10.0), (2, -5.0)]
    assert rows(root, "revenue_per_customer", ("customer_id", "revenue", "orders")) == [
        ("a", 10.0, 1), ("b", -5.0, 1)]
    assert rows(root, "customers", ("customer_id", "name")) == [(1, "Anne")]
    orders_round(landing, 1)
    run_ok(root)
    assert len(rows(root, "orders_raw", ("amount",))) == 5       # nothing read twice
    assert rows(root, "orders_clean", ("order_id",)) == [(1,), (2,), (4,)]
    assert rows(root, "revenue_per_customer", ("customer_id", "revenue", "orders")) == [
        ("a", 10.0, 1), ("b", -3.0, 2)]
    # customer 2's delete (seq 2) outlives the older upsert that arrived after it
    assert rows(root, "customers", ("customer_id", "name")) == [(1, "Anne"), (3, "Cy")]


def test_the_event_log_table_function_answers_for_a_notebook_pipeline(spark, keep_lakehouse,
                                                                      tmp_path):
    """What the published monitoring notebooks query: flow progress with data quality."""
    landing = tmp_path / "landing"
    root = notebook_project(tmp_path, "orders_python.py", {"corpus.landing": str(landing)})
    orders_round(landing, 0)
    run_ok(root)
    found = spark.sql(
        "SELECT details FROM event_log(TABLE(orders_clean)) "
        "WHERE event_type = 'flow_progress'").collect()
    assert found, "no flow_progress events for orders_clean"
    assert any("data_quality" in (r.details or "") for r in found)


def test_our_sql_notebook_runs_and_runs_again_incrementally(spark, keep_lakehouse, tmp_path):
    landing = tmp_path / "landing"
    root = notebook_project(tmp_path, "orders_sql.sql", {"corpus.landing": str(landing)})
    orders_round(landing, 0)
    run_ok(root)
    assert len(rows(root, "sql_orders_raw", ("amount",))) == 4
    # no id: dropped by the view's expectation; -5.0: below the SET minimum
    assert rows(root, "sql_orders_clean", ("order_id", "status")) == [(1, "NEW"), (3, "LOST")]
    assert rows(root, "sql_revenue", ("customer_id", "revenue", "orders")) == [("a", 17.5, 2)]
    assert rows(root, "sql_customers", ("customer_id", "name")) == [(1, "Anne")]
    orders_round(landing, 1)
    run_ok(root)
    assert rows(root, "sql_orders_clean", ("order_id",)) == [(1,), (3,), (4,)]
    assert rows(root, "sql_revenue", ("customer_id", "revenue", "orders")) == [
        ("a", 17.5, 2), ("b", 2.0, 1)]
    assert rows(root, "sql_customers", ("customer_id", "name")) == [(1, "Anne"), (3, "Cy")]


PRODUCTS = pa.schema([("product_id", pa.int64()), ("name", pa.string()),
                      ("price", pa.float64())])


def snapshot(folder: Path, version: str, products: list[tuple[int, str, float]]) -> None:
    (folder / version).mkdir(parents=True)
    table = pa.Table.from_pylist([dict(zip(PRODUCTS.names, p)) for p in products], PRODUCTS)
    pq.write_table(table, folder / version / "part-0.parquet")


def test_our_streaming_notebook_reads_kafka_and_snapshots(spark, keep_lakehouse, tmp_path,
                                                          broker):
    topic, snapshots = "devices", tmp_path / "snapshots"
    broker.create_topic(topic, 1)
    root = notebook_project(tmp_path, "events_python.py",
                            {"corpus.kafka": broker.servers, "corpus.snapshots": str(snapshots)})
    events = [{"device": "d1", "temp": 20.0}, {"device": "d1", "temp": 22.0},
              {"device": "d2", "temp": 30.0}]
    broker.produce(topic, [(0, None, json.dumps(e).encode()) for e in events] +
                   [(0, None, b"not json")])
    snapshot(snapshots, "2024-01-01 10", [(1, "pen", 1.0), (2, "ink", 5.0)])
    snapshot(snapshots, "2024-01-01 11", [(1, "pen", 1.5), (2, "ink cartridge", 5.0),
                                          (3, "pad", 2.0)])
    run_ok(root)
    assert len(rows(root, "device_events_raw", ("offset",))) == 4
    assert rows(root, "device_stats", ("device", "events", "avg_temp")) == [
        ("d1", 2, 21.0), ("d2", 1, 30.0)]
    history = ("product_id", "name", "price", "__START_AT", "__END_AT")
    assert rows(root, "products", history) == [
        (1, "pen", 1.0, "2024-01-01 10", "2024-01-01 11"),
        (1, "pen", 1.5, "2024-01-01 11", None),
        (2, "ink cartridge", 5.0, "2024-01-01 10", None),    # untracked column: in place
        (3, "pad", 2.0, "2024-01-01 11", None)]
    broker.produce(topic, [(0, None, json.dumps(e).encode())
                           for e in ({"device": "d1", "temp": 24.0},
                                     {"device": "d3", "temp": 10.0})])
    snapshot(snapshots, "2024-01-01 12", [(1, "pen", 1.5), (3, "pad", 2.0)])
    run_ok(root)
    assert rows(root, "device_stats", ("device", "events", "avg_temp")) == [
        ("d1", 3, 22.0), ("d2", 1, 30.0), ("d3", 1, 10.0)]
    assert rows(root, "products", history)[2] == (
        2, "ink cartridge", 5.0, "2024-01-01 10", "2024-01-01 12")


def order_messages(rng: random.Random, first: int, n: int) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) records: JSON orders, some without an order id, some no JSON."""
    records = []
    for i in range(first, first + n):
        order: dict = {"order_id": i, "customer": rng.choice("abc"),
                       "amount": round(rng.uniform(1, 200), 2),
                       "ts": f"2024-05-0{1 + i % 9} 10:{i % 60:02d}:00"}
        if i % 11 == 5:
            del order["order_id"]
        value = json.dumps(order).encode() if i % 13 != 7 else b"no json %d" % i
        records.append((i % 2, f"e{i}".encode(), value))
    return records


def kafka_answers(records: list[tuple[int, bytes, bytes]]) -> tuple[list, list, list]:
    """(parsed orders, revenue per customer, big orders) worked out from the produced records
    in plain Python."""
    orders = []
    for _, key, value in records:
        try:
            order = json.loads(value)
        except ValueError:
            continue
        if order.get("order_id") is not None:
            orders.append((key.decode(), order["order_id"], order["customer"], order["amount"]))
    revenue: dict[str, list] = {}
    for _, _, customer, amount in orders:
        revenue.setdefault(customer, []).append(amount)
    per_customer = sorted((c, round(sum(a), 6), len(a)) for c, a in revenue.items())
    big = sorted((key, {"order_id": o, "customer": c, "amount": a})
                 for key, o, c, a in orders if a >= 100)
    return sorted(orders), per_customer, sorted(big, key=lambda r: r[0])


def test_a_kafka_notebook_reads_parses_and_writes_back_twice(spark, keep_lakehouse, tmp_path,
                                                             broker):
    """format("kafka") both ways in a DLT notebook: raw records, from_json with a declared
    schema, an expectation, a materialized view and a Kafka sink, run, fed, run again."""
    topic, out = f"orders-{uuid.uuid4().hex[:8]}", f"big-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    broker.create_topic(out, 1)
    root = notebook_project(tmp_path, "kafka_python.py", {
        "corpus.kafka": broker.servers, "corpus.topic": topic, "corpus.out_topic": out})
    rng = random.Random(25)
    produced = order_messages(rng, 0, 30)
    broker.produce(topic, produced)
    for round_ in (1, 2):
        if round_ == 2:  # more orders arrive between the updates
            more = order_messages(rng, 30, 17)
            broker.produce(topic, more)
            produced += more
        run_ok(root)
        orders, revenue, big = kafka_answers(produced)
        raw = rows(root, "orders_kafka_raw", ("partition", "offset", "key", "value"))
        assert sorted((p, k, v) for p, _, k, v in raw) == sorted(produced), round_
        assert len({(p, o) for p, o, _, _ in raw}) == len(produced)   # nothing read twice
        assert rows(root, "orders_parsed", ("eventId", "order_id", "customer", "amount")) \
            == orders
        assert [(c, round(r, 6), n) for c, r, n in
                rows(root, "revenue_per_customer", ("customer", "revenue", "orders"))] \
            == revenue
        sent = broker.consume_all(out, 1, expected=len(big))
        assert sorted((k.decode(), json.loads(v)) for _, _, k, v, _ in sent) == big, round_


def test_a_sql_notebook_reads_kafka_with_read_kafka_twice(spark, keep_lakehouse, tmp_path,
                                                         broker):
    """Databricks' read_kafka: STREAM read_kafka in a streaming table, a batch read_kafka in a
    materialized view; run, fed, run again."""
    topic = f"sql-orders-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    root = notebook_project(tmp_path, "kafka_sql.sql",
                            {"corpus.kafka": broker.servers, "corpus.topic": topic})
    rng = random.Random(33)
    produced = order_messages(rng, 0, 25)
    broker.produce(topic, produced)
    for round_ in (1, 2):
        if round_ == 2:
            more = order_messages(rng, 25, 12)
            broker.produce(topic, more)
            produced += more
        run_ok(root)
        orders, revenue, _ = kafka_answers(produced)
        raw = rows(root, "sql_kafka_raw", ("partition", "offset", "key", "value"))
        assert sorted((p, k, v) for p, _, k, v in raw) == sorted(produced), round_
        assert rows(root, "sql_kafka_orders", ("eventId", "order_id", "customer", "amount")) \
            == orders
        assert [(c, round(r, 6), n) for c, r, n in
                rows(root, "sql_kafka_revenue", ("customer", "revenue", "orders"))] == revenue
        assert rows(root, "sql_kafka_records", ("records",)) == [(len(produced),)]


def test_read_kafka_options_as_databricks_names_them(spark):
    """bootstrapServers is kafka.bootstrap.servers, back-quoted names lose their quotes, values
    are Spark's constants; positional arguments are an error."""
    from headwater.errors import HeadwaterError
    from headwater.pipeline.sql_dlt import file_reads
    from headwater.pipeline.sql_files import tokens

    sql = ("CREATE STREAMING TABLE t AS SELECT * FROM STREAM read_kafka(\n"
           "  bootstrapServers => concat('h', ':9092'), subscribe => 'a,b',\n"
           "  `kafka.security.protocol` => 'SSL', maxOffsetsPerTrigger => 10)")
    text, reads = file_reads(sql, tokens(sql), Path("p.sql"), spark)
    [read] = reads
    assert read.options == {"kafka.bootstrap.servers": "h:9092", "subscribe": "a,b",
                            "kafka.security.protocol": "SSL", "maxOffsetsPerTrigger": "10"}
    assert read.format == "kafka" and read.streaming and read.path is None
    assert text.rstrip("\n").endswith(f"FROM {read.view}")
    assert text.count("\n") == sql.count("\n")  # line numbers stay the file's
    batch = "CREATE MATERIALIZED VIEW m AS SELECT * FROM read_kafka(subscribe => 'a')"
    assert not file_reads(batch, tokens(batch), Path("p.sql"), spark)[1][0].streaming
    bad = "CREATE MATERIALIZED VIEW m AS SELECT * FROM read_kafka('h:9092')"
    with pytest.raises(HeadwaterError) as wrong:
        file_reads(bad, tokens(bad), Path("p.sql"), spark)
    assert wrong.value.code == "HW_PIPELINE_SQL_INVALID" and "p.sql:1" in str(wrong.value)
