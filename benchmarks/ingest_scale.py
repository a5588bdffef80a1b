"""File ingestion benchmark: headwater's read_files against Spark's plain file source.

    .venv/bin/python benchmarks/ingest_scale.py [--files 100000] [--throughput-files 5000]
                                                [--runs 3] [--smoke] [--json [PATH]]

``--json`` writes benchmarks/results/ingest_scale.json (format: benchmarks/results.py).

Both sources read the same small JSON files (ROWS_PER_FILE records each, FILES_PER_FOLDER
files per folder, as a feed landing in hourly folders would) with the same fixed schema and
the same read limit (maxFilesPerTrigger), into Spark's ``noop`` sink. headwater runs with its
rescue features on (rescued data column, record counting through ``observe``).

1. Throughput: one discarded warm-up per source, then ``--runs`` interleaved runs over
   ``--throughput-files`` files; medians of wall time, files/s, rows/s and CPU seconds of the
   whole process tree (driver, JVM, Python workers). A third variant is the Python limit: a
   Python source serving the same rows already parsed (Arrow, in memory), MAX_FILES files'
   rows per micro-batch, TASKS tasks each.
2. Scale: each source in its own driver process (its own JVM, so heaps are not mixed) ingests
   files landing in waves up to 1k, 10k and 100k files, one availableNow run per wave on one
   checkpoint. After each wave: driver JVM heap after GC above its baseline, peak RSS of the
   Python driver and of the largest Python worker (the stream reader runs in its own worker),
   checkpoint size (and headwater's file index, kept beside the schema), and the median
   planning time per batch (latestOffset + getBatch + queryPlanning). Spark's own per-batch
   history (retained batches, progress, UI executions) is bounded to HISTORY on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results as results_file  # noqa: E402 - benchmarks/results.py
from delta_io import tree_cpu_seconds  # noqa: E402

SCHEMA = "id BIGINT, device STRING, ts STRING, value DOUBLE, ok BOOLEAN"
ROWS_PER_FILE = 20
FILES_PER_FOLDER = 1000
MAX_FILES = 500  # maxFilesPerTrigger, both sources
TASKS = 2
SOURCES = ("spark", "headwater", "python-limit")
LABELS = {"spark": "Spark file source (format(\"json\"))", "headwater": "headwater read_files",
          "python-limit": "Python source serving the parsed rows (limit)"}
SCALE_TARGET = 1.5  # the largest wave ÷ the smallest, per resource: at most
SETUP = (
    "Small JSON files (20 records each, 1,000 per folder like an hourly feed), the same fixed "
    "schema and `maxFilesPerTrigger=500` on both sides, `noop` sink, `local[2]`. headwater "
    "runs with its rescue features on (rescued data column, counts through `observe`). "
    "Throughput: one discarded warm-up per source, then the median of the interleaved runs; "
    "the limit is a Python source serving the same rows already parsed. Scale: one driver "
    "(its own JVM) per source ingests files landing in waves to 1k, 10k and 100k (one "
    "availableNow run per wave, one checkpoint); Spark's per-batch history bounded to 2 on "
    "both sides. Details: `benchmarks/README.md`.")


def land(root: Path, start: int, stop: int) -> None:
    """Files start..stop-1, in folders of FILES_PER_FOLDER."""
    for n in range(start, stop):
        folder = root / f"hour={n // FILES_PER_FOLDER:05d}"
        if n % FILES_PER_FOLDER == 0 or n == start:
            folder.mkdir(parents=True, exist_ok=True)
        base = n * ROWS_PER_FILE
        lines = [
            f'{{"id": {base + i}, "device": "d{(base + i) % 97}", '
            f'"ts": "2026-11-23T10:{i % 60:02d}:00", "value": {(base + i) * 0.5}, '
            f'"ok": {"true" if i % 7 else "false"}}}'
            for i in range(ROWS_PER_FILE)]
        tmp = folder / f".f{n:07d}.json.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.rename(tmp, folder / f"f{n:07d}.json")  # whole files only, as a feed should land


# Spark keeps per-batch history whatever the source: offsets/commits logs of the last
# minBatchesToRetain batches, progress updates, and SQL executions for the UI. Bounded to the
# same small numbers on both sides, so that growth after 1k/10k/100k files is the source's own.
HISTORY = "2"
HISTORY_CONF = {
    "spark.sql.streaming.minBatchesToRetain": HISTORY,
    "spark.sql.streaming.numRecentProgressUpdates": HISTORY,
    "spark.sql.ui.retainedExecutions": HISTORY,
    "spark.ui.retainedJobs": HISTORY,
    "spark.ui.retainedStages": HISTORY,
    "spark.ui.retainedTasks": "100",
    "spark.sql.streaming.ui.retainedQueries": HISTORY,
    "spark.sql.streaming.ui.retainedProgressUpdates": HISTORY,
}


class Progress:
    """Every progress event (recentProgress keeps only the last few)."""

    def __init__(self, spark) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.events: dict[str, list[dict]] = {}
        outer = self

        class Collect(StreamingQueryListener):
            def onQueryStarted(self, event) -> None:
                pass

            def onQueryProgress(self, event) -> None:
                outer.events.setdefault(str(event.progress.runId), []).append(
                    json.loads(event.progress.json))

            def onQueryIdle(self, event) -> None:
                pass

            def onQueryTerminated(self, event) -> None:
                pass

        spark.streams.addListener(Collect())

    def of(self, query, expected_rows: int | None = None) -> list[dict]:
        deadline = time.time() + 30  # listener events arrive asynchronously
        while time.time() < deadline:
            events = self.events.get(str(query.runId), [])
            if expected_rows is None or sum(e["numInputRows"] for e in events) >= expected_rows:
                break
            time.sleep(0.1)
        return self.events.get(str(query.runId), [])


def session():
    import headwater

    spark = headwater.spark_session(
        f"local[{TASKS}]", app_name="ingest-bench",
        conf={"spark.sql.shuffle.partitions": str(TASKS), "spark.ui.enabled": "false",
              "spark.driver.memory": "2g", **HISTORY_CONF})
    spark._bench_progress = Progress(spark)
    return spark


# --- the limit: a Python source serving already-parsed rows ---------------------------------

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow  # noqa: E402


class _ServeParsed(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The same rows (and a null rescued column) from Arrow IPC bytes, one chunk of
    MAX_FILES files per micro-batch: what any Python source costs before it parses a byte."""

    def __init__(self, chunks: list[list[bytes]]) -> None:
        self.chunks = chunks

    def initialOffset(self) -> dict:
        return {"chunk": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict, limit) -> dict:
        return {"chunk": min(start["chunk"] + 1, len(self.chunks))}

    def partitions(self, start: dict, end: dict):
        return [InputPartition(part) for i in range(start["chunk"], end["chunk"])
                for part in self.chunks[i]]

    def read(self, partition: InputPartition):
        import pyarrow as pa

        yield from pa.ipc.open_stream(partition.value).read_all().to_batches()

    def commit(self, end: dict) -> None:
        pass


