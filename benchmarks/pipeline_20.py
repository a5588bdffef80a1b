"""Ratio benchmark: a 20-dataset pipeline (five sources in three formats, joins, a CDC target,
an aggregate with a watermark) on 2 M generated input rows, run by headwater (`headwater run`),
by Spark Declarative Pipelines (`spark-pipelines run`) where SDP can run it, and by a
hand-written PySpark batch script doing the same work with Spark's native parquet reads and
writes: the floor, nothing does this work faster on Spark.

    .venv/bin/python benchmarks/pipeline_20.py                  # 2 M input rows, 3 runs per tool
    .venv/bin/python benchmarks/pipeline_20.py --smoke          # 20 k rows, 1 run
    .venv/bin/python benchmarks/pipeline_20.py --rows 500000 --tools headwater,native --runs 5
    .venv/bin/python benchmarks/pipeline_20.py --json           # into benchmarks/results/pipeline_20.json

The pipeline (benchmarks/pipeline_20/, logic in transforms20.py, input from data20.py):
  bronze  orders, clicks, CDC changes (JSON) and customers (CSV) as streaming tables,
          products (parquet) as a materialized view;
  silver  four cleaned datasets, orders x customers x products, clicks x products, and
          customers_cdc: AUTO CDC (SCD type 1) of the change feed;
  gold    revenue per country / category / day, customer lifetime value, clicks per category,
          conversion per product, a segment summary, and clicks per page in 5-minute
          event-time windows with a 10-minute watermark (a streaming table).
It is written once, as an SDP project (`from pyspark import pipelines as dp`, the CDC target
and the watermark aggregate each in its own file: SDP runs the project without them).

Tools, each a subprocess from clean output folders, `local[2]`, the settings of
pipeline_vs_sdp/hw_project/headwater.toml [spark]:
  headwater           the project unchanged: 20 datasets, Delta tables;
  native              benchmarks/pipeline_20/native20.py: the 20 datasets as plain batch
                      PySpark, `spark.read` of the sources and `df.write.parquet` per dataset
                      (the CDC target as the newest change per key, the watermark aggregate as
                      the batch aggregate keeping the windows the stream closes);
  headwater-sdp-set   headwater on SDP's copy of the project (18 datasets), and
  sdp                 `spark-pipelines run` of that copy (parquet tables), which leaves out
                      customers_cdc.py (SDP has no AUTO CDC into a format without MERGE, and
                      no Delta without jars) and clicks_per_window.py (pyspark 4.3's SDP
                      refuses a withWatermark on a pipeline table's stream while the flow
                      registers: TABLE_OR_VIEW_NOT_FOUND).
Correctness: every dataset's row count must equal the native script's (the bronze ones also
the generator's source counts), and none may be empty: a tool doing other work than the floor
is a failed run, not a faster one.

Rules (benchmarks/README.md): data generated once (seeded) into the work dir and reused; one
discarded warm-up per tool, then --runs runs interleaved; medians. Wall, startup (launch until
the user's code runs: the definitions file for the pipelines, the line after getOrCreate for
the script), pipeline (the rest) and CPU of every process the run started, as
pipeline_vs_sdp.py measures them (its run_once). Headlines: headwater ÷ native wall time
(target ≤ 1.2, issue 39) and headwater-sdp-set ÷ SDP wall time (the same 18 datasets).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

HERE = Path(__file__).resolve().parent / "pipeline_20"
sys.path[:0] = [str(HERE), str(HERE.parent)]

import data20  # noqa: E402
import transforms20  # noqa: E402

import pipeline_vs_sdp as pvs  # noqa: E402 - the run harness: subprocess, CPU, flow events
import results as results_file  # noqa: E402 - benchmarks/results.py

SEED = 20
HW, HW_SDP, NATIVE, SDP = ("headwater", "headwater, SDP's 18 datasets", "native PySpark",
                           "SDP")
TOOLS = (NATIVE, HW, HW_SDP, SDP)  # the native script first: the reference
WORDS = {"headwater": HW, "native": NATIVE, "headwater-sdp-set": HW_SDP, "sdp": SDP}
TARGET = 1.2  # headwater wall time ÷ the native script's, at most (issue 39)
# SDP cannot run these: no AUTO CDC into parquet; a watermark on a pipeline table's stream is
# refused while the flow registers (pyspark 4.3: TABLE_OR_VIEW_NOT_FOUND)
SDP_LEAVES_OUT = {transforms20.CDC_TARGET: "customers_cdc.py",
                  "clicks_per_window": "clicks_per_window.py"}
SDP_DATASETS = tuple(d for d in transforms20.DATASETS if d not in SDP_LEAVES_OUT)
# the script's "written <dataset> in 1.234s" lines: flow events like headwater's "refreshed"
pvs.FLOW_EVENTS.append((re.compile(r"^written (\w+) in ([\d.]+)s"), "refreshed"))
SETUP = (
    "A 20-dataset pipeline on generated input (orders, clicks and a CDC feed of customer "
    "changes as JSON, customers as CSV, products as parquet): bronze streaming tables, "
    "cleaned silver, two joins, an AUTO CDC target (SCD type 1), seven gold aggregates and a "
    "streaming aggregate of clicks per 5-minute window with a 10-minute watermark. One SDP "
    "project (`benchmarks/pipeline_20/sdp_project`) run unchanged by `headwater run` (Delta); "
    "the floor is a hand-written PySpark batch script doing the same work with Spark's native "
    "parquet reads and writes (the CDC target as the newest change per key, the watermark "
    "aggregate as the batch aggregate keeping the windows the stream closes). SDP runs the "
    "project without its CDC target (SDP has no AUTO CDC into parquet, and no Delta without "
    "jars) and without the watermark aggregate (`spark-pipelines` 4.3 refuses a watermark on "
    "a pipeline table's stream while registering the flow): 18 datasets, compared with "
    "headwater on that same copy. Every dataset's row count "
    "must equal the script's. CLI subprocesses from clean folders, `local[2]`, the same Spark "
    "settings; one warm-up per tool, then the median of the interleaved runs. Details: "
    "`benchmarks/README.md`.")


# --- input ---------------------------------------------------------------------------------


def ensure_input(workdir: Path, rows: int) -> tuple[Path, dict]:
    """Generate the sources once per (rows, seed, generator version); reuse after."""
    data = workdir / f"input-{rows}-seed{SEED}"
    manifest = data / "manifest.json"
    if manifest.exists():
        made = json.loads(manifest.read_text())
        if made.get("generator_version") == data20.GENERATOR_VERSION:
            return data, made
    shutil.rmtree(data, ignore_errors=True)
    t0 = time.perf_counter()
    made = data20.generate(data, rows, SEED)
    manifest.write_text(json.dumps(made, indent=1))
    size = sum(p.stat().st_size for p in data.rglob("*.*") if p != manifest) / 1e6
    print(f"generated {rows:,} rows ({size:.0f} MB) in {time.perf_counter() - t0:.1f}s: {data}")
    return data, made


# --- the tools -----------------------------------------------------------------------------


def project_copy(project: Path, storage: Path, sql_conf: dict[str, str], full: bool) -> None:
    """A copy of the SDP project with its spec; for SDP without the files of the datasets
    it cannot run (``full``: all of them)."""
    shutil.rmtree(project, ignore_errors=True)
    skip = ["__pycache__"] + ([] if full else list(SDP_LEAVES_OUT.values()))
    shutil.copytree(HERE / "sdp_project", project, ignore=shutil.ignore_patterns(*skip))
    lines = ["# Written by benchmarks/pipeline_20.py.", "name: pipeline20",
             f"storage: {storage.as_uri()}", "configuration:"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in sql_conf.items()]
    lines += ["libraries:", "  - glob:", "      include: transformations/**", ""]
    (project / "spark-pipeline.yml").write_text("\n".join(lines))


def _parquet_rows(folder: Path) -> int:
    """Rows of a parquet table folder; a streaming sink's: only the files its log lists."""
    import pyarrow.dataset as ds

    log = folder / "_spark_metadata"
    if not log.is_dir():
        return ds.dataset(folder, format="parquet").count_rows()
    files = set()
    for entry in sorted(log.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:  # first line: the log version
            files.add(unquote(urlparse(json.loads(line)["path"]).path))
    return ds.dataset(sorted(files), format="parquet").count_rows() if files else 0


class Headwater(pvs.Tool):
    def __init__(self, workdir: Path, settings: dict[str, str], name: str, full: bool) -> None:
        self.name = name
        self.datasets = transforms20.DATASETS if full else SDP_DATASETS
        self.project = workdir / ("headwater" if full else "headwater-sdp-set")
        self.root = self.project / "storage"
        project_copy(self.project, self.root,
                     {k: v for k, v in settings.items() if k.startswith("spark.sql.")}, full)
        conf = "\n".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in settings.items())
        (self.project / "headwater.toml").write_text(
            "# Written by benchmarks/pipeline_20.py: headwater's keys beside the spec.\n"
            f'[pipeline]\ntrigger = "available-now"\n\n[spark]\n{conf}\n')

    def clean(self) -> None:
        for path in (self.root, self.project / "spark-warehouse", self.project / "metastore_db"):
            shutil.rmtree(path, ignore_errors=True)

    def command(self) -> list[str]:
        exe = pvs.VENV_BIN / "headwater"
        return [str(exe) if exe.exists() else "headwater", "run", "--project", str(self.project)]

    def counts(self) -> dict[str, int]:
        from deltalake import DeltaTable

        tables = {p.parent.name: p.parent for p in self.root.rglob("_delta_log")
                  if "checkpoint" not in str(p.parent.relative_to(self.root)).lower()}
        return {name: DeltaTable(str(tables[name])).to_pyarrow_dataset().count_rows()
                for name in self.datasets if name in tables}


