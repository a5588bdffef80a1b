"""Every seed scenario in examples/ runs on the shared session, and its output rows are
checked, not only that it ran."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_to_table_appends_new_rows_on_a_timer(spark, tmp_path):
    rows = example("table_to_table").main(str(tmp_path / "lake"), "1 second", spark)
    assert rows == [(1, "alpha"), (2, "beta"), (3, "gamma")]


def _device_counts(truth, batches: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in truth.of("devices"):
        if entry["batch"] < batches:
            device = entry["record"]["device_id"]
            out[device] = out.get(device, 0) + 1
    return out


def test_device_counts_change_as_the_factory_lands_data(spark, tmp_path):
    from headwater.factory import DataFactory

    root = tmp_path / "lake"
    before, after = example("device_counts").main(str(root), "1 second", spark)
    truth = DataFactory(root).truth()
    assert before == _device_counts(truth, 1)
    assert after == _device_counts(truth, 2) and after != before


def _flat_rows(order: dict) -> list[tuple]:
    """What the seed's explode_outer gives for one order: (order_id, item_id, key)."""
    items = order.get("items") or [None]
    metadata = order.get("metadata") or [None]
    return [(order["order_id"], i and i["item_id"], m and m["key"])
            for m in metadata for i in items]


def test_orders_json_flattened_exactly_with_nothing_lost(spark, tmp_path):
    from collections import Counter

    from headwater.factory import DataFactory

    root = tmp_path / "lake"
    out = example("orders_json").main(str(root), spark)
    truth = DataFactory(root).truth()
    key = lambda r: (r["order_id"], r["item_id"], r["key"])  # noqa: E731

    # Spark's own source over the multi-line files: exact for every well-typed order
    multi = [e for e in truth.of("orders") if e["multi_line"]]
    expected = Counter(t for e in multi if e["kind"] != "mistyped" for t in _flat_rows(e["record"]))
    typed_ids = {e["record"]["order_id"] for e in multi if e["kind"] != "mistyped"}
    got = Counter(key(r) for r in out["seed_rows"] if r["order_id"] in typed_ids)
    assert got == expected

    # read_files over every file: each order flattened, each malformed line one rescued row
    orders = [e for e in truth.of("orders") if e["kind"] != "malformed"]
    # a mistyped item rescues its whole items array (kept as JSON in _rescued_data)
    expected = Counter(t for e in orders for t in _flat_rows(
        {**e["record"], "items": None} if e["kind"] == "mistyped" else e["record"]))
    assert Counter(key(r) for r in out["rows"] if r["order_id"]) == expected
    malformed = [r for r in out["rows"] if r["order_id"] is None]
    assert len(malformed) == truth.count("orders", "malformed")
    assert all('"_corrupt_record"' in r["_rescued_data"] for r in malformed)
    mistyped = {e["record"]["order_id"] for e in truth.of("orders", "mistyped")}
    rescued = {r["order_id"] for r in out["rows"] if r["order_id"] and r["_rescued_data"]}
    assert rescued == mistyped  # a quantity of "two" is kept, not nulled
    landing = root / "landing" / "orders"
    assert not list(landing.rglob("*.json"))  # all archived after their batches committed
    assert len(list((root / "archive" / "orders").rglob("*.json"))) == 4


def test_color_windows_in_complete_update_and_append_modes(spark, tmp_path):
    import datetime as dt
    from collections import Counter

    mod = example("color_windows")
    out = mod.main(str(tmp_path / "lake"), spark)
    events = [(c, dt.datetime.fromisoformat(t)) for rows in mod.ROUNDS for c, t in rows]

    def windows(size: int, slide: int) -> Counter:
        got: Counter = Counter()
        for color, ts in events:
            minute = ts.replace(second=0) - dt.timedelta(minutes=ts.minute % slide)
            start = minute
            while start + dt.timedelta(minutes=size) > ts:
                if start <= ts:
                    got[(color, start, start + dt.timedelta(minutes=size))] += 1
                start -= dt.timedelta(minutes=slide)
        return got

    def table(name: str) -> Counter:
        return Counter({(r["color"], r["window"]["start"], r["window"]["end"]): r["count"]
                        for r in out[name]})

    assert table("tumbling_complete") == windows(5, 5)
    assert table("sliding_update") == windows(10, 5)  # merged by (color, window)
    # append: only windows the watermark closed, each once with its final count
    appended = table("tumbling_append")
    watermark = max(ts for rows in mod.ROUNDS[:2] for _, ts in
                    [(c, dt.datetime.fromisoformat(t)) for c, t in rows]) - dt.timedelta(seconds=10)
    closed = {k: v for k, v in windows(5, 5).items() if k[2] <= watermark}
    assert closed and set(closed) <= set(appended)
    assert all(appended[k] == windows(5, 5)[k] for k in appended)
    assert not any(k[1] >= dt.datetime(2025, 6, 22, 10, 30) for k in appended)  # still open


def test_foreach_batch_writes_two_tables_exactly_once(spark, tmp_path):
    from headwater.factory import DataFactory

    root = tmp_path / "lake"
    counts = example("foreach_batch").main(str(root), spark)
    readings = DataFactory(root).truth().records("devices")
    assert counts == {"ok": sum(r["status"] == "ok" for r in readings),
                      "warn": sum(r["status"] != "ok" for r in readings)}


def test_a_restarted_stream_reads_only_new_data(spark, tmp_path):
    from headwater.factory import DataFactory

    root = tmp_path / "lake"
    out = example("restart_from_checkpoint").main(str(root), "1 second", spark)
    per_batch = [e["batch"] for e in DataFactory(root).truth().of("devices")]
    assert out == {"first_run": per_batch.count(0),
                   "second_run": per_batch.count(1) + per_batch.count(2),
                   "silver": len(per_batch)}


def test_order_by_on_a_stream_gives_the_clear_error(spark, tmp_path):
    message = example("order_by_error").main(str(tmp_path / "lake"), spark)
    assert "Sorting is not supported" in message or "ORDER BY" in message.upper()
    assert message.startswith("[HW_")


def test_seed_helpers_wait_list_stop_and_clean_up(spark, tmp_path):
    import headwater

    root = tmp_path / "lake"
    lake = headwater.Lakehouse(root, spark)
    lake.sql("CREATE TABLE src (id BIGINT)")
    spark.sql("INSERT INTO src VALUES (1), (2)")
    query = (spark.readStream.table("src").writeStream.trigger(processingTime="1 second")
             .option("checkpointLocation", lake.checkpoint("dst")).table("dst"))
    headwater.block_until_stream_is_ready(query, min_batches=2)
    assert len(query.recentProgress) >= 2
    assert query in headwater.active_streams(spark) or \
        any(q.id == query.id for q in headwater.active_streams(spark))
    headwater.cleanup(root, spark)
    assert not query.isActive and not headwater.active_streams(spark)
    assert not root.exists()
    assert "dst" not in [t.name for t in spark.catalog.listTables()]


def test_customers_cdc_keeps_tables_equal_to_the_database(spark, tmp_path):
    from headwater.factory.debezium import CustomerDatabase

    root = tmp_path / "lake"
    tables = example("customers_cdc").main(str(root), spark)
    db = CustomerDatabase(root / "factory", seed=4)
    assert tables["customers"] == db.current()
    # columns in order: the row's, then __START_AT, __END_AT (NULL: the current version)
    key = lambda r: tuple((v is None, v) for v in r)  # noqa: E731
    assert sorted(tables["customers_history"], key=key) == sorted(db.history(), key=key)
