"""The SparkSession headwater runs on: local by default, any Spark master otherwise."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from headwater.conf.layout import LOG_LEVEL_CONF
from headwater.errors import HeadwaterError
from headwater.spark import class_archive
from headwater.spark.jvm import (
    driver_gateway,
    kept_active,
    look_up_python_sources,
    run_sql_in_jvm,
    set_thread_session,
    started_context,
)

_LOG4J = Path(__file__).parent.parent / "log4j2.properties"

# Defaults a laptop wants, for a SparkContext headwater starts; anything in ``conf`` wins.
_DEFAULT_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Lets headwater's batch reader prune partitions and skip files from pushed filters.
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.streaming.stopTimeout": "30s",
    # How long a Python worker may take to connect back to the JVM (Spark's default 15 s).
    # A pipeline starts a Python process per flow at once; on a busy 2-core machine the
    # default failed whole flows with "Python worker failed to connect back".
    "spark.python.authenticate.socketTimeout": "120s",
    # Spark lists more than 32 paths with a Spark job, one task per path (a file stream's
    # batch of 100 files, a native read of a table's files): on local files the driver lists
    # them faster itself; object stores are read by headwater's Python readers, not Spark's.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000",
    # Spark keeps the 100 newest compiled classes of generated code; a pipeline's flows and
    # views together need more, and each miss compiles again with Janino (18% of a
    # continuous demo run's JVM CPU before, 2% after, measured with Java Flight Recorder).
    "spark.sql.codegen.cache.maxEntries": "1000",
}

# On a local master only (checkpoints on this machine's disk): streaming checkpoints (offset
# and commit logs, state store files, the sink's log) written through Hadoop's FileSystem API
# instead of FileContext. Without Hadoop's native library, FileContext's create and rename of
# a local file start a `chmod` and two `readlink` processes from the JVM (about 20 per
# micro-batch, traced with strace): a micro-batch of a Delta -> Delta stream took 234 ms, now
# 165 ms on an idle 2-core machine (walCommit 32 -> 10 ms, commitOffsets 28 -> 9 ms), more on a
# busy one. Spark's own class; a file is still written as a temporary file, then renamed. A
# cluster keeps Spark's default: on HDFS or S3A the FileSystem API's rename does not replace
# a file, which a state store's retried batch asks for (FileContext's does, atomically).
_LOCAL_CONF: dict[str, str] = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
}

_stop_registered = False


@functools.cache
def java_version(java: str) -> str:
    """What ``java -version`` prints (run once per process)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise HeadwaterError(
            "HW_JAVA_MISSING", f"Java at {java} could not be started: {exc}.",
            "Spark runs on the JVM and needs Java 17 or newer.",
            "Install a JDK 17+ and point JAVA_HOME at it.",
        ) from exc
    return out.stderr + out.stdout


def _java() -> str | None:
    """The ``java`` Spark will start: JAVA_HOME's, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    return str(candidate) if candidate and candidate.exists() else shutil.which("java")


def java_major_version(java: str | None = None) -> int:
    """The major version of the ``java`` Spark will start, or a HeadwaterError if none."""
    java = java or _java()
    if not java:
        raise HeadwaterError(
            "HW_JAVA_MISSING",
            "No Java runtime was found (neither JAVA_HOME nor `java` on PATH).",
            "Spark runs on the JVM and needs Java 17 or newer.",
            "Install a JDK 17+ (e.g. `apt-get install openjdk-17-jre-headless`) and set JAVA_HOME.",
        )
    match = re.search(r'version "(\d+)(?:\.(\d+))?', java_version(java))
    if not match:
        raise HeadwaterError(
            "HW_JAVA_MISSING", f"`{java} -version` did not report a version.",
            "Spark needs a working Java 17+ runtime.", "Install a JDK 17+ and set JAVA_HOME.",
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    return major


def _check_java() -> int:
    major = java_major_version()
    if major < 17:
        raise HeadwaterError(
            "HW_JAVA_TOO_OLD",
            f"Java {major} was found, but Spark 4 needs Java 17 or newer.",
            "pyspark 4.3 is compiled for Java 17.",
            "Install a JDK 17+ and set JAVA_HOME to it.",
        )
    return major


def session_parallelism(spark: Any) -> int:
    """Spark's ``defaultParallelism`` for ``spark``: the task slots of ``local[N]``, the
    executors' cores on a cluster. Under Spark Connect (no SparkContext here) the
    ``spark.default.parallelism`` setting if any, else this machine's cores."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001 - Spark Connect has no sparkContext
        pass
    try:
        value = spark.conf.get("spark.default.parallelism", None)
        if value:
            return max(1, int(value))
    except Exception:  # noqa: BLE001
        pass
    return os.cpu_count() or 2


