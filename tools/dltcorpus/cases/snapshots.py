"""APPLY CHANGES FROM SNAPSHOT (apply-changes-from-snapshot-demo): order snapshots made the way
generate_snapshot.py makes them (orders with order_id, price, order_status, order_date,
customer_id, product_id; each new snapshot moves the oldest pending orders on, deletes some
returned ones with odd ids, and adds new orders).

- Pattern 1 (process_snapshot_pattern1.py + order_count_by_status_pattern1.sql): the snapshot
  is a table, ``<snapshot_source_catalog>.<snapshot_source_database>.orders_snapshot``,
  overwritten by each new snapshot (written here with deltalake into the pipeline's
  lakehouse, where headwater finds tables by name); SCD type 1.
- Pattern 2 (process_snapshot_pattern2.py + order_count_by_status_pattern2.sql): one parquet
  folder per hour, ``<snapshot_path>/yyyy-MM-dd HH``; SCD type 2 tracking order_status, the
  version being the folder's name.

Round 1 writes the first snapshot (pattern 2: the first two hours), round 2 the next one.
Configuration as databricks.yml's development target sets it, with headwater's catalog
``spark_catalog`` in place of ``hive_metastore`` and the snapshot path a local folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import write_deltalake

from dltcorpus.cases.base import Case, Env, Row, TableCheck
from dltcorpus.edits import local_path

SCHEMA = pa.schema([("order_id", pa.int32()), ("price", pa.int32()),
                    ("order_status", pa.string()), ("order_date", pa.string()),
                    ("customer_id", pa.string()), ("product_id", pa.int32())])
SOURCE_DB = "snapshots_corpus"
SNAPSHOT_PATH = "dbfs:/snapshots_corpus/orders/"
FIRST_HOUR = datetime(2024, 3, 1, 10)
NUM_ORDERS, NUM_CUSTOMERS, NUM_PRODUCTS = 30, 5, 4


@dataclass
class Snapshots(Case):
    pattern: int = 1
    snapshots: list[tuple[str, list[Row]]] = field(default_factory=list)

    def configuration(self, env: Env) -> dict[str, str]:
        if self.pattern == 1:
            return {"snapshot_source_catalog": "spark_catalog",
                    "snapshot_source_database": SOURCE_DB}
        return {"snapshot_path": local_path(SNAPSHOT_PATH, env.data)}

    def _orders(self, first_id: int, count: int, now: datetime) -> list[Row]:
        rng = self.rng
        out = []
        for order_id in range(first_id, first_id + count):
            status = rng.choice(["re-ordered", "pending"]) if rng.random() <= 0.3 else \
                rng.choice(["shipping", "delivered", "cancelled", "returned"])
            when = now - timedelta(days=1, seconds=rng.randint(0, 30 * 86400))
            out.append({"order_id": order_id, "price": rng.randint(1, 1000),
                        "order_status": status,
                        "order_date": when.strftime("%Y-%m-%d %H:%M:%S"),
                        "customer_id": str(rng.randint(1, NUM_CUSTOMERS)),
                        "product_id": rng.randint(1, NUM_PRODUCTS)})
        return out

    def _next(self, previous: list[Row], now: datetime) -> list[Row]:
        """generate_snapshot.py's incremental snapshot."""
        n = len(previous)
        pending = sorted((r for r in previous if r["order_status"] == "pending"),
                         key=lambda r: r["order_date"])[:int(n * 0.3)]
        updated = {r["order_id"]: {**r, "order_status": ("shipping", "delivered", "cancelled")[
            r["order_id"] % 3], "order_date": now.strftime("%Y-%m-%d %H:%M:%S")}
            for r in pending}
        returned = sorted((r for r in previous if r["order_status"] == "returned"),
                          key=lambda r: r["order_date"])[:int(n * 0.1)]
        deleted = {r["order_id"] for r in returned if r["order_id"] % 2 == 1}
        kept = [updated.get(r["order_id"], r) for r in previous if r["order_id"] not in deleted]
        top = max(r["order_id"] for r in previous)
        return kept + self._orders(top + 1, int(NUM_ORDERS * 0.2), now)

    def write(self, env: Env, round_: int) -> None:
        hours = [0, 1] if self.pattern == 2 and round_ == 1 else [len(self.snapshots)]
        for hour in hours:
            now = FIRST_HOUR + timedelta(hours=hour)
            rows = self._orders(1, NUM_ORDERS, now) if not self.snapshots else \
                self._next(self.snapshots[-1][1], now)
            version = now.strftime("%Y-%m-%d %H")
            self.snapshots.append((version, rows))
            table = pa.Table.from_pylist(rows, SCHEMA)
            if self.pattern == 1:
                write_deltalake(str(env.storage / SOURCE_DB / "orders_snapshot"), table,
                                mode="overwrite")
            else:
                folder = Path(local_path(SNAPSHOT_PATH, env.data)) / version
                folder.mkdir(parents=True, exist_ok=True)
                pq.write_table(table, folder / "part-00000.parquet")

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        if self.pattern == 1:
            orders = [dict(r) for r in self.snapshots[-1][1]]
        else:
            orders = _scd2(self.snapshots, track=("order_status",))
        counts: dict[str, int] = {}
        for r in orders:
            counts[r["order_status"]] = counts.get(r["order_status"], 0) + 1
        return [TableCheck(self.table("orders"), orders),
                TableCheck(self.table("order_status_count"),
                           [{"order_status": s, "orders_count": n} for s, n in counts.items()])]


def _scd2(snapshots: list[tuple[str, list[Row]]], track: tuple[str, ...]) -> list[Row]:
    """SCD type 2 from full snapshots: a key's row opens at the version it appears or its
    tracked columns change, closes at the version it disappears or changes; a change to
    untracked columns only updates the open row."""
    history: list[Row] = []
    current: dict[int, Row] = {}
    for version, rows in snapshots:
        seen = {r["order_id"]: r for r in rows}
        for key, open_row in list(current.items()):
            if key not in seen:
                open_row["__END_AT"] = version
                del current[key]
        for key, row in seen.items():
            open_row = current.get(key)
            if open_row is None or any(open_row[c] != row[c] for c in track):
                if open_row is not None:
                    open_row["__END_AT"] = version
                new = {**row, "__START_AT": version, "__END_AT": None}
                history.append(new)
                current[key] = new
            else:
                open_row.update(row)
    return history


def cases() -> list[Case]:
    base = "apply-changes-from-snapshot-demo/src/notebooks/"
    return [Snapshots("snapshot-pattern1", (base + "process_snapshot_pattern1.py",
                                            base + "order_count_by_status_pattern1.sql"),
                      database="orders_pattern1", pattern=1),
            Snapshots("snapshot-pattern2", (base + "process_snapshot_pattern2.py",
                                            base + "order_count_by_status_pattern2.sql"),
                      database="orders_pattern2", pattern=2)]
