"""Ratio benchmark: the same 3-layer pipeline, on the same generated data, run by headwater
(`headwater run`) and by Spark Declarative Pipelines (`spark-pipelines run`, pyspark 4.3),
both as CLI subprocesses, each from clean output directories.

    .venv/bin/python benchmarks/pipeline_vs_sdp.py                  # 300k orders, 100 files, 3 runs
    .venv/bin/python benchmarks/pipeline_vs_sdp.py --smoke          # 3k orders, 10 files, 1 run
    .venv/bin/python benchmarks/pipeline_vs_sdp.py --orders 1000000 --files 200 --runs 5 \\
        --workdir /tmp/pvs --json /tmp/pvs.json
    .venv/bin/python benchmarks/pipeline_vs_sdp.py --json     # into benchmarks/results/pipeline_vs_sdp.json

Pipeline (benchmarks/pipeline_vs_sdp/): JSON Lines orders (nested customer.address, payment,
items[] and metadata[] arrays of structs; schema given explicitly on both sides)
  -> bronze: streaming table, raw
  -> silver: streaming table, explode_outer(metadata) then explode_outer(items), flattened
  -> gold:   materialized view, per country: orders, silver rows, quantity, exact revenue.
Both tools run the same unchanged SDP project (pipeline_vs_sdp/sdp_project: `from pyspark
import pipelines as dp`, the `spark` global SDP injects; logic in orders_transforms.py) from
the same spark-pipeline.yml the harness writes into each copy. headwater writes Delta tables;
SDP writes parquet tables (no Delta jars without a download).

Settings: the [spark] table of pipeline_vs_sdp/hw_project/headwater.toml is the one source;
SDP gets the same values (master local[2] via --remote, driver memory, shuffle partitions,
time zone); headwater reads the spec's configuration plus a headwater.toml the harness writes
beside the spec (master, driver memory). The definitions file prints the effective settings
and the harness checks them. (hw_project/transformations is headwater's own spelling of the
same pipeline, kept for reading; the harness no longer runs it.)

Rules (benchmarks/README.md): data generated once (seeded) into the work dir and reused; one
discarded warm-up run per tool, then --runs runs interleaved (hw, sdp, hw, sdp, ...); medians.
Every timed run starts from clean tables, checkpoints and warehouse (SDP's in-memory catalog
forgets its tables on exit, so a second run into existing dirs fails: LOCATION_ALREADY_EXISTS).

Per tool it reports:
  wall      launch of the CLI subprocess -> its exit.
  startup   launch -> the first line of the user's definitions file running. Both tools run
            that file only once their Spark session is up (SDP: launcher JVM, Python CLI,
            Spark Connect server JVM, dataflow-graph RPC; headwater: Python, JVM, session),
            so this is "time until the tool can start on the user's pipeline", measured
            inside the real run rather than by a separate probe process. The file records
            time.time() as its first statement and prints it (PIPELINE_BENCH_SESSION_UP).
  pipeline  wall - startup: registration, analysis, the three flows, commit and shutdown.
  orders/s, silver rows/s   over pipeline time.
  CPU s     user+sys of every process the run started (JVMs, Python CLI and workers):
            getrusage(RUSAGE_CHILDREN) deltas, with this process made a child subreaper
            (Linux prctl) so orphaned grandchildren are reparented here, reaped and counted.
Correctness: each tool's gold (headwater: the Delta table, read with deltalake; SDP: the
parquet table, read with pyarrow) and silver row count must equal the expectation the
generator computes in plain Python, hence also each other.

The headline is headwater wall / SDP wall (target <= 0.85, issue 26). If `headwater run` is not there
yet (no headwater.cli), the headwater side is reported as not available and SDP still runs.
SDP needs pyyaml and the Spark Connect client packages (pyspark's "pipelines" extra); any
missing from the venv are pip-installed once into <workdir>/sdp-deps and put on PYTHONPATH
for the SDP subprocess only, leaving the venv untouched.

Wall times move with other load on the machine (the caption shows the load average): compare
the ratio from one invocation, not absolute times across invocations.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote, urlparse

HERE = Path(__file__).resolve().parent / "pipeline_vs_sdp"
sys.path[:0] = [str(HERE), str(HERE.parent)]

import orders_data  # noqa: E402

import results as results_file  # noqa: E402 - benchmarks/results.py

VENV_BIN = Path(sys.executable).parent
SEED = 4
MARKER = "PIPELINE_BENCH_SESSION_UP "
# Flow events in each CLI's output, stamped with their arrival time (both run unbuffered):
# headwater prints "[ 12.3s] started   bronze (...)" / "completed bronze" / "refreshed gold";
# SDP prints "Flow spark_catalog.default.bronze is STARTING." / "... has COMPLETED.".
FLOW_EVENTS = [
    (re.compile(r"\]\s+started\s+([\w.]+)"), "start"),
    (re.compile(r"\]\s+completed\s+([\w.]+?):"), "end"),
    (re.compile(r"\]\s+refreshed\s+([\w.]+?):.* in ([\d.]+)s"), "refreshed"),
    (re.compile(r"Flow (?:[\w`]+\.)*([\w`]+) is STARTING"), "start"),
    (re.compile(r"Flow (?:[\w`]+\.)*([\w`]+) has COMPLETED"), "end"),
]
HW, SDP = "headwater", "SDP"
# headwater with its JVM class archive off (HEADWATER_CLASS_ARCHIVE=0): what a first session
# on a machine costs, and what the archive is worth
HW_COLD = "headwater, no class archive"
# headwater with one of its defaults off: what that default costs (--tools to include them)
HW_NO_EVENT_LOG = "headwater, no event log"
HW_NO_COMPACT = "headwater, no auto compaction"
TOOLS = (HW, HW_COLD, HW_NO_EVENT_LOG, HW_NO_COMPACT, SDP)
HEADWATERS = TOOLS[:-1]
# --tools word -> (tool, project folder, [pipeline] keys, environment)
VARIANTS: dict[str, tuple[str, str, dict[str, bool], dict[str, str]]] = {
    "headwater": (HW, "headwater", {}, {}),
    "headwater-cold": (HW_COLD, "headwater", {}, {"HEADWATER_CLASS_ARCHIVE": "0"}),
    "headwater-no-event-log": (HW_NO_EVENT_LOG, "headwater-no-event-log",
                               {"event_log": False}, {}),
    "headwater-no-auto-compact": (HW_NO_COMPACT, "headwater-no-auto-compact",
                                  {"auto_compact": False}, {}),
}
TARGET = 0.85  # headwater wall time ÷ SDP's, at most (issue 26)
SETUP = (
    "The same 3-layer pipeline on the same generated nested JSON orders (bronze → silver with "
    "two `explode_outer` → gold revenue per country), `headwater run` (Delta) against "
    "`spark-pipelines run` (parquet), both CLI subprocesses running the same unchanged SDP "
    "project (`benchmarks/pipeline_vs_sdp/sdp_project`) from clean folders, `local[2]`, the "
    "same Spark settings; one warm-up per tool, then the median of the interleaved runs. "
    "Startup: launch until the definitions file runs; pipeline: the rest. CPU: every process "
    "the run started. Both gold tables must equal the expected result computed in Python. "
    "Details: `benchmarks/README.md`.")
NOT_AVAILABLE = re.compile(
    r"No module named '?headwater\.cli'?|No such command '?run'?|"
    r"cannot import name '(table|materialized_view|read_stream|read)' from 'headwater'|"
    r"module 'headwater' has no attribute '(table|materialized_view|read_stream|read)'")


# --- settings -----------------------------------------------------------------------------


def spark_settings() -> dict[str, str]:
    """The [spark] table of the committed headwater.toml: the settings both tools get."""
    with open(HERE / "hw_project" / "headwater.toml", "rb") as f:
        conf = {k: str(v) for k, v in tomllib.load(f)["spark"].items()}
    for key in ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions"):
        if key not in conf:
            sys.exit(f"headwater.toml [spark] must set {key}")
    return conf


# --- input --------------------------------------------------------------------------------


def ensure_input(workdir: Path, orders: int, files: int) -> tuple[Path, dict]:
    """Generate the orders once per (orders, files, seed, generator version); reuse after."""
    data = workdir / f"input-{orders}x{files}-seed{SEED}"
    manifest = data / "_expected.json"  # '_' prefix: Spark's file source skips it
    if manifest.exists():
        expected = json.loads(manifest.read_text())
        if expected.get("generator_version") == orders_data.GENERATOR_VERSION:
            return data, expected
    shutil.rmtree(data, ignore_errors=True)
    t0 = time.perf_counter()
    expected = orders_data.generate(data, orders, files, SEED)
    manifest.write_text(json.dumps(expected, indent=1))
    size = sum(p.stat().st_size for p in data.glob("*.json")) / 1e6
    print(f"generated {orders:,} orders in {files} files ({size:.0f} MB) in "
          f"{time.perf_counter() - t0:.1f}s: {data}")
    return data, expected


# --- SDP's client packages ----------------------------------------------------------------


def sdp_pythonpath(workdir: Path) -> list[str]:
    """pyspark's "pipelines" extra that the venv lacks, installed once into a side dir."""
    wanted = []
    for req in importlib.metadata.requires("pyspark") or []:
        if 'extra == "pipelines"' not in req:
            continue
        spec = req.split(";")[0].strip()
        name = re.split(r"[<>=!~ ]", spec)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            wanted.append(spec)
    if not wanted:
        return []
    target = workdir / "sdp-deps"
    stamp = target / ".installed"
    if not stamp.exists() or stamp.read_text() != "\n".join(wanted):
        print(f"installing SDP's client packages into {target}: {' '.join(wanted)}")
        shutil.rmtree(target, ignore_errors=True)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                               "--disable-pip-version-check", "--target", str(target), *wanted],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"pip could not install {wanted}:\n{done.stdout}{done.stderr}")
        stamp.write_text("\n".join(wanted))
    return [str(target)]


