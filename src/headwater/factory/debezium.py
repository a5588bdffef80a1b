"""An operational database and its change feed: ``CustomerDatabase(root).load()`` applies
random inserts, updates and deletes to a SQLite ``customers`` table and lands each change as
a Debezium change event, one JSON object per line, as Kafka Connect's file/object-store sinks
deliver them (``{"before", "after", "source": {..., "lsn"}, "op", "ts_ms"}``, or wrapped as
``{"schema": ..., "payload": ...}`` like the JsonConverter with ``schemas.enable=true``).

Where things are (``root`` is the factory's folder):

- ``<root>/_factory/operational.db``: the database, the ground truth. ``customers`` holds the
  current rows; ``customers_history`` every version a row ever had, with the lsn that opened
  it (``start_lsn``) and the lsn of the change that replaced or deleted it (``end_lsn``, NULL
  for the current version): exactly what an SCD type 2 target sequenced by lsn holds.
- ``<root>/landing/customers_cdc/customers-<batch>-<file>.json``: the events.

Delivery is as messy as real connectors make it (each a rate, seeded): ``out_of_order``
events move to another file of their batch, so a newer change can land in an earlier file;
``duplicate`` events are delivered twice (at-least-once delivery); ``late`` events are held
back and land with the next batch. Batch 0 is the connector's initial snapshot (``op`` "r").

A load interrupted half-way lands the same batch again: the database changes of a batch are
one SQLite transaction committed after its files are written, and the same seed and batch
give the same changes and files.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.factory.factory import CITIES, EPOCH, NAMES, _write_atomic

COLUMNS = ("customer_id", "name", "email", "city", "country", "tier")
ROW_DDL = ("customer_id INT, name STRING, email STRING, city STRING, country STRING, "
           "tier STRING")
TIERS = ("bronze", "silver", "gold", "platinum")
SERVER = "headwater"  # Debezium's topic prefix (logical server name)


@dataclass
class CdcRates:
    """Changes per batch and the delivery trouble mixed in.

    snapshot: rows of the initial snapshot (batch 0). changes: changes per later batch,
    ``inserts`` / ``deletes`` of them (shares; the rest are updates); ``reinserts``: share of
    inserts that reuse a deleted key. files: event files per batch. out_of_order, duplicate,
    late: shares of events moved to another file, delivered twice, held to the next batch.
    envelope: wrap each event as ``{"schema", "payload"}`` (JsonConverter, schemas on).
    """
    snapshot: int = 30
    changes: int = 40
    inserts: float = 0.25
    deletes: float = 0.15
    reinserts: float = 0.3
    files: int = 3
    out_of_order: float = 0.2
    duplicate: float = 0.05
    late: float = 0.1
    envelope: bool = False


class CustomerDatabase:
    """The operational database and the folder its change events land in."""

    def __init__(self, root: str | os.PathLike[str], seed: int = 0,
                 rates: CdcRates | None = None) -> None:
        self.root = Path(root).expanduser().resolve()
        self.seed = seed
        self.rates = rates or CdcRates()
        self.db_path = self.root / "_factory" / "operational.db"
        self.landing = self.root / "landing" / "customers_cdc"

    def connect(self) -> sqlite3.Connection:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.db_path, isolation_level=None)
        db.executescript("""
            CREATE TABLE IF NOT EXISTS customers (customer_id INTEGER PRIMARY KEY, name TEXT,
                email TEXT, city TEXT, country TEXT, tier TEXT);
            CREATE TABLE IF NOT EXISTS customers_history (customer_id INTEGER, name TEXT,
                email TEXT, city TEXT, country TEXT, tier TEXT, start_lsn INTEGER,
                end_lsn INTEGER);
            CREATE TABLE IF NOT EXISTS held_events (batch INTEGER, event TEXT);
            CREATE TABLE IF NOT EXISTS factory_state (batches INTEGER, lsn INTEGER);
        """)
        return db

    # --- ground truth ---------------------------------------------------------------------

    def current(self) -> list[tuple[Any, ...]]:
        """The table's rows, by key: (customer_id, name, email, city, country, tier)."""
        with self._closing() as db:
            return db.execute(f"SELECT {', '.join(COLUMNS)} FROM customers "
                              "ORDER BY customer_id").fetchall()

    def history(self) -> list[tuple[Any, ...]]:
        """Every version: the columns, then start_lsn and end_lsn (NULL: current)."""
        with self._closing() as db:
            return db.execute(f"SELECT {', '.join(COLUMNS)}, start_lsn, end_lsn FROM "
                              "customers_history ORDER BY customer_id, start_lsn").fetchall()

    @property
    def batches_landed(self) -> int:
        with self._closing() as db:
            row = db.execute("SELECT batches FROM factory_state").fetchone()
        return int(row[0]) if row else 0

    # --- loading --------------------------------------------------------------------------

    def load(self, batches: int = 1) -> list[int]:
        """Apply the next ``batches`` batches of changes and land their events."""
        return [self._batch(changes=True) for _ in range(batches)]

    def drain(self) -> int:
        """Land the events held back as late, with no new changes (a batch of its own), so
        the landed events describe the database exactly."""
        return self._batch(changes=False)

    def _batch(self, changes: bool) -> int:
        with self._closing() as db:
            db.execute("BEGIN IMMEDIATE")
            state = db.execute("SELECT batches, lsn FROM factory_state").fetchone()
            number, lsn = state if state else (0, 0)
            rng = random.Random(f"{self.seed}:customers:{number}")
            events = list(self._changes(db, rng, number, lsn)) if changes else []
            self._deliver(db, rng, number, events, hold=changes)
            if events:
                lsn = payload_of(events[-1])["source"]["lsn"]
            db.execute("DELETE FROM factory_state")
            db.execute("INSERT INTO factory_state VALUES (?, ?)", (number + 1, lsn))
            db.execute("COMMIT")
        return int(number)

    def _changes(self, db: sqlite3.Connection, rng: random.Random, number: int,
                 lsn: int) -> Iterator[dict[str, Any]]:
        rates = self.rates
        if number == 0:
            for _ in range(rates.snapshot):
                lsn += 1
                yield self._insert(db, rng, self._new_key(db, rng), lsn, number, "r")
            return
        for _ in range(rates.changes):
            lsn += 1
            keys = [r[0] for r in db.execute("SELECT customer_id FROM customers")]
            roll = rng.random()
            if not keys or roll < rates.inserts:
                yield self._insert(db, rng, self._new_key(db, rng), lsn, number, "c")
            elif roll < rates.inserts + rates.deletes:
                yield self._delete(db, rng.choice(keys), lsn, number)
            else:
                yield self._update(db, rng, rng.choice(keys), lsn, number)

    def _new_key(self, db: sqlite3.Connection, rng: random.Random) -> int:
        gone = [r[0] for r in db.execute(
            "SELECT DISTINCT customer_id FROM customers_history WHERE customer_id NOT IN "
            "(SELECT customer_id FROM customers) ORDER BY customer_id")]
        if gone and rng.random() < self.rates.reinserts:
            return int(rng.choice(gone))
        top = db.execute("SELECT MAX(customer_id) FROM customers_history").fetchone()[0]
        return int(top or 0) + 1

    def _insert(self, db: sqlite3.Connection, rng: random.Random, key: int, lsn: int,
                number: int, op: str) -> dict[str, Any]:
        city, country = rng.choice(CITIES)
        row = {"customer_id": key, "name": rng.choice(NAMES), "email": f"c{key}@example.com",
               "city": city, "country": country, "tier": rng.choice(TIERS)}
        self._write(db, row, lsn)
        return self._event(None, row, op, lsn, number)

    def _update(self, db: sqlite3.Connection, rng: random.Random, key: int, lsn: int,
                number: int) -> dict[str, Any]:
        before = self._row(db, key)
        after = dict(before)
        # every update changes something, as a real UPDATE that reaches the log does
        column = rng.choice(("name", "email", "city", "tier"))
        if column == "city":
            after["city"], after["country"] = rng.choice(
                [c for c in CITIES if c[0] != before["city"]])
        elif column == "email":
            after["email"] = f"c{key}.{lsn}@example.com"
        else:
            choices = NAMES if column == "name" else TIERS
            after[column] = rng.choice([v for v in choices if v != before[column]])
        self._write(db, after, lsn)
        return self._event(before, after, "u", lsn, number)

    def _delete(self, db: sqlite3.Connection, key: int, lsn: int,
                number: int) -> dict[str, Any]:
        before = self._row(db, key)
        db.execute("DELETE FROM customers WHERE customer_id = ?", (key,))
        db.execute("UPDATE customers_history SET end_lsn = ? WHERE customer_id = ? AND "
                   "end_lsn IS NULL", (lsn, key))
        return self._event(before, None, "d", lsn, number)

    def _row(self, db: sqlite3.Connection, key: int) -> dict[str, Any]:
        values = db.execute(f"SELECT {', '.join(COLUMNS)} FROM customers WHERE "
                            "customer_id = ?", (key,)).fetchone()
        return dict(zip(COLUMNS, values, strict=True))

    def _write(self, db: sqlite3.Connection, row: dict[str, Any], lsn: int) -> None:
        values = tuple(row[c] for c in COLUMNS)
        db.execute(f"INSERT OR REPLACE INTO customers VALUES ({', '.join('?' * len(COLUMNS))})",
                   values)
        db.execute("UPDATE customers_history SET end_lsn = ? WHERE customer_id = ? AND "
                   "end_lsn IS NULL", (lsn, row["customer_id"]))
        db.execute("INSERT INTO customers_history VALUES "
                   f"({', '.join('?' * (len(COLUMNS) + 2))})", (*values, lsn, None))

    def _event(self, before: dict[str, Any] | None, after: dict[str, Any] | None, op: str,
               lsn: int, number: int) -> dict[str, Any]:
        ts_ms = int((EPOCH.timestamp() + number * 600 + lsn % 600) * 1000)
        payload = {
            "before": before, "after": after,
            "source": {"version": "2.7.0.Final", "connector": "sqlite", "name": SERVER,
                       "ts_ms": ts_ms, "snapshot": "true" if op == "r" else "false",
                       "db": "operational", "table": "customers", "txId": lsn, "lsn": lsn},
            "op": op, "ts_ms": ts_ms + 5, "transaction": None}
        return {"schema": connect_schema(), "payload": payload} if self.rates.envelope \
            else payload

    # --- delivery -------------------------------------------------------------------------

    def _deliver(self, db: sqlite3.Connection, rng: random.Random, number: int,
                 events: list[dict[str, Any]], hold: bool) -> None:
        """Spread the batch's events (and those held back from the last batch) over its
        files, in order except for the moved ones; hold the late ones back."""
        rates, files = self.rates, max(1, self.rates.files)
        held = [json.loads(e) for (e,) in db.execute(
            "SELECT event FROM held_events WHERE batch = ?", (number,))]
        db.execute("DELETE FROM held_events WHERE batch = ?", (number,))
        groups: list[list[dict[str, Any]]] = [[] for _ in range(files)]
        groups[0].extend(held)
        for i, event in enumerate(events):
            if hold and number > 0 and rng.random() < rates.late:
                db.execute("INSERT INTO held_events VALUES (?, ?)",
                           (number + 1, json.dumps(event)))
                continue
            place = i * files // max(1, len(events))
            if rng.random() < rates.out_of_order:
                place = rng.randrange(files)
            groups[place].append(event)
            if rng.random() < rates.duplicate:
                groups[rng.randrange(files)].append(event)
        self.landing.mkdir(parents=True, exist_ok=True)
        for f, group in enumerate(groups):
            if not group and f:
                continue
            body = "".join(json.dumps(e) + "\n" for e in group)
            _write_atomic(self.landing / f"customers-{number:05d}-{f}.json", body.encode())

    def _closing(self) -> _Closing:
        return _Closing(self.connect())


