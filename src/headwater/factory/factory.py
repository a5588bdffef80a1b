"""``DataFactory(root).load()`` lands the next batch of each feed, as the seeds'
``DA.data_factory.load()`` does, and records what it landed as ground truth.

Feeds (all deterministic for a seed and batch number):

- orders: JSON files with the seeds' nested order schema, one document per file (a
  pretty-printed array) in ``<root>/landing/orders/multiline/`` and one order per line in
  ``<root>/landing/orders/lines/`` (Spark's multiLine reader needs one kind per folder);
- devices: IoT readings appended to the Delta table ``<root>/devices_bronze`` (another
  name with ``device_table=``, e.g. seed 001's ``bronze``);
- colors: colour events appended to the Delta table ``<root>/colors_bronze``
  (``color_table=``).

Each batch mixes in what real feeds bring: events out of order and late (event time well
behind the batch's window), duplicates of earlier orders, malformed lines and mistyped values.
Files land atomically (written under a hidden name, then renamed). Every landed record is
written to ``<root>/_factory/truth-<batch>.jsonl`` with its kind, so outputs can be checked
exactly. A load interrupted half-way lands the same batch again: files are rewritten with the
same content, Delta appends carry a transaction id per batch, and the truth file is replaced.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
BATCH_SPAN = dt.timedelta(minutes=10)  # event time advances this much per batch
LATE_BY = dt.timedelta(hours=2)

CITIES = [("Lisbon", "PT"), ("Porto", "PT"), ("Berlin", "DE"), ("Munich", "DE"),
          ("Paris", "FR"), ("Lyon", "FR"), ("Madrid", "ES"), ("Austin", "US"),
          ("Boston", "US"), ("Osaka", "JP")]
PRODUCTS = [("P-01", "kettle", 24.5), ("P-02", "toaster", 39.0), ("P-03", "mug", 7.25),
            ("P-04", "teapot", 31.0), ("P-05", "grinder", 55.9), ("P-06", "scale", 18.4)]
METHODS = ["card", "paypal", "bank_transfer"]
COLORS = ["red", "green", "blue", "yellow", "purple"]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eva", "Femi", "Gus", "Hana", "Ivo", "Jun"]


@dataclass
class Rates:
    """Records per batch, and the share of each kind of trouble mixed in."""
    orders: int = 40
    order_files: int = 2
    devices: int = 60
    colors: int = 20
    late: float = 0.05
    duplicate: float = 0.05
    malformed: float = 0.03
    mistyped: float = 0.03


@dataclass
class GroundTruth:
    """What the factory landed: one entry per record, with its feed, batch and kind.

    kind is "valid", "late" (valid, event time far behind its batch), "duplicate" (an exact
    copy of an earlier valid order), "malformed" (not parseable) or "mistyped" (a value of the
    wrong type: quantity as text, say).
    """
    entries: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, root: str | os.PathLike) -> GroundTruth:
        entries = []
        for path in sorted((Path(root) / "_factory").glob("truth-*.jsonl")):
            entries.extend(json.loads(line) for line in path.read_text().splitlines() if line)
        return cls(entries)

    def of(self, feed: str, *kinds: str) -> list[dict[str, Any]]:
        return [e for e in self.entries if e["feed"] == feed and (not kinds or e["kind"] in kinds)]

    def records(self, feed: str, *kinds: str) -> list[dict[str, Any]]:
        return [e["record"] for e in self.of(feed, *kinds)]

    def count(self, feed: str, *kinds: str) -> int:
        return len(self.of(feed, *kinds))


class DataFactory:
    def __init__(self, root: str | os.PathLike, seed: int = 0, rates: Rates | None = None,
                 device_table: str = "devices_bronze", color_table: str = "colors_bronze") -> None:
        self.root = Path(root).expanduser().resolve()
        self.seed = seed
        self.rates = rates or Rates()
        self.tables = {"devices": device_table, "colors": color_table}
        self.state_dir = self.root / "_factory"
        self.orders_dir = self.root / "landing" / "orders"

    # --- batches ------------------------------------------------------------------------

    @property
    def batches_landed(self) -> int:
        state = self.state_dir / "state.json"
        return json.loads(state.read_text())["batches"] if state.exists() else 0

    def load(self, batches: int = 1) -> list[int]:
        """Land the next ``batches`` batches of every feed; returns their numbers."""
        landed = []
        for _ in range(batches):
            number = self.batches_landed
            self.state_dir.mkdir(parents=True, exist_ok=True)
            entries = [*self._orders(number), *self._devices(number), *self._colors(number)]
            body = "".join(json.dumps(e, default=str) + "\n" for e in entries)
            _write_atomic(self.state_dir / f"truth-{number:05d}.jsonl", body.encode())
            _write_atomic(self.state_dir / "state.json",
                          json.dumps({"batches": number + 1, "seed": self.seed}).encode())
            landed.append(number)
        return landed

    def truth(self) -> GroundTruth:
        return GroundTruth.read(self.root)

    def _rng(self, feed: str, number: int) -> random.Random:
        return random.Random(f"{self.seed}:{feed}:{number}")

    def _event_time(self, rng: random.Random, number: int, late: bool) -> dt.datetime:
        start = EPOCH + number * BATCH_SPAN - (LATE_BY if late else dt.timedelta())
        return start + dt.timedelta(seconds=rng.randrange(int(BATCH_SPAN.total_seconds())))

    # --- orders: nested JSON files ---------------------------------------------------------

    def _orders(self, number: int) -> Iterator[dict[str, Any]]:
        rng, rates = self._rng("orders", number), self.rates
        entries: list[dict[str, Any]] = []
        for i in range(rates.orders):
            late = rng.random() < rates.late
            order = self._order(rng, number, i, late)
            kind = "late" if late else "valid"
            if rng.random() < rates.mistyped:
                order["items"][0]["quantity"] = rng.choice(["two", "3 pcs", "many"])
                kind = "mistyped"
            entries.append({"feed": "orders", "batch": number, "kind": kind, "record": order})
        if number > 0:  # duplicates: exact copies of valid orders of the previous batch
            earlier = self.state_dir / f"truth-{number - 1:05d}.jsonl"
            for line in earlier.read_text().splitlines():
                entry = json.loads(line)
                if entry["feed"] == "orders" and entry["kind"] == "valid" \
                        and rng.random() < rates.duplicate:
                    entries.append({"feed": "orders", "batch": number, "kind": "duplicate",
                                    "record": entry["record"]})
        rng.shuffle(entries)  # out of order within the batch
        files: list[list[dict[str, Any]]] = [[] for _ in range(max(1, rates.order_files))]
        for i, entry in enumerate(entries):
            files[i % len(files)].append(entry)
        for f, group in enumerate(files):
            multi_line = f % 2 == 1
            name = f"{'multiline' if multi_line else 'lines'}/orders-{number:05d}-{f}.json"
            (self.orders_dir / name).parent.mkdir(parents=True, exist_ok=True)
            lines: list[str] = []
            for entry in group:
                entry["file"] = name
                lines.append(json.dumps(entry["record"]))
            if multi_line:
                body = json.dumps([e["record"] for e in group], indent=2) + "\n"
            else:
                for _ in range(sum(rng.random() < rates.malformed for _ in group)):
                    broken = rng.choice(group)["record"] if group else {"order_id": "?"}
                    text = json.dumps(broken)[: rng.randrange(10, 40)]  # cut mid-record
                    lines.insert(rng.randrange(len(lines) + 1), text)
                    group.append({"feed": "orders", "batch": number, "kind": "malformed",
                                  "file": name, "record": text})
                body = "\n".join(lines) + "\n"
            for entry in group:
                entry["multi_line"] = multi_line
            _write_atomic(self.orders_dir / name, body.encode())
            yield from group

    def _order(self, rng: random.Random, number: int, i: int, late: bool) -> dict[str, Any]:
        city, country = rng.choice(CITIES)
        customer_id = rng.randrange(1, 200)
        items = []
        for _k in range(rng.randrange(1, 4)):
            item_id, product, price = rng.choice(PRODUCTS)
            items.append({"item_id": item_id, "product_name": product,
                          "quantity": rng.randrange(1, 5), "price": price})
        return {
            "order_id": f"ORD-{number:05d}-{i:04d}",
            "timestamp": self._event_time(rng, number, late).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "customer": {
                "customer_id": customer_id, "name": rng.choice(NAMES),
                "email": f"c{customer_id}@example.com",
                "address": {"city": city, "postal_code": f"{rng.randrange(10000, 99999)}",
                            "country": country}},
            "items": items,
            "payment": {"method": rng.choice(METHODS),
                        "transaction_id": f"TX-{number:05d}-{i:04d}"},
            "metadata": [{"key": "channel", "value": rng.choice(["web", "app", "store"])},
                         {"key": "batch", "value": str(number)}],
        }

    # --- devices and colours: appended to bronze Delta tables ------------------------------

    def _devices(self, number: int) -> Iterator[dict[str, Any]]:
        rng, rates = self._rng("devices", number), self.rates
        rows = []
        for _i in range(rates.devices):
            late = rng.random() < rates.late
            rows.append({"device_id": rng.randrange(1, 11),
                         "event_time": self._event_time(rng, number, late),
                         "reading": round(rng.uniform(-5, 45), 2),
                         "status": rng.choice(["ok", "ok", "ok", "warn"]),
                         "_kind": "late" if late else "valid"})
        rng.shuffle(rows)
        yield from self._append_delta("devices", number, rows, {
            "device_id": "int32", "event_time": "timestamp", "reading": "float64",
            "status": "string"})

    def _colors(self, number: int) -> Iterator[dict[str, Any]]:
        rng, rates = self._rng("colors", number), self.rates
        rows = []
        for _i in range(rates.colors):
            late = rng.random() < rates.late
            rows.append({"color": rng.choice(COLORS),
                         "event_date": self._event_time(rng, number, late),
                         "_kind": "late" if late else "valid"})
        yield from self._append_delta("colors", number, rows,
                                      {"color": "string", "event_date": "timestamp"})

    def _append_delta(self, feed: str, number: int, rows: list[dict[str, Any]],
                      types: dict[str, str]) -> Iterator[dict[str, Any]]:
        arrow = {"int32": pa.int32(), "float64": pa.float64(), "string": pa.string(),
                 "timestamp": pa.timestamp("us", tz="UTC")}
        table = pa.table({name: pa.array([r[name] for r in rows], arrow[kind])
                          for name, kind in types.items()})
        # One commit per batch with a transaction id: a retried load is not appended twice.
        path = str(self.root / self.tables[feed])
        app_id = "headwater-factory"
        try:
            done = DeltaTable(path).transaction_version(app_id)
        except TableNotFoundError:
            done = None
        if done is None or done < number:
            write_deltalake(path, table, mode="append", commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id, number)]))
        for row in rows:
            record = {k: (v.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(v, dt.datetime) else v)
                      for k, v in row.items() if k != "_kind"}
            yield {"feed": feed, "batch": number, "kind": row["_kind"], "record": record}


def _write_atomic(path: Path, data: bytes) -> None:
    """Readers never see half a file: write under a hidden name, then rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
