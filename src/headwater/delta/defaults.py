"""delta-spark's session defaults for new tables.

``spark.databricks.delta.properties.defaults.<key> = value`` (Delta's documentation, "Default
table properties") gives every table created afterwards in that session the property
``delta.<key> = value``: e.g. ``...defaults.enableChangeDataFeed = true`` turns on the change
data feed of each new table, ``...defaults.appendOnly``, ``...defaults.minWriterVersion``. A
property the statement itself sets wins over the default. Only creation reads them: existing
tables keep what they have.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from headwater.spark.jvm import conf_with_prefix

PREFIX = "spark.databricks.delta.properties.defaults."


def table_defaults(spark: SparkSession | None = None) -> dict[str, str]:
    """The ``delta.*`` properties the session's defaults give a new table (the active
    session's when ``spark`` is None; none without a session, e.g. on a worker)."""
    session = spark or SparkSession.getActiveSession()
    if session is None:
        return {}
    return {f"delta.{key[len(PREFIX):]}": value
            for key, value in conf_with_prefix(session, PREFIX).items()}


def with_defaults(properties: Mapping[str, str] | None,
                  spark: SparkSession | None = None) -> dict[str, str]:
    """``properties`` over the session's defaults (a key the table sets wins, compared
    case-insensitively as Delta's keys are)."""
    given = dict(properties or {})
    lowered = {k.lower() for k in given}
    return {**{k: v for k, v in table_defaults(spark).items() if k.lower() not in lowered},
            **given}
