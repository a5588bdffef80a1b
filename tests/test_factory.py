"""The data factory: deterministic batches, atomic files, ground truth that matches what
landed, and loads that can be retried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headwater.factory import DataFactory
from headwater.factory.factory import Rates


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted((root / "landing").rglob("*")) if p.is_file()}


def _landed_orders(root: Path) -> list[tuple[str, object]]:
    """(file, record or raw text) for every record in the landed order files."""
    out = []
    for path in sorted((root / "landing" / "orders").rglob("*.json")):
        text = path.read_text()
        try:
            doc = json.loads(text)
            name = f"{path.parent.name}/{path.name}"
            out.extend((name, r) for r in (doc if isinstance(doc, list) else [doc]))
            continue
        except ValueError:
            pass
        for line in text.splitlines():
            try:
                out.append((f"{path.parent.name}/{path.name}", json.loads(line)))
            except ValueError:
                out.append((f"{path.parent.name}/{path.name}", line))
    return out


def test_same_seed_same_batches_and_truth_matches_the_files(tmp_path):
    rates = Rates(malformed=0.15)
    a, b = DataFactory(tmp_path / "a", 7, rates), DataFactory(tmp_path / "b", 7, rates)
    assert a.load(3) == [0, 1, 2] and b.load(2) == [0, 1] and b.load() == [2]
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert a.truth().entries == b.truth().entries
    assert DataFactory(tmp_path / "c", seed=8).load() and \
        _files(tmp_path / "c") != {k: v for k, v in _files(tmp_path / "a").items() if "00000" in k}

    truth = a.truth()
    landed = _landed_orders(tmp_path / "a")
    expected = [(e["file"], e["record"]) for e in truth.of("orders")]
    assert sorted(map(json.dumps, landed)) == sorted(map(json.dumps, expected))
    kinds = {e["kind"] for e in truth.of("orders")}
    assert kinds >= {"valid", "late", "duplicate", "malformed"}
    assert not list((tmp_path / "a").rglob(".*.tmp"))  # atomic: no half-written file left


def test_feeds_carry_late_out_of_order_duplicate_and_mistyped_records(tmp_path):
    factory = DataFactory(tmp_path, seed=3, rates=Rates(orders=60, mistyped=0.2, late=0.2))
    factory.load(2)
    truth = factory.truth()
    orders = truth.of("orders")
    times = [e["record"]["timestamp"] for e in orders if e["kind"] == "valid" and e["batch"] == 1]
    assert times != sorted(times)  # out of order
    late = [e["record"]["timestamp"] for e in truth.of("orders", "late") if e["batch"] == 1]
    assert late and max(late) < min(times)  # far behind the batch's window
    mistyped = truth.records("orders", "mistyped")
    assert mistyped and all(isinstance(r["items"][0]["quantity"], str) for r in mistyped)
    valid_ids = {r["order_id"] for r in truth.records("orders", "valid")}
    assert all(r["order_id"] in valid_ids for r in truth.records("orders", "duplicate"))
    multi = {e["file"] for e in orders if e["multi_line"]}
    single = {e["file"] for e in orders if not e["multi_line"]}
    assert multi and single
    assert truth.count("devices", "late") and truth.count("colors")


def test_an_interrupted_load_lands_the_same_batch_again_without_doubling(tmp_path):
    from deltalake import DeltaTable

    factory = DataFactory(tmp_path, seed=1)
    factory.load(2)
    files, truth = _files(tmp_path), factory.truth().entries
    rows = DeltaTable(str(tmp_path / "devices_bronze")).count()
    # a crash after batch 1 landed but before its state was saved
    (tmp_path / "_factory" / "state.json").write_text(json.dumps({"batches": 1, "seed": 1}))
    assert factory.load() == [1]
    assert _files(tmp_path) == files and factory.truth().entries == truth
    assert DeltaTable(str(tmp_path / "devices_bronze")).count() == rows
    assert rows == factory.truth().count("devices")


@pytest.mark.procs  # `headwater sql` starts a JVM of its own (twice)
def test_factory_and_sql_commands(tmp_path):
    from tests.support import cli

    landed = cli("factory", "--root", str(tmp_path / "lake"), "--batches", "2", "--seed", "3",
                 cwd=tmp_path)
    assert landed.returncode == 0, landed.stderr[-2000:]
    assert "landed batch 1" in landed.stdout and "orders: " in landed.stdout
    truth = DataFactory(tmp_path / "lake", seed=3).truth()
    query = cli("sql", "SELECT device_id, count(*) AS n FROM devices_bronze GROUP BY device_id "
                "ORDER BY device_id", "--root", str(tmp_path / "lake"), cwd=tmp_path)
    assert query.returncode == 0, query.stderr[-2000:]
    lines = query.stdout.strip().splitlines()
    got = {int(line.split()[0]): int(line.split()[1]) for line in lines[2:-1]}
    expected: dict[int, int] = {}
    for r in truth.records("devices"):
        expected[r["device_id"]] = expected.get(r["device_id"], 0) + 1
    assert got == expected
    bad = cli("sql", "SELECT * FROM nope", "--root", str(tmp_path / "lake"), cwd=tmp_path)
    assert bad.returncode == 1 and "devices_bronze" in bad.stderr
