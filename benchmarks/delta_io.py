"""Ratio benchmark: headwater's Delta sink and source against Spark's native parquet and the
limits of any Python data source (a discarding Python sink, a Python source serving the files),
and batch reads: a full aggregate over ``spark.read.format("delta")`` against
``spark.read.parquet`` of the same files (and against headwater's Python reader).

    .venv/bin/python benchmarks/delta_io.py [--rows N] [--read-rows N] [--runs K] [--smoke]
                                            [--reads-only] [--json [PATH]]

``--json`` writes benchmarks/results/delta_io.json (benchmarks/results.py: the format the docs'
Benchmarks page draws from).

Rules (docs: DESIGN.md "Conventions"): same data, codec (snappy), file count and task count on
both sides; one discarded warm-up per variant, then interleaved runs; medians of wall time,
rows/s and CPU seconds of the whole process tree (driver, JVM, Python workers).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

sys.path.insert(0, str(Path(__file__).resolve().parent))
import headwater  # noqa: E402
import results as results_file  # noqa: E402 - benchmarks/results.py

SCHEMA = "id BIGINT, n INT, x DOUBLE, ts TIMESTAMP, s STRING"
FILES = 4  # input files, on both the parquet and the Delta side
TASKS = 2  # task slots (local[TASKS]), the same for every variant
BATCH_ROWS = 3_000_000  # the batch writes: df.write.format("delta") vs format("parquet")


# --- the limits: Python data sources that do no Delta work -------------------------------


class _ServeFiles(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One micro-batch holding the parquet input, read by pyarrow inside the Python worker."""

    def __init__(self, files: list[str], schema) -> None:
        self.files, self.schema = files, schema

    def initialOffset(self) -> dict:
        return {"served": False}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"served": True}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict, end: dict):
        if start == end:
            return []
        # One partition per file: at the default size Spark's file source and headwater's
        # split_entries also make one task per file (each file is over half of 128 MB).
        return [InputPartition(path) for path in self.files]

    def read(self, partition: InputPartition):
        from pyspark.sql.pandas.types import to_arrow_schema

        # Spark checks the Arrow schema exactly (nullability, timestamp zone): cast to it.
        target = to_arrow_schema(self.schema, timezone="UTC")
        for batch in pq.ParquetFile(partition.value).iter_batches():
            yield pa.RecordBatch.from_arrays(
                [batch.column(f.name).cast(f.type) for f in target], schema=target)

    def commit(self, end: dict) -> None:
        pass


class _Discard(DataSourceStreamArrowWriter):
    """Receives every Arrow batch and drops it: the cost of JVM -> Python transfer alone."""

    def write(self, iterator) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


class BenchLimits(DataSource):
    @classmethod
    def name(cls) -> str:
        return "hw_bench_limits"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema):
        return _ServeFiles(sorted(str(p) for p in Path(self.options["dir"]).glob("*.parquet")),
                           schema)

    def streamWriter(self, schema, overwrite: bool):
        return _Discard()


# --- CPU of the whole process tree -------------------------------------------------------


def tree_cpu_seconds() -> float:
    """user+sys of this process and all live descendants, plus what they reaped (cutime).

    Python workers are forked by a daemon under the JVM and may exit between measurements;
    their time then lands in the daemon's or JVM's cutime/cstime, so summing
    utime+stime+cutime+cstime over the live tree neither loses nor double-counts it.
    """
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        root = psutil.Process()
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            try:
                t = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total
    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()  # the command name may contain spaces
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(v) for v in fields[11:15]) / ticks  # utime..cstime
    tree, frontier = set(), [os.getpid()]
    while frontier:
        pid = frontier.pop()
        tree.add(pid)
        frontier.extend(p for p, pp in parent.items() if pp == pid and p not in tree)
    return sum(cpu.get(pid, 0.0) for pid in tree)


# --- data and variants -------------------------------------------------------------------