class ParsedLimit(DataSource):
    chunks: list[list[bytes]] = []

    @classmethod
    def name(cls) -> str:
        return "hw_bench_parsed"

    def schema(self) -> str:
        return SCHEMA + ", _rescued_data STRING"

    def streamReader(self, schema):
        return _ServeParsed(ParsedLimit.chunks)


def parsed_chunks(landing: Path) -> list[list[bytes]]:
    """The landed files parsed once, as IPC bytes: MAX_FILES files a chunk, TASKS parts each."""
    import pyarrow as pa
    import pyarrow.json as pj

    from headwater.delta.schema import arrow_schema
    from headwater.ingest.schema_hints import parse_ddl

    target = arrow_schema(parse_ddl(SCHEMA + ", _rescued_data string"))
    files = sorted(landing.rglob("*.json"))
    chunks = []
    for i in range(0, len(files), MAX_FILES):
        group = files[i:i + MAX_FILES]
        parts = []
        for j in range(TASKS):
            blob = b"".join(f.read_bytes() for f in group[j::TASKS])
            table = pj.read_json(pa.BufferReader(blob))
            table = pa.Table.from_arrays(
                [table.column(f.name).cast(f.type) if f.name in table.column_names
                 else pa.nulls(table.num_rows, f.type) for f in target], schema=target)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, target) as writer:
                writer.write_table(table)
            parts.append(sink.getvalue().to_pybytes())
        chunks.append(parts)
    return chunks