# --- the two tools ------------------------------------------------------------------------


class Tool:
    name: str
    project: Path

    def clean(self) -> None:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def gold(self) -> list[dict]:
        raise NotImplementedError

    def silver_rows(self) -> int:
        raise NotImplementedError


def sdp_project_copy(project: Path, storage: Path, sql_conf: dict[str, str]) -> None:
    """A copy of the SDP project (pipeline_vs_sdp/sdp_project) with its spec: both tools run
    this same unchanged project. SDP wants an absolute storage URI; for headwater the storage
    is the lakehouse (tables and checkpoints)."""
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(HERE / "sdp_project", project, ignore=shutil.ignore_patterns("__pycache__"))
    lines = ["# Written by benchmarks/pipeline_vs_sdp.py.", "name: orders_bench",
             f"storage: {storage.as_uri()}", "configuration:"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in sql_conf.items()]
    lines += ["libraries:", "  - glob:", "      include: transformations/**", ""]
    (project / "spark-pipeline.yml").write_text("\n".join(lines))


class Headwater(Tool):
    name = HW

    def __init__(self, workdir: Path, settings: dict[str, str], name: str = HW,
                 folder: str = "headwater", pipeline: dict[str, bool] | None = None) -> None:
        self.name = name
        # The SDP project, unchanged; the settings SDP gets on its command line (master,
        # driver memory) go in a headwater.toml beside the spec, which holds only those.
        self.project = workdir / folder
        self.root = self.project / "storage"
        sdp_project_copy(self.project, self.root,
                         {k: v for k, v in settings.items() if k.startswith("spark.sql.")})
        conf = "\n".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in settings.items())
        (self.project / "headwater.toml").write_text(
            "# Written by benchmarks/pipeline_vs_sdp.py: headwater's keys beside the spec.\n"
            '[pipeline]\ntrigger = "available-now"\n'
            + "".join(f"{k} = {str(v).lower()}\n" for k, v in (pipeline or {}).items())
            + f'\n[spark]\n{conf}\n')

    def clean(self) -> None:
        for path in (self.root, self.project / "spark-warehouse", self.project / "metastore_db"):
            shutil.rmtree(path, ignore_errors=True)

    def command(self) -> list[str]:
        exe = VENV_BIN / "headwater"
        return [str(exe) if exe.exists() else "headwater", "run", "--project", str(self.project)]

    def _table(self, name: str) -> Path:
        """The Delta table directory `name` under the lakehouse root (layout not assumed)."""
        found = sorted(p.parent for p in self.root.rglob("_delta_log")
                       if p.parent.name == name
                       and "checkpoint" not in str(p.parent.relative_to(self.root)).lower())
        if not found:
            listing = "\n  ".join(str(p.relative_to(self.root))
                                  for p in sorted(self.root.rglob("*"))[:40])
            raise RuntimeError(f"no Delta table named {name!r} under {self.root}:\n  {listing}")
        return found[0]

    def gold(self) -> list[dict]:
        from deltalake import DeltaTable

        return DeltaTable(str(self._table("gold"))).to_pyarrow_table().to_pylist()

    def silver_rows(self) -> int:
        from deltalake import DeltaTable

        return DeltaTable(str(self._table("silver"))).to_pyarrow_dataset().count_rows()