def build_session(
    master: str | None = None,
    app_name: str = "headwater",
    conf: dict[str, Any] | None = None,
    warehouse: str | os.PathLike | None = None,
) -> pyspark.sql.SparkSession:  # noqa: F821
    """Start (or return) a SparkSession with headwater's defaults; no sources registered.

    warehouse: Spark's managed-table folder (``spark.sql.warehouse.dir``), unless ``conf``
    names one.
    """
    major = _check_java()
    master = master or "local[*]"
    # Python workers must run this interpreter, and the env var is what the driver-side
    # data-source worker honours (spark.pyspark.python alone is not enough).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    # headwater's defaults go to a SparkContext started here; a running one (the caller's
    # application) keeps its own settings: only ``conf`` is applied to it
    fresh = SparkContext._active_spark_context is None  # a SparkContext is started here
    settings: dict[str, str] = {}
    if fresh:
        settings.update(_DEFAULT_CONF)
        if master.startswith("local"):
            settings.update(_LOCAL_CONF)
    settings["spark.pyspark.python"] = sys.executable
    settings["spark.executorEnv.PYSPARK_PYTHON"] = sys.executable
    log_opt = f"-Dlog4j2.configurationFile=file:{_LOG4J}"
    settings["spark.driver.extraJavaOptions"] = log_opt
    settings["spark.executor.extraJavaOptions"] = log_opt
    if warehouse is not None:
        settings["spark.sql.warehouse.dir"] = str(warehouse)
    for key, value in (conf or {}).items():
        if key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            value = f"{log_opt} {value}"  # the user's JVM options keep headwater's log config
        settings[key] = str(value)
    if driver_gateway() is None:  # a new driver JVM is launched: its class archive
        java = _java()
        archive = class_archive.jvm_options(major, java_version(java) if java else "",
                                            settings)
        if archive:
            settings["spark.driver.extraJavaOptions"] = \
                f"{settings['spark.driver.extraJavaOptions']} {archive}"

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        if key.startswith("spark."):
            builder = builder.config(key, value)
    caller_sigint = _own_sigint_handler()
    started = threading.Event()
    if fresh:
        _look_up_python_sources_early(started)
    try:
        spark = builder.getOrCreate()
    finally:
        started.set()
    if fresh:
        class_archive.check_started(driver_gateway())
        _warm_up(spark, "spark.sql.warehouse.dir" in settings and str(settings.get(
            "spark.sql.catalogImplementation", "in-memory")).lower() != "hive")
    if caller_sigint is not None:
        # pyspark's SparkContext replaces the SIGINT handler with one that cancels every job
        # and raises KeyboardInterrupt; a caller that installed its own (`headwater run`:
        # stop each flow after its micro-batch, exit 0) keeps it.
        signal.signal(signal.SIGINT, caller_sigint)
    # Keys outside spark.* (a pipeline's configuration: mypipeline.source_path, ...) go on the
    # session once it runs: given to the builder, spark-submit would print "Warning: Ignoring
    # non-Spark config property" for each. spark.conf.get sees them either way.
    for key, value in settings.items():
        if not key.startswith("spark."):
            spark.conf.set(key, value)
    if fresh or LOG_LEVEL_CONF in (conf or {}):
        # the log level of a SparkContext started here (or one asked for): an application's
        # own running session keeps its level
        spark.sparkContext.setLogLevel(settings.get(LOG_LEVEL_CONF, "WARN"))
    _register_stop()
    return spark


def _look_up_python_sources_early(started: threading.Event) -> None:
    """Start Spark's one-time search for installed Python data sources as soon as the new
    SparkContext's JVM side is up, on a thread of its own, while the caller's thread goes on
    creating the SparkSession.

    Spark searches once per JVM (``DataSourceManager``: a Python process that imports pyspark
    and looks for ``pyspark_*`` packages), the first time any session touches Python data
    sources: headwater's registration of its sources, right after the session is up. That
    search took 0.66-0.73 s on 2 cores (measured with the session idle), all of it between
    the session being up and a pipeline's definitions running. Started here it runs beside
    the SparkSession's creation (the JVM's SQL classes, 0.85 s) instead. The search and its
    result are Spark's own, cached by Spark for every later session; only its start moves.
    The thread gives up when the caller's ``getOrCreate`` returned without a JVM
    SparkContext (``started``), e.g. a Spark Connect session; a failure here only means the
    search runs where it ran before."""

    def run() -> None:
        while True:
            sc = started_context()
            if sc is not None:
                break
            if started.wait(0.01):
                sc = started_context()
                if sc is None:
                    return
                break
        try:
            look_up_python_sources(sc)
        except Exception:  # noqa: BLE001 - see the docstring
            pass

    threading.Thread(target=run, name="headwater-python-source-lookup", daemon=True).start()


