"""Reported, not a target (moto is not S3): headwater's Delta streaming sink writing to
``s3://`` on moto's server (127.0.0.1) against the same sink writing to a local folder.

    bash dev.sh bench-s3 [--rows N] [--runs K] [--smoke] [--json [PATH]]

Same input (a local Delta table of N rows in 4 files), same query (local[2], availableNow,
local checkpoint); one discarded warm-up per variant, then interleaved runs; medians of wall
time and of CPU seconds of the process tree (driver, JVM, Python workers, moto's server).
Needs moto[server] (the test extra). ``--json`` writes benchmarks/results/s3_sink.json
(format: benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from tests.object_store import MotoServer, moto_binary  # noqa: E402

import headwater  # noqa: E402
import results as results_file  # noqa: E402 - benchmarks/results.py
from delta_io import tree_cpu_seconds  # noqa: E402

SETUP = (
    "The Delta streaming sink writing to `s3://` on moto's server (127.0.0.1) against the same "
    "sink writing to a local folder: the same input (a local Delta table in 4 files) and "
    "query (`local[2]`, availableNow, local checkpoint), one discarded warm-up per side, then "
    "the median of the interleaved runs; CPU of the process tree, moto included. Reported, "
    "not a target: moto is not S3.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="40k rows, 1 run")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.runs = 40_000, 1
    record = results_file.Run(__file__, "Delta sink on S3 (moto) vs a local folder", SETUP,
                              order=9, parameters={"rows": args.rows, "runs": args.runs,
                                                   "smoke": args.smoke})
    binary = moto_binary()
    if binary is None:
        sys.exit("moto_server not found: pip install 'moto[server]==5.2.5'")
    server = MotoServer(binary).start()
    work = Path(tempfile.mkdtemp(prefix="hw-s3-bench-"))
    try:
        src = str(work / "src")
        per = args.rows // 4
        for part in range(4):
            ids = pa.array(range(part * per, (part + 1) * per), pa.int64())
            write_deltalake(src, pa.table({"id": ids, "x": pa.compute.multiply(ids, 2),
                                           "s": pa.compute.cast(ids, pa.string())}),
                            mode="append")
        spark = headwater.spark_session("local[2]", conf={"spark.ui.enabled": "false"})
        bucket = server.bucket()

        def run(kind: str) -> tuple[float, float]:
            tag = uuid.uuid4().hex[:8]
            dst = f"{bucket}/{tag}" if kind == "s3" else str(work / f"dst-{tag}")
            opts = server.options() if kind == "s3" else {}
            cpu, start = tree_cpu_seconds(), time.perf_counter()
            (spark.readStream.format("delta").load(src).writeStream.format("delta")
             .options(**opts).option("checkpointLocation", str(work / f"cp-{tag}"))
             .trigger(availableNow=True).start(dst).awaitTermination())
            return time.perf_counter() - start, tree_cpu_seconds() - cpu

        for kind in ("local", "s3"):
            run(kind)  # warm-up
        times: dict[str, list[tuple[float, float]]] = {"local": [], "s3": []}
        for _ in range(args.runs):
            for kind in ("local", "s3"):
                times[kind].append(run(kind))
        med = {kind: (statistics.median(t for t, _ in runs), statistics.median(c for _, c in runs))
               for kind, runs in times.items()}
        print(f"rows {args.rows:,}  runs {args.runs} (medians)")
        print(f"{'sink':<8}{'wall s':>10}{'rows/s':>14}{'CPU s':>8}")
        for kind, label in (("local", "local"), ("s3", "s3/moto")):
            wall, cpu = med[kind]
            print(f"{label:<8}{wall:>10.2f}{args.rows / wall:>14,.0f}{cpu:>8.1f}")
        print(f"s3/moto vs local: {med['s3'][0] / med['local'][0]:.2f}x the time")
        record.table(f"{args.rows:,} rows: medians", ["sink", "wall s", "rows/s", "CPU s"], [
            results_file.variant({"sink": label}, {"wall s": [t for t, _ in times[kind]],
                                                   "CPU s": [c for _, c in times[kind]]},
                                 {"rows/s": args.rows / med[kind][0]})
            for kind, label in (("local", "local folder"), ("s3", "s3:// on moto"))],
            chart={"kind": "bar", "label": ["sink"], "value": "rows/s"})
        record.ratio("S3 (moto) ÷ local folder", med["s3"][0] / med["local"][0],
                     basis="wall time")
        record.write(args.json)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