class Sdp(Tool):
    name = SDP

    def __init__(self, workdir: Path, settings: dict[str, str]) -> None:
        self.project = workdir / "sdp"
        self.storage = self.project / "storage"  # checkpoints
        self.warehouse = self.project / "warehouse"  # the tables (spark_catalog.default.*)
        conf = dict(settings)
        self.master = conf.pop("spark.master")
        self.driver_memory = conf.pop("spark.driver.memory")
        # Runtime SQL settings go in the spec's configuration (SDP applies them to the session
        # and to every flow); anything else must be set at launch, as spark-submit --conf:
        # SDP rejects static settings in the spec (CANNOT_MODIFY_STATIC_CONFIG).
        self.sql_conf = {k: v for k, v in conf.items() if k.startswith("spark.sql.")}
        self.launch_conf = {k: v for k, v in conf.items() if k not in self.sql_conf}
        self.launch_conf["spark.sql.warehouse.dir"] = str(self.warehouse)
        sdp_project_copy(self.project, self.storage, self.sql_conf)

    def clean(self) -> None:
        for path in (self.storage, self.warehouse, self.project / "spark-warehouse",
                     self.project / "metastore_db"):
            shutil.rmtree(path, ignore_errors=True)

    def command(self) -> list[str]:
        # spark-pipelines passes spark-submit options to spark-submit. --remote, not --master:
        # SDP always runs over Spark Connect and starts a local Connect server with this master.
        cmd = [str(VENV_BIN / "spark-pipelines"), "--remote", self.master,
               "--driver-memory", self.driver_memory]
        for key, value in self.launch_conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd + ["run", "--spec", str(self.project / "spark-pipeline.yml")]

    def gold(self) -> list[dict]:
        import pyarrow.parquet as pq

        return pq.read_table(self.warehouse / "gold").to_pylist()

    def silver_rows(self) -> int:
        import pyarrow.dataset as ds

        # only files the streaming sink committed (its _spark_metadata log lists them)
        log = self.warehouse / "silver" / "_spark_metadata"
        files = set()
        for entry in sorted(log.iterdir(), key=lambda p: p.name):
            if entry.name.startswith("."):
                continue
            for line in entry.read_text().splitlines()[1:]:  # first line: the log version
                files.add(unquote(urlparse(json.loads(line)["path"]).path))
        return ds.dataset(sorted(files), format="parquet").count_rows()


