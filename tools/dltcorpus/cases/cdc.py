"""Retail CDC (change-data-capture-example: 2-Retail_DLT_CDC_Python.py and _sql.sql): JSON
change events shaped like 1-CDC_DataGenerator.py's (id, firstname, lastname, email, address,
operation APPEND/UPDATE/DELETE or missing, operation_date "MM-dd-yyyy HH:mm:ss"; Spark's JSON
writer leaves NULL fields out) in ``<source>/customers``, ingested by Auto Loader, cleaned by
expectations on a view, and applied with APPLY CHANGES (SCD type 1, keys id, sequenced by the
operation_date text) into customer_silver.

The generator's own events all have distinct ids (uuid4 per row), so no update or delete ever
meets a row; these events reuse ids, so updates, deletes, out-of-order arrivals and a delete
followed by an older update (the tombstone case) all happen. Round 2 adds a file of events.

Configuration: PipelineSetting.json.sql's ``configuration`` (``source`` pointed at the local
copy of its folder) and its ``target`` as the pipeline's schema."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from dltcorpus.cases.base import Case, Env, Row, TableCheck, write_json_lines
from dltcorpus.edits import local_path

SETTINGS = "change-data-capture-example/PipelineSetting.json.sql"
START = datetime(2024, 3, 1, 8, 0, 0)


def pipeline_settings(repo: Path) -> dict[str, object]:
    """PipelineSetting.json.sql: a SQL-notebook export whose body is the pipeline's JSON."""
    text = (repo / SETTINGS).read_text()
    return json.loads(text.split("\n", 1)[1])


@dataclass
class Cdc(Case):
    repo: Path = Path()
    events: list[Row] = field(default_factory=list)
    live: dict[str, Row] = field(default_factory=dict)   # what the source database holds
    tick: int = 0
    late: list[Row] = field(default_factory=list)

    def configuration(self, env: Env) -> dict[str, str]:
        conf = {str(k): str(v) for k, v in
                dict(pipeline_settings(self.repo)["configuration"]).items()}  # type: ignore[call-overload]
        conf["source"] = local_path(conf["source"], env.data)
        return conf

    def _when(self) -> str:
        self.tick += 1
        return (START + timedelta(seconds=97 * self.tick)).strftime("%m-%d-%Y %H:%M:%S")

    def _event(self, op: str | None, row: Row, when: str | None = None) -> Row:
        return {**row, "operation": op, "operation_date": when or self._when()}

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        new: list[Row] = []
        for _ in range(50 if round_ == 1 else 15):
            bits = rng.getrandbits(128)
            cid = str(uuid.UUID(int=bits, version=4))     # uuid4's shape, seeded
            row = {"id": cid, "firstname": rng.choice(["Ann", "Bob", "Chen", "Dina", "Eve"]),
                   "lastname": rng.choice(["Moss", "Lee", "Okafor", "Silva"]),
                   "email": f"{cid[:6]}@example.com",
                   "address": None if rng.random() < 0.05 else f"{rng.randint(1, 999)} Elm St"}
            self.live[cid] = row
            new.append(self._event("APPEND", row))
        keys = sorted(self.live)
        for cid in rng.sample(keys, 25 if round_ == 1 else 12):
            if cid not in self.live:
                continue
            row = {**self.live[cid], "address": f"{rng.randint(1, 999)} Oak Ave",
                   "email": f"{cid[:6]}.{round_}@example.com"}
            self.live[cid] = row
            new.append(self._event("UPDATE", row))
        for cid in rng.sample(sorted(self.live), 6 if round_ == 1 else 4):
            before = self.live.pop(cid)
            stale = self._when()           # an update made before the delete ...
            new.append(self._event("DELETE", before))
            if round_ == 1:                # ... arriving in the next round: the tombstone of
                self.late.append(self._event("UPDATE", {**before, "lastname": "Stale"}, stale))
            else:                          # the first run keeps it out; or in the same file
                new.append(self._event("UPDATE", {**before, "lastname": "Stale"}, stale))
        if round_ == 2:
            new += self.late
        # rows the expectations drop: no operation, no id
        some = self.live[sorted(self.live)[0]]
        new.append(self._event(None, {**some, "firstname": "NoOp"}))
        new.append(self._event("UPDATE", {**some, "id": None}))
        rng.shuffle(new)
        self.events += new
        folder = Path(self.configuration(env)["source"]) / "customers"
        parts = 3 if round_ == 1 else 1
        for part in range(parts):
            chunk = new[part::parts]
            write_json_lines(folder / f"part-{round_}{part:04d}.json",
                             [{k: v for k, v in e.items() if v is not None} for e in chunk])

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        winners: dict[str, Row] = {}
        for e in self.events:
            if e["id"] is None or e["operation"] is None:
                continue
            best = winners.get(e["id"])
            if best is None or e["operation_date"] > best["operation_date"]:
                winners[e["id"]] = e
        silver = [{k: e[k] for k in ("id", "firstname", "lastname", "email", "address")}
                  for e in winners.values() if e["operation"] != "DELETE"]
        bronze = [{"id": e["id"], "operation": e["operation"],
                   "operation_date": e["operation_date"]} for e in self.events]
        return [TableCheck(self.table("customer_bronze"), bronze),
                TableCheck(self.table("customer_silver"), silver)]


def cases(repo: Path) -> list[Case]:
    settings = pipeline_settings(repo) if (repo / SETTINGS).is_file() else {}
    target = str(settings.get("target") or "") or None
    notes = ("configuration and target from PipelineSetting.json.sql; its library "
             "1-CDC_DataGenerator is replaced by the runner's generated events",)
    base = "change-data-capture-example/notebooks/"
    return [Cdc("cdc-python", (base + "2-Retail_DLT_CDC_Python.py",), database=target,
                notes=notes, repo=repo),
            Cdc("cdc-sql", (base + "2-Retail_DLT_CDC_sql.sql",), database=target, notes=notes,
                repo=repo)]
