"""Audit log monitoring (python/Log Monitoring.py): Databricks audit logs as Databricks delivers
them to a bucket (``workspaceId=<id>/date=<yyyy-MM-dd>/auditlogs_<n>.json``; records with
version, timestamp in ms, userIdentity.email, serviceName, actionName, requestParams,
response), here under the local stand-in of the notebook's s3a:// path. Bronze drops records
without an actionName; silver flattens, de-duplicates with a one-day watermark and drops
records dated before February 2021; one gold table per service name. Round 1 holds exact
duplicates; round 2 adds newer records and repeats some of round 1's newest (still inside
the watermark, so they are duplicates, not late rows)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dltcorpus.cases.base import Case, Env, Row, TableCheck, write_json_lines

BUCKET = ("s3/databricks-field-eng-audit-logs/field-eng/workspaceId=468793438776649")
SERVICES = ["accounts", "clusters", "dbfs", "deltaPipelines", "genie", "globalInitScripts",
            "groups", "iamRole", "instancePools", "jobs", "mlflowExperiment", "notebook",
            "repos", "secrets", "sqlAnalytics", "sqlPermissions", "ssh", "workspace"]
ACTIONS = ("create", "delete", "edit", "login", "runCommand", "getStatus")


@dataclass
class AuditLogs(Case):
    records: list[Row] = field(default_factory=list)
    files: int = 0

    def _record(self, when: datetime, n: int) -> Row:
        rng = self.rng
        service = rng.choice(SERVICES[:-2] + ["unityCatalog"])    # ssh, workspace: none
        return {"version": "2.0", "auditLevel": "WORKSPACE_LEVEL",
                "timestamp": int(when.timestamp() * 1000) + rng.randint(0, 999),
                "orgId": "468793438776649", "shardName": "field-eng",
                "sourceIPAddress": f"10.0.{rng.randint(0, 9)}.{rng.randint(1, 250)}",
                "userAgent": "databricks-cli", "sessionId": f"s{rng.randint(1, 40)}",
                "userIdentity": {"email": f"user{rng.randint(1, 6)}@example.com"},
                "serviceName": service,
                "actionName": None if rng.random() < 0.04 else rng.choice(ACTIONS),
                "requestId": f"r{n}-{rng.getrandbits(32):08x}",
                "requestParams": {"id": str(rng.randint(1, 99)),
                                  "path": rng.choice(["/a", "/b"])},
                "response": {"statusCode": rng.choice([200, 200, 403])}}

    def write(self, env: Env, round_: int) -> None:
        rng = self.rng
        if round_ == 1:
            days = [datetime(2021, 1, 30, tzinfo=UTC)] + [
                datetime(2021, 2, d, tzinfo=UTC) for d in range(1, 10)]
        else:
            days = [datetime(2021, 2, d, tzinfo=UTC) for d in (10, 11)]
        newest = sorted(self.records, key=lambda r: r["timestamp"])[-5:]
        for day in days:
            batch = [self._record(day + timedelta(seconds=rng.randint(0, 86399)), len(
                self.records) + i) for i in range(12)]
            if round_ == 1:
                batch += [dict(r) for r in batch[:2]]                   # exact duplicates
            elif day.day == 10:
                batch += [json.loads(json.dumps(r)) for r in newest]      # seen in round 1
            self.records += batch
            self.files += 1
            write_json_lines(env.data / BUCKET / f"date={day.date()}" /
                             f"auditlogs_{self.files:04d}.json",
                             [{k: v for k, v in r.items() if v is not None} for r in batch])

    def configuration(self, env: Env) -> dict[str, str]:
        return {}

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        bronze = [r for r in self.records if r["actionName"] is not None]
        silver: dict[str, Row] = {}
        for r in bronze:
            when = datetime.fromtimestamp(r["timestamp"] // 1000, UTC)
            row = {"serviceName": r["serviceName"], "actionName": r["actionName"],
                   "requestId": r["requestId"], "timestamp": r["timestamp"],
                   "email": r["userIdentity"]["email"], "requestParams": r["requestParams"],
                   "date_time": when, "date": when.date()}
            if row["date"] > datetime(2021, 1, 31).date():
                silver[json.dumps(r, sort_keys=True)] = row
        rows = list(silver.values())
        checks = [TableCheck(self.table("audit_logs_bronze"),
                             [{"requestId": r["requestId"], "actionName": r["actionName"]}
                              for r in bronze]),
                  TableCheck(self.table("audit_logs_silver"), rows,
                             json_columns=("requestParams",))]
        for service in SERVICES:
            checks.append(TableCheck(
                self.table(f"audit_logs_gold_{service.lower()}"),
                [r for r in rows if r["serviceName"] == service],
                columns=("serviceName", "actionName", "requestId", "email", "date_time"),
            ))
        return checks


def cases() -> list[Case]:
    return [AuditLogs("log-monitoring-python", ("python/Log Monitoring.py",))]
