"""A pipeline's database: unqualified names resolve in it while its definitions run, as
``USE database`` would. Kept apart from the catalog bookkeeping because it runs SQL (Spark's
own ``raw_sql``) and checks the lakehouse's folders."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from headwater.conf.database import split_database
from headwater.conf.layout import DELTA_LOG
from headwater.errors import HeadwaterError
from headwater.lakehouse.catalog import lakehouse_of
from headwater.spark.jvm import current_database, database_exists, set_current_database
from headwater.spark.raw_sql import raw_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextlib.contextmanager
def using_database(spark: SparkSession, database: str | None) -> Iterator[None]:
    """Make ``database`` (a lakehouse schema; created in Spark's catalog when missing) the
    session's current database for the block, as ``USE`` would, so unqualified names resolve
    in it; the previous one comes back after. ``None`` changes nothing."""
    if database is None:
        yield
        return
    lake = lakehouse_of(spark)
    catalog, _ = split_database(database)
    if lake is not None and catalog is not None:
        lake.create_catalog(catalog)  # a pipeline's catalog exists once it runs
    elif lake is not None and (lake.root / database / DELTA_LOG).is_dir():
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"The pipeline's database {database!r} is the name of a "
            f"table of the lakehouse at {lake.root}.",
            "A database is a folder of tables under the root; tables inside a table's folder "
            "would be hidden from the catalog and at risk from its VACUUM.",
            "Name the database differently, or rename that table.")
    # Spark's names (main__sales), not the patched spark.catalog's
    previous = current_database(spark)
    raw_sql(spark, f"CREATE DATABASE IF NOT EXISTS `{database}`")
    set_current_database(spark, database)
    try:
        yield
    finally:
        if database_exists(spark, previous):
            set_current_database(spark, previous)
