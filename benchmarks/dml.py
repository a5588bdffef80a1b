"""MERGE and DELETE at scale: Spark copy-on-write vs delta-rs on the driver vs a hand-written
foreachBatch merge with deltalake, at two target sizes.

    bash dev.sh bench-dml                             # 1M and 10M target rows, warm-up + 3 runs
    bash dev.sh bench-dml --smoke                     # 100k rows, 2k changes, 1 run (< 60 s)
    bash dev.sh bench-dml --rows 1000000,4000000 --runs 1 --json /tmp/dml.json
    bash dev.sh bench-dml --json                      # into benchmarks/results/dml.json

The target: id (long, ascending, files of ``--rows-per-file`` contiguous ids, so min/max stats
prune), v (long), s (string); snappy parquet, change data feed off. Statements:

- MERGE clustered: ``--changes`` source rows, half updates of a contiguous id range in the
  middle of the table (one or two files touched), half inserts of new ids;
- MERGE random: the same, the updated ids drawn at random (seeded) over the whole table;
- DELETE 1%: ``id % 100 = 0``, rows in every file.

Paths, each on a fresh copy of the same table (copied outside the timing):

- spark: ``headwater.delta.dml`` with engine="spark" (copy-on-write on executors);
- delta-rs: engine="delta-rs" (the MERGE source collected, delta-rs's merge on the driver);
- hand-written: what a user writes in foreachBatch, ``DeltaTable(path).merge(batch.toArrow(),
  ...)`` / ``DeltaTable(path).delete(...)`` with deltalake directly.

The MERGE source is the same parquet file read by Spark for every path (a micro-batch).
Per run: wall seconds; CPU seconds of the whole process tree (driver, JVM, Python workers);
CPU seconds of the JVM alone; the Python driver's peak RSS (VmHWM, reset before each run
through /proc/self/clear_refs after freeing what the allocators hold) and the JVM's peak RSS
(in local mode the executors live in the JVM, so that one holds Spark's work). One discarded
warm-up per statement and path at each size, then ``--runs`` interleaved runs; medians.

Driver memory: Arrow's and delta-rs's allocators keep some freed memory, so in one process a
path's peak can include what an earlier path left ("driver +MB" then understates it). For
clean driver peaks run one path per process: ``--paths delta-rs``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).parent))
import headwater  # noqa: E402
import results as results_file  # noqa: E402 - benchmarks/results.py
from delta_io import tree_cpu_seconds  # noqa: E402
from headwater.delta import dml  # noqa: E402

PATHS = ("spark", "delta-rs", "hand-written")
STATEMENTS = ("MERGE clustered", "MERGE random", "DELETE 1%")
DELETE_CONDITION = "id % 100 = 0"


# --- data -------------------------------------------------------------------------------


def make_table(path: Path, rows: int, rows_per_file: int) -> int:
    """The target table: ``rows`` rows in files of ``rows_per_file`` contiguous ids."""
    for start in range(0, rows, rows_per_file):
        ids = pa.array(range(start, min(rows, start + rows_per_file)), pa.int64())
        write_deltalake(str(path), pa.table({
            "id": ids, "v": pa.compute.multiply(ids, 2),
            "s": pa.compute.binary_join_element_wise("name-", pa.compute.cast(ids, pa.string()),
                                                     "")}), mode="append")
    DeltaTable(str(path)).create_checkpoint()  # DML loads one checkpoint, not 100 commits
    return sum(f.stat().st_size for f in path.glob("*.parquet"))


def make_source(path: Path, rows: int, changes: int, clustered: bool, seed: int = 7) -> None:
    """Half updates (clustered: a contiguous range mid-table; random: drawn over all ids),
    half inserts of ids past the end."""
    import numpy as np

    half = changes // 2
    if clustered:
        updated = np.arange(rows // 2, rows // 2 + half, dtype=np.int64)
    else:
        updated = np.sort(np.random.default_rng(seed).choice(rows, half, replace=False))
    ids = pa.array(np.concatenate([updated, np.arange(rows, rows + changes - half)]))
    pq.write_table(pa.table({"id": ids, "v": pa.compute.multiply(ids, 3),
                             "s": pa.array(["changed"] * len(ids))}), str(path))


# --- the three paths ----------------------------------------------------------------------


def hand_written_upsert(batch, path: str) -> dict[str, Any]:
    """A foreachBatch upsert as users write it with deltalake alone."""
    return DeltaTable(path).merge(
        batch.toArrow(), predicate="t.id = s.id", source_alias="s", target_alias="t",
    ).when_matched_update_all().when_not_matched_insert_all().execute()


def run_statement(spark, statement: str, path_kind: str, table: str, source: str) -> dict:
    """Run one statement; returns the rows it updated, inserted and deleted."""
    if statement.startswith("DELETE"):
        if path_kind == "hand-written":
            m = DeltaTable(table).delete(DELETE_CONDITION)
            return {"deleted": int(m["num_deleted_rows"])}
        result = dml.delete(spark, table, DELETE_CONDITION, engine=path_kind)
        assert result.engine == path_kind, result
        return {"deleted": result.num_deleted_rows}
    batch = spark.read.parquet(source)
    if path_kind == "hand-written":
        m = hand_written_upsert(batch, table)
        return {"updated": int(m["num_target_rows_updated"]),
                "inserted": int(m["num_target_rows_inserted"])}
    builder = dml.MergeBuilder(spark, table, batch.alias("s"), "t.id = s.id", target_alias="t")
    result = builder.when_matched_update().when_not_matched_insert().execute(engine=path_kind)
    assert result.engine == path_kind, result
    return {"updated": result.num_updated_rows, "inserted": result.num_inserted_rows}


# --- measuring ----------------------------------------------------------------------------


def _jvm() -> int | None:
    """The pid of the JVM this driver started (a java process among its descendants)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(b")", 1)[1].split()[1]), []).append(int(entry))
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                return pid
        except OSError:
            continue
        todo += children.get(pid, [])
    return None