def _warm_up(spark: SparkSession, catalog: bool) -> None:
    """Initialise Spark's SQL parser, analyzer and catalog on a background thread, while the
    caller's thread goes on (registering headwater's Python data sources, loading a
    pipeline's definitions).

    A new JVM pays both once: the first statement ~1 s of class loading and initialisation,
    and the first Python data source ~1.2 s (Spark starts a Python process that looks for
    ``pyspark_*`` packages on the path). One after the other they were 2.6 s from the session
    being up to a pipeline's first CREATE TABLE on 2 cores; side by side 1.9-2.1 s.
    ``SHOW TABLES`` reads the catalog and changes nothing, but the first catalog access creates
    the warehouse folder: only where the caller chose that folder (``catalog``; a lakehouse,
    a pipeline run), else ``SELECT 1`` warms the parser and analyzer alone, leaving no
    ``spark-warehouse`` (or Hive's ``metastore_db``) in the working directory. It runs in the
    JVM directly (no headwater hook routes it). A failure here only means no warm-up (e.g.
    the session was stopped first)."""
    statement = "SHOW TABLES" if catalog else "SELECT 1"

    def run() -> None:
        try:
            run_sql_in_jvm(spark, statement)
        except Exception:  # noqa: BLE001 - see the docstring
            pass

    threading.Thread(target=run, name="headwater-sql-warm-up", daemon=True).start()


@contextmanager
def activated(spark: Any) -> Iterator[None]:
    """``spark`` the active session of this thread while the block runs, for code that asks
    ``SparkSession.active()`` / ``getActiveSession()`` (pipeline definitions do); the session
    active before (pyspark's and the JVM's thread's, or none) is active again after.

    Why: pyspark keeps the active session in a class attribute shared by all threads, and
    ``createDataFrame`` on a foreachBatch's cloned session (which runs on another thread) sets
    it to that clone. ``getActiveSession()`` on the main thread then returns the clone, which
    lacks data sources registered after it was cloned. pyspark has no public setter for its
    side: these are the two assignments its own ``createDataFrame`` makes, put back after.
    """
    with kept_active(spark):
        SparkSession._activeSession = spark
        set_thread_session(spark)
        yield


def stop_spark() -> None:
    """Stop active streams and the SparkSession, if any. Safe to call more than once."""
    spark = SparkSession.getActiveSession()
    if spark is None:
        return
    for query in spark.streams.active:
        try:
            query.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    server = _detach_accumulator_server(spark)
    try:
        spark.stop()
    finally:
        if server is not None:
            threading.Thread(target=server.shutdown, name="headwater-accumulator-stop",
                             daemon=True).start()


def _detach_accumulator_server(spark: SparkSession) -> Any:
    """The SparkContext's accumulator server, taken from it so ``spark.stop()`` does not wait
    for it: the caller shuts it down on a thread of its own once the JVM is stopped.

    Why: pyspark's ``SparkContext.stop()`` stops the JVM, then shuts the server down, which
    waits for its one request handler to notice: the JVM's connection stays open after the
    JVM stopped, and the handler looks at the shutdown flag once a second (pyspark's poll
    loop), so every ``headwater run`` waited 0-1 s (0.6 s measured) at exit for nothing. By
    the time the JVM's stop returns every task's accumulator updates were read and
    acknowledged (the JVM waits for each acknowledgement), so nothing is left to read; the
    handler still ends at its next poll, and the process does not wait for it (a daemon
    thread). None when there is no server (another pyspark, or already stopped)."""
    sc = getattr(spark, "_sc", None)
    server = getattr(sc, "_accumulatorServer", None)
    if server is None or not callable(getattr(server, "shutdown", None)):
        return None
    sc._accumulatorServer = None  # type: ignore[union-attr]
    return server


def _at_exit() -> None:
    try:
        stop_spark()
    finally:
        class_archive.finish(driver_gateway())  # an archive this JVM was asked to write


def _own_sigint_handler() -> Any:
    """The SIGINT handler the caller installed (None: Python's default, or not the main
    thread, where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGINT)
    if handler in (signal.default_int_handler, signal.SIG_DFL, signal.SIG_IGN, None):
        return None
    return handler


def _register_stop() -> None:
    """Exiting a driver that ran Python streams without ``spark.stop()`` can abort (exit 134)."""
    global _stop_registered
    if _stop_registered:
        return
    _stop_registered = True
    atexit.register(_at_exit)
    if threading.current_thread() is not threading.main_thread():
        return
    # SIGTERM's default action skips atexit: turn it into a normal exit instead.
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    class_archive.discard()  # no waiting ~10 s for the JVM's class archive: exit now
    raise SystemExit(128 + signum)