def make_input(spark, rows: int, root: Path) -> tuple[str, str]:
    from pyspark.sql import functions as F

    # spark.range with FILES slices gives FILES tasks, hence FILES files, without a shuffle.
    df = spark.range(0, rows, 1, FILES).select(
        F.col("id"),
        (F.col("id") % 1000).cast("int").alias("n"),
        (F.col("id") * 0.25).alias("x"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"),
        F.sha1(F.col("id").cast("string")).alias("s"),  # 40 hex chars, barely compressible
    )
    parquet_dir, delta_dir = str(root / "input_parquet"), str(root / "input_delta")
    df.write.option("compression", "snappy").parquet(parquet_dir)
    # one file per input partition on both sides, whatever the size (default rolls at 128m)
    df.write.format("delta").mode("overwrite").option("targetFileSize", "4g").save(delta_dir)

    from deltalake import DeltaTable

    counts = {"parquet": len(list(Path(parquet_dir).glob("*.parquet"))),
              "delta": len(DeltaTable(delta_dir).file_uris())}
    if set(counts.values()) != {FILES}:
        sys.exit(f"input file counts differ from {FILES}: {counts}")
    return parquet_dir, delta_dir


def variants(spark, parquet_dir: str, delta_dir: str) -> dict[str, Callable]:
    """name -> start(out_dir, checkpoint) returning a running availableNow query."""

    def parquet_stream():
        return spark.readStream.schema(SCHEMA).parquet(parquet_dir)

    def into(fmt: str, source: Callable):
        def start(out: str, checkpoint: str):
            writer = (source().writeStream.format(fmt).option("checkpointLocation", checkpoint)
                      .trigger(availableNow=True))
            return writer.start() if fmt == "noop" else writer.start(out)
        return start

    return {
        "Delta sink": into("delta", parquet_stream),
        "native parquet sink": into("parquet", parquet_stream),
        "discarding Python sink": into("hw_bench_limits", parquet_stream),
        "Delta source": into("noop", lambda: spark.readStream.format("delta").load(delta_dir)),
        "native parquet source": into("noop", parquet_stream),
        "in-memory Python source": into(
            "noop", lambda: spark.readStream.format("hw_bench_limits")
            .option("dir", parquet_dir).load()),
    }


def batch_frame(spark, rows: int):
    """The batch writes' DataFrame: 4 columns (id, int, double, 40-char string) computed from
    ``spark.range`` in FILES tasks, so both writers get the same rows, tasks and files."""
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, FILES).select(
        F.col("id"), (F.col("id") % 1000).cast("int").alias("n"),
        (F.col("id") * 0.25).alias("x"), F.sha1(F.col("id").cast("string")).alias("s"))


def batch_variants(spark, rows: int) -> dict[str, tuple[Callable, Callable]]:
    """name -> (write(out_dir), count(out_dir): the rows the written table / folder holds)."""
    df = batch_frame(spark, rows)

    def delta(out: str) -> None:
        df.write.format("delta").mode("append").save(out)

    def delta_rows(out: str) -> int:
        from deltalake import DeltaTable

        return sum(int(n) for n in pa.table(DeltaTable(out).get_add_actions(flatten=True))
                   .column("num_records").to_pylist())

    def parquet(out: str) -> None:
        df.write.mode("append").option("compression", "snappy").parquet(out)

    def parquet_rows(out: str) -> int:
        return sum(pq.read_metadata(str(f)).num_rows for f in Path(out).glob("*.parquet"))

    return {"batch Delta write": (delta, delta_rows),
            "batch parquet write": (parquet, parquet_rows)}


