"""Freshness: how long from a file landing to its rows being visible in gold, for a pipeline
that runs continuously (``headwater run --trigger continuous``: every 500 ms, the default).

    bash dev.sh bench-freshness                  # 30 landings per scenario, 3 per-run landings
    bash dev.sh bench-freshness --smoke          # 3 landings of the demo, no other scenario
    bash dev.sh bench-freshness --landings 50 --per-run 5 --json /tmp/fresh.json
    bash dev.sh bench-freshness --json           # into benchmarks/results/freshness.json

Scenarios (each its own `headwater run` process; this one only lands files and watches):

- demo, continuous: the demo pipeline (src/headwater/demo: `headwater demo`'s project, all of
  it running) fed by the data factory; a landing is one factory batch (orders, devices,
  colours, customer changes), its orders JSON files -> bronze_orders -> silver_orders ->
  revenue_by_country (a materialized view): three hops.
- orders, continuous: the SDP project of benchmarks/pipeline_vs_sdp (the same unchanged
  `from pyspark import pipelines as dp` code) run by headwater; a landing is one orders JSON
  file -> bronze -> silver -> gold.
- orders, a run per landing (``--per-run``): what a pipeline without a continuous mode does
  at best, a triggered run launched as each file lands: headwater (`headwater run`) and Spark
  Declarative Pipelines (`spark-pipelines run`, its tables kept in a Hive metastore so that
  each run is incremental: SDP's default in-memory catalog forgets them on exit). SDP starts
  a run's flows together, each downstream flow reading what its input had committed when it
  started, so one run can leave a landing short of gold: SDP's runs are repeated until gold
  has the landing (at most 4), the latency counts them all and their number is noted.
  headwater runs the flows in graph order, so one run must bring a landing to gold.

SDP cannot run either pipeline continuously: `spark-pipelines run` (pyspark 4.3) performs one
triggered update and exits; it has no continuous mode. The demo pipeline also uses what SDP
lacks (read_files with rescued data, expectations with a quarantine, AUTO CDC from Debezium
events, late rows kept). Those cells say so.

Measuring: landing time is when the file is in place (the factory's atomic rename; here, an
os.replace of a hidden temporary file). Each table's Delta log is polled (every 20 ms) for new
versions, and a version's time is its commit's ``commitInfo.timestamp``; gold's first version
whose ``lines`` total covers the landing (the expectation is computed from the landed files
in plain Python) gives the latency. The hops: landing -> bronze's first commit after it ->
silver's -> gold's. SDP's gold is a parquet table: its time is the ``_SUCCESS`` file of the
overwrite that covers the landing. The next file lands 0.5-2 s (random) after gold covered
the previous one, so landings fall at any point of the trigger interval. The first landing of
each scenario (tables created, JVM warm-up) is not counted.

p50 and p99 are nearest-rank percentiles of the landings (with 30 landings p99 is the
slowest one). Wall-clock latencies move with other load on the machine: the caption shows
the load average; compare scenarios from one invocation.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "pipeline_vs_sdp"))

import orders_data  # noqa: E402

import pipeline_vs_sdp as pvs  # noqa: E402
import results as results_file  # noqa: E402 - benchmarks/results.py

VENV_BIN = Path(sys.executable).parent
POLL = 0.02
SEED = 7
SETUP = (
    "How long a landed file takes to be visible in gold, with `headwater run --trigger "
    "continuous` (every 500 ms) running as its own process while the benchmark lands files "
    "and watches the tables' Delta logs (gold's first version whose `lines` total covers the "
    "landing, at its commit's timestamp). The hops are commit-driven: the demo's bronze "
    "micro-batch starts when a file lands (the orders scenario's Spark file source waits for "
    "its 500 ms poll), silver's when bronze commits, and gold is recomputed when silver "
    "commits, the 500 ms trigger being their floor. Scenarios: the demo pipeline fed by the data "
    "factory; the SDP project of the pipeline benchmark run by headwater; and a triggered run "
    "launched as each file lands, by `headwater run` and by `spark-pipelines run` (SDP has no "
    "continuous mode). The first landing of each scenario is not counted; every landing's "
    "latency is a sample. Details: `benchmarks/README.md`.")


# --- watching Delta logs -------------------------------------------------------------------


class DeltaVersions:
    """New versions of the Delta table at ``path`` (which may not exist yet), each with its
    commit time (``commitInfo.timestamp``, seconds)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: dict[int, float] = {}

    def poll(self) -> dict[int, float]:
        log = self.path / "_delta_log"
        new = {}
        try:
            names = os.listdir(log)
        except OSError:
            return new
        for name in names:
            if not name.endswith(".json") or not name[:-5].isdigit():
                continue
            version = int(name[:-5])
            if version in self.seen:
                continue
            stamp = commit_time(log / name)
            if stamp is not None:
                self.seen[version] = new[version] = stamp
        return new

    def first_after(self, when: float) -> float | None:
        self.poll()
        after = [t for t in self.seen.values() if t >= when]
        return min(after) if after else None