def start_query(spark, source: str, landing: Path, work: Path, name: str):
    import headwater

    if source == "python-limit":
        df = spark.readStream.format("hw_bench_parsed").load()
    elif source == "headwater":
        df = headwater.read_files(landing, schema=SCHEMA, schema_location=work / f"{name}_schema",
                                  max_files_per_trigger=MAX_FILES)
    else:
        df = (spark.readStream.format("json").schema(SCHEMA)
              .option("maxFilesPerTrigger", MAX_FILES).load(str(landing / "hour=*")))
    return (df.writeStream.format("noop").option("checkpointLocation", str(work / f"{name}_cp"))
            .trigger(availableNow=True).start())


def run_once(spark, source: str, landing: Path, work: Path, name: str,
             expected_rows: int | None = None) -> dict:
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    query = start_query(spark, source, landing, work, name)
    query.awaitTermination()
    wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    progress = spark._bench_progress.of(query, expected_rows)
    rows = sum(p["numInputRows"] for p in progress)
    return {"wall_s": wall, "cpu_s": cpu, "rows": rows, "progress": progress}


# --- 1. throughput -------------------------------------------------------------------------


def throughput(files: int, runs: int, work: Path) -> dict:
    spark = session()
    landing = work / "throughput"
    land(landing, 0, files)
    ParsedLimit.chunks = parsed_chunks(landing)
    spark.dataSource.register(ParsedLimit)
    results: dict[str, dict[str, list[float]]] = {s: {} for s in SOURCES}
    for attempt in range(runs + 1):  # attempt 0 is the discarded warm-up
        for source in SOURCES:
            out = run_once(spark, source, landing, work, f"tp_{source}_{attempt}",
                           files * ROWS_PER_FILE)
            assert out["rows"] == files * ROWS_PER_FILE, (source, out["rows"])
            if attempt:
                for key in ("wall_s", "cpu_s"):
                    results[source].setdefault(key, []).append(out[key])
    summary = {}
    for source, r in results.items():
        wall = statistics.median(r["wall_s"])
        summary[source] = {"median_wall_s": wall, "files_per_s": files / wall,
                           "rows_per_s": files * ROWS_PER_FILE / wall,
                           "median_cpu_s": statistics.median(r["cpu_s"]), **r}
    summary["ratio"] = summary["spark"]["median_wall_s"] / summary["headwater"]["median_wall_s"]
    summary["ratio_limit"] = (summary["python-limit"]["median_wall_s"]
                              / summary["headwater"]["median_wall_s"])
    return summary


# --- 2. scale (one driver per source) ------------------------------------------------------


def _python_rss() -> dict[int, int]:
    """RSS in bytes of every Python process under this one, this one included."""
    me = os.getpid()
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(text[text.rindex(")") + 2:].split()[1])
    tree, frontier = set(), [me]
    while frontier:
        pid = frontier.pop()
        tree.add(pid)
        frontier.extend(p for p, pp in parents.items() if pp == pid and p not in tree)
    out = {}
    for pid in tree:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if b"python" not in cmd.split(b"\0")[0]:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                out[pid] = int(line.split()[1]) * 1024
    return out