class Sdp(pvs.Tool):
    name = SDP

    def __init__(self, workdir: Path, settings: dict[str, str]) -> None:
        self.datasets = SDP_DATASETS
        self.project = workdir / "sdp"
        self.storage = self.project / "storage"  # checkpoints
        self.warehouse = self.project / "warehouse"  # the tables (spark_catalog.default.*)
        conf = dict(settings)
        self.master = conf.pop("spark.master")
        self.driver_memory = conf.pop("spark.driver.memory")
        # runtime SQL settings in the spec; the rest at launch (pipeline_vs_sdp.Sdp's split)
        sql_conf = {k: v for k, v in conf.items() if k.startswith("spark.sql.")}
        self.launch_conf = {k: v for k, v in conf.items() if k not in sql_conf}
        self.launch_conf["spark.sql.warehouse.dir"] = str(self.warehouse)
        project_copy(self.project, self.storage, sql_conf, full=False)

    def clean(self) -> None:
        for path in (self.storage, self.warehouse, self.project / "spark-warehouse",
                     self.project / "metastore_db"):
            shutil.rmtree(path, ignore_errors=True)

    def command(self) -> list[str]:
        cmd = [str(pvs.VENV_BIN / "spark-pipelines"), "--remote", self.master,
               "--driver-memory", self.driver_memory]
        for key, value in self.launch_conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd + ["run", "--spec", str(self.project / "spark-pipeline.yml")]

    def counts(self) -> dict[str, int]:
        return {name: _parquet_rows(self.warehouse / name) for name in self.datasets
                if (self.warehouse / name).is_dir()}


