"""Streaming integrals (applyInPandasWithState-integral-calculus/01_DLT_StatefulTimeWeightedAverage.py):
sensor readings (location_id, sensor, timestamp, value FLOAT) appended to a Delta table,
``<catalog>.<schema_name>.<raw_table>``, as the runbook (00_Runbook_for_Demo.py) appends its
three time windows, one pipeline update after each. The pipeline streams the table and, per
location, sensor and 10-minute interval, buffers readings in applyInPandasWithState until the
watermark (interval end minus 10 minutes) passes the interval, then emits its time-weighted
average. Three rounds, as in the runbook: the first closes no interval; the second closes
the first group; the third brings a reading behind the watermark (dropped), three groups that
close and one that stays open. Readings are generated (seeded), not the runbook's.

The answers model Structured Streaming's rules: a reading whose interval end is behind the
watermark of the batch before is dropped; after each update's data the watermark moves to
the newest interval end minus 10 minutes and a group whose interval end is below it emits
(in the same update, as the runbook shows: a no-data batch runs the timeouts).

Configuration as the runbook sets it (schema_name, raw_table), plus ``catalog`` =
``spark_catalog`` (the notebook reads it for Unity Catalog; without it, it names
hive_metastore). The pipeline's target schema is the raw table's, as in the runbook."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
from deltalake import write_deltalake

from dltcorpus.cases.base import Case, Env, Row, TableCheck, f32

SCHEMA_NAME, RAW = "demo_dlt_integrals", "raw"
ARROW = pa.schema([("location_id", pa.string()), ("sensor", pa.string()),
                   ("timestamp", pa.timestamp("us", tz="UTC")), ("value", pa.float32())])
BASE = datetime(2024, 1, 1, 12, 0)
WINDOW = timedelta(minutes=10)


def interval_end(when: datetime) -> datetime:
    start = BASE + (when - BASE) // WINDOW * WINDOW
    return start + WINDOW


def time_weighted(rows: list[Row], end: datetime) -> float | None:
    """The notebook's pd_time_weighted_average: the first reading stands at the interval's
    start, the last at its end; each value weighs the whole minutes until the next point."""
    ordered = sorted(rows, key=lambda r: r["timestamp"])
    points = [(end - WINDOW, ordered[0]["value"])] + \
        [(r["timestamp"], r["value"]) for r in ordered] + [(end, ordered[-1]["value"])]
    total = 0.0
    for (t, value), (t_next, _) in zip(points, points[1:]):
        total += value * int((t_next - t).total_seconds() / 60)
    return f32(total / 10)


@dataclass
class Integrals(Case):
    rounds_written: list[list[Row]] = field(default_factory=list)

    def configuration(self, env: Env) -> dict[str, str]:
        return {"schema_name": SCHEMA_NAME, "raw_table": RAW, "catalog": "spark_catalog"}

    def _reading(self, location: str, sensor: str, minute: int) -> Row:
        return {"location_id": location, "sensor": sensor,
                "timestamp": BASE + timedelta(minutes=minute),
                "value": f32(float(self.rng.randint(1, 400)) / 2)}

    def write(self, env: Env, round_: int) -> None:
        rng, r = self.rng, self._reading
        if round_ == 1:      # group A opens, nothing closes
            rows = [r("L1", "Wind_Speed", 11), r("L1", "Wind_Speed", 12 + rng.randint(0, 3))]
        elif round_ == 2:    # two more for A, then a reading 30 minutes later closes A
            rows = [r("L1", "Wind_Speed", 16), r("L1", "Wind_Speed", 19),
                    r("L1", "Wind_Speed", 40)]
        else:                # a late reading for A; B, C, D close; E stays open
            rows = [r("L1", "Wind_Speed", 18), r("L1", "Wind_Speed", 41 + rng.randint(0, 7)),
                    r("L2", "Oil_Temp", 48), r("L2", "Oil_Temp", 41), r("L2", "Oil_Temp", 45),
                    r("L3", "Humidity", 50 + rng.randint(0, 9)), r("L3", "Wind_Speed", 90)]
        self.rounds_written.append(rows)
        table = pa.Table.from_pylist(rows, ARROW)
        write_deltalake(str(env.storage / SCHEMA_NAME / RAW), table, mode="append")

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        watermark: datetime | None = None
        groups: dict[tuple[str, str, datetime], list[Row]] = {}
        emitted: list[Row] = []
        for rows in self.rounds_written[:round_]:
            for row in rows:
                end = interval_end(row["timestamp"])
                if watermark is not None and end <= watermark:
                    continue                                   # behind the watermark
                groups.setdefault((row["location_id"], row["sensor"], end), []).append(row)
            # the newest interval end seen, minus the delay; it never moves back
            newest = max(interval_end(r["timestamp"]) for r in rows) - WINDOW
            watermark = newest if watermark is None else max(watermark, newest)
            for key in sorted(k for k in groups if k[2] < watermark):
                buffered = groups.pop(key)
                emitted.append({"location_id": key[0], "sensor": key[1], "timestamp": key[2],
                                "value": time_weighted(buffered, key[2]),
                                "count_rows": len(buffered)})
        inputs = [dict(r) for rows in self.rounds_written[:round_] for r in rows]
        return [TableCheck(self.table("input_table"), inputs),
                TableCheck(self.table("dlt_integrals"), emitted,
                           columns=("location_id", "sensor", "timestamp", "value",
                                    "count_rows"))]


def cases() -> list[Case]:
    return [Integrals("integrals-python",
                      ("applyInPandasWithState-integral-calculus/"
                       "01_DLT_StatefulTimeWeightedAverage.py",),
                      database=SCHEMA_NAME, rounds=3,
                      notes=("three rounds, as the runbook's three updates",))]
