"""The active SparkSession, left as it was: headwater changes it only for a block of its own.

pyspark keeps "the active session" twice: a class attribute of ``SparkSession`` that all
threads share, and the JVM's active session of each thread. pyspark's ``createDataFrame`` sets
both to its session, so every result frame headwater builds that way (DESCRIBE's rows, the empty
result of a CREATE TABLE, a MERGE's keys) would make its session the application's active one,
where Spark's own ``spark.sql`` leaves it alone. :func:`data_frame` builds them and puts both back.

Kept out of ``spark/session.py`` on purpose: the Delta writer's modules, which Spark's Python
workers import, use it, and it imports nothing but pyspark and the JVM boundary
(:mod:`headwater.spark.jvm`, where :func:`~headwater.spark.jvm.kept_active` lives).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from headwater.spark.jvm import kept_active


def data_frame(spark: SparkSession, data: Any, schema: Any = None, **kwargs: Any) -> DataFrame:
    """``spark.createDataFrame(data, schema, ...)``, the active session left as it was."""
    with kept_active(spark):
        return spark.createDataFrame(data, schema, **kwargs)
