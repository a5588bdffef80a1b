"""`headwater demo --once`: the factory's batches through the medallion pipeline, gold equal
to the ground truth, every landed record accounted for."""

from __future__ import annotations

import pytest
from tests.support import cli, show

# Starts other JVMs or headwater processes: not in the fast tier.
pytestmark = pytest.mark.procs


def test_demo_once_verifies_gold_against_the_ground_truth(tmp_path):
    run = cli("demo", "--once", "--batches", "2", "--root", str(tmp_path / "demo"), cwd=tmp_path)
    assert run.returncode == 0, show(run)
    checks = [line for line in run.stdout.splitlines() if line.strip().startswith("[")
              and ("[ok ]" in line or "[FAIL]" in line)]
    assert len(checks) == 11 and all("[ok ]" in line for line in checks), run.stdout
    for what in ("customers (SCD 1) = the database's customers table",
                 "customers_history (SCD 2) = every version in the database",
                 "revenue_by_tier = ground truth"):
        assert f"[ok ] {what}" in run.stdout, run.stdout
    for table in ("revenue_by_country", "revenue_by_hour", "revenue_by_tier", "device_counts"):
        assert f"\n{table} (" in run.stdout
    # the project is left for the user: run it again, edit it, query it
    assert (tmp_path / "demo" / "pipeline" / "demo.py").is_file()
    assert (tmp_path / "demo" / "headwater.toml").is_file()
