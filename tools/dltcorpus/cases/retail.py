"""Retail sales (python/Retail Sales.py, sql/Retail Sales.sql): shaped like
/databricks-datasets/retail-org: customers/customers.csv (header, text values, names with
commas) and sales_orders/*.json (epoch-second order times as text, nested ordered_products).
Orders stream in (Auto Loader / read_files), are joined with the customers, and sales in Los
Angeles and Chicago are summed per day, customer and currency. Round 2 adds an orders file;
the customers file stays as it is (it already lists every customer)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dltcorpus.cases.base import Case, Env, Row, TableCheck, write_json_lines

BASE = "databricks-datasets/retail-org"
CSV_COLUMNS = ("customer_id", "tax_id", "tax_code", "customer_name", "state", "city", "postcode",
               "street", "number", "unit", "region", "district", "lon", "lat",
               "ship_to_address", "valid_from", "valid_to", "units_purchased",
               "loyalty_segment")
CITIES = (("CA", "Los Angeles"), ("IL", "Chicago"), ("TX", "Houston"), ("CA", "San Diego"))
PRODUCTS = (("AVpe6FfKilAPnD_xyfD7", "Sony - 5.1-Ch. 3D Smart Blu-ray Home Theater", 488),
            ("AVpfuJ4pilAPnD_xhDyM", "Opteka - 500mm f/8.0 Telephoto Lens", 121),
            ("AVpf3txeLJeJML43FN82", "Canon - EF 75-300mm Zoom Lens", 199),
            ("AVpfRoqcLJeJML436FqG", "Sennheiser - Wireless Headphones", 299))


@dataclass
class Retail(Case):
    sql: bool = False
    customers: list[Row] = field(default_factory=list)
    orders: list[Row] = field(default_factory=list)

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        if round_ == 1:
            self._write_customers(env)
        new = []
        for i in range(120 if round_ == 1 else 50):
            known = rng.random() < 0.9
            customer = rng.choice(self.customers) if known else {
                "customer_id": str(99000000 + i), "customer_name": "UNKNOWN, SOMEONE"}
            products = []
            for _ in range(rng.randint(1, 3)):
                pid, name, price = rng.choice(PRODUCTS)
                products.append({"curr": rng.choice(["USD", "USD", "EUR"]), "id": pid,
                                 "name": name, "price": price, "promotion_info": None,
                                 "qty": rng.randint(1, 4), "unit": "pcs"})
            epoch = 1575158400 + rng.randint(0, 60 * 86400)      # Dec 2019 - Jan 2020
            new.append({
                "clicked_items": [[rng.choice(PRODUCTS)[0], str(rng.randint(1, 300))]],
                "customer_id": customer["customer_id"],
                "customer_name": customer["customer_name"],
                "number_of_line_items": str(len(products)),
                "order_datetime": str(epoch),
                "order_number": None if rng.random() < 0.05 else 1000 * round_ + i,
                "ordered_products": products,
                "promo_info": None})
        self.orders += new
        write_json_lines(env.data / BASE / "sales_orders" / f"part-{round_:05d}.json", new)

    def _write_customers(self, env: Env) -> None:
        rng = self.rng
        first = ("BETTY", "JOHN", "MARIA", "WEI", "AMIT", "SARA", "LUIS", "OLGA")
        last = ("BAKER", "SMITH", "GARCIA", "CHEN", "PATEL", "JONES")
        for i in range(40):
            state, city = rng.choice(CITIES)
            self.customers.append({
                "customer_id": str(12096776 + i * 7), "tax_id": str(rng.randint(10**8, 10**9)),
                "tax_code": rng.choice(["A", "B", ""]),
                "customer_name": f"{rng.choice(last)}, {rng.choice(first)}",
                "state": state, "city": city, "postcode": str(rng.randint(10000, 99999)),
                "street": "Main Street", "number": str(rng.randint(1, 999)), "unit": "",
                "region": "", "district": "", "lon": f"{rng.uniform(-120, -80):.4f}",
                "lat": f"{rng.uniform(30, 45):.4f}", "ship_to_address": f"{state}, {city}",
                "valid_from": "1530403200", "valid_to": "",
                "units_purchased": str(rng.randint(1, 200)),
                "loyalty_segment": str(rng.randint(0, 3))})
        path = env.data / BASE / "customers" / "customers.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as out:
            writer = csv.DictWriter(out, CSV_COLUMNS)
            writer.writeheader()
            writer.writerows(self.customers)

    def _cleaned(self) -> list[Row]:
        by_key = {(c["customer_id"], c["customer_name"]): c for c in self.customers}
        out = []
        for order in self.orders:
            if order["order_number"] is None:
                continue
            c = by_key.get((order["customer_id"], order["customer_name"]), {})
            when = datetime.fromtimestamp(int(order["order_datetime"]), UTC)
            out.append({
                "customer_id": order["customer_id"], "customer_name": order["customer_name"],
                "number_of_line_items": order["number_of_line_items"],
                "order_datetime": when, "order_date": when.date(),
                "order_number": order["order_number"],
                "ordered_products": order["ordered_products"],
                **{k: self._csv(c.get(k)) for k in ("state", "city", "lon", "lat",
                                                    "units_purchased", "loyalty_segment")}})
        return out

    def _in(self, cleaned: list[Row], city: str) -> list[Row]:
        groups: dict[tuple[object, ...], list[int]] = {}
        for row in cleaned:
            if row["city"] != city:
                continue
            for p in row["ordered_products"]:
                key = (row["order_date"], row["city"], row["customer_id"],
                       row["customer_name"], p["curr"])
                acc = groups.setdefault(key, [0, 0, 0])
                acc[0] += p["price"]
                acc[1] += p["qty"]
                acc[2] += 1
        currency = "curr" if self.sql else "currency"
        out = []
        for (day, c, cid, name, curr), (sales, qty, count) in groups.items():
            row = {"order_date": day, "city": c, "customer_id": cid, "customer_name": name,
                   currency: curr, "sales": sales, "quantity": qty}
            if self.sql:
                row["product_count"] = count
            out.append(row)
        return out

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        cleaned = self._cleaned()
        checks = [
            TableCheck(self.table("sales_orders_raw"), [
                {k: o[k] for k in ("customer_id", "customer_name", "order_datetime",
                                   "order_number", "ordered_products")} for o in self.orders]),
            TableCheck(self.table("sales_orders_cleaned"), cleaned),
            TableCheck(self.table("sales_order_in_la"), self._in(cleaned, "Los Angeles")),
            TableCheck(self.table("sales_order_in_chicago"), self._in(cleaned, "Chicago")),
        ]
        if self.sql:
            checks.insert(0, TableCheck(self.table("customers"),
                                        [{k: self._csv(v) for k, v in c.items()}
                                         for c in self.customers]))
        return checks

    def _csv(self, value: object) -> object:
        """A CSV field as the notebook reads it: an empty field is NULL; ``spark.read.csv``
        (Python) keeps text, ``read_files`` (SQL) infers column types by default (numbers
        here: every value of those columns is one)."""
        if value is None or value == "":
            return None
        if self.sql and isinstance(value, str) and re.fullmatch(r"-?\d+", value):
            return int(value)
        if self.sql and isinstance(value, str) and re.fullmatch(r"-?\d+\.\d+", value):
            return float(value)
        return value


def cases() -> list[Case]:
    return [Retail("retail-python", ("python/Retail Sales.py",)),
            Retail("retail-sql", ("sql/Retail Sales.sql",), sql=True)]
