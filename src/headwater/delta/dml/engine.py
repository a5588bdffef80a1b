"""Which engine runs a DML: Spark copy-on-write, or delta-rs on the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.delta.dml.common import DmlResult
from headwater.delta.dml.target import load_snapshot
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENGINES = ("auto", "spark", "delta-rs")


def run(spark: SparkSession, operation: str, path: str, engine: str = "auto",
        **kwargs: Any) -> DmlResult:
    if engine not in ENGINES:
        raise HeadwaterError("HW_OPTION_INVALID", f"Unknown DML engine {engine!r}.",
                             "DML runs on Spark's executors or on the driver with delta-rs.",
                             f"Use one of {', '.join(ENGINES)}.")
    snapshot = load_snapshot(path, operation)
    from headwater.delta.dml import delete_update, merge_spark

    if operation == "DELETE":
        return delete_update.spark_delete(spark, snapshot, kwargs.get("condition"),
                                          kwargs.get("alias"))
    if operation == "UPDATE":
        return delete_update.spark_update(spark, snapshot, kwargs["assignments"],
                                          kwargs.get("condition"), kwargs.get("alias"))
    return merge_spark.spark_merge(spark, snapshot, kwargs["spec"])
