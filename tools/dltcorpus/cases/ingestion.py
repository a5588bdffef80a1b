"""Serverless ingestion benchmark (dlt-serverless-benchmarks/ingestion/01_DLT_Ingestion_Notebook.py):
JSON files as its 00_Data_Generator.py writes them with dbldatagen and ``df.write.json`` (id,
customer_id, name with 1% NULLs left out, payment_instrument_type, amount, email, ip_address,
created_ts in Spark's JSON timestamp form), in the notebook's volume path; Auto Loader
without schema hints, plus a ``date`` column. Round 2 adds a file. Compared: the text
columns and the date (Auto Loader without inferColumnTypes reads every column as text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dltcorpus.cases.base import Case, Env, Row, TableCheck, write_json_lines

FOLDER = "Volumes/main/data/datagen/customers"
PAYMENTS = ("paypal", "Visa", "Mastercard", "American Express", "discover", "branded visa",
            "branded mastercard")


@dataclass
class Ingestion(Case):
    rows: list[Row] = field(default_factory=list)

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        new = []
        start = datetime(2023, 1, 1, tzinfo=UTC)
        for _ in range(200 if round_ == 1 else 80):
            when = start + timedelta(seconds=rng.randint(0, 365 * 86400 - 1))
            row = {"id": len(self.rows) + len(new), "customer_id": rng.randint(0, 50),
                   "name": None if rng.random() < 0.01 else
                   f"{rng.choice(['ann', 'bo', 'cy'])} {rng.choice(['lee', 'ng', 'ortiz'])}",
                   "payment_instrument_type": rng.choice(PAYMENTS),
                   "amount": round(rng.uniform(1, 9999), 2),
                   "email": f"{rng.choice(['a', 'b'])}.{rng.randint(1, 99)}@example.com",
                   "ip_address": ".".join(str(rng.randint(0, 255)) for _ in range(4)),
                   "created_ts": when.strftime("%Y-%m-%dT%H:%M:%S.000Z")}
            new.append(row)
        self.rows += new
        write_json_lines(env.data / FOLDER / f"part-{round_:05d}.json",
                         [{k: v for k, v in r.items() if v is not None} for r in new])

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        rows = [{"name": r["name"], "email": r["email"],
                 "payment_instrument_type": r["payment_instrument_type"],
                 "date": datetime.strptime(r["created_ts"][:10], "%Y-%m-%d").date()}
                for r in self.rows]
        return [TableCheck(self.table("customer_ingestion"), rows)]


def cases() -> list[Case]:
    return [Ingestion("serverless-ingestion",
                      ("dlt-serverless-benchmarks/ingestion/01_DLT_Ingestion_Notebook.py",))]
