"""A query whose checkpoint lease is taken over stops, with HW_LEASE_LOST: through
Lakehouse.write_stream (its awaitTermination raises) and in a continuous pipeline run (the
flow fails). The checkpoints are local folders made to use the lease (no network mount
here), with a short ttl; another holder takes over by writing the next lease object."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from headwater import Lakehouse
from headwater.conf.layout import LEASE, LEASE_ALWAYS_ENV, LEASE_TTL_ENV
from headwater.errors import HeadwaterError


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch):
    monkeypatch.setenv(LEASE_ALWAYS_ENV, "1")
    monkeypatch.setenv(LEASE_TTL_ENV, "1.2")


def _lease_dir(root: Path, timeout: float = 60) -> Path:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = [p for p in root.rglob(LEASE) if p.is_dir() and any(p.glob("*.json"))]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no lease under {root}")


def take_over(lease_dir: Path) -> dict:
    """Write the next lease object as another holder (as one that found the lease expired)."""
    record = {"owner": "intruder", "token": uuid.uuid4().hex, "host": "elsewhere", "pid": 1,
              "expires": time.time() + 3600}
    while True:
        seqs = sorted(int(p.stem) for p in lease_dir.glob("*.json") if p.stem.isdigit())
        try:
            fd = os.open(lease_dir / f"{seqs[-1] + 1:020d}.json",
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # the holder renewed in between: take the next one
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle)
        return record


def test_write_stream_stops_with_lease_lost_when_taken_over(spark, tmp):
    lake = Lakehouse(tmp / "lake", spark, attach=False)
    rate = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    query = lake.write_stream(rate, "ticks", trigger={"processingTime": "200 ms"})
    try:
        lease = _lease_dir(tmp / "lake")
        time.sleep(1.0)  # renewed a few times: the lease is live and working
        assert query.isActive
        take_over(lease)
        with pytest.raises(HeadwaterError) as lost:
            query.awaitTermination(30)
        assert lost.value.code == "HW_LEASE_LOST"
        assert "another writer took the checkpoint over" in lost.value.what
        assert not query.isActive
    finally:
        if query.isActive:
            query.stop()
        lake.release_locks()


def test_a_pipeline_flow_that_loses_its_lease_fails_with_lease_lost(spark, tmp_path):
    from tests.pipelines import build, project

    from headwater.conf.triggers import trigger_kwargs
    from headwater.pipeline.run import Runner

    root = project(tmp_path, {"p.py": """
        @headwater.table
        def ticks():
            return spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    """})
    graph = build(spark, root)
    runner = Runner(graph, trigger_kwargs({"processingTime": "200 ms"}), True,
                    echo=lambda _: None)
    results: list = []
    thread = threading.Thread(target=lambda: results.extend(runner.run()), daemon=True)
    thread.start()
    try:
        take_over(_lease_dir(root / "lake"))
        thread.join(60)
        assert not thread.is_alive()
    finally:
        runner.stop_requested.set()
        thread.join(30)
    (result,) = results
    assert result.status.name == "FAILED"
    assert "HW_LEASE_LOST" in result.error