def commit_time(path: Path) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if '"commitInfo"' in line:
            info = json.loads(line)["commitInfo"]
            if "timestamp" in info:
                return int(info["timestamp"]) / 1000
    return path.stat().st_mtime


def delta_lines(path: Path, version: int) -> int:
    """Sum of the ``lines`` column of version ``version`` of the table at ``path``."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path), version=version).to_pyarrow_table(columns=["lines"])
    return int(sum(v or 0 for v in table.column("lines").to_pylist()))


@dataclass
class Landing:
    number: int
    landed: float
    gold: float | None = None
    bronze: float | None = None
    silver: float | None = None
    runs: int = 0  # triggered runs until gold had it (a run per landing)

    @property
    def latency(self) -> float | None:
        return None if self.gold is None else self.gold - self.landed


@dataclass
class Scenario:
    name: str
    tool: str
    mode: str
    landings: list[Landing] = field(default_factory=list)
    status: str = "ok"

    def counted(self) -> list[Landing]:
        return [x for x in self.landings[1:] if x.latency is not None]


class GoldWatcher:
    """Gold's versions and their ``lines`` totals; bronze and silver's commit times."""

    def __init__(self, gold: Path, bronze: Path | None, silver: Path | None) -> None:
        self.gold = DeltaVersions(gold)
        self.bronze = DeltaVersions(bronze) if bronze else None
        self.silver = DeltaVersions(silver) if silver else None
        self.lines: dict[int, int] = {}

    def covered(self, expected: int) -> float | None:
        """The commit time of gold's first version whose lines total is at least
        ``expected``; None while there is none."""
        self.gold.poll()
        for version in sorted(self.gold.seen):
            if version not in self.lines:
                try:
                    self.lines[version] = delta_lines(self.gold.path, version)
                except Exception:  # noqa: BLE001 - a version being written: read it next time
                    return None
            if self.lines[version] >= expected:
                return self.gold.seen[version]
        return None

    def wait(self, landing: Landing, expected: int, timeout: float,
             alive: Callable[[], bool]) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            done = self.covered(expected)
            if done is not None:
                landing.gold = done
                if self.bronze is not None:
                    landing.bronze = self.bronze.first_after(landing.landed)
                if self.silver is not None:
                    landing.silver = self.silver.first_after(landing.landed)
                return True
            if not alive():
                return False
            time.sleep(POLL)
        return False


# --- the pipeline processes ----------------------------------------------------------------


class Process:
    """A pipeline CLI process in its own session (stopped with SIGINT, by its id)."""

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self.out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this benchmark started
            return self.proc.wait()
        finally:
            self.out.close()

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGINT)  # the CLI stops its flows between batches
        return self.wait(180)


def headwater_cmd(project: Path, trigger: str | None) -> list[str]:
    exe = VENV_BIN / "headwater"
    cmd = [str(exe) if exe.exists() else "headwater", "run", "--project", str(project), "--plain"]
    return cmd + (["--trigger", trigger] if trigger else [])


def base_env(extra_path: list[str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    spark_home = Path(importlib.util.find_spec("pyspark").origin).parent
    env.update({"PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
                "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "PYTHONUNBUFFERED": "1"})
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE",
                "PYSPARK_SUBMIT_ARGS"):
        env.pop(var, None)
    paths = [*(extra_path or []), str(HERE / "pipeline_vs_sdp"),
             *filter(None, [os.environ.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def pause() -> None:
    time.sleep(random.uniform(0.5, 2.0))  # land at any point of the trigger interval


# --- the demo pipeline, continuous ----------------------------------------------------------


def demo_continuous(work: Path, landings: int, timeout: float, logs: Path) -> Scenario:
    from headwater.demo.run import setup_project
    from headwater.factory import CdcRates, CustomerDatabase, DataFactory

    scenario = Scenario("demo: orders files -> bronze_orders -> silver_orders -> "
                        "revenue_by_country", "headwater", "continuous (500 ms)")
    root = work / "demo"
    shutil.rmtree(root, ignore_errors=True)
    setup_project(root)
    factory = DataFactory(root, seed=SEED)
    customers = CustomerDatabase(root, seed=SEED, rates=CdcRates(snapshot=150))

    def land() -> Landing:
        number = factory.load(1)[0]
        customers.load(1)
        files = list((root / "landing" / "orders").rglob(f"orders-{number:05d}-*.json"))
        return Landing(number, max(f.stat().st_mtime for f in files))

    def expected() -> int:  # gold's lines: every line of the orders that count (not resent)
        truth = factory.truth()
        return sum(len(e["record"].get("items") or [])
                   for e in truth.of("orders") if e["kind"] in ("valid", "late"))

    first = land()
    proc = Process(headwater_cmd(root, "continuous"), root, base_env(), logs / "demo.log")
    watcher = GoldWatcher(root / "revenue_by_country", root / "bronze_orders",
                          root / "silver_orders")
    return run_landings(scenario, proc, watcher, first, land, expected, landings, timeout)


def run_landings(scenario: Scenario, proc: Process, watcher: GoldWatcher, first: Landing,
                 land: Callable[[], Landing], expected: Callable[[], int], landings: int,
                 timeout: float) -> Scenario:
    try:
        # the first landing waits for the pipeline to start and create its tables
        if not watcher.wait(first, expected(), max(timeout, 600), proc.alive):
            scenario.status = f"FAILED: the first landing never reached gold (see {proc.log})"
            return scenario
        scenario.landings.append(first)
        for _ in range(landings):
            pause()
            landing = land()
            scenario.landings.append(landing)
            if not watcher.wait(landing, expected(), timeout, proc.alive):
                scenario.status = (f"FAILED: landing {landing.number} not in gold within "
                                   f"{timeout:.0f} s (see {proc.log})")
                break
            print(f"  {scenario.tool:9} {scenario.mode:22} landing {landing.number:3}: "
                  f"{landing.latency:6.2f} s", flush=True)
    finally:
        code = proc.stop()
        if code not in (0, -signal.SIGINT) and scenario.status == "ok":
            scenario.status = f"FAILED: exit {code} (see {proc.log})"
    return scenario


# --- the orders pipeline (benchmarks/pipeline_vs_sdp's SDP project) --------------------------


class OrderFiles:
    """Orders JSON files generated once, landed one at a time into ``landing``; the gold
    ``lines`` total they make (explode_outer of metadata then items)."""

    def __init__(self, work: Path, files: int, orders_per_file: int) -> None:
        self.source = work / f"orders-{files}x{orders_per_file}-seed{SEED}"
        if not (self.source / f"orders-{files - 1:05d}.json").exists():
            shutil.rmtree(self.source, ignore_errors=True)
            orders_data.generate(self.source, files * orders_per_file, files, SEED)
        self.files = sorted(self.source.glob("orders-*.json"))
        self.landed_lines = 0
        self.next = 0

    def land(self, landing: Path) -> Landing:
        landing.mkdir(parents=True, exist_ok=True)
        src = self.files[self.next]
        tmp = landing / f".{src.name}.tmp"  # hidden: Spark's file source skips it
        shutil.copyfile(src, tmp)
        os.replace(tmp, landing / src.name)
        landed = time.time()
        self.landed_lines += lines_of(src)
        self.next += 1
        return Landing(self.next - 1, landed)


def lines_of(path: Path) -> int:
    total = 0
    for line in path.read_text().splitlines():
        if line.strip():
            order = json.loads(line)
            total += max(1, len(order.get("metadata") or [])) * \
                max(1, len(order.get("items") or []))
    return total


def orders_project(work: Path, name: str, trigger: str, extra_spark: dict[str, str]
                   ) -> tuple[Path, Path]:
    """A copy of the SDP project and a headwater.toml beside its spec: (project, storage)."""
    project = work / name
    storage = project / "storage"
    settings = pvs.spark_settings()
    pvs.sdp_project_copy(project, storage, {k: v for k, v in settings.items()
                                            if k.startswith("spark.sql.")})
    conf = "\n".join(f"{json.dumps(k)} = {json.dumps(v)}"
                     for k, v in {**settings, **extra_spark}.items())
    (project / "headwater.toml").write_text(f'[pipeline]\ntrigger = "{trigger}"\n\n'
                                            f"[spark]\n{conf}\n")
    return project, storage


def orders_continuous(work: Path, landings: int, timeout: float, logs: Path,
                      orders_per_file: int) -> Scenario:
    scenario = Scenario("orders: one JSON file -> bronze -> silver -> gold", "headwater",
                        "continuous (500 ms)")
    files = OrderFiles(work, landings + 1, orders_per_file)
    project, storage = orders_project(work, "orders-continuous", "available-now", {})
    landing = work / "orders-continuous-landing"
    shutil.rmtree(landing, ignore_errors=True)
    env = base_env()
    env["PIPELINE_BENCH_INPUT"] = str(landing)
    first = files.land(landing)
    proc = Process(headwater_cmd(project, "continuous"), project, env,
                   logs / "orders-continuous.log")
    watcher = GoldWatcher(storage / "gold", storage / "bronze", storage / "silver")
    return run_landings(scenario, proc, watcher, first, lambda: files.land(landing),
                        lambda: files.landed_lines, landings, timeout)


def headwater_per_run(work: Path, landings: int, timeout: float, logs: Path,
                      orders_per_file: int) -> Scenario:
    scenario = Scenario("orders: one JSON file -> bronze -> silver -> gold", "headwater",
                        "a run per landing")
    files = OrderFiles(work, landings + 1, orders_per_file)
    project, storage = orders_project(work, "orders-per-run", "available-now", {})
    landing = work / "orders-per-run-landing"
    shutil.rmtree(landing, ignore_errors=True)
    env = base_env()
    env["PIPELINE_BENCH_INPUT"] = str(landing)
    watcher = GoldWatcher(storage / "gold", storage / "bronze", storage / "silver")
    for i in range(landings + 1):
        if i:
            pause()
        x = files.land(landing)
        x.runs = 1  # one run must bring it to gold: headwater runs the flows in graph order
        proc = Process(headwater_cmd(project, None), project, env, logs / f"per-run-hw-{i}.log")
        code = proc.wait(timeout)
        if code != 0 or not watcher.wait(x, files.landed_lines, 5, lambda: False):
            scenario.status = f"FAILED: run {i} exit {code} (see {proc.log})"
            break
        scenario.landings.append(x)
        if i:
            print(f"  headwater a run per landing   landing {i:3}: {x.latency:6.2f} s",
                  flush=True)
    return scenario


def sdp_per_run(work: Path, landings: int, timeout: float, logs: Path,
                orders_per_file: int) -> Scenario:
    scenario = Scenario("orders: one JSON file -> bronze -> silver -> gold", "SDP",
                        "a run per landing")
    files = OrderFiles(work, landings + 1, orders_per_file)
    sdp = pvs.Sdp(work / "orders-sdp", pvs.spark_settings())
    sdp.clean()
    shutil.rmtree(sdp.project / "metastore_db", ignore_errors=True)
    landing = work / "orders-sdp-landing"
    shutil.rmtree(landing, ignore_errors=True)
    env = base_env(pvs.sdp_pythonpath(work))
    env["PIPELINE_BENCH_INPUT"] = str(landing)
    cmd = sdp.command()
    run_at = cmd.index("run")
    # tables in a Hive metastore (Derby, in the project folder): kept between runs, so each
    # run is incremental
    cmd[run_at:run_at] = ["--conf", "spark.sql.catalogImplementation=hive"]
    success = sdp.warehouse / "gold" / "_SUCCESS"
    # SDP starts a run's flows together: silver and gold read what bronze had committed when
    # they started, so one run can leave a landing short of gold (seen: every time). Runs are
    # repeated until gold has the landing; the latency counts them all, and their number is
    # reported.
    for i in range(landings + 1):
        if i:
            pause()
        x = files.land(landing)
        lines = 0
        while x.runs < SDP_MAX_RUNS_PER_LANDING and lines < files.landed_lines:
            x.runs += 1
            proc = Process(cmd, sdp.project, env, logs / f"per-run-sdp-{i}-{x.runs}.log")
            code = proc.wait(timeout)
            if code != 0 or not success.exists():
                scenario.status = f"FAILED: landing {i} run {x.runs} exit {code} " \
                                  f"(see {proc.log})"
                return scenario
            lines = sum(int(r["lines"] or 0) for r in sdp.gold())
        if lines < files.landed_lines:
            scenario.status = f"FAILED: landing {i}: after {x.runs} runs gold has {lines} " \
                              f"lines, expected {files.landed_lines}"
            break
        x.gold = success.stat().st_mtime
        scenario.landings.append(x)
        if i:
            print(f"  SDP       a run per landing   landing {i:3}: {x.latency:6.2f} s "
                  f"({x.runs} runs)", flush=True)
    return scenario


SDP_MAX_RUNS_PER_LANDING = 4  # three hops: at most one run each, and one more


# --- report -------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summary(s: Scenario) -> dict:
    counted = s.counted()
    out: dict = {"scenario": s.name, "tool": s.tool, "mode": s.mode, "status": s.status,
                 "landings": len(counted),
                 "latencies_s": [round(x.latency, 3) for x in counted],
                 "runs": [x.runs for x in counted if x.runs]}
    if counted:
        lat = [x.latency for x in counted]
        out.update({"p50_s": percentile(lat, 0.5), "p99_s": percentile(lat, 0.99),
                    "mean_s": statistics.fmean(lat)})
        hops = [(x.bronze - x.landed, x.silver - x.bronze, x.gold - x.silver)
                for x in counted if x.bronze is not None and x.silver is not None]
        if hops:
            out["hops_s"] = {name: [round(h[i], 3) for h in hops]
                             for i, name in enumerate(HOPS)}
            out["hops_median_s"] = {
                "landing->bronze": statistics.median(h[0] for h in hops),
                "bronze->silver": statistics.median(h[1] for h in hops),
                "silver->gold": statistics.median(h[2] for h in hops)}
    return out


HOPS = ("landing->bronze", "bronze->silver", "silver->gold")


def record(rows: list[dict], run: results_file.Run) -> bool:
    """Every measured scenario's latencies into ``run`` (the others as notes); False: none."""
    variants = []
    for r in rows:
        if "latencies_s" not in r or not r["latencies_s"]:
            run.note(f"{r['scenario']}, {r['tool']}, {r['mode']}: {r['status']}")
            continue
        if r["status"] != "ok":
            run.note(f"{r['scenario']}, {r['tool']}, {r['mode']}: {r['status']} (after "
                     f"{r['landings']} landings)")
        if r.get("runs") and max(r["runs"]) > 1:
            run.note(f"{r['scenario']}, {r['tool']}, {r['mode']}: triggered runs until gold "
                     f"had each landing: {r['runs']} (the latency counts them all)")
        samples = {"latency s": r["latencies_s"],
                   **{f"{hop} s": r.get("hops_s", {}).get(hop, []) for hop in HOPS}}
        values = {f"{hop} s": None for hop in HOPS if not samples[f"{hop} s"]}
        values.update({"p50 s": r["p50_s"], "p99 s": r["p99_s"]})
        variants.append(results_file.variant(
            {"scenario": r["scenario"], "tool": r["tool"], "mode": r["mode"],
             "landings": r["landings"]}, samples, values))
    if not variants:
        return False
    run.table("Landing to gold: p50 / p99 (nearest rank), median hops",
              ["scenario", "tool", "mode", "landings", "p50 s", "p99 s",
               *(f"{hop} s" for hop in HOPS)], variants,
              chart={"kind": "grouped", "label": ["scenario", "tool", "mode"],
                     "series": ["p50 s", "p99 s"]})
    return True


