"""The demo: a project in ``root`` (headwater.toml + pipeline/demo.py), the data factory
landing batches into it, the pipeline run triggered (``--once``) or continuously, then gold
printed and every landed record accounted for against the factory's ground truth."""

from __future__ import annotations

import datetime as dt
import shutil
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import headwater
from headwater.factory import CdcRates, CustomerDatabase, DataFactory
from headwater.factory.debezium import COLUMNS
from headwater.monitor.dashboard import DashboardServer
from headwater.monitor.display import Display
from headwater.pipeline.run import load_project, run_project

TOML = '''[pipeline]
name = "headwater-demo"
root = "."                       # tables, checkpoints and landed files live here
definitions = ["pipeline/*.py"]

[spark]
"spark.sql.shuffle.partitions" = "2"
'''


def setup_project(root: Path) -> None:
    """Write the demo's project files, unless the user already has (and maybe edited) them."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "headwater.toml").exists():
        (root / "headwater.toml").write_text(TOML)
    pipeline = root / "pipeline" / "demo.py"
    if not pipeline.exists():
        pipeline.parent.mkdir(exist_ok=True)
        shutil.copyfile(Path(__file__).with_name("pipeline_template.py"), pipeline)


@dataclass
class Check:
    lines: list[tuple[str, Any, Any]] = field(default_factory=list)  # (what, got, expected)

    def add(self, what: str, got: Any, expected: Any) -> None:
        self.lines.append((what, got, expected))

    @property
    def ok(self) -> bool:
        return all(got == expected for _, got, expected in self.lines)


def _items(record: dict) -> list[dict]:
    return record.get("items") or []


def _line_revenue(records: list[dict], key: Callable[[dict], Any]) -> dict[Any, Decimal]:
    out: dict[Any, Decimal] = {}
    for r in records:
        for item in _items(r):
            amount = Decimal(str(item["price"])) * item["quantity"]
            out[key(r)] = out.get(key(r), Decimal(0)) + amount
    return {k: v.quantize(Decimal("0.01")) for k, v in out.items()}


def verify(lake: Any, truth: Any, customers: Any) -> Check:
    """Every landed record is in gold, quarantined or rescued, and gold equals the truth;
    the AUTO CDC tables equal the customer database (today's rows, every version)."""
    check = Check()
    orders = truth.of("orders")
    kinds = Counter(e["kind"] for e in orders)
    unique = [e["record"] for e in orders if e["kind"] in ("valid", "late")]
    copies = [e["record"] for e in orders if e["kind"] == "duplicate"]
    bronze = lake.read("bronze_orders")
    check.add("bronze_orders rows = order records landed", bronze.count(), len(orders))
    check.add("  of which with rescued data = malformed + mistyped",
              bronze.where("_rescued_data IS NOT NULL").count(),
              kinds["malformed"] + kinds["mistyped"])
    silver = lake.read("silver_orders")
    check.add("silver_orders rows = order lines landed (resent ones included)", silver.count(),
              sum(len(_items(r)) for r in unique + copies))
    quarantine = lake.read("silver_orders__quarantine").count() \
        if lake.exists("silver_orders__quarantine") else 0
    check.add("silver_orders__quarantine rows = malformed + mistyped", quarantine,
              kinds["malformed"] + kinds["mistyped"])
    check.add("distinct (order, line) in silver = unique order lines",
              silver.select("order_id", "line").distinct().count(),
              sum(len(_items(r)) for r in unique))

    by_country = {r["country"]: Decimal(str(r["revenue"])).quantize(Decimal("0.01"))
                  for r in lake.read("revenue_by_country").collect()}
    expected = _line_revenue(unique, lambda r: r["customer"]["address"]["country"])
    check.add("revenue_by_country = ground truth", by_country, expected)

    def hour(r: dict) -> tuple:
        ts = dt.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00"))
        return ts.replace(minute=0, second=0, tzinfo=None), r["customer"]["address"]["country"]

    by_hour = {(r["hour"].replace(tzinfo=None), r["country"]):
               Decimal(str(r["revenue"])).quantize(Decimal("0.01"))
               for r in lake.read("revenue_by_hour").collect()}
    check.add("revenue_by_hour = ground truth", by_hour, _line_revenue(unique, hour))

    verify_customers(check, lake, customers, unique)
    devices = Counter(r["device_id"] for r in truth.records("devices"))
    got = {r["device_id"]: r["readings"] for r in lake.read("device_counts").collect()}
    check.add("device_counts = readings landed per device", got, dict(devices))
    return check


def verify_customers(check: Check, lake: Any, customers: Any, orders: list[dict]) -> None:
    def rows(name: str, columns: tuple[str, ...]) -> list[tuple]:
        got = [tuple(r[c] for c in columns) for r in lake.read(name).collect()]
        return sorted(got, key=lambda r: tuple((v is None, v) for v in r))

    current = customers.current()
    check.add("customers (SCD 1) = the database's customers table", rows("customers", COLUMNS),
              current)
    history = sorted(customers.history(), key=lambda r: tuple((v is None, v) for v in r))
    check.add("customers_history (SCD 2) = every version in the database",
              rows("customers_history", (*COLUMNS, "__START_AT", "__END_AT")), history)
    tier_of = {r[0]: r[COLUMNS.index("tier")] for r in current}
    by_tier = {r["tier"]: Decimal(str(r["revenue"])).quantize(Decimal("0.01"))
               for r in lake.read("revenue_by_tier").collect()}
    expected = _line_revenue(orders, lambda r: tier_of.get(r["customer"]["customer_id"],
                                                            "unknown"))
    check.add("revenue_by_tier = ground truth", by_tier, expected)


def print_tables(lake: Any, echo: Callable[[str], None]) -> None:
    for name, order in (("revenue_by_country", "revenue DESC"),
                        ("revenue_by_hour", "hour, country"),
                        ("revenue_by_tier", "tier"),
                        ("device_counts", "device_id")):
        df = lake.read(name)
        rows = df.orderBy(*[o for o in order.split(", ")] if "DESC" not in order
                          else [df["revenue"].desc()]).collect()
        echo(f"\n{name} ({len(rows)} rows)")
        columns = df.columns
        cells = [[str(r[c]) for c in columns] for r in rows[:12]]
        widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(columns)]
        echo("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths)))
        for x in cells:
            echo("  " + "  ".join(v.ljust(w) for v, w in zip(x, widths)))
        if len(rows) > 12:
            echo(f"  ... {len(rows) - 12} more")


def run_demo(root: str | Path, once: bool, batches: int, interval: float,
             duration: float | None, seed: int, echo: Callable[[str], None],
             stop: threading.Event | None = None, live: bool | None = False,
             dashboard_port: int | None = None) -> int:
    root = Path(root).expanduser().resolve()
    setup_project(root)
    factory = DataFactory(root, seed=seed)
    # the orders' customers are ids 1-199: a snapshot that size makes the tier join meaningful
    customers = CustomerDatabase(root, seed=seed, rates=CdcRates(snapshot=150))
    landed = factory.load(batches if once else 1)
    customers.load(batches if once else 1)
    echo(f"factory: landed batch {landed[-1]} into {root}")
    loaded = load_project(root, app_name="headwater-demo")
    lake = loaded.lakehouse
    failed = False

    display = Display(echo, live=live)  # the runs' progress; the tables print plainly
    dashboard = None
    if dashboard_port is not None:
        try:
            dashboard = DashboardServer(root, port=dashboard_port).start()
        except headwater.HeadwaterError:  # the port is taken (another demo?): any free one
            dashboard = DashboardServer(root, port=0).start()
        echo(f"dashboard: {dashboard.url}")

    def run(trigger: str, continuous: bool, stop_event: threading.Event | None) -> None:
        nonlocal failed
        # the caller's stop (Ctrl-C, --duration) reaches the runner through stop_event
        outcome = run_project(loaded, trigger=trigger, continuous=continuous, display=display,
                              echo=display.echo, stop_event=stop_event)
        failed = failed or not outcome.ok

    if once:
        customers.drain()  # events held back as late land too: the feed describes the database
        run("available-now", False, None)
    else:
        stop = stop or threading.Event()
        timer = threading.Timer(duration, stop.set) if duration else None
        if timer is not None:
            timer.daemon = True  # a run that ends early must not wait for it
            timer.start()

        def land() -> None:
            while not stop.wait(interval):
                display.echo(f"factory: landed batch {factory.load()[0]}")
                customers.load()

        lander = threading.Thread(target=land, daemon=True)
        lander.start()
        run("2 seconds", True, stop)
        stop.set()  # the pipeline ended (a failed flow, say): stop landing too
        if timer is not None:
            timer.cancel()
        lander.join()  # a batch being landed is finished before the last run reads
        customers.drain()
        display.echo("stopped; one triggered run processes what landed last")
        run("available-now", False, None)

    if dashboard is not None:
        dashboard.stop()
    print_tables(lake, echo)
    check = verify(lake, factory.truth(), customers)
    echo("\naccounting against the factory's ground truth:")
    for what, got, expected in check.lines:
        mark = "ok " if got == expected else "FAIL"
        shown = f"{len(got)} groups" if isinstance(got, dict) else \
            f"{len(got)} rows" if isinstance(got, list) else f"{got}"
        echo(f"  [{mark}] {what}: {shown}" + ("" if got == expected else f" (expected {expected})"))
    return 0 if check.ok and not failed else 1