class _Closing:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None and self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self.db.close()


def payload_of(event: dict[str, Any]) -> dict[str, Any]:
    """The Debezium envelope of an event, wrapped ({"schema", "payload"}) or not."""
    payload: dict[str, Any] = event.get("payload", event)
    return payload


def connect_schema() -> dict[str, Any]:
    """The Kafka Connect schema of a customers change event (JsonConverter, schemas on)."""
    def row(field: str) -> dict[str, Any]:
        types = {"customer_id": ("int32", False)}
        return {"type": "struct", "optional": True, "name": f"{SERVER}.customers.Value",
                "field": field, "fields": [
                    {"type": types.get(c, ("string", True))[0],
                     "optional": types.get(c, ("string", True))[1], "field": c}
                    for c in COLUMNS]}

    source = [{"type": t, "optional": o, "field": f} for f, t, o in (
        ("version", "string", False), ("connector", "string", False), ("name", "string", False),
        ("ts_ms", "int64", False), ("snapshot", "string", True), ("db", "string", False),
        ("table", "string", True), ("txId", "int64", True), ("lsn", "int64", True))]
    return {"type": "struct", "optional": False, "name": f"{SERVER}.customers.Envelope",
            "fields": [row("before"), row("after"),
                       {"type": "struct", "optional": False, "field": "source",
                        "name": "io.debezium.connector.sqlite.Source", "fields": source},
                       {"type": "string", "optional": False, "field": "op"},
                       {"type": "int64", "optional": True, "field": "ts_ms"},
                       {"type": "struct", "optional": True, "field": "transaction",
                        "fields": [{"type": "string", "optional": False, "field": "id"}]}]}
