"""Spark's own ``spark.sql``: the method pyspark defines, under whatever wrapper
``SparkSession.sql`` carries now (headwater's lakehouse router, a user's own). headwater's
internal statements (``USE``, ``DROP TABLE IF EXISTS`` of a catalog entry, a query whose text
headwater rewrote) run through it, so they are never routed again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from headwater.spark import patches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def raw_sql(spark: SparkSession, text: str, args: Any = None) -> DataFrame:
    """Spark's own ``spark.sql`` (headwater's internal statements must not be routed)."""
    return patches.original(SparkSession, "sql")(spark, text, args)