def measure_batch(variant: tuple[Callable, Callable], rows: int,
                  scratch: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one batch write into a new folder (its row check after the clock)."""
    write, count = variant
    out = scratch / "out"
    shutil.rmtree(out, ignore_errors=True)
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    write(str(out))
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    written = count(str(out))
    if written != rows:  # a variant that skipped data would look fast
        sys.exit(f"batch write holds {written} rows, expected {rows}")
    return wall, cpu


def measure(start: Callable, rows: int, scratch: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one query, query start included: every trigger of a user pays it."""
    out, checkpoint = scratch / "out", scratch / "checkpoint"
    for path in (out, checkpoint):
        shutil.rmtree(path, ignore_errors=True)
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    query = start(str(out), str(checkpoint))
    query.awaitTermination()
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    seen = sum(p["numInputRows"] for p in query.recentProgress)
    if seen != rows:  # a variant that skipped data would look fast
        sys.exit(f"query read {seen} rows, expected {rows}")
    return wall, cpu


# --- batch reads: a full aggregate -------------------------------------------------------

READ_SCHEMA = "id BIGINT, n INT, x DOUBLE, s STRING"  # 4 columns, every one aggregated


def make_read_input(spark, rows: int, root: Path) -> tuple[str, str]:
    """The same rows as FILES parquet files and as a Delta table of FILES files."""
    from pyspark.sql import functions as F

    df = spark.range(0, rows, 1, FILES).select(
        F.col("id"), (F.col("id") % 1000).cast("int").alias("n"),
        (F.col("id") * 0.25).alias("x"), F.sha1(F.col("id").cast("string")).alias("s"))
    parquet_dir, delta_dir = str(root / "read_parquet"), str(root / "read_delta")
    df.write.option("compression", "snappy").parquet(parquet_dir)
    df.write.format("delta").mode("overwrite").option("targetFileSize", "4g").save(delta_dir)
    from deltalake import DeltaTable

    files = DeltaTable(delta_dir).file_uris()
    if len(files) != FILES or len(list(Path(parquet_dir).glob("*.parquet"))) != FILES:
        sys.exit(f"read input: expected {FILES} files on both sides")
    return parquet_dir, delta_dir


def read_variants(spark, parquet_dir: str, delta_dir: str) -> dict[str, Callable]:
    """name -> a full aggregate (every column) over one way of reading the rows."""
    from pyspark.sql import DataFrameReader
    from pyspark.sql import functions as F

    from headwater.spark import patches

    python_load = patches.original(DataFrameReader, "load")

    def aggregate(read: Callable) -> Callable:
        def run() -> int:
            row = read().agg(F.count("*").alias("rows"), F.sum("id"), F.sum("n"), F.sum("x"),
                             F.max("s")).collect()[0]
            return int(row["rows"])
        return run

    return {
        "Delta batch read": aggregate(lambda: spark.read.format("delta").load(delta_dir)),
        "parquet batch read": aggregate(lambda: spark.read.schema(READ_SCHEMA)
                                        .parquet(parquet_dir)),
        "Delta batch read, Python reader": aggregate(
            lambda: python_load(spark.read.format("delta"), delta_dir)),
    }


def measure_read(run: Callable, rows: int) -> tuple[float, float]:
    """(wall s, CPU s) of one aggregate, the read's planning included."""
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    seen = run()
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    if seen != rows:
        sys.exit(f"aggregate counted {seen} rows, expected {rows}")
    return wall, cpu


# --- reporting ---------------------------------------------------------------------------

# (label, headwater variant, reference variant, target, goal): reference time / headwater
# time, a throughput ratio. Targets: issue 26 (batch and streaming writes 0.95x, reads 0.9x,
# source 1.0x the Python transfer limit) and issue 39 (source 0.9x native).
RATIOS = [
    ("batch Delta write ÷ batch parquet write", "batch Delta write", "batch parquet write",
     0.95),
    ("Delta sink ÷ native parquet sink", "Delta sink", "native parquet sink", 0.95),
    ("Delta sink ÷ discarding Python sink", "Delta sink", "discarding Python sink", 0.9),
    ("Delta source ÷ native parquet source", "Delta source", "native parquet source", 0.9),
    ("Delta source ÷ in-memory Python source", "Delta source", "in-memory Python source", 1.0),
    ("Delta batch read ÷ parquet batch read", "Delta batch read", "parquet batch read", 0.9),
    ("Delta batch read ÷ Python reader", "Delta batch read",
     "Delta batch read, Python reader", 1.0),
]
GROUPS = [  # the results file's tables: (caption, the variants' names)
    ("Streams: availableNow queries", ("Delta sink", "native parquet sink",
                                       "discarding Python sink", "Delta source",
                                       "native parquet source", "in-memory Python source")),
    ("Batch writes", ("batch Delta write", "batch parquet write")),
    ("Batch reads: a full aggregate of every column", (
        "Delta batch read", "parquet batch read", "Delta batch read, Python reader")),
]
SETUP = (
    "The rules of DESIGN.md: the same rows (long, int, double, timestamp, 40-char string) in 4 "
    "snappy files on both sides, 2 task slots (`local[2]`), one discarded warm-up per variant, "
    "then the median of the interleaved runs (the streams --runs times, the batch writes and "
    "reads, about 1 s each, --batch-runs times); CPU of all processes (driver, JVM, Python "
    "workers). Streams: one availableNow query per variant (Delta sink and source against "
    "Spark's parquet sink and source, and against the limit of any Python data source: a "
    "sink that discards its Arrow batches, a source serving the same files from pyarrow). "
    "Batch writes: `df.write.format(\"delta\")` against `df.write.parquet`. Batch reads: one "
    "full aggregate over `spark.read.format(\"delta\")`, `spark.read.parquet` of the same "
    "files and headwater's Python reader. Ratios are throughput ratios (reference time ÷ "
    "headwater time): 1.0x is as fast as the reference. Details: `benchmarks/README.md`.")


def report(results: dict, run: results_file.Run) -> None:
    """Print the medians and ratios and put them, every sample with them, into ``run``."""
    summary = {name: {"median_wall_s": statistics.median(r["wall_s"]),
                      "rows_per_s": r["rows"] / statistics.median(r["wall_s"]),
                      "median_cpu_s": statistics.median(r["cpu_s"]), **r}
               for name, r in results.items()}
    ratios = {label: (summary[ref]["median_wall_s"] / summary[hw]["median_wall_s"], target)
              for label, hw, ref, target in RATIOS if hw in summary and ref in summary}
    header = ("variant", "median wall s", "rows/s", "CPU s")
    lines = [(name, f"{s['median_wall_s']:.2f}", f"{s['rows_per_s']:,.0f}",
              f"{s['median_cpu_s']:.2f}") for name, s in summary.items()]
    info = ", ".join(f"{k}={v}" for k, v in run.data["parameters"].items())
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="headwater Delta I/O", caption=info)
        for i, col in enumerate(header):
            table.add_column(col, justify="left" if i == 0 else "right")
        for line in lines:
            table.add_row(*line)
        console = Console()
        console.print(table)
        for label, (value, target) in ratios.items():
            console.print(f"{label}: [bold]{value:.2f}x[/bold] throughput (target ≥ {target}x)")
    except ImportError:
        print(info)
        for line in [header, *lines]:
            print(f"{line[0]:<24}" + "".join(f"{v:>15}" for v in line[1:]))
        for label, (value, target) in ratios.items():
            print(f"{label}: {value:.2f}x throughput (target ≥ {target}x)")
    for caption, names in GROUPS:
        present = [n for n in names if n in results]
        if not present:
            continue
        run.table(caption, ["variant", "rows", "wall s", "rows/s", "CPU s"], [
            results_file.variant(
                {"variant": n, "rows": results[n]["rows"]},
                {"wall s": results[n]["wall_s"], "CPU s": results[n]["cpu_s"]},
                {"rows/s": summary[n]["rows_per_s"]}) for n in present],
            chart={"kind": "bar", "label": ["variant"], "value": "rows/s"})
    for label, (value, target) in ratios.items():
        run.ratio(label, value, target, "at least", "throughput")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows of the streams")
    parser.add_argument("--batch-rows", type=int, default=BATCH_ROWS,
                        help="rows of the batch writes")
    parser.add_argument("--read-rows", type=int, default=3_000_000,
                        help="rows of the batch-read aggregate (4 columns)")
    parser.add_argument("--runs", type=int, default=9,
                        help="runs of each stream (~2.5 s each; run-to-run noise on 2 cores is "
                             "about ±4%%: with fewer runs one slow run moves a median)")
    parser.add_argument("--batch-runs", type=int, default=9,
                        help="runs of each batch write and read (about 1 s each: more runs "
                             "than the streams, so their medians hold still)")
    parser.add_argument("--only", metavar="WORDS",
                        help="comma-separated words: run the variants whose name has one "
                             "(e.g. 'sink,batch')")
    parser.add_argument("--smoke", action="store_true", help="200k rows, 1 run (a quick check)")
    parser.add_argument("--reads-only", action="store_true",
                        help="only the batch reads (no sink / source streams)")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    rows, batch_rows, read_rows, runs, batch_runs = (200_000, 200_000, 200_000, 1, 1) \
        if args.smoke else (args.rows, args.batch_rows, args.read_rows, args.runs,
                            max(args.runs, args.batch_runs))
    words = [w.strip().lower() for w in (args.only or "").split(",") if w.strip()]
    # other work on the machine skews wall times: the results file shows the load around it
    run_record = results_file.Run(
        __file__, "Delta source and sink, batch writes and reads", SETUP, order=1,
        parameters={"rows": rows, "batch_rows": batch_rows, "read_rows": read_rows,
                    "runs": runs, "batch_runs": batch_runs, "files": FILES, "task_slots": TASKS,
                    "only": args.only, "reads_only": args.reads_only, "smoke": args.smoke})

    spark = headwater.spark_session(
        f"local[{TASKS}]",
        conf={"spark.sql.shuffle.partitions": str(TASKS), "spark.ui.enabled": "false"})
    # Micros, not Spark's legacy INT96: the same timestamp encoding as headwater's writer.
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.dataSource.register(BenchLimits)
    root = Path(tempfile.mkdtemp(prefix="hw-bench-delta-io-"))
    try:
        # name -> (run it once, its rows): the streams, the batch writes, the batch reads
        todo: dict[str, tuple[Callable[[], tuple[float, float]], int]] = {}
        if not args.reads_only:
            parquet_dir, delta_dir = make_input(spark, rows, root)
            for name, start in variants(spark, parquet_dir, delta_dir).items():
                todo[name] = (lambda start=start: measure(start, rows, root), rows)
            for name, variant in batch_variants(spark, batch_rows).items():
                todo[name] = (lambda v=variant: measure_batch(v, batch_rows, root), batch_rows)
        read_parquet, read_delta = make_read_input(spark, read_rows, root)
        for name, read in read_variants(spark, read_parquet, read_delta).items():
            todo[name] = (lambda r=read: measure_read(r, read_rows), read_rows)
        if words:
            todo = {k: v for k, v in todo.items() if any(w in k.lower() for w in words)}
        for run, _ in todo.values():  # warm-up: JIT, Python worker daemon, page cache
            run()
        results = {name: {"wall_s": [], "cpu_s": [], "rows": n} for name, (_, n) in todo.items()}
        batch = {name for name in todo if "batch" in name}
        names = list(todo)
        for i in range(batch_runs):  # interleaved, so drift in machine load hits every variant
            # every other run in reverse order: a variant timed right after a stream pays for
            # that query's wind-down (its Python processes exiting), so no variant always goes
            # first after the streams (the batch Delta write did: ~15% of its time)
            for name in names if i % 2 == 0 else names[::-1]:
                run = todo[name][0]
                if i >= runs and name not in batch:
                    continue  # the streams: --runs; the batch writes and reads: --batch-runs
                wall, cpu = run()
                results[name]["wall_s"].append(wall)
                results[name]["cpu_s"].append(cpu)
        report(results, run_record)
        run_record.write(args.json)
    finally:
        headwater.stop_spark()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