class Native(pvs.Tool):
    name = NATIVE

    def __init__(self, workdir: Path) -> None:
        self.datasets = transforms20.DATASETS
        self.project = workdir / "native"
        self.out = self.project / "tables"
        self.project.mkdir(parents=True, exist_ok=True)

    def clean(self) -> None:
        for path in (self.out, self.project / "spark-warehouse", self.project / "metastore_db"):
            shutil.rmtree(path, ignore_errors=True)

    def command(self) -> list[str]:
        return [sys.executable, str(HERE / "native20.py"), str(self.out)]

    def counts(self) -> dict[str, int]:
        return {name: _parquet_rows(self.out / name) for name in self.datasets
                if (self.out / name).is_dir()}


# --- correctness ---------------------------------------------------------------------------

BRONZE_SOURCES = {"orders_raw": "orders", "clicks_raw": "clicks", "changes_raw": "changes",
                  "customers_raw": "customers", "products_raw": "products"}


def check(counts: dict[str, int], datasets: tuple[str, ...], made: dict,
          reference: dict[str, int] | None) -> str | None:
    """None when every dataset is there, none is empty, the bronze ones hold their source's
    rows and every count equals the reference's (the native script's, once it ran)."""
    missing = [d for d in datasets if d not in counts]
    if missing:
        return f"datasets missing: {', '.join(missing)}"
    empty = [d for d in datasets if counts[d] == 0]
    if empty:
        return f"empty datasets: {', '.join(empty)}"
    for table, src in BRONZE_SOURCES.items():
        if counts[table] != made["source_rows"][src]:
            return f"{table} has {counts[table]:,} rows, its source {made['source_rows'][src]:,}"
    if reference is not None:
        differ = [f"{d}: {counts[d]:,} vs {reference[d]:,}" for d in datasets
                  if d in reference and counts[d] != reference[d]]
        if differ:
            return "row counts differ from the native script's: " + "; ".join(differ)
    return None