def _cpu_s(pid: int | None) -> float:
    """user + system seconds of one process (its own threads, not its children)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _release_memory() -> None:
    """Hand freed memory back to the OS, so a run's peak is not hidden in what an earlier run
    left in the allocators' free lists."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak(pid: int | str) -> None:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := current RSS
    except OSError:
        pass


def _status_kb(pid: int | str, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def measure(spark, statement: str, path_kind: str, template: Path, work: Path,
            source: Path) -> dict:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(template, work)
    before = set(DeltaTable(str(work)).file_uris())
    jvm = _jvm()
    _release_memory()
    for pid in ("self", jvm):
        if pid is not None:
            _reset_peak(pid)
    rss0 = _status_kb("self", "VmRSS")
    jvm_cpu0 = _cpu_s(jvm)
    cpu0, wall0 = tree_cpu_seconds(), time.perf_counter()
    counts = run_statement(spark, statement, path_kind, str(work), str(source))
    wall, cpu = time.perf_counter() - wall0, tree_cpu_seconds() - cpu0
    out = {
        "wall_s": wall, "cpu_s": cpu,
        "jvm_cpu_s": _cpu_s(jvm) - jvm_cpu0,
        "driver_peak_mb": _status_kb("self", "VmHWM") / 1024,
        "driver_growth_mb": (_status_kb("self", "VmHWM") - rss0) / 1024,
        "jvm_peak_mb": _status_kb(jvm, "VmHWM") / 1024 if jvm else 0.0,
        **counts,
    }
    after = set(DeltaTable(str(work)).file_uris())
    out["files_rewritten"] = len(before - after)
    return out


def check(statement: str, run: dict, rows: int, changes: int) -> None:
    if statement.startswith("DELETE"):
        expected = {"deleted": (rows + 99) // 100}
    else:
        expected = {"updated": changes // 2, "inserted": changes - changes // 2}
    got = {k: run[k] for k in expected}
    assert got == expected, f"{statement}: {got} != {expected}"


def bench(spark, rows: int, changes: int, rows_per_file: int, runs: int, warm_up: int,
          base: Path, statements=STATEMENTS, paths=PATHS) -> list[dict]:
    """Every statement on every path at ``rows`` target rows; one result dict per pair."""
    template = base / f"t{rows}"
    size = make_table(template, rows, rows_per_file)
    sources = {}
    for statement in statements:
        if statement.startswith("MERGE"):
            sources[statement] = base / f"source-{rows}-{statement.split()[1]}.parquet"
            make_source(sources[statement], rows, changes, statement.endswith("clustered"))
    results = []
    for statement in statements:
        measured: dict[str, list[dict]] = {p: [] for p in paths}
        for i in range(warm_up + runs):  # the first warm_up rounds are discarded
            for path_kind in paths:
                run = measure(spark, statement, path_kind, template, base / "work",
                              sources.get(statement, base / "none"))
                check(statement, run, rows, changes)
                if i >= warm_up:
                    measured[path_kind].append(run)
        for path_kind, got in measured.items():
            med = {k: statistics.median(r[k] for r in got) for k in got[0]}
            results.append({"rows": rows, "table_mb": size / 2**20, "statement": statement,
                            "path": path_kind, "runs": len(got), **med,
                            "samples": {k: [r[k] for r in got] for k in got[0]}})
            print(_row(results[-1]), flush=True)
    shutil.rmtree(template, ignore_errors=True)
    return results


HEADER = ("target rows", "MB", "statement", "path", "runs", "wall s", "CPU s", "JVM CPU s",
          "files rewritten", "driver peak MB", "driver +MB", "JVM peak MB")


def _row(r: dict) -> str:
    cells = (f"{r['rows']:,}", f"{r['table_mb']:.0f}", r["statement"], r["path"], str(r["runs"]),
             f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}", f"{r['jvm_cpu_s']:.2f}",
             f"{r['files_rewritten']:.0f}", f"{r['driver_peak_mb']:.0f}",
             f"{r['driver_growth_mb']:.0f}", f"{r['jvm_peak_mb']:.0f}")
    return "| " + " | ".join(cells) + " |"


def report(results: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in sorted(results, key=lambda r: (STATEMENTS.index(r["statement"]), r["rows"],
                                            PATHS.index(r["path"]))):
        lines.append(_row(r))
    return "\n".join(lines)


METRICS = {"wall s": "wall_s", "CPU s": "cpu_s", "JVM CPU s": "jvm_cpu_s",
           "files rewritten": "files_rewritten", "driver peak MB": "driver_peak_mb",
           "driver +MB": "driver_growth_mb", "JVM peak MB": "jvm_peak_mb"}
SETUP = (
    "MERGE of changed rows (half updates, half inserts; updated keys clustered in one file, "
    "or random over every file) and DELETE of 1% into a target table (files of contiguous "
    "ids), each path on a fresh copy: Spark copy-on-write (`engine=\"spark\"`), delta-rs on "
    "the driver (`engine=\"delta-rs\"`), and the foreachBatch upsert users write with "
    "deltalake alone. One discarded warm-up per statement and path, then the median of the "
    "interleaved runs; CPU of the process tree and of the JVM; peak RSS of the Python driver "
    "(and its growth during the run) and of the JVM. For driver peaks free of other paths' "
    "leftovers run one path per process (`--paths`).")


def record(results: list[dict], run: results_file.Run) -> None:
    """Wall seconds per statement and size, one column per path, and every metric per path."""
    def key(r: dict) -> tuple:
        return STATEMENTS.index(r["statement"]), r["rows"]

    ordered = sorted(results, key=lambda r: (*key(r), PATHS.index(r["path"])))
    paths = [p for p in PATHS if any(r["path"] == p for r in results)]
    groups: dict[tuple, dict[str, dict]] = {}
    for r in ordered:
        groups.setdefault(key(r), {})[r["path"]] = r
    run.table("Wall seconds", ["statement", "rows", *paths], [
        results_file.variant({"statement": STATEMENTS[k[0]], "rows": k[1]},
                             {p: by[p]["samples"]["wall_s"] for p in paths if p in by},
                             {p: None for p in paths if p not in by})
        for k, by in groups.items()],
        chart={"kind": "grouped", "label": ["statement", "rows"], "series": paths})
    run.table("Every measure per path (medians)", [
        "statement", "rows", "table MB", "path", *METRICS], [
        results_file.variant({"statement": r["statement"], "rows": r["rows"],
                              "table MB": round(r["table_mb"], 1), "path": r["path"]},
                             {m: r["samples"][k] for m, k in METRICS.items()})
        for r in ordered])
    for (index, rows), by in groups.items():
        for other in ("hand-written", "spark"):
            if "delta-rs" in by and other in by:
                run.ratio(f"{STATEMENTS[index]}, {rows:,} rows: delta-rs ÷ {other}",
                          by["delta-rs"]["wall_s"] / by[other]["wall_s"], basis="wall time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1000000,10000000", help="Target sizes, comma-separated.")
    parser.add_argument("--changes", type=int, default=100_000, help="MERGE source rows.")
    parser.add_argument("--rows-per-file", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm-up", type=int, default=1, help="Discarded rounds per size.")
    parser.add_argument("--statements", default=None,
                        help=f"Comma-separated, of: {', '.join(STATEMENTS)} (default: all).")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help="Comma-separated, of: spark, delta-rs, hand-written. One path per "
                             "process gives driver peaks free of other paths' leftovers.")
    parser.add_argument("--smoke", action="store_true",
                        help="100k rows, 2k changes, 10k rows per file, MERGE random and "
                             "DELETE 1%% only (unless --statements), no warm-up, 1 run.")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.changes, args.rows_per_file, args.runs, args.warm_up = \
            "100000", 2000, 10_000, 1, 0
        args.statements = args.statements or "MERGE random,DELETE 1%"
    run = results_file.Run(
        __file__, "DML: Spark copy-on-write vs delta-rs vs hand-written deltalake", SETUP,
        order=7, parameters={"rows": args.rows, "changes": args.changes,
                             "rows_per_file": args.rows_per_file, "runs": args.runs,
                             "warm_up": args.warm_up, "statements": args.statements,
                             "paths": args.paths, "smoke": args.smoke})
    statements = tuple(s.strip() for s in (args.statements or ",".join(STATEMENTS)).split(","))
    paths = tuple(p.strip() for p in args.paths.split(","))
    unknown = (set(statements) - set(STATEMENTS)) | (set(paths) - set(PATHS))
    if unknown:
        parser.error(f"unknown statements or paths {sorted(unknown)}")
    spark = headwater.spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                      "spark.ui.enabled": "false"})
    base = Path(tempfile.mkdtemp(prefix="hw-bench-dml-"))
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; changes {args.changes:,}; rows per file "
          f"{args.rows_per_file:,}; warm-up {args.warm_up}, runs {args.runs}", flush=True)
    results: list[dict] = []
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            results += bench(spark, rows, args.changes, args.rows_per_file, args.runs,
                             args.warm_up, base, statements, paths)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        headwater.stop_spark()
    print(f"\nMedians, load average {load:.2f} at start, now {os.getloadavg()[0]:.2f}:\n")
    print(report(results))
    record(results, run)
    run.write(args.json)


if __name__ == "__main__":
    main()
