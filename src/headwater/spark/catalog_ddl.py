"""A Python data source's table in Spark's catalog, its columns given.

``CREATE TABLE t USING <python source>`` asks the source for its schema: Spark starts a Python
worker (the first one of the session starts its daemon too) and unpickles the source in it,
0.1-2 s each. Given the columns (``CREATE TABLE t (<columns>) USING ...``), Spark keeps them
without asking; it keeps the schema the source answered either way, so the catalog holds
the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.spark.jvm import jvm_data_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


def columns_sql(spark: SparkSession, schema: StructType) -> str:
    """``(<columns>)`` for ``CREATE TABLE`` (Spark's own DDL of ``schema``), or "" for a
    schema without columns (Spark then asks the source)."""
    if not schema.fields:
        return ""
    ddl = jvm_data_type(spark, schema).toDDL()
    return f"({ddl}) "