def report(rows: list[dict], info: dict) -> None:
    header = ("scenario", "tool", "mode", "landings", "p50 s", "p99 s",
              "hops (median s): land->bronze, ->silver, ->gold")
    lines = []
    for r in rows:
        hops = r.get("hops_median_s")
        hop_text = ", ".join(f"{v:.2f}" for v in hops.values()) if hops else "-"
        if r["status"] != "ok" and "p50_s" not in r:
            lines.append((r["scenario"], r["tool"], r["mode"], "-", "-", "-", r["status"]))
            continue
        lines.append((r["scenario"], r["tool"], r["mode"], str(r["landings"]),
                      f"{r['p50_s']:.2f}", f"{r['p99_s']:.2f}",
                      hop_text + ("" if r["status"] == "ok" else f" ({r['status']})")))
    caption = ", ".join(f"{k}={v}" for k, v in info.items())
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="freshness: a landed file -> its rows in gold", caption=caption)
        for col in header:
            table.add_column(col)
        for line in lines:
            table.add_row(*line)
        Console(width=max(140, shutil.get_terminal_size().columns)).print(table)
    except ImportError:
        print(caption)
        for line in [header, *lines]:
            print(" | ".join(line))


SDP_CONTINUOUS = ("cannot run: spark-pipelines (pyspark {v}) has no continuous mode; `run` is "
                  "one triggered update and exits (see 'a run per landing')")
