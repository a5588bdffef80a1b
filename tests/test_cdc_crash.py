"""A real ``headwater run`` of a CDC pipeline killed with SIGKILL mid-batch (the SCD2
target committed, its key state not yet), then restarted: every key exactly as in the
factory's database, every version of its history too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from headwater.conf.layout import CDC_STATE
from headwater.factory.debezium import CdcRates, CustomerDatabase
from pipelines import cdc_project, check_against_database

# Starts headwater processes: not in the fast tier.
pytestmark = pytest.mark.procs


def txns(table) -> dict[str, int]:
    """The newest txn version per app id in a Delta table's log."""
    found: dict[str, int] = {}
    for path in sorted((table / "_delta_log").glob("*.json")):
        for action in map(json.loads, path.read_text().splitlines()):
            if "txn" in action:
                found[action["txn"]["appId"]] = action["txn"]["version"]
    return found


def headwater_run(root, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "headwater.cli", "run", "--project", str(root)],
                          env=dict(os.environ, PYTHONUNBUFFERED="1", **env),
                          capture_output=True, text=True, timeout=400, start_new_session=True)


def test_kill_9_between_target_and_state_commits_then_restart(tmp):
    db = CustomerDatabase(tmp / "factory", seed=21, rates=CdcRates(snapshot=20, changes=30))
    db.load(2)
    root = cdc_project(tmp, db, max_files_per_trigger=3)
    first = headwater_run(root)
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]

    db.load(2)
    db.drain()
    crashed = headwater_run(root, HEADWATER_FAULT="cdc_between_commits",
                            HEADWATER_FAULT_TABLE="customers_history",
                            HEADWATER_EVENT_FLUSH_SECONDS="3600")
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr[-3000:]
    history = root / "lake" / "customers_history"
    target, state = txns(history), txns(history / CDC_STATE)
    # killed mid-batch: the target holds a batch whose state commit never happened
    assert any(version > state.get(app, -1) for app, version in target.items()), (target, state)

    again = headwater_run(root)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    # every key and every version exactly as in the database: the replayed batch was not
    # applied twice (a second copy would be a duplicate history row) nor lost
    check_against_database(root / "lake", db)
    # the replay did not commit that batch to the target again
    commits = [a for p in sorted((history / "_delta_log").glob("*.json"))
               for a in map(json.loads, p.read_text().splitlines()) if "txn" in a]
    versions = [a["txn"]["version"] for a in commits]
    assert len(versions) == len(set(versions)), versions
