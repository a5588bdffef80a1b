"""Helpers the test modules share (imported as ``tests.support``; fixtures stay in conftest)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from headwater.conf.layout import CDC_STATE
from headwater.spark.jvm import analyzed_plan
from headwater.spark.plan import node_name, nodes

REPO = Path(__file__).resolve().parents[1]
# Delta tables written by the JVM implementation: beside the repository in CI, absent from a
# fresh clone. Tests reach them only through golden(), which skips when they are missing
# (tests/test_conventions.py checks that no test reads ../shared another way).
GOLDEN = REPO.parent / "shared" / "delta-golden"


def golden(name: str) -> Path:
    """The golden table ``name`` (a folder of ../shared/delta-golden); the test is skipped,
    naming what is missing, on a clone without ../shared."""
    import pytest  # noqa: PLC0415 - optional: support is imported by tools that lack pytest

    path = GOLDEN / name
    if not path.is_dir():
        pytest.skip(f"needs {path} (the JVM-written golden tables in ../shared/delta-golden, "
                    "which a clone of the repository does not have)")
    return path

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


# --- AUTO CDC: change rows (id, name, city, seq, op) and what the target holds ----------

CDC_SCHEMA = "id INT, name STRING, city STRING, seq INT, op STRING"


def cdc_batch(spark, rows):
    return spark.createDataFrame(rows, CDC_SCHEMA)


def rows_of(path, columns=("id", "name", "city")):
    table = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in table)


def cdc_apply(spark, path, rows, batch_id, **kwargs):
    """One batch of ``rows`` (CDC_SCHEMA) through AUTO CDC into ``path``; the flow's arguments
    default to keys id, sequence seq, deletes op = 'D'."""
    from headwater.delta.cdc import CdcSpec, apply_changes_batch

    spec = CdcSpec.build(kwargs.pop("keys", ["id"]), kwargs.pop("sequence_by", "seq"),
                         apply_as_deletes=kwargs.pop("apply_as_deletes", "op = 'D'"), **kwargs)
    return apply_changes_batch(cdc_batch(spark, rows), batch_id, str(path), spec, "test-flow")


def scd1_truth(batches, ignore_null_updates=False):
    """Sequential replay: per key the newest event wins; deletes leave tombstones."""
    applied: dict[int, int] = {}
    live: dict[int, tuple] = {}
    for rows in batches:
        for row in sorted(rows, key=lambda r: r[3]):
            key, name, city, seq, op = row
            if key in applied and seq <= applied[key]:
                continue
            applied[key] = seq
            if op == "D":
                live.pop(key, None)
            elif ignore_null_updates and key in live:
                old = live[key]
                live[key] = (key, name if name is not None else old[1],
                             city if city is not None else old[2])
            else:
                live[key] = (key, name, city)
    return sorted(live.values())


def random_batches(seed, n=4, size=60, keys=15):
    rng = random.Random(seed)
    batches, seq = [], 0
    for _ in range(n):
        rows = []
        for _ in range(size):
            seq += 1
            late = seq - rng.randint(0, 40) if rng.random() < 0.2 else seq
            rows.append((rng.randint(1, keys), rng.choice(["a", "b", None]),
                         rng.choice(["x", None]), late * 1000 + seq, rng.choice("IUUD")))
        batches.append(rows)
    return batches


def state_rows(path):
    rows = DeltaTable(str(path / CDC_STATE)).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["__hw_seq"], r["__hw_deleted"], r["__hw_kind"]) for r in rows)


def collected(df) -> list[tuple]:
    """A DataFrame's rows as sorted tuples: order-free comparisons."""
    return sorted(tuple(r) for r in df.collect())


def commits(path) -> list[list[dict]]:
    """Every commit of the Delta table's log at ``path``, as its actions."""
    log = sorted(Path(path, "_delta_log").glob("*.json"))
    return [[json.loads(line) for line in f.read_text().splitlines()] for f in log]


def live_adds(path) -> dict[str, dict]:
    """The table's live add actions (path -> add), replayed from its JSON commits (no
    checkpoints)."""
    live: dict[str, dict] = {}
    for actions in commits(path):
        for a in actions:
            if "add" in a:
                live[a["add"]["path"]] = a["add"]
            elif "remove" in a:
                live.pop(a["remove"]["path"], None)
    return live


def native(df) -> bool:
    """True when every table leaf of ``df``'s plan is Spark's parquet file source over a
    Delta file index (none is headwater's Python data source)."""
    leaves = [n for n in nodes(analyzed_plan(df)) if n.children().size() == 0
              and node_name(n) in ("LogicalRelation", "DataSourceV2Relation")]
    return bool(leaves) and all(
        node_name(n) == "LogicalRelation"
        and str(n.relation().location().toString()).startswith("DeltaFileIndex[")
        for n in leaves)


def logged_schema(path) -> dict:
    """The table's schema (Delta's JSON form) as the log's newest metaData action holds it."""
    schema = None
    for actions in commits(path):
        for a in actions:
            if "metaData" in a:
                schema = json.loads(a["metaData"]["schemaString"])
    assert schema is not None
    return schema


def logged_fields(path) -> dict[str, dict]:
    """The table's schema fields (name -> field, with their metadata), as logged."""
    return {f["name"]: f for f in logged_schema(path)["fields"]}
