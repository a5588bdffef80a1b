"""delta-spark's ``delta.testing.utils.DeltaTestCase`` on headwater: a unittest base class
whose ``spark`` is a headwater session with a lakehouse in a temporary folder (delta-spark's
version configures Delta's extension and catalog classes, which headwater does not need).

Same interface: ``self.spark``, ``self.sc``, ``self.tempPath`` / ``self.tempFile`` per test,
``self.table(*names)`` and ``self.tempTable()`` (tables dropped afterwards)."""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest
import uuid
from collections.abc import Generator
from contextlib import contextmanager

from pyspark import SparkConf
from pyspark.testing.sqlutils import SQLTestUtils

import headwater
from headwater.lakehouse.delta_spark.pip_utils import session_settings


class DeltaTestCase(unittest.TestCase, SQLTestUtils):
    """Test class base with a SparkSession that reads and writes Delta tables."""

    @classmethod
    def conf(cls) -> SparkConf:
        conf = SparkConf()
        conf.set("spark.app.name", cls.__name__)
        conf.set("spark.master", "local[4]")
        conf.set("spark.ui.enabled", "false")
        conf.set("spark.sql.shuffle.partitions", "5")
        return conf

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        settings = dict(cls.conf().getAll())
        master = os.environ.get("HEADWATER_TEST_MASTER") or settings.pop("spark.master", None)
        settings.pop("spark.master", None)
        app_name = settings.pop("spark.app.name", cls.__name__)
        conf, _ = session_settings(settings)
        cls._lakehouse_dir = tempfile.mkdtemp(prefix="delta-test-lake-")
        cls.spark = headwater.spark_session(master, app_name=app_name, conf=conf,
                                            lakehouse=cls._lakehouse_dir)
        cls.sc = cls.spark.sparkContext

    @classmethod
    def tearDownClass(cls) -> None:
        try:
            headwater.stop_spark()
            shutil.rmtree(cls._lakehouse_dir, ignore_errors=True)
        finally:
            super().tearDownClass()

    def setUp(self) -> None:
        super().setUp()
        self.tempPath = tempfile.mkdtemp()
        self.tempFile = os.path.join(self.tempPath, "tempFile")

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.tempPath, ignore_errors=True)

    @contextmanager
    def tempTable(self) -> Generator[str, None, None]:  # noqa: N802 (delta-spark's name)
        table_name = "table_" + str(uuid.uuid4()).replace("-", "_")
        with self.table(table_name):
            yield table_name