# --- reporting -----------------------------------------------------------------------------


def summarize(runs: list[dict], rows: int) -> dict:
    s = pvs.summarize(runs, rows, 1)
    s["rows_per_s"] = s.pop("orders_per_s")
    s.pop("silver_rows_per_s")
    return s


def record(summary: dict, results: dict[str, list[dict]], status: dict, counts: dict,
           run: results_file.Run) -> bool:
    tools = [t for t in TOOLS if t in summary]
    for tool in TOOLS:
        if status[tool] not in ("ok", "not run"):
            run.note(f"{tool}: {status[tool]}")
    if not tools:
        return False
    rows = run.data["parameters"]["rows"]
    variants = []
    for tool in tools:
        rs, s = results[tool], summary[tool]
        samples = {"wall s": [r["wall_s"] for r in rs], "CPU s": [r["cpu_s"] for r in rs]}
        values: dict[str, float | None] = {"datasets": len(counts[tool]),
                                           "input rows/s": s["rows_per_s"]}
        if all(r["startup_s"] is not None for r in rs):
            samples["startup s"] = [r["startup_s"] for r in rs]
            samples["pipeline s"] = [r["wall_s"] - r["startup_s"] for r in rs]
        else:
            values.update({"startup s": None, "pipeline s": None})
        variants.append(results_file.variant({"tool": tool}, samples, values))
    run.table(f"{rows:,} input rows, 20 datasets (SDP: 18): medians",
              ["tool", "datasets", "wall s", "startup s", "pipeline s", "input rows/s", "CPU s"],
              variants, chart={"kind": "grouped", "label": ["tool"],
                               "series": ["startup s", "pipeline s"]})
    flows = [results_file.variant(
        {"tool": tool, "dataset": name},
        {"start s": [t["flows"][name]["start"] for t in timelines],
         "seconds": [t["flows"][name]["end"] - t["flows"][name]["start"] for t in timelines]})
        for tool in (HW, NATIVE) if tool in summary
        for timelines in [[r["flows"] for r in results[tool] if r.get("flows")]]
        for name in summary[tool]["flows"]
        if timelines and all("start" in t["flows"].get(name, {}) and "end" in t["flows"][name]
                             for t in timelines)]
    if flows:
        run.table("Dataset by dataset, headwater and the native script: start (seconds after "
                  "the session is up) and duration, medians",
                  ["tool", "dataset", "start s", "seconds"], flows)
    if HW in summary and NATIVE in summary:
        for key, label in (("wall_s", "wall time"), ("pipeline_s", "pipeline time"),
                           ("cpu_s", "CPU")):
            a, b = summary[HW][key], summary[NATIVE][key]
            run.ratio(f"headwater ÷ native PySpark {label}", a / b if a is not None and b else None,
                      TARGET if key == "wall_s" else None,
                      "at most" if key == "wall_s" else None, label)
    if HW_SDP in summary and SDP in summary:
        for key, label in (("wall_s", "wall time"), ("pipeline_s", "pipeline time")):
            a, b = summary[HW_SDP][key], summary[SDP][key]
            run.ratio(f"headwater ÷ SDP {label} (SDP's 18 datasets)",
                      a / b if a is not None and b else None, None, None, label)
    return True


