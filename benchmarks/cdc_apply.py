"""AUTO CDC against a hand-written foreachBatch + deltalake MERGE, in the same run.

    .venv/bin/python benchmarks/cdc_apply.py [--events 1000000] [--keys 1000000]
        [--batch 100000] [--runs 3] [--scd 1,2] [--smoke] [--json [PATH]]

``--json`` writes benchmarks/results/cdc_apply.json (format: benchmarks/results.py).

The events (upserts and 10% deletes, keys drawn at random from ``--keys``, one sequence number
per event, increasing) are written once as one parquet file per batch. Every variant reads the
same files, batch by batch, into the same empty target:

- headwater: ``apply_changes_batch`` (what a pipeline's create_auto_cdc_flow and
  ``apply_changes_stream`` run): latest event per key, tombstones, out-of-order safety, one
  txn-tagged commit per batch.
- hand-written: what a data engineer writes in foreachBatch with deltalake directly. SCD1:
  latest event per key (a window), ``toArrow()``, one MERGE with sequence guards. SCD2: close
  the open row of each key with a MERGE, then append the batch's versions. It assumes events
  arrive in order (this run's do); headwater also handles late and duplicate events.
- hand-written + CDF: the same code on a target created with
  ``delta.enableChangeDataFeed=true``, as headwater's targets are by default (so downstream
  streams can follow them): the like-for-like comparison of the MERGE's work.

Both targets are compared row for row at the end of each run (the same rows, or the run
fails). One discarded warm-up, then ``--runs`` interleaved runs; medians of wall, CPU of the
process tree (driver, JVM, Python workers) and peak RSS of the driver and of the JVM during the
variant (reset through /proc/<pid>/clear_refs before each one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
import headwater  # noqa: E402
import results as results_file  # noqa: E402 - benchmarks/results.py
from delta_io import tree_cpu_seconds  # noqa: E402
from headwater.delta.cdc import CdcSpec, apply_changes_batch  # noqa: E402

COLUMNS = ["id", "name", "city", "amount", "seq"]
METRICS = {"wall s": "wall", "CPU s": "cpu", "driver peak MB": "driver_mb",
           "JVM peak MB": "jvm_mb"}  # the results file's columns: run_variant's keys
SETUP = (
    "Change events (10% deletes, keys at random) in batches, applied by headwater "
    "(`apply_changes_batch`, what a pipeline's `create_auto_cdc_flow` runs: tombstones, "
    "out-of-order safety, txn-tagged exactly-once commits) and by the foreachBatch + "
    "deltalake MERGE a data engineer writes (in-order events only), in the same run; every "
    "target is compared row for row with headwater's. headwater's targets write their change "
    "data feed by default, so the hand-written code also runs on a target with the feed on, "
    "the like-for-like comparison. One discarded warm-up, then the median of the interleaved "
    "runs; CPU of the process tree; peak RSS of the driver and the JVM.")
CITIES = np.array(["Lisbon", "Oslo", "Quito", "Lagos", "Hanoi", "Perth", "Lima", "Accra"])


def make_events(folder: Path, events: int, keys: int, batch: int, seed: int = 7) -> int:
    """``events`` change events in files of ``batch``; returns the number of batches."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for start in range(0, events, batch):
        size = min(batch, events - start)
        ids = rng.integers(0, keys, size)
        table = pa.table({
            "id": pa.array(ids, pa.int64()),
            # every event's values differ: an SCD2 upsert changing nothing opens no version
            # in AUTO CDC (Spark's too), while the hand-written code opens one
            "name": pa.array([f"customer-{i}-{start + j}" for j, i in enumerate(ids)]),
            "city": pa.array(CITIES[rng.integers(0, len(CITIES), size)]),
            "amount": pa.array(rng.integers(0, 10_000, size), pa.int64()),
            "seq": pa.array(np.arange(start, start + size), pa.int64()),
            "op": pa.array(np.where(rng.random(size) < 0.1, "D", "U")),
        })
        pq.write_table(table, folder / f"batch-{n:05d}.parquet")
        n += 1
    return n


def headwater_variant(scd: int):
    spec = CdcSpec.build(["id"], "seq", apply_as_deletes="op = 'D'",
                         except_column_list=["op"], stored_as_scd_type=scd)

    def apply(batch, batch_id: int, target: str) -> None:
        apply_changes_batch(batch, batch_id, target, spec, "bench")

    return apply


