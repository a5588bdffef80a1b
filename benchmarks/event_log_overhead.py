"""What watching a pipeline costs: the demo pipeline with and without the event log.

    .venv/bin/python benchmarks/event_log_overhead.py [--rounds 5] [--landings 3] [--smoke]
                                                      [--json [PATH]]

Each round copies the same landed data (the data factory, seed 0) into a fresh project and
runs the demo pipeline as a scheduled job would: ``--landings`` times, one factory batch lands
and a triggered run (availableNow) processes it. Three variants, interleaved in a rotating
order inside every round, on one SparkSession (one JVM):

- ``bare``: the runner alone (no listener, no log, no progress output);
- ``progress``: Spark's listener and the per-batch progress lines (lag included), no log;
- ``event log``: the listener, the progress lines and the ``_event_log`` table.

Round 1 is a warm-up and is discarded; then the median of the rounds for wall time and CPU
seconds of the whole process tree (driver, JVM, Python workers), and the median of the
per-round ratios to ``bare`` ("paired": the variants of a round run back to back, so the drift
between rounds cancels). The target: ``event log`` within 5 % of ``bare`` in wall time.
``--json`` writes benchmarks/results/event_log_overhead.json (format: benchmarks/results.py).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results as results_file  # noqa: E402 - benchmarks/results.py
from delta_io import tree_cpu_seconds  # noqa: E402

VARIANTS = ("bare", "progress", "event log")
LABELS = {"bare": "bare: the runner alone (no listener, no log, no output)",
          "progress": "progress: listener + per-batch lines with lag",
          "event log": "event log: listener + lines + _event_log"}
TARGET = 1.05  # event log ÷ bare, paired wall time: at most
SETUP = (
    "The demo pipeline as a scheduled job (a factory batch lands, then a triggered run, "
    "`--landings` times per round), three variants interleaved in rotating order per round "
    "on one `local[2]` session; the first round is a discarded warm-up, then medians of the "
    "rounds; wall time and CPU seconds of the whole process tree. \"paired\" is the median "
    "of each round's ratio to bare (a round's variants run back to back, so drift between "
    "rounds cancels).")


def prepare(seed_dir: Path, landings: int) -> None:
    """The demo project and every batch it will land, landed once into ``seed_dir/_all``."""
    from headwater.demo.run import setup_project
    from headwater.factory import DataFactory

    setup_project(seed_dir)
    for n in range(landings):  # snapshot the folder after each landing
        DataFactory(seed_dir, seed=0).load(1)
        shutil.copytree(seed_dir, seed_dir.parent / f"landed-{n}", dirs_exist_ok=True)


def one_round(spark, seeds: Path, work: Path, variant: str, landings: int,
              select: list[str] | None = None) -> dict:
    """``landings`` triggered runs of the demo pipeline (its ``select`` flows, default all),
    each after one more batch landed."""
    import headwater
    from headwater.conf.project_file import Project
    from headwater.conf.triggers import trigger_kwargs
    from headwater.monitor.display import Display
    from headwater.pipeline.graph import Graph
    from headwater.pipeline.loader import load_definitions
    from headwater.pipeline.run import Runner

    wall = cpu = 0.0
    rows = 0
    lines: list[str] = []
    for n in range(landings):
        # the next batch lands: files and the factory's tables as they were after landing n
        shutil.copytree(seeds / f"landed-{n}", work, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("_checkpoints", "_event_log", "_runs",
                                                      "*_orders*", "revenue_*",
                                                      "device_counts"))
        project = Project.load(work)
        lake = headwater.Lakehouse(project.root, spark)
        graph = Graph(load_definitions(project), lake).build()
        display = None if variant == "bare" else Display(lines.append, live=False)
        runner = Runner(graph, trigger_kwargs("available-now"), False, select,
                        pipeline=project.name,
                        event_log=variant == "event log", display=display,
                        echo=lambda _: None)
        cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
        results = runner.run()
        wall += time.perf_counter() - t0
        cpu += tree_cpu_seconds() - cpu0
        failed = [r for r in results if not r.ok]
        if failed:
            raise SystemExit(f"{variant}: {failed}")
        rows += sum(r.rows_written for r in results if r.key in ("bronze_orders", "silver_orders"))
    return {"wall": wall, "cpu": cpu, "rows": rows,
            "logged": (work / "_event_log" / "_delta_log").is_dir(), "lines": len(lines)}


def measure(spark, rounds: int, landings: int, base: Path,
            select: list[str] | None = None) -> dict[str, list[dict]]:
    seeds = base / "seeds"
    prepare(seeds / "project", landings)
    results: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS[r % 3:] + VARIANTS[:r % 3]  # rotate: no variant always goes first
        for variant in order:
            work = base / f"round-{r}-{variant.replace(' ', '-')}"
            results[variant].append(one_round(spark, seeds, work, variant, landings,
                                                     select))
            shutil.rmtree(work, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the first a warm-up")
    parser.add_argument("--landings", type=int, default=3, help="landings + runs per round")
    parser.add_argument("--smoke", action="store_true", help="2 rounds of 1 landing")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.landings = 2, 1
    run = results_file.Run(__file__, "Watching: the event log's cost", SETUP, order=4,
                           parameters={"rounds": args.rounds, "warm_up_rounds": 1,
                                       "landings": args.landings, "smoke": args.smoke})
    import headwater

    spark = headwater.spark_session("local[2]", app_name="event-log-overhead",
                                    conf={"spark.sql.shuffle.partitions": "2",
                                          "spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory(prefix="hw-eventlog-") as tmp:
        results = measure(spark, args.rounds, args.landings, Path(tmp))
    kept = {v: runs[1:] for v, runs in results.items()}
    bare = statistics.median(r["wall"] for r in kept["bare"])
    bare_walls = [r["wall"] for r in kept["bare"]]
    print(f"\ndemo pipeline, {args.landings} landings + triggered runs per round, "
          f"median of {args.rounds - 1} rounds (1 warm-up discarded)\n")
    print(f"{'variant':<10} {'wall s':>8} {'vs bare':>8} {'paired':>8} {'cpu s':>8} "
          f"{'rows/s':>8}  per round")
    summary = {}
    rows_table = []
    for variant, runs in kept.items():
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        rows = runs[0]["rows"]
        # each round's variants ran back to back: their ratio cancels the drift between rounds
        paired = statistics.median(r["wall"] / b for r, b in zip(runs, bare_walls))
        summary[variant] = {"wall": wall, "cpu": cpu, "ratio": wall / bare, "paired": paired,
                            "rows": rows, "walls": [round(r["wall"], 2) for r in runs]}
        print(f"{variant:<10} {wall:8.2f} {wall / bare:8.3f} {paired:8.3f} {cpu:8.1f} "
              f"{rows / wall:8.0f}  " + " ".join(f"{r['wall']:.2f}" for r in runs))
        rows_table.append(results_file.variant(
            {"variant": LABELS[variant]},
            {"wall s": [r["wall"] for r in runs], "CPU s": [r["cpu"] for r in runs],
             "paired ÷ bare": [r["wall"] / b for r, b in zip(runs, bare_walls)]},
            {"÷ bare": wall / bare, "rows/s": rows / wall}))
    run.table(f"Medians of {args.rounds - 1} rounds", [
        "variant", "wall s", "÷ bare", "paired ÷ bare", "CPU s", "rows/s"], rows_table,
        chart={"kind": "bar", "label": ["variant"], "value": "paired ÷ bare"},
        formats={"÷ bare": "{:.3f}", "paired ÷ bare": "{:.3f}"})
    run.ratio("event log ÷ bare (paired wall time)", summary["event log"]["paired"], TARGET,
              "at most", "wall time")
    run.ratio("progress ÷ bare (paired wall time)", summary["progress"]["paired"],
              basis="wall time")
    run.write(args.json)
    headwater.stop_spark()


if __name__ == "__main__":
    main()
