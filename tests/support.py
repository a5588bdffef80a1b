"""Helpers the test modules share (imported as ``tests.support``; fixtures stay in conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO.parent / "shared" / "delta-golden"

_SCRIPT = Path(sys.executable).with_name("headwater")
HEADWATER = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "headwater.cli"]
CALL_TIMEOUT = 480  # one CLI call; a loaded 2-core machine makes a run take ~90 s


def run_script(code: str, env: dict | None = None, timeout: int = 180,
               new_session: bool = True) -> subprocess.CompletedProcess:
    """Run Python code in a fresh interpreter (a real driver process)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=full_env, start_new_session=new_session)


def rows(spark, path: str, order: str = "id") -> list[tuple]:
    df = spark.read.format("delta").load(path)
    return [tuple(r) for r in df.orderBy(order).collect()]


def write(path, data: dict | pa.Table, mode: str = "append", **kwargs) -> None:
    from deltalake import write_deltalake

    table = data if isinstance(data, pa.Table) else pa.table(data)
    write_deltalake(str(path), table, mode=mode, **kwargs)


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``headwater ARGS`` as a real process in its own session."""
    return subprocess.run(HEADWATER + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=CALL_TIMEOUT, env=cli_env(), start_new_session=True)


def show(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-4000:]}"
