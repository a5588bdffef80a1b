"""File count of a streamed table after N micro-batches, with and without auto-compaction.

Each micro-batch goes through the Delta sink's own code path without a JVM: ``write_task``
(what a Spark task runs: rows -> parquet file + add action) then ``commit_files`` (what the
sink's driver commit runs, including auto-compaction). The file count depends only on those
commits, so Spark's per-batch overhead (0.2-0.5 s here) is left out to keep 1,000 batches fast.

    bash dev.sh bench-autocompact [--batches 1000] [--rows 100] [--smoke] [--json [PATH]]

``--json`` writes benchmarks/results/autocompact_files.json (format: benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.types import LongType, StringType, StructField, StructType

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results as results_file  # noqa: E402 - benchmarks/results.py
from headwater.delta.files import write_task  # noqa: E402
from headwater.delta.write.commit import commit_files  # noqa: E402
from headwater.delta.write.request import WriteRequest  # noqa: E402

SETUP = (
    "Micro-batches of a few rows appended to one table through the Delta sink's own code "
    "path (what a Spark task and the sink's driver commit run; Spark's per-batch overhead "
    "left out), with and without `delta.autoOptimize.autoCompact`. Compaction commits with "
    "dataChange=false, so streams reading the table see no duplicates.")
SCHEMA = StructType([StructField("id", LongType()), StructField("v", StringType())])


def run(path: Path, batches: int, rows: int, auto_compact: bool) -> tuple[int, int, float]:
    """(files in the table, rows, seconds) after ``batches`` micro-batches of ``rows`` rows."""
    config = {"delta.autoOptimize.autoCompact": "true"} if auto_compact else {}
    empty = pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.string())})
    write_deltalake(str(path), empty, configuration=config)
    start = time.perf_counter()
    for b in range(batches):
        ids = pa.array(range(b * rows, (b + 1) * rows), pa.int64())
        batch = pa.RecordBatch.from_arrays([ids, pa.compute.cast(ids, pa.string())],
                                           names=["id", "v"])
        message = write_task(str(path), [], 128 << 20, "snappy", [batch])
        commit_files(WriteRequest(path=str(path), txn=("bench", b)), message.adds, SCHEMA)
    seconds = time.perf_counter() - start
    table = DeltaTable(str(path))
    count = len(table.file_uris())
    total = table.to_pyarrow_dataset().count_rows()
    return count, total, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="50 batches: a few seconds")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args(argv)
    if args.smoke:
        args.batches = 50
    record = results_file.Run(
        __file__, f"Auto compaction: files after {args.batches:,} micro-batches", SETUP,
        order=10, parameters={"batches": args.batches, "rows": args.rows,
                              "smoke": args.smoke}, argv=argv)
    print(f"{'auto-compaction':<16} {'batches':>8} {'files':>7} {'rows':>9} {'seconds':>8}")
    variants = []
    with tempfile.TemporaryDirectory() as tmp:
        for on in (False, True):
            files, rows, seconds = run(Path(tmp) / f"t{on}", args.batches, args.rows, on)
            assert rows == args.batches * args.rows
            print(f"{'on' if on else 'off':<16} {args.batches:>8} {files:>7} {rows:>9} "
                  f"{seconds:>8.1f}")
            variants.append(results_file.variant(
                {"table": "with auto compaction" if on else "without auto compaction",
                 "rows": rows}, {"files": [files], "seconds": [seconds]}))
    record.table(f"Data files of the table after {args.batches:,} micro-batches of "
                 f"{args.rows} rows (one run)", ["table", "rows", "files", "seconds"],
                 variants, chart={"kind": "bar", "label": ["table"], "value": "files"})
    without, with_ = (v["median"]["files"] for v in variants)
    record.ratio("files with ÷ without auto compaction", with_ / without, basis="file count")
    record.write(args.json)


if __name__ == "__main__":
    main()
