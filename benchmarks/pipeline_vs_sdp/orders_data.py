"""Deterministic nested-orders JSON generator for the pipeline benchmark, and the gold result
the pipeline must produce from it (computed here in plain Python: the ground truth).

One JSON object per line (JSON Lines), shaped like an e-commerce order export: a nested
``customer`` with an ``address``, a ``payment`` struct, an ``items`` array of structs and a
``metadata`` array of key/value structs. Some orders have an empty or missing ``items`` or
``metadata`` array and a few have no address, so ``explode_outer`` and null grouping keys are
exercised. File ``k`` is generated from its own seeded RNG: the output depends only on
(orders, files, seed), never on the machine or the Python hash seed.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

GENERATOR_VERSION = 1

COUNTRIES = [  # (country, cities, weight)
    ("US", ["New York", "Chicago", "Austin", "Seattle"], 30),
    ("IN", ["Mumbai", "Delhi", "Bengaluru", "Pune"], 20),
    ("DE", ["Berlin", "Munich", "Hamburg"], 10),
    ("GB", ["London", "Leeds", "Bristol"], 9),
    ("FR", ["Paris", "Lyon", "Nantes"], 8),
    ("BR", ["Sao Paulo", "Rio de Janeiro"], 6),
    ("JP", ["Tokyo", "Osaka"], 5),
    ("CA", ["Toronto", "Vancouver"], 4),
    ("AU", ["Sydney", "Melbourne"], 3),
    ("ES", ["Madrid", "Barcelona"], 2),
    ("NL", ["Amsterdam"], 1),
    ("SE", ["Stockholm"], 1),
    ("MX", ["Mexico City"], 1),
]
_COUNTRY_WEIGHTS = [w for _, _, w in COUNTRIES]
PRODUCTS = [(f"SKU-{i:04d}", f"Product {i:04d}", 199 + (i * 7919) % 49_800) for i in range(500)]
PAYMENT_METHODS = ["card", "paypal", "upi", "bank_transfer", "cod"]
METADATA_KEYS = {
    "source": ["web", "app", "store", "partner"],
    "campaign": ["none", "spring_sale", "black_friday", "newsletter"],
    "priority": ["standard", "express"],
    "gift": ["true", "false"],
}
FIRST = ["Asha", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jo"]
LAST = ["Kumar", "Smith", "Li", "Okafor", "Novak", "Garcia", "Sato", "Muller", "Silva", "Berg"]
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def _order(rng: random.Random, order_no: int) -> tuple[dict, str | None, list[tuple[int, int]], int]:
    """One order, plus (country, [(quantity, price_cents)], metadata count) for the expectation."""
    customer_id = rng.randrange(1, 50_001)
    country, cities, _ = rng.choices(COUNTRIES, weights=_COUNTRY_WEIGHTS)[0]
    first, last = rng.choice(FIRST), rng.choice(LAST)
    address = {
        "city": rng.choice(cities),
        "postal_code": f"{rng.randrange(10_000, 99_999)}",
        "country": country,
    }
    if rng.random() < 0.01:  # a few orders without an address: a null country in gold
        address, country = None, None

    roll = rng.random()
    if roll < 0.02:
        items = None  # missing array: explode_outer keeps the order with null item columns
    elif roll < 0.04:
        items = []
    else:
        items = []
        for _ in range(rng.randint(1, 5)):
            item_id, name, cents = rng.choice(PRODUCTS)
            items.append({"item_id": item_id, "product_name": name,
                          "quantity": rng.randint(1, 4), "price": cents / 100})

    roll = rng.random()
    if roll < 0.05:
        metadata = None
    elif roll < 0.10:
        metadata = []
    else:
        keys = rng.sample(sorted(METADATA_KEYS), rng.randint(1, 3))
        metadata = [{"key": k, "value": rng.choice(METADATA_KEYS[k])} for k in keys]

    ts = _EPOCH + timedelta(seconds=rng.randrange(0, 365 * 86_400))
    order = {
        "order_id": f"ORD-{order_no:09d}",
        "timestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "customer": {
            "customer_id": customer_id,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{customer_id}@example.com",
            "address": address,
        },
        "items": items,
        "payment": {"method": rng.choice(PAYMENT_METHODS),
                    "transaction_id": f"TXN-{rng.getrandbits(48):012x}"},
        "metadata": metadata,
    }
    lines = [(it["quantity"], round(it["price"] * 100)) for it in items or []]
    return order, country, lines, len(metadata or [])


def generate(out_dir: Path, orders: int, files: int, seed: int = 4) -> dict:
    """Write ``orders`` orders into ``files`` JSON Lines files; return the expected gold.

    Expected gold (one row per country, None included), matching the pipeline's semantics:
    silver explodes ``metadata`` then ``items`` with explode_outer, so an order yields
    max(1, #metadata) * max(1, #items) silver rows and each item line is repeated once per
    metadata entry (as in the seed notebook the pipeline mirrors).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    gold: dict = defaultdict(lambda: {"orders": 0, "lines": 0, "quantity": 0, "revenue_cents": 0})
    per_file, extra = divmod(orders, files)
    order_no = 0
    for k in range(files):
        rng = random.Random(f"{seed}/{k}")
        n = per_file + (1 if k < extra else 0)
        chunks = []
        for _ in range(n):
            order, country, lines, n_meta = _order(rng, order_no)
            order_no += 1
            chunks.append(json.dumps(order, separators=(",", ":")))
            mult = max(1, n_meta)
            g = gold[country]
            g["orders"] += 1
            g["lines"] += mult * max(1, len(lines))
            g["quantity"] += mult * sum(q for q, _ in lines)
            g["revenue_cents"] += mult * sum(q * c for q, c in lines)
        (out_dir / f"orders-{k:05d}.json").write_text("\n".join(chunks) + "\n")
    silver_rows = sum(g["lines"] for g in gold.values())
    rows = [{"country": c, "orders": g["orders"], "lines": g["lines"],
             "quantity": g["quantity"], "revenue": str(Decimal(g["revenue_cents"]) / 100)}
            for c, g in gold.items()]
    return {"generator_version": GENERATOR_VERSION, "orders": orders, "files": files,
            "seed": seed, "silver_rows": silver_rows, "gold": rows}
