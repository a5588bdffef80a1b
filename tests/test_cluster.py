"""Source and sink on a real Spark standalone cluster (a master and two workers on 127.0.0.1),
so executor-side reading and writing runs in other processes than the driver."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyspark
import pytest
from tests.support import run_script

# Starts other JVMs or headwater processes: not in the fast tier.
pytestmark = pytest.mark.procs

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_class(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    handle = open(log, "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=handle,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    logs = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, SPARK_WORKER_DIR=str(logs / "work"))
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [spark_class(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(port), "--webui-port", str(free_port())],
                         logs / "master.log", env)]
    for i in range(2):
        procs.append(spark_class(
            ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
             "--memory", "1g", "--webui-port", str(free_port())], logs / f"worker{i}.log", env))
    deadline = time.time() + 120
    while time.time() < deadline:
        text = (logs / "master.log").read_text() if (logs / "master.log").exists() else ""
        if text.count("Registering worker") >= 2:
            break
        time.sleep(0.5)
    else:
        for proc in procs:
            proc.kill()
        pytest.fail("standalone cluster did not start:\n" + (logs / "master.log").read_text())
    yield url
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


DRIVER = textwrap.dedent("""
    import os, sys
    import headwater
    master, root = sys.argv[1], sys.argv[2]
    spark = headwater.spark_session(master, conf={
        "spark.ui.enabled": "false", "spark.executor.memory": "512m", "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "2"})
    df = spark.range(0, 20000, numPartitions=4).selectExpr(
        "id", "id % 7 AS k", "concat('row-', id) AS s", "timestamp_seconds(id) AS ts")
    df.write.format("delta").mode("append").save(f"{root}/src")
    (spark.readStream.format("delta").option("maxFilesPerTrigger", 2).load(f"{root}/src")
     .writeStream.format("delta").option("checkpointLocation", f"{root}/cp")
     .trigger(availableNow=True).start(f"{root}/dst").awaitTermination())
    out = spark.read.format("delta").load(f"{root}/dst")
    pids = (spark.sparkContext.parallelize(range(8), 8)
            .map(lambda _: __import__("os").getppid()).distinct().collect())
    print("ROWS", out.count(), "DISTINCT", out.select("id").distinct().count(),
          "SUM", out.groupBy().sum("id").first()[0], "EXECUTOR_JVMS", len(set(pids)),
          "DRIVER", os.getpid() in pids)
""")


def test_source_and_sink_on_a_standalone_cluster(cluster, tmp):
    code = DRIVER.replace("sys.argv[1], sys.argv[2]", f"{cluster!r}, {str(tmp)!r}")
    done = run_script(code, env={"SPARK_LOCAL_IP": "127.0.0.1"}, timeout=300)
    assert "ROWS" in done.stdout, done.stderr[-4000:]
    line = done.stdout.split("ROWS", 1)[1].split()
    assert line[0] == "20000" and line[2] == "20000"
    assert line[4] == str(sum(range(20000)))
    assert line[6] == "2"  # tasks ran in two executor JVMs
    assert line[8] == "False"