# --- running one measured subprocess ------------------------------------------------------


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1 if on else 0, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


_children_before_subreaper: set[int] | None = None


def make_subreaper() -> bool:
    """Orphans of the tools (a JVM outliving its Python parent, pyspark daemons) are
    reparented to this process, so they can be reaped and their CPU counted. A caller that
    goes on living (a test session running a benchmark's main) calls :func:`clear_subreaper`
    after."""
    global _children_before_subreaper
    _children_before_subreaper = children()
    return _set_subreaper(True)


def clear_subreaper() -> None:
    """This process no longer adopts orphans, and the ones it adopted and that exited are
    reaped (a zombie still counts as a member of its process group: a caller waiting for a
    group to vanish would wait for ever). Its own children from before are left alone."""
    global _children_before_subreaper
    _set_subreaper(False)
    before, _children_before_subreaper = _children_before_subreaper, None
    for pid in children() - (before or set()):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def children() -> set[int]:
    """The pids whose parent is this process."""
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == os.getpid()}


def reap_orphans(deadline_s: float, keep: set[int]) -> list[int]:
    """Wait for the descendants a run left (this process's children not in ``keep``: the
    ones it had before the run, such as a test session's own JVM, are never touched); kill
    (by pid) those still alive at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        left = children() - keep
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped meanwhile, or not our child after all
                done = pid
            if done:
                left.discard(pid)
        if not left or time.monotonic() > end:
            break
        time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in left:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return sorted(left)


def _ppid(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(text[text.rindex(")") + 2:].split()[1])


def run_once(tool: Tool, env: dict[str, str], log: Path, timeout: float) -> dict:
    """One clean run: wall, startup, CPU and the subprocess's exit code."""
    tool.clean()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    events: list[tuple[float, str, str]] = []  # (time.time(), "start" | "end", flow)

    def copy(stream, out) -> None:  # the output to the log, flow events stamped on arrival
        for raw in iter(stream.readline, b""):
            out.write(raw)
            line = raw.decode(errors="replace")
            for pattern, kind in FLOW_EVENTS:
                found = pattern.search(line)
                if found:
                    now, name = time.time(), found.group(1).strip("`")
                    if kind == "refreshed":  # a view: its line comes at the end
                        events.append((now - float(found.group(2)), "start", name))
                        kind = "end"
                    events.append((now, kind, name))
                    break

    keep = children()  # the caller's own (a test session's JVM): never reaped or killed
    with open(log, "wb") as out:
        launched = time.time()
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(tool.command(), cwd=tool.project,
                                    env={**env, "PYTHONUNBUFFERED": "1"},
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except FileNotFoundError as exc:
            return {"rc": 127, "error": str(exc), "log": str(log)}
        reader = threading.Thread(target=copy, args=(proc.stdout, out), daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this run started, nothing else
            rc = proc.wait()
            rc = rc if rc else -9
        wall = time.perf_counter() - t0
        reader.join(timeout=10)
    leftovers = reap_orphans(30.0, keep)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = log.read_text(errors="replace")
    session = None
    for line in text.splitlines():
        if line.startswith(MARKER):
            session = json.loads(line[len(MARKER):])
            break
    result = {"rc": rc, "wall_s": wall, "cpu_s": cpu, "log": str(log),
              "startup_s": session["t"] - launched if session else None,
              "conf": session["conf"] if session else None,
              "flows": flow_timeline(events, session["t"] if session else launched,
                                     launched + wall)}
    if leftovers:
        result["killed_leftovers"] = leftovers
    return result


def flow_timeline(events: list[tuple[float, str, str]], up: float, exited: float) -> dict:
    """Seconds from the session being up: each flow's start and end, the first flow's start
    (registration and analysis before it) and the time from the last flow's end to exit."""
    flows: dict[str, dict[str, float]] = {}
    for at, kind, name in events:
        flows.setdefault(name, {})[kind] = round(at - up, 3)
    starts = [f["start"] for f in flows.values() if "start" in f]
    ends = [f["end"] for f in flows.values() if "end" in f]
    return {"flows": flows,
            "before_first_flow_s": min(starts) if starts else None,
            "after_last_flow_s": round(exited - up - max(ends), 3) if ends else None}


# --- correctness --------------------------------------------------------------------------


def normalize(rows: list[dict]) -> dict:
    out = {}
    for row in rows:
        out[row["country"]] = (int(row["orders"] or 0), int(row["lines"] or 0),
                               int(row["quantity"] or 0), Decimal(str(row["revenue"] or 0)))
    return out


def check(tool: Tool, expected: dict) -> str | None:
    """None when gold and the silver row count match the generator's expectation."""
    try:
        gold, silver = normalize(tool.gold()), tool.silver_rows()
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the other tool still runs
        return f"could not read the output: {exc}"
    want = normalize(expected["gold"])
    if silver != expected["silver_rows"]:
        return f"silver has {silver:,} rows, expected {expected['silver_rows']:,}"
    if gold != want:
        diff = [f"{c}: got {gold.get(c)} want {want.get(c)}"
                for c in sorted(set(gold) | set(want), key=str) if gold.get(c) != want.get(c)]
        return "gold differs: " + "; ".join(diff[:5])
    return None


def tail(path: str, lines: int = 25) -> str:
    text = Path(path).read_text(errors="replace").splitlines()
    keep = [ln for ln in text if not ln.lstrip().startswith("at ")]  # drop JVM stack frames
    return "\n".join(keep[-lines:])


# --- reporting ----------------------------------------------------------------------------


def summarize(runs: list[dict], orders: int, silver_rows: int) -> dict:
    med = statistics.median
    startups = [r["startup_s"] for r in runs if r["startup_s"] is not None]
    wall = med(r["wall_s"] for r in runs)
    startup = med(startups) if len(startups) == len(runs) else None
    pipeline = (med(r["wall_s"] - r["startup_s"] for r in runs)
                if startup is not None else None)
    timelines = [r["flows"] for r in runs if r.get("flows")]
    names = sorted({n for t in timelines for n in t["flows"]},
                   key=lambda n: med(t["flows"][n].get("start", 1e9) for t in timelines
                                     if n in t["flows"]))
    flows = {}
    for name in names:
        spans = [t["flows"][name] for t in timelines
                 if "start" in t["flows"].get(name, {}) and "end" in t["flows"][name]]
        if spans:
            flows[name] = {"start_s": med(f["start"] for f in spans),
                           "seconds": med(f["end"] - f["start"] for f in spans)}
    edges = {key: med(vals) if (vals := [t[key] for t in timelines if t[key] is not None])
             else None for key in ("before_first_flow_s", "after_last_flow_s")}
    return {"wall_s": wall, "startup_s": startup, "pipeline_s": pipeline,
            "flows": flows, **edges,
            "cpu_s": med(r["cpu_s"] for r in runs),
            "orders_per_s": orders / pipeline if pipeline else None,
            "silver_rows_per_s": silver_rows / pipeline if pipeline else None,
            "runs": runs}


def flow_breakdown(summary: dict) -> list[str]:
    """Text rows: per flow, each tool's start and duration; then the time before the first
    flow (registration, analysis) and after the last (shutdown)."""
    tools = [t for t in TOOLS if t in summary and summary[t].get("flows")]
    if not tools:
        return []
    names = list(dict.fromkeys(n for t in tools for n in summary[t]["flows"]))
    short = {HW: "headwater", HW_COLD: "no archive", HW_NO_EVENT_LOG: "no ev. log",
             HW_NO_COMPACT: "no compact.", SDP: "SDP"}
    rows = ["{:<24}".format("") + "".join(f"{short[t] + ' start':>18}{short[t] + ' s':>14}"
                                          for t in tools)]

    def cell(v) -> str:
        return "-" if v is None else f"{v:.2f}"

    for name in names:
        row = f"{name:<24}"
        for t in tools:
            f = summary[t]["flows"].get(name, {})
            row += f"{cell(f.get('start_s')):>18}{cell(f.get('seconds')):>14}"
        rows.append(row)
    for key, label in (("before_first_flow_s", "before the first flow"),
                       ("after_last_flow_s", "after the last flow")):
        rows.append(f"{label:<24}" + "".join(f"{'':>18}{cell(summary[t].get(key)):>14}"
                                             for t in tools))
    return rows


def record(summary: dict, results: dict[str, list[dict]], status: dict,
           run: results_file.Run) -> bool:
    """The medians, every run's numbers and the ratios into ``run``; False: nothing ran."""
    tools = [t for t in TOOLS if t in summary]
    for tool in TOOLS:
        if status[tool] != "ok":
            run.note(f"{tool}: {status[tool]}")
    if not tools:
        return False
    orders, silver = run.data["parameters"]["orders"], run.data["parameters"]["silver_rows"]
    variants = []
    for tool in tools:
        runs = results[tool]
        samples = {"wall s": [r["wall_s"] for r in runs], "CPU s": [r["cpu_s"] for r in runs]}
        if all(r["startup_s"] is not None for r in runs):
            samples["startup s"] = [r["startup_s"] for r in runs]
            samples["pipeline s"] = [r["wall_s"] - r["startup_s"] for r in runs]
        s = summary[tool]
        variants.append(results_file.variant(
            {"tool": tool}, samples,
            {"startup s": s["startup_s"], "pipeline s": s["pipeline_s"],
             "orders/s": s["orders_per_s"], "silver rows/s": s["silver_rows_per_s"]}
            if "startup s" not in samples else
            {"orders/s": s["orders_per_s"], "silver rows/s": s["silver_rows_per_s"]}))
    run.table(f"{orders:,} orders, {silver:,} silver rows: medians",
              ["tool", "wall s", "startup s", "pipeline s", "orders/s", "silver rows/s",
               "CPU s"], variants,
              chart={"kind": "grouped", "label": ["tool"], "series": ["startup s",
                                                                      "pipeline s"]})
    flows = [results_file.variant(
        {"tool": tool, "flow": name},
        {"start s": [t["flows"][name]["start"] for t in timelines],
         "seconds": [t["flows"][name]["end"] - t["flows"][name]["start"] for t in timelines]})
        for tool in tools
        for timelines in [[r["flows"] for r in results[tool] if r.get("flows")]]
        for name in summary[tool]["flows"]
        if all("start" in t["flows"].get(name, {}) and "end" in t["flows"][name]
               for t in timelines)]
    if flows:  # the pipeline phase flow by flow: seconds from the session being up
        run.table("Flow by flow: start (seconds after the session is up) and duration, medians",
                  ["tool", "flow", "start s", "seconds"], flows,
                  chart={"kind": "grouped", "label": ["tool", "flow"],
                         "series": ["start s", "seconds"]})
    if HW in summary and SDP in summary:
        for key, label in (("wall_s", "wall time"), ("startup_s", "startup"),
                           ("pipeline_s", "pipeline time"), ("cpu_s", "CPU")):
            a, b = summary[HW][key], summary[SDP][key]
            run.ratio(f"headwater ÷ SDP {label}", a / b if a is not None and b else None,
                      TARGET if key == "wall_s" else None,
                      "at most" if key == "wall_s" else None, label)
    if HW_COLD in summary and SDP in summary:
        for key, label in (("wall_s", "wall time"), ("startup_s", "startup")):
            a, b = summary[HW_COLD][key], summary[SDP][key]
            run.ratio(f"headwater (no class archive) ÷ SDP {label}",
                      a / b if a is not None and b else None, None, None, label)
    for tool, default in ((HW_COLD, "the class archive"), (HW_NO_EVENT_LOG, "the event log"),
                          (HW_NO_COMPACT, "auto compaction")):
        if tool in summary and HW in summary:  # what headwater's default costs (< 1: saves)
            run.ratio(f"headwater ÷ {tool} wall time (what {default} costs)",
                      summary[HW]["wall_s"] / summary[tool]["wall_s"], None, None, "wall time")
    return True


def report(summary: dict, status: dict, info: dict) -> None:
    def f(v, spec):
        return "-" if v is None else format(v, spec)

    header = ("tool", "wall s", "startup s", "pipeline s", "orders/s", "silver rows/s",
              "CPU s", "correct")
    lines = []
    for tool in TOOLS:
        if tool not in summary and status[tool] == "not run":
            continue
        s = summary.get(tool)
        if s is None:
            lines.append((tool, "-", "-", "-", "-", "-", "-", status[tool]))
            continue
        lines.append((tool, f(s["wall_s"], ".2f"), f(s["startup_s"], ".2f"),
                      f(s["pipeline_s"], ".2f"), f(s["orders_per_s"], ",.0f"),
                      f(s["silver_rows_per_s"], ",.0f"), f(s["cpu_s"], ".1f"), status[tool]))
    ratios = {}
    if HW in summary and SDP in summary:
        for key in ("wall_s", "startup_s", "pipeline_s", "cpu_s"):
            a, b = summary[HW][key], summary[SDP][key]
            ratios[key] = a / b if a is not None and b else None
    caption = ", ".join(f"{k}={v}" for k, v in info.items())
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="pipeline: headwater run vs spark-pipelines run (medians)",
                      caption=caption)
        for i, col in enumerate(header):
            table.add_column(col, justify="left" if i in (0, 7) else "right")
        for line in lines:
            table.add_row(*line)
        console = Console(width=max(120, shutil.get_terminal_size().columns))
        console.print(table)
        emit = console.print
    except ImportError:
        print(caption)
        for line in [header, *lines]:
            print(" | ".join(str(v) for v in line))
        emit = print
    breakdown = flow_breakdown(summary)
    if breakdown:
        emit("pipeline phase, flow by flow (medians; seconds from the session being up):")
        for line in breakdown:
            emit("  " + line)
    if ratios.get("wall_s") is not None:
        verdict = "meets" if ratios["wall_s"] <= TARGET else "misses"
        emit(f"headwater ÷ SDP wall time: {ratios['wall_s']:.2f} ({verdict} the target "
             f"≤ {TARGET})")
        emit("  startup {}, pipeline {}, CPU {}".format(
            *(f(ratios[k], ".2f") for k in ("startup_s", "pipeline_s", "cpu_s"))))
    else:
        emit(f"headwater ÷ SDP wall time: n/a (headwater: {status[HW]}; SDP: {status[SDP]})")
    if HW_COLD in summary and SDP in summary:
        emit("headwater without its JVM class archive ÷ SDP wall time: "
             f"{summary[HW_COLD]['wall_s'] / summary[SDP]['wall_s']:.2f}")
    for tool in HEADWATERS[1:]:
        if tool in summary and HW in summary:
            emit(f"headwater ÷ {tool}: {summary[HW]['wall_s'] / summary[tool]['wall_s']:.3f} "
                 "wall time (what that default costs)")


# --- main ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=300_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--runs", type=int, help="timed runs per tool (default 3, --smoke 1)")
    parser.add_argument("--smoke", action="store_true",
                        help="3,000 orders in 10 files, 1 run: a quick end-to-end check")
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "headwater-pipeline-vs-sdp",
                        help="input data (reused), projects, outputs and logs")
    parser.add_argument("--tools", default="headwater,headwater-cold,sdp",
                        help="comma-separated subset of sdp and "
                             f"{','.join(VARIANTS)} (headwater-cold: "
                             "HEADWATER_CLASS_ARCHIVE=0; the last two: that default off)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up runs")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    results_file.add_json_argument(parser, __file__)
    args = parser.parse_args()
    orders, files = (3_000, 10) if args.smoke else (args.orders, args.files)
    runs = args.runs or (1 if args.smoke else 3)
    wanted = {t.strip().lower() for t in args.tools.split(",")}
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    logs = workdir / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()

    settings = spark_settings()
    data, expected = ensure_input(workdir, orders, files)
    spark_home = Path(importlib.util.find_spec("pyspark").origin).parent
    base_env = dict(os.environ)
    base_env.update({
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_HOME": str(spark_home),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PIPELINE_BENCH_INPUT": str(data),
    })
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE",
                "PYSPARK_SUBMIT_ARGS"):
        base_env.pop(var, None)

    def env_with(paths: list[str]) -> dict[str, str]:
        env = dict(base_env)
        env["PYTHONPATH"] = os.pathsep.join(
            [*paths, str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])
        return env

    tools: dict[str, tuple[Tool, dict]] = {}
    status: dict[str, str] = {name: "not run" for name in TOOLS}
    if wanted & set(VARIANTS):
        env = env_with([])
        probe = subprocess.run([sys.executable, "-c", "import headwater.cli"], env=env,
                               capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            status[HW] = "not available yet (no headwater.cli)"
            print(f"headwater: not available yet: {probe.stderr.strip().splitlines()[-1]}")
        else:
            for word, (name, folder, pipeline, extra) in VARIANTS.items():
                if word in wanted:
                    tools[name] = (Headwater(workdir, settings, name, folder, pipeline),
                                   {**env, **extra})
    if "sdp" in wanted:
        tools[SDP] = (Sdp(workdir, settings), env_with(sdp_pythonpath(workdir)))
    subreaper = make_subreaper()
    load_before = os.getloadavg()[0]
    run = results_file.Run(
        __file__, "Pipelines: headwater run vs Spark Declarative Pipelines", SETUP, order=2,
        parameters={"orders": orders, "files": files, "silver_rows": expected["silver_rows"],
                    "runs": runs, "warm_up": not args.no_warmup, "tools": sorted(wanted),
                    "master": settings["spark.master"],
                    "driver_memory": settings["spark.driver.memory"],
                    "shuffle_partitions": settings["spark.sql.shuffle.partitions"],
                    "cpu_accounting": "full tree" if subreaper else "reaped children only",
                    "smoke": args.smoke})

    results: dict[str, list[dict]] = {name: [] for name in tools}

    def attempt(name: str, label: str) -> dict | None:
        tool, env = tools[name]
        slug = re.sub(r"[^a-z]+", "-", name.lower()).strip("-")
        r = run_once(tool, env, logs / f"{slug}-{label}.log", args.timeout)
        print(f"  {name:<27} {label:<7} rc={r['rc']} wall={r.get('wall_s', 0):6.1f}s "
              f"startup={r.get('startup_s') or 0:5.1f}s cpu={r.get('cpu_s', 0):6.1f}s",
              flush=True)
        problem = None
        if r["rc"] != 0:
            text = Path(r["log"]).read_text(errors="replace") if "wall_s" in r else ""
            missing = NOT_AVAILABLE.search(text)
            if name in HEADWATERS and (missing or "wall_s" not in r):
                status[name] = "not available yet: " + (
                    missing.group(0) if missing else r.get("error", "no headwater command"))
                print(f"{name}: {status[name]}")
                del tools[name]
                return None
            problem = f"exit {r['rc']}, see {r['log']}"
            print(f"{name} run failed ({problem}); last lines:\n"
                  + (tail(r["log"]) if "wall_s" in r else r.get("error", "")))
        else:
            problem = check(tool, expected)
            if problem is None and r["conf"] is None:
                problem = f"no {MARKER.strip()} marker in {r['log']}"
            if problem is None:  # a setting a session does not show (None) is not held against it
                bad = {k: v for k, v in r["conf"].items() if v is not None and v != settings.get(k)}
                if bad:
                    problem = f"ran with other settings: {bad} (wanted {settings})"
                unseen = sorted(k for k, v in r["conf"].items() if v is None)
                if unseen:
                    print(f"  {name}: could not verify {', '.join(unseen)}")
        if problem:
            status[name] = "FAILED: " + problem
            del tools[name]
            return None
        status[name] = "ok"
        return r

    order = [name for name in TOOLS if name in tools]
    print(f"{orders:,} orders, {files} files, {expected['silver_rows']:,} silver rows; "
          f"tools: {', '.join(order) or 'none'}; work dir {workdir}")
    if not args.no_warmup:
        for name in order:
            if name in tools:
                attempt(name, "warmup")  # JIT, page cache, pyc files; discarded
    for i in range(runs):  # interleaved, so drift in machine load hits both tools
        for name in order:
            if name in tools:
                r = attempt(name, f"run{i + 1}")
                if r is not None:
                    results[name].append(r)
    # the outputs of the last run stay in the work dir, to inspect

    summary = {name: summarize(rs, orders, expected["silver_rows"])
               for name, rs in results.items() if rs and status[name] == "ok"}
    import pyspark

    info = {"cores": os.cpu_count(), "orders": orders, "files": files,
            "silver_rows": expected["silver_rows"], "runs": runs,
            "master": settings["spark.master"], "driver_memory": settings["spark.driver.memory"],
            "shuffle_partitions": settings["spark.sql.shuffle.partitions"],
            "loadavg_1m": f"{load_before:.1f}->{os.getloadavg()[0]:.1f}",
            "cpu_accounting": "full tree" if subreaper else "reaped children only",
            "python": platform.python_version(), "pyspark": pyspark.__version__}
    report(summary, status, info)
    if not record(summary, results, status, run):
        print("no tool ran to the end: no results file written")
    elif args.json:
        run.write(args.json)
    ok = status.get(SDP) in ("ok", "not run") and all(
        status[t] in ("ok", "not run") or status[t].startswith("not available")
        for t in HEADWATERS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
