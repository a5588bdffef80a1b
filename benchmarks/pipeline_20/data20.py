"""Seeded input of the 20-dataset pipeline benchmark (benchmarks/pipeline_20.py): five
sources in three formats, as a shop's exports would land.

- ``orders/``: JSON Lines (order_id, customer_id, product_id, quantity, status, order_ts);
  about 2% name a customer the customer file lacks, 5% are cancelled, 1% have quantity 0;
- ``customers/``: CSV with a header (customer_id, name, country, segment, signup_date);
- ``products/``: parquet (product_id, name, category, price);
- ``changes/``: JSON Lines, a CDC feed of customer changes (customer_id, name, country,
  segment, seq, op): ``seq`` is unique and increasing, ``op`` is I, U or D;
- ``clicks/``: JSON Lines (click_id, customer_id, product_id, page, event_time), event time
  rising file by file with up to 5 minutes of disorder (under the aggregate's 10-minute
  watermark delay, so no click is late whatever the micro-batching).

``rows`` is the total over the five sources. Each file comes from its own seeded RNG: the
output depends only on (rows, seed), never on the machine.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

GENERATOR_VERSION = 1
# share of the total rows per source
SHARES = {"orders": 0.40, "clicks": 0.50, "customers": 0.05, "changes": 0.045,
          "products": 0.005}
COUNTRIES = ["us", "in", "de", "gb", "fr", "br", "jp", "ca", "au", "es", "nl", "se", "mx"]
SEGMENTS = ["consumer", "small_business", "enterprise", "public"]
CATEGORIES = ["books", "garden", "toys", "kitchen", "sports", "music", "tools", "beauty"]
PAGES = ["home", "search", "product", "cart", "checkout", None]  # None: dropped in silver
STATUSES = ["placed"] * 14 + ["shipped"] * 5 + ["cancelled"]
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
CLICK_SPAN_S = 30 * 86_400  # the clicks cover 30 days
MAX_DISORDER_S = 300


def sizes(rows: int) -> dict[str, int]:
    out = {name: max(20, int(rows * share)) for name, share in SHARES.items()}
    out["orders"] += max(0, rows - sum(out.values()))  # the rounding, so they sum to rows
    return out


def files_for(rows: int) -> dict[str, int]:
    """Files per source: about 20,000 rows a file, within fixed bounds."""
    n = sizes(rows)
    bounds = {"orders": (2, 40), "clicks": (2, 50), "changes": (1, 10), "customers": (1, 4),
              "products": (1, 2)}
    return {k: min(hi, max(lo, n[k] // 20_000)) for k, (lo, hi) in bounds.items()}


def _split(total: int, parts: int) -> list[range]:
    step, extra = divmod(total, parts)
    out, start = [], 0
    for k in range(parts):
        end = start + step + (1 if k < extra else 0)
        out.append(range(start, end))
        start = end
    return out


def _name(rng: random.Random, i: int) -> str:
    return f"Customer {i} {rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}."


def generate(out: Path, rows: int, seed: int = 20) -> dict:
    """Write the five sources under ``out``; returns what was written (rows and files)."""
    n, files = sizes(rows), files_for(rows)
    customers, products = n["customers"], n["products"]
    for sub in SHARES:
        (out / sub).mkdir(parents=True, exist_ok=True)

    for k, ids in enumerate(_split(customers, files["customers"])):
        rng = random.Random(f"{seed}/customers/{k}")
        lines = ["customer_id,name,country,segment,signup_date"]
        for i in ids:
            day = EPOCH - timedelta(days=rng.randrange(0, 2_000))
            lines.append(f"{i + 1},{_name(rng, i + 1)},{rng.choice(COUNTRIES)},"
                         f"{rng.choice(SEGMENTS)},{day:%Y-%m-%d}")
        (out / "customers" / f"customers-{k:03d}.csv").write_text("\n".join(lines) + "\n")

    for k, ids in enumerate(_split(products, files["products"])):
        rng = random.Random(f"{seed}/products/{k}")
        table = pa.table({
            "product_id": pa.array([i + 1 for i in ids], pa.int64()),
            "name": pa.array([f"Product {i + 1}" for i in ids]),
            "category": pa.array([rng.choice(CATEGORIES) for _ in ids]),
            # a few products without a price yet: dropped in silver
            "price": pa.array([None if rng.random() < 0.01 else rng.randrange(99, 50_000) / 100
                               for _ in ids], pa.float64())})
        pq.write_table(table, out / "products" / f"products-{k:03d}.parquet")

    for k, ids in enumerate(_split(n["orders"], files["orders"])):
        rng = random.Random(f"{seed}/orders/{k}")
        lines = []
        for i in ids:
            ts = EPOCH + timedelta(seconds=rng.randrange(0, 365 * 86_400))
            customer = rng.randrange(1, int(customers * 1.02) + 2)  # ~2% unknown customers
            product = rng.randrange(1, products + 1)
            quantity = rng.randrange(0, 100) and rng.randrange(1, 6)  # 1% zero
            lines.append(
                f'{{"order_id":{i + 1},"customer_id":{customer},"product_id":{product},'
                f'"quantity":{quantity},"status":"{rng.choice(STATUSES)}",'
                f'"order_ts":"{ts:%Y-%m-%d %H:%M:%S}"}}')
        (out / "orders" / f"orders-{k:04d}.json").write_text("\n".join(lines) + "\n")

    seq = 0
    for k, ids in enumerate(_split(n["changes"], files["changes"])):
        rng = random.Random(f"{seed}/changes/{k}")
        lines = []
        for _ in ids:
            seq += 1
            roll = rng.random()
            op = "D" if roll < 0.10 else "I" if roll < 0.15 else "U"
            cid = rng.randrange(1, int(customers * 1.1) + 2)
            lines.append(
                f'{{"customer_id":{cid},"name":"{_name(rng, cid)}",'
                f'"country":"{rng.choice(COUNTRIES)}","segment":"{rng.choice(SEGMENTS)}",'
                f'"seq":{seq},"op":"{op}"}}')
        (out / "changes" / f"changes-{k:03d}.json").write_text("\n".join(lines) + "\n")

    step = CLICK_SPAN_S / n["clicks"]
    for k, ids in enumerate(_split(n["clicks"], files["clicks"])):
        rng = random.Random(f"{seed}/clicks/{k}")
        lines = []
        for i in ids:
            at = EPOCH + timedelta(seconds=int(i * step) + rng.randrange(0, MAX_DISORDER_S))
            page = rng.choice(PAGES)
            lines.append(
                f'{{"click_id":{i + 1},"customer_id":{rng.randrange(1, customers + 1)},'
                f'"product_id":{rng.randrange(1, products + 1)},'
                + (f'"page":"{page}",' if page else "")
                + f'"event_time":"{at:%Y-%m-%d %H:%M:%S}"}}')
        (out / "clicks" / f"clicks-{k:04d}.json").write_text("\n".join(lines) + "\n")

    return {"generator_version": GENERATOR_VERSION, "rows": rows, "seed": seed,
            "source_rows": n, "files": files}
