"""File count of a streamed table after N micro-batches, with and without auto-compaction.

Each micro-batch goes through the Delta sink's own code path without a JVM: ``write_task``
(what a Spark task runs: rows -> parquet file + add action) then ``commit_files`` (what the
sink's driver commit runs, including auto-compaction). The file count depends only on those
commits, so Spark's per-batch overhead (0.2-0.5 s here) is left out to keep 1,000 batches fast.

    PYTHONPATH=src python benchmarks/autocompact_files.py [--batches 1000] [--rows 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.types import LongType, StringType, StructField, StructType

from headwater.delta.files import write_task
from headwater.delta.sink import commit_files

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
        commit_files(str(path), message.adds, SCHEMA, "append", [],
                     txn=("bench", b))
    seconds = time.perf_counter() - start
    table = DeltaTable(str(path))
    count = len(table.file_uris())
    total = table.to_pyarrow_dataset().count_rows()
    return count, total, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    args = parser.parse_args()
    print(f"{'auto-compaction':<16} {'batches':>8} {'files':>7} {'rows':>9} {'seconds':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for on in (False, True):
            files, rows, seconds = run(Path(tmp) / f"t{on}", args.batches, args.rows, on)
            assert rows == args.batches * args.rows
            print(f"{'on' if on else 'off':<16} {args.batches:>8} {files:>7} {rows:>9} "
                  f"{seconds:>8.1f}")


if __name__ == "__main__":
    main()
