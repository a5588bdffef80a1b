"""The active SparkSession, left as it was: headwater changes it only for a block of its own.

pyspark keeps "the active session" twice: a class attribute of ``SparkSession`` that all
threads share, and the JVM's active session of each thread. pyspark's ``createDataFrame`` sets
both to its session, so every result frame headwater builds that way (DESCRIBE's rows, the empty
result of a CREATE TABLE, a MERGE's keys) would make its session the application's active one,
where Spark's own ``spark.sql`` leaves it alone. :func:`data_frame` builds them and puts both back.

Kept out of ``spark/session.py`` on purpose: the Delta writer's modules, which Spark's Python
workers import, use it, and it imports nothing but pyspark's SparkSession.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession


@contextmanager
def kept_active(spark: Any) -> Iterator[None]:
    """The active session (pyspark's and the JVM's of this thread, or none) after the block
    as it was before it. ``spark``: any session of the JVM (a Spark Connect session has no
    JVM here: nothing is kept, nothing to keep)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        yield
        return
    sessions = jvm.SparkSession
    before, jbefore = SparkSession._activeSession, sessions.getActiveSession()
    try:
        yield
    finally:
        SparkSession._activeSession = before
        if jbefore.isDefined():
            sessions.setActiveSession(jbefore.get())
        else:
            sessions.clearActiveSession()


def data_frame(spark: SparkSession, data: Any, schema: Any = None, **kwargs: Any) -> DataFrame:
    """``spark.createDataFrame(data, schema, ...)``, the active session left as it was."""
    with kept_active(spark):
        return spark.createDataFrame(data, schema, **kwargs)