def hand_written_variant(scd: int, change_data_feed: bool = False):
    """foreachBatch code a user writes with deltalake's merge (no tombstones, in-order only)."""
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import TableNotFoundError
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def target_table(target: str, schema: pa.Schema) -> DeltaTable:
        try:
            return DeltaTable(target)
        except TableNotFoundError:
            return DeltaTable.create(target, schema, configuration={
                "delta.enableChangeDataFeed": "true"} if change_data_feed else None)

    def scd1(batch, batch_id: int, target: str) -> None:
        latest = (batch.withColumn("_n", F.row_number().over(
            Window.partitionBy("id").orderBy(F.col("seq").desc())))
            .where("_n = 1").drop("_n")).toArrow()
        schema = latest.select(COLUMNS).schema
        values = {c: f"s.{c}" for c in COLUMNS}
        (target_table(target, schema)
         .merge(latest, "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_delete("s.op = 'D' AND s.seq > t.seq")
         .when_matched_update(values, "s.op <> 'D' AND s.seq > t.seq")
         .when_not_matched_insert(values, "s.op <> 'D'")
         .execute())

    def scd2(batch, batch_id: int, target: str) -> None:
        by_key = Window.partitionBy("id").orderBy("seq")
        events = batch.withColumn("__END_AT", F.lead("seq").over(by_key))
        versions = (events.where("op <> 'D'")
                    .select(*COLUMNS, F.col("seq").alias("__START_AT"), "__END_AT")).toArrow()
        first = batch.groupBy("id").agg(F.min("seq").alias("first_seq")).toArrow()
        table = target_table(target, versions.schema)
        (table.merge(first, "t.id = s.id AND t.__END_AT IS NULL", source_alias="s",
                     target_alias="t")
         .when_matched_update({"__END_AT": "s.first_seq"}).execute())
        write_deltalake(target, versions, mode="append")

    return scd1 if scd == 1 else scd2


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak(pid: int) -> None:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _jvm_pid() -> int | None:
    mine = str(os.getpid())
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{entry}/cmdline").read_text()
            except OSError:
                continue
            if stat[1] == mine and "java" in cmd:
                return int(entry)
    return None


def run_variant(spark, apply, files: list[Path], target: Path) -> dict[str, float]:
    if target.exists():
        shutil.rmtree(target)
    jvm = _jvm_pid()
    for pid in (os.getpid(), jvm):
        if pid:
            _reset_peak(pid)
    cpu, wall = tree_cpu_seconds(), time.perf_counter()
    for batch_id, file in enumerate(files):
        apply(spark.read.parquet(str(file)), batch_id, str(target))
    wall = time.perf_counter() - wall
    return {"wall": wall, "cpu": tree_cpu_seconds() - cpu,
            "driver_mb": _peak_rss_mb(os.getpid()),
            "jvm_mb": _peak_rss_mb(jvm) if jvm else float("nan")}


def _folder(variant: str) -> str:
    return variant.replace(" + ", "-").replace(" ", "-")


def table_rows(path: Path, scd: int) -> list[tuple]:
    from deltalake import DeltaTable

    columns = COLUMNS + (["__START_AT", "__END_AT"] if scd == 2 else [])
    data = DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scd", default="1,2")
    parser.add_argument("--smoke", action="store_true", help="20k events in batches of 5k, 1 run")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    if args.smoke:
        args.events, args.keys, args.batch, args.runs = 20_000, 20_000, 5_000, 1
    run = results_file.Run(
        __file__, "AUTO CDC against a hand-written foreachBatch + MERGE", SETUP, order=6,
        parameters={"events": args.events, "keys": args.keys, "batch": args.batch,
                    "runs": args.runs, "scd": args.scd, "smoke": args.smoke})
    table_rows_out = []
    spark = headwater.spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                      "spark.ui.enabled": "false"})
    base = Path(tempfile.mkdtemp(prefix="hw-cdc-bench-"))
    try:
        batches = make_events(base / "events", args.events, args.keys, args.batch)
        files = sorted((base / "events").glob("*.parquet"))
        print(f"{args.events:,} events over {args.keys:,} keys, {batches} batches of "
              f"{args.batch:,}; {args.runs} runs after a warm-up, medians\n")
        print("| SCD | variant | events/s | wall s | CPU s | driver peak MB | JVM peak MB |"
              " headwater ÷ this (events/s) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for scd in (int(s) for s in args.scd.split(",")):
            variants = {"headwater": headwater_variant(scd),
                        "hand-written": hand_written_variant(scd),
                        "hand-written + CDF": hand_written_variant(scd, True)}
            got: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            for i in range(args.runs + 1):  # run 0 warms up and is discarded
                for name, apply in variants.items():
                    measured = run_variant(spark, apply, files, base / _folder(name))
                    if i:
                        got[name].append(measured)
                expected = table_rows(base / "headwater", scd)
                for name in variants:
                    assert table_rows(base / _folder(name), scd) == expected, \
                        f"SCD{scd}: {name}'s target differs from headwater's"
            med = {v: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                   for v, runs in got.items()}
            for name, m in med.items():
                ratio = m["wall"] / med["headwater"]["wall"]
                print(f"| {scd} | {name} | {args.events / m['wall']:,.0f} | {m['wall']:.1f} | "
                      f"{m['cpu']:.1f} | {m['driver_mb']:.0f} | {m['jvm_mb']:.0f} | "
                      f"{'' if name == 'headwater' else f'{ratio:.2f}x'} |")
                table_rows_out.append(results_file.variant(
                    {"SCD": scd, "variant": name},
                    {key: [r[k] for r in got[name]] for key, k in METRICS.items()},
                    {"events/s": args.events / m["wall"]}))
                if name != "headwater":
                    run.ratio(f"SCD{scd}: headwater ÷ {name}", ratio, basis="throughput")
        run.table(f"{args.events:,} events over {args.keys:,} keys, batches of "
                  f"{args.batch:,}: medians", ["SCD", "variant", "events/s", *METRICS],
                  table_rows_out, chart={"kind": "bar", "label": ["SCD", "variant"],
                                         "value": "events/s"})
        run.write(args.json)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        headwater.stop_spark()


if __name__ == "__main__":
    main()
