"""Reported, not a target (moto is not S3): headwater's Delta streaming sink writing to
``s3://`` on moto's server (127.0.0.1) against the same sink writing to a local folder.

    .venv/bin/python benchmarks/s3_sink.py [--rows N] [--runs K]

Same input (a local Delta table of N rows in 4 files), same query (local[2], availableNow,
local checkpoint); one discarded warm-up per variant, then interleaved runs; median wall time.
Needs moto[server] (the test extra).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.object_store import MotoServer, moto_binary  # noqa: E402

import headwater  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
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

        def run(kind: str) -> float:
            tag = uuid.uuid4().hex[:8]
            dst = f"{bucket}/{tag}" if kind == "s3" else str(work / f"dst-{tag}")
            opts = server.options() if kind == "s3" else {}
            start = time.perf_counter()
            (spark.readStream.format("delta").load(src).writeStream.format("delta")
             .options(**opts).option("checkpointLocation", str(work / f"cp-{tag}"))
             .trigger(availableNow=True).start(dst).awaitTermination())
            return time.perf_counter() - start

        for kind in ("local", "s3"):
            run(kind)  # warm-up
        times: dict[str, list[float]] = {"local": [], "s3": []}
        for _ in range(args.runs):
            for kind in ("local", "s3"):
                times[kind].append(run(kind))
        local, s3 = statistics.median(times["local"]), statistics.median(times["s3"])
        print(f"rows {args.rows:,}  runs {args.runs}")
        print(f"{'sink':<8}{'median s':>10}{'rows/s':>14}")
        for kind, t in (("local", local), ("s3/moto", s3)):
            print(f"{kind:<8}{t:>10.2f}{args.rows / t:>14,.0f}")
        print(f"s3/moto vs local: {s3 / local:.2f}x the time")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
