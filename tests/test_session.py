"""The session: Java checks, and a clean exit on every path (see DESIGN.md: exit 134)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest
from tests.support import run_script, write

import headwater
from headwater.spark.session import java_major_version

STREAMING_DRIVER = textwrap.dedent("""
    import headwater
    spark = headwater.spark_session("local[1]", conf={{"spark.ui.enabled": "false"}})
    (spark.readStream.format("delta").load({src!r}).writeStream.format("delta")
     .option("checkpointLocation", {cp!r}).trigger(availableNow=True).start({dst!r})
     .awaitTermination())
    print("streamed", spark.read.format("delta").load({dst!r}).count())
    {tail}
""")


def test_java_too_old_is_a_clear_error(tmp, monkeypatch):
    fake = tmp / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (fake / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp / "jdk"))
    assert java_major_version() == 11
    with pytest.raises(headwater.HeadwaterError) as err:
        headwater.spark.session._check_java()
    assert err.value.code == "HW_JAVA_TOO_OLD"


def test_java_missing_is_a_clear_error(tmp, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp / "none"))
    monkeypatch.setenv("PATH", str(tmp))
    with pytest.raises(headwater.HeadwaterError) as err:
        java_major_version()
    assert err.value.code == "HW_JAVA_MISSING"


def _driver(tmp, tail: str = "") -> str:
    return STREAMING_DRIVER.format(src=str(tmp / "src"), dst=str(tmp / "dst"),
                                   cp=str(tmp / "cp"), tail=tail)


@pytest.mark.procs
def test_ten_runs_exit_zero_without_abort(tmp):
    """Drivers that ran Python-source streams and never call spark.stop() exit cleanly."""
    write(tmp / "src", {"id": pa.array(range(20), pa.int64())})
    results = []
    for _run in range(10):
        done = run_script(_driver(tmp), timeout=180)
        results.append((done.returncode, "terminate called" in done.stderr))
        assert "streamed 20" in done.stdout, done.stderr[-3000:]
    assert results == [(0, False)] * 10


@pytest.mark.procs
def test_exception_and_sigterm_exit_without_abort(tmp):
    write(tmp / "src", {"id": pa.array(range(5), pa.int64())})
    failed = run_script(_driver(tmp, "raise RuntimeError('user code failed')"), timeout=180)
    assert failed.returncode == 1 and "user code failed" in failed.stderr
    assert "terminate called" not in failed.stderr and "Aborted" not in failed.stderr

    code = _driver(tmp, "import time; print('ready', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ))
    deadline = time.time() + 180
    line = ""
    while time.time() < deadline and "ready" not in line:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
    assert "ready" in line, proc.stderr.read()[-3000:]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "terminate called" not in err


def test_split_target_follows_the_master(spark):
    """Scans aim for Spark's defaultParallelism: local[2] here (no environment variable)."""
    from headwater.spark.session import session_parallelism

    assert session_parallelism(spark) == spark.sparkContext.defaultParallelism == 2


ACCUMULATOR_DRIVER = textwrap.dedent("""
    import threading
    import headwater
    spark = headwater.spark_session("local[1]", conf={"spark.ui.enabled": "false"})
    sc = spark.sparkContext
    server = sc._accumulatorServer
    total = sc.accumulator(0)
    sc.parallelize(range(100), 4).foreach(lambda x: total.add(x))
    headwater.stop_spark()
    print("total", total.value, "detached", sc._accumulatorServer is None, flush=True)
    stoppers = [t for t in threading.enumerate() if t.name == "headwater-accumulator-stop"]
    for t in stoppers:
        t.join(timeout=60)
    print("server closed", server.socket.fileno() == -1, "stoppers", len(stoppers), flush=True)
    spark = headwater.spark_session("local[1]", conf={"spark.ui.enabled": "false"})
    again = spark.sparkContext.accumulator(0)
    spark.sparkContext.parallelize(range(10), 2).foreach(lambda x: again.add(1))
    print("again", again.value, flush=True)
""")


@pytest.mark.procs
def test_stop_spark_leaves_the_accumulator_server_to_a_thread(tmp):
    """stop_spark() does not wait for pyspark's accumulator server (its handler polls once a
    second): the updates of every task are in before the JVM stops, the server is shut down
    and closed on a thread of its own, and a new session gets a working server of its own."""
    done = run_script(ACCUMULATOR_DRIVER, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "total 4950 detached True" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "server closed True stoppers 1" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "again 10" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


STATIC_SOURCE = textwrap.dedent("""
    from pyspark.sql.datasource import DataSource, DataSourceReader


    class Reader(DataSourceReader):
        def read(self, partition):
            yield (1, "static")


    class DefaultSource(DataSource):
        @classmethod
        def name(cls):
            return "hwstatic"

        def schema(self):
            return "id int, what string"

        def reader(self, schema):
            return Reader()
""")

STATIC_DRIVER = textwrap.dedent("""
    import headwater
    spark = headwater.spark_session("local[1]", conf={"spark.ui.enabled": "false"})
    print("rows", [tuple(r) for r in spark.read.format("hwstatic").load().collect()], flush=True)
""")


@pytest.mark.procs
def test_python_sources_installed_as_packages_are_found(tmp):
    """Spark's one-time search for installed ``pyspark_*`` data sources, which headwater
    starts while the session is still being created, finds them as Spark's own would."""
    package = tmp / "site" / "pyspark_hwstatic"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STATIC_SOURCE)
    path = os.pathsep.join([str(tmp / "site"), os.environ.get("PYTHONPATH", "")])
    done = run_script(STATIC_DRIVER, env={"PYTHONPATH": path}, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows [(1, 'static')]" in done.stdout, done.stdout + done.stderr[-3000:]