def report(summary: dict, status: dict, counts: dict, info: str) -> None:
    def f(v, spec):
        return "-" if v is None else format(v, spec)

    print(f"\npipeline_20 (medians; {info})")
    print(f"{'tool':<30}{'datasets':>9}{'wall s':>9}{'startup s':>11}{'pipeline s':>12}"
          f"{'rows/s':>11}{'CPU s':>8}  status")
    for tool in TOOLS:
        if status[tool] == "not run":
            continue
        s = summary.get(tool)
        if s is None:
            print(f"{tool:<30}{'-':>9}{'-':>9}{'-':>11}{'-':>12}{'-':>11}{'-':>8}  {status[tool]}")
            continue
        print(f"{tool:<30}{len(counts[tool]):>9}{f(s['wall_s'], '.2f'):>9}"
              f"{f(s['startup_s'], '.2f'):>11}{f(s['pipeline_s'], '.2f'):>12}"
              f"{f(s['rows_per_s'], ',.0f'):>11}{f(s['cpu_s'], '.1f'):>8}  {status[tool]}")
    if HW in summary and NATIVE in summary:
        r = summary[HW]["wall_s"] / summary[NATIVE]["wall_s"]
        verdict = "meets" if r <= TARGET else "misses"
        print(f"headwater ÷ native PySpark wall time: {r:.2f} ({verdict} the target ≤ {TARGET})")
        a, b = summary[HW]["pipeline_s"], summary[NATIVE]["pipeline_s"]
        if a is not None and b:
            print(f"  pipeline time {a / b:.2f}, startup {summary[HW]['startup_s']:.1f}s vs "
                  f"{summary[NATIVE]['startup_s']:.1f}s")
    if HW_SDP in summary and SDP in summary:
        print("headwater ÷ SDP wall time on SDP's 18 datasets: "
              f"{summary[HW_SDP]['wall_s'] / summary[SDP]['wall_s']:.2f}")
    for tool in (HW, NATIVE):
        flows = summary.get(tool, {}).get("flows")
        if flows:
            print(f"{tool}, dataset by dataset (start s after the session is up / seconds):")
            for name, fl in sorted(flows.items(), key=lambda kv: kv[1]["start_s"]):
                print(f"  {name:<24}{fl['start_s']:>8.2f}{fl['seconds']:>8.2f}")
            print(f"  {'before the first':<24}{f(summary[tool]['before_first_flow_s'], '.2f'):>8}"
                  f"   after the last {f(summary[tool]['after_last_flow_s'], '.2f')}")