class RssSampler:
    def __init__(self) -> None:
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            for pid, rss in _python_rss().items():
                self.peak[pid] = max(self.peak.get(pid, 0), rss)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _heap_after_gc(spark) -> int:
    import gc

    gc.collect()  # Python proxies of JVM objects (progress events) release them when collected
    jvm = spark.sparkContext._jvm
    for _ in range(3):
        jvm.java.lang.System.gc()
        time.sleep(0.3)
    rt = jvm.java.lang.Runtime.getRuntime()
    return rt.totalMemory() - rt.freeMemory()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def scale_driver(source: str, waves: list[int], work: Path) -> dict:
    spark = session()
    warm = work / "warm"
    land(warm, 0, 50)
    run_once(spark, source, warm, work, "warm")
    baseline = _heap_after_gc(spark)
    landing = work / "landing"
    results, landed = [], 0
    for wave in waves:
        land(landing, landed, wave)
        with RssSampler() as rss:
            out = run_once(spark, source, landing, work, "scale",
                           (wave - landed) * ROWS_PER_FILE)
        assert out["rows"] == (wave - landed) * ROWS_PER_FILE, (out["rows"], wave, landed)
        landed = wave
        planning = [sum(p["durationMs"].get(k, 0) for k in ("latestOffset", "getBatch",
                                                            "queryPlanning"))
                    for p in out["progress"] if p["numInputRows"]]
        steady = planning[1:] or planning  # the first batch of a run pays the query start
        me = os.getpid()
        results.append({
            "files": wave, "batches": len(planning), "rows": out["rows"],
            "wall_s": out["wall_s"],
            "heap_growth_mb": (_heap_after_gc(spark) - baseline) / 2**20,
            "driver_rss_mb": rss.peak.get(me, 0) / 2**20,
            "worker_rss_mb": max([v for k, v in rss.peak.items() if k != me] or [0]) / 2**20,
            "checkpoint_kb": _size(work / "scale_cp") / 1024,
            "file_index_kb": _size(work / "scale_schema") / 1024,
            "planning_ms": statistics.median(steady) if steady else 0.0,
        })
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return {"source": source, "baseline_heap_mb": baseline / 2**20, "waves": results}


def scale(files: int, work: Path) -> dict:
    waves = [w for w in (1000, 10_000, 100_000) if w <= files] or [files]
    out = {}
    for source in ("spark", "headwater"):
        folder = work / f"scale_{source}"
        folder.mkdir()
        proc = subprocess.run(
            [sys.executable, __file__, "--scale-driver", source, "--waves",
             ",".join(map(str, waves)), "--work", str(folder)],
            capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{source} scale driver failed:\n{proc.stderr[-4000:]}")
        out[source] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


# --- report ----------------------------------------------------------------------------------


def _table(header: tuple, rows: list[tuple]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(c).rjust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])