SDP_DEMO = ("cannot run: no continuous mode, and the demo uses what SDP lacks (read_files "
            "with rescued data, expectations with a quarantine, AUTO CDC, late rows kept)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--landings", type=int, default=30,
                        help="counted landings per continuous scenario (default 30)")
    parser.add_argument("--per-run", type=int, default=3,
                        help="counted landings of the run-per-landing rows (0: skip them)")
    parser.add_argument("--orders-per-file", type=int, default=3000)
    parser.add_argument("--scenarios", default="demo,orders,per-run",
                        help="comma-separated subset of demo,orders,per-run")
    parser.add_argument("--smoke", action="store_true",
                        help="3 landings of the demo only: a quick end-to-end check")
    parser.add_argument("--timeout", type=float, default=180,
                        help="seconds a landing may take to reach gold")
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "headwater-freshness")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    wanted = {s.strip() for s in args.scenarios.split(",")}
    if args.smoke:
        args.landings, wanted = 3, {"demo"}
    random.seed(SEED)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    pvs.make_subreaper()
    load_before = os.getloadavg()[0]
    run = results_file.Run(
        __file__, "Freshness: a landed file -> its rows in gold", SETUP, order=5,
        parameters={"landings": args.landings, "per_run": args.per_run,
                    "orders_per_file": args.orders_per_file, "scenarios": sorted(wanted),
                    "trigger": "continuous = every 500 ms", "smoke": args.smoke})
    import pyspark

    rows = []
    if "demo" in wanted:
        rows.append(summary(demo_continuous(work, args.landings, args.timeout, logs)))
        rows.append({"scenario": rows[-1]["scenario"], "tool": "SDP", "mode": "continuous",
                     "status": SDP_DEMO})
    if "orders" in wanted:
        rows.append(summary(orders_continuous(work, args.landings, args.timeout, logs,
                                              args.orders_per_file)))
        rows.append({"scenario": rows[-1]["scenario"], "tool": "SDP", "mode": "continuous",
                     "status": SDP_CONTINUOUS.format(v=pyspark.__version__)})
    if "per-run" in wanted and args.per_run > 0:
        rows.append(summary(headwater_per_run(work, args.per_run, args.timeout, logs,
                                              args.orders_per_file)))
        rows.append(summary(sdp_per_run(work, args.per_run, args.timeout, logs,
                                        args.orders_per_file)))
    info = {"cores": os.cpu_count(), "loadavg_1m": f"{load_before:.1f}->{os.getloadavg()[0]:.1f}",
            "trigger": "continuous = every 500 ms", "pyspark": pyspark.__version__}
    report(rows, info)
    if not record(rows, run):
        print("no scenario measured a landing: no results file written")
    elif args.json:
        run.write(args.json)
    return 0 if all(r["status"] == "ok" or r["status"].startswith("cannot run")
                    for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