# --- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (``--help``); the process adopts the tools' orphans while it runs
    and stops doing so when it returns (a test session may be its caller)."""
    try:
        return _main(argv)
    finally:
        pvs.clear_subreaper()


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="input rows, all sources")
    parser.add_argument("--runs", type=int, help="timed runs per tool (default 3, --smoke 1)")
    parser.add_argument("--smoke", action="store_true",
                        help="20,000 input rows, 1 run: a quick end-to-end check")
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "headwater-pipeline-20",
                        help="input data (reused), projects, outputs and logs")
    parser.add_argument("--tools", default=",".join(WORDS),
                        help=f"comma-separated subset of {','.join(WORDS)}")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up runs")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args(argv)
    rows = 20_000 if args.smoke else args.rows
    runs = args.runs or (1 if args.smoke else 3)
    wanted = {w.strip().lower() for w in args.tools.split(",") if w.strip()}
    unknown = wanted - set(WORDS)
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}; choose from {', '.join(WORDS)}")
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    logs = workdir / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()

    settings = pvs.spark_settings()
    data, made = ensure_input(workdir, rows)
    spark_home = Path(importlib.util.find_spec("pyspark").origin).parent
    env = dict(os.environ)
    env.update({"PATH": f"{pvs.VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "PIPELINE20_INPUT": str(data),
                "PIPELINE20_CONF": json.dumps(settings)})
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE",
                "PYSPARK_SUBMIT_ARGS"):
        env.pop(var, None)

    def env_with(paths: list[str]) -> dict[str, str]:
        return {**env, "PYTHONPATH": os.pathsep.join(
            [*paths, str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}

    tools: dict[str, tuple[pvs.Tool, dict]] = {}
    if "native" in wanted:
        tools[NATIVE] = (Native(workdir), env_with([]))
    if "headwater" in wanted:
        tools[HW] = (Headwater(workdir, settings, HW, full=True), env_with([]))
    if "headwater-sdp-set" in wanted:
        tools[HW_SDP] = (Headwater(workdir, settings, HW_SDP, full=False), env_with([]))
    if "sdp" in wanted:
        tools[SDP] = (Sdp(workdir, settings), env_with(pvs.sdp_pythonpath(workdir)))
    status = {name: "not run" for name in TOOLS}
    subreaper = pvs.make_subreaper()
    load_before = os.getloadavg()
    run = results_file.Run(
        __file__, "A 20-dataset pipeline: headwater vs hand-written PySpark and SDP", SETUP,
        order=13, argv=sys.argv[1:] if argv is None else argv,
        parameters={"rows": rows, "source_rows": made["source_rows"], "files": made["files"],
                    "runs": runs, "warm_up": not args.no_warmup, "tools": sorted(wanted),
                    "master": settings["spark.master"],
                    "driver_memory": settings["spark.driver.memory"],
                    "shuffle_partitions": settings["spark.sql.shuffle.partitions"],
                    "cpu_accounting": "full tree" if subreaper else "reaped children only",
                    "smoke": args.smoke})
    results: dict[str, list[dict]] = {name: [] for name in tools}
    counts: dict[str, dict[str, int]] = {}

    def attempt(name: str, label: str) -> dict | None:
        tool, tool_env = tools[name]
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        r = pvs.run_once(tool, tool_env, logs / f"{slug}-{label}.log", args.timeout)
        print(f"  {name:<30} {label:<7} rc={r['rc']} wall={r.get('wall_s', 0):6.1f}s "
              f"startup={r.get('startup_s') or 0:5.1f}s cpu={r.get('cpu_s', 0):6.1f}s "
              f"load={os.getloadavg()[0]:.1f}", flush=True)
        if r["rc"] != 0:
            problem = f"exit {r['rc']}, see {r['log']}"
            print(f"{name} run failed ({problem}); last lines:\n"
                  + (pvs.tail(r["log"]) if "wall_s" in r else r.get("error", "")))
        else:
            try:
                got = tool.counts()
            except Exception as exc:  # noqa: BLE001 - reported: the other tools still run
                got, problem = {}, f"could not count the datasets' rows: {exc}"
            else:
                problem = check(got, tool.datasets, made, counts.get(NATIVE))
            if problem is None and r["conf"] is None:
                problem = f"no {transforms20.MARKER.strip()} marker in {r['log']}"
            if problem is None:
                bad = {k: v for k, v in r["conf"].items()
                       if v is not None and v != settings.get(k)}
                if bad:
                    problem = f"ran with other settings: {bad} (wanted {settings})"
            if problem is None:
                counts[name] = got
        if problem:
            status[name] = "FAILED: " + problem
            print(f"{name}: {status[name]}")
            del tools[name]
            return None
        status[name] = "ok"
        return r

    order = [name for name in TOOLS if name in tools]  # the native script first: the reference
    print(f"{rows:,} input rows {made['source_rows']}; tools: {', '.join(order) or 'none'}; "
          f"work dir {workdir}; load {os.getloadavg()[0]:.1f}")
    if not args.no_warmup:
        for name in order:
            if name in tools:
                attempt(name, "warmup")  # JIT, page cache, pyc files; discarded
    for i in range(runs):  # interleaved, so drift in machine load hits every tool
        for name in order:
            if name in tools:
                r = attempt(name, f"run{i + 1}")
                if r is not None:
                    results[name].append(r)

    summary = {name: summarize(rs, rows) for name, rs in results.items()
               if rs and status[name] == "ok"}
    info = (f"{rows:,} input rows, {runs} runs, {settings['spark.master']}, load average "
            f"{load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    report(summary, status, counts, info)
    if HW in counts:
        print("row counts: " + ", ".join(f"{d} {counts[HW][d]:,}" for d in transforms20.DATASETS))
    if not record(summary, results, status, counts, run):
        print("no tool ran to the end: no results file written")
    elif args.json:
        run.write(args.json)
    return 0 if all(s in ("ok", "not run") for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