def report(tp: dict, sc: dict, args, run: results_file.Run) -> None:
    print(f"\nThroughput: {args.throughput_files} files x {ROWS_PER_FILE} rows, "
          f"maxFilesPerTrigger={MAX_FILES}, local[{TASKS}], noop sink, median of {args.runs}")
    print(_table(("source", "wall s", "files/s", "rows/s", "CPU s"), [
        (name, f"{tp[name]['median_wall_s']:.2f}", f"{tp[name]['files_per_s']:,.0f}",
         f"{tp[name]['rows_per_s']:,.0f}", f"{tp[name]['median_cpu_s']:.1f}")
        for name in SOURCES]))
    print(f"headwater throughput / Spark file source: {tp['ratio']:.2f}x (target >= 1.0x); "
          f"/ Python source serving parsed rows: {tp['ratio_limit']:.2f}x")
    for source in ("spark", "headwater"):
        waves = sc[source]["waves"]
        print(f"\nScale, {source} (one driver; baseline heap "
              f"{sc[source]['baseline_heap_mb']:.0f} MB)")
        print(_table(("files", "batches", "wall s", "heap +MB", "driver RSS MB",
                      "worker RSS MB", "checkpoint KB", "file index KB", "plan ms/batch"), [
            (f"{w['files']:,}", w["batches"], f"{w['wall_s']:.1f}", f"{w['heap_growth_mb']:.1f}",
             f"{w['driver_rss_mb']:.0f}", f"{w['worker_rss_mb']:.0f}",
             f"{w['checkpoint_kb']:.0f}", f"{w['file_index_kb']:.0f}", f"{w['planning_ms']:.0f}")
            for w in waves]))
        first, last = waves[0], waves[-1]
        ratios = {k: (last[k] / first[k] if first[k] else float("nan"))
                  for k in ("heap_growth_mb", "driver_rss_mb", "worker_rss_mb", "checkpoint_kb",
                            "planning_ms")}
        print(f"{last['files']:,} vs {first['files']:,} files: " + ", ".join(
            f"{k} {v:.2f}x" for k, v in ratios.items()) + " (target <= 1.5x each)")
    run.table(f"Throughput, {args.throughput_files:,} files", [
        "source", "wall s", "files/s", "rows/s", "CPU s"], [
        results_file.variant({"source": LABELS[name]},
                             {"wall s": tp[name]["wall_s"], "CPU s": tp[name]["cpu_s"]},
                             {"files/s": tp[name]["files_per_s"],
                              "rows/s": tp[name]["rows_per_s"]})
        for name in SOURCES], chart={"kind": "bar", "label": ["source"], "value": "files/s"})
    run.ratio("headwater read_files ÷ Spark file source", tp["ratio"], 1.0, "at least",
              "throughput")
    run.ratio("headwater read_files ÷ Python transfer limit", tp["ratio_limit"],
              basis="throughput")
    metrics = {"wall s": "wall_s", "heap growth MB": "heap_growth_mb",
               "driver RSS MB": "driver_rss_mb", "worker RSS MB": "worker_rss_mb",
               "checkpoint KB": "checkpoint_kb", "file index KB": "file_index_kb",
               "plan ms/batch": "planning_ms"}
    run.table("Scale: files landing in waves, one availableNow run per wave (one run each)",
              ["source", "files", "batches", *metrics], [
                  results_file.variant({"source": source, "files": w["files"],
                                        "batches": w["batches"]},
                                       {m: [w[k]] for m, k in metrics.items()})
                  for source in ("spark", "headwater") for w in sc[source]["waves"]],
              chart={"kind": "line", "x": "files", "y": "heap growth MB", "series": "source",
                     "logx": True})
    waves = sc["headwater"]["waves"]
    if len(waves) > 1:  # heap growth stays near 0 MB: as a ratio it is noise, so not here
        first, last = waves[0], waves[-1]
        for m in ("driver RSS MB", "worker RSS MB", "checkpoint KB", "plan ms/batch"):
            k = metrics[m]
            run.ratio(f"headwater {m} at {last['files']:,} ÷ {first['files']:,} files",
                      last[k] / first[k] if first[k] else None, SCALE_TARGET, "at most",
                      "resource growth")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--throughput-files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    results_file.add_json_argument(parser, __file__)
    parser.add_argument("--scale-driver")
    parser.add_argument("--waves")
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.scale_driver:
        result = scale_driver(args.scale_driver, [int(w) for w in args.waves.split(",")],
                              Path(args.work))
        print(json.dumps(result))
        return
    if args.smoke:
        args.files, args.throughput_files, args.runs = 1000, 200, 1
    run = results_file.Run(
        __file__, "File ingestion: read_files vs Spark's file source", SETUP, order=3,
        parameters={"files": args.files, "throughput_files": args.throughput_files,
                    "runs": args.runs, "rows_per_file": ROWS_PER_FILE,
                    "files_per_folder": FILES_PER_FOLDER, "max_files_per_trigger": MAX_FILES,
                    "task_slots": TASKS, "smoke": args.smoke})
    work = Path(tempfile.mkdtemp(prefix="hw-ingest-bench-"))
    try:
        tp = throughput(args.throughput_files, args.runs, work)
        from headwater import stop_spark

        stop_spark()
        sc = scale(args.files, work)
        report(tp, sc, args, run)
        run.write(args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
