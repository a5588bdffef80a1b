"""Issue 13: `headwater optimize`, `vacuum` and `restore` as real processes on a lakehouse."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from tests.support import cli, show, write


@pytest.mark.procs
def test_optimize_vacuum_and_restore_commands(tmp_path):
    lake = tmp_path / "lake"
    for i in range(3):
        write(lake / "events", {"id": [i, i + 10], "day": ["d1", "d2"]}, partition_by=["day"])
    root = ["--root", str(lake)]

    done = cli("optimize", "events", *root, "--zorder-by", "id", cwd=tmp_path)
    assert done.returncode == 0, show(done)
    assert "6 files -> 2 (2 partitions)" in done.stdout
    table = DeltaTable(str(lake / "events"))
    assert table.history(1)[0]["operation"] == "OPTIMIZE" and len(table.file_uris()) == 2

    dry = cli("vacuum", "events", *root, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, show(dry)
    assert "would delete 0 files of events" in dry.stdout  # all younger than 7 days
    short = cli("vacuum", "events", *root, "--retain-hours", "0", cwd=tmp_path)
    assert short.returncode == 1 and "HW_VACUUM_RETENTION_TOO_SHORT" in short.stderr

    back = cli("restore", "events", *root, "--version", "1", cwd=tmp_path)
    assert back.returncode == 0, show(back)
    assert "version 4, 4 files" in back.stdout
    assert sorted(DeltaTable(str(lake / "events")).to_pyarrow_table()["id"].to_pylist()) \
        == [0, 1, 10, 11]
    missing = cli("restore", "nope", *root, "--version", "0", cwd=tmp_path)
    assert missing.returncode == 1 and "HW_TABLE_NOT_FOUND" in missing.stderr
