"""Auto Loader options Databricks also takes from the session's settings.

Databricks documents two Spark settings for Auto Loader's schema inference
(https://docs.databricks.com/en/ingestion/cloud-object-storage/auto-loader/schema.html):
``spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles`` and ``.numBytes``, so a
pipeline's ``SET spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles = 2`` makes
every file stream it starts infer from two files. An option given on the read wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_PREFIX = "spark.databricks.cloudFiles."
SAMPLE_FILES_CONF = "spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles"
SAMPLE_BYTES_CONF = "spark.databricks.cloudFiles.schemaInference.sampleSize.numBytes"
SESSION_OPTIONS = tuple(conf.removeprefix(_PREFIX) for conf in (SAMPLE_FILES_CONF,
                                                                 SAMPLE_BYTES_CONF))


def from_session(spark: SparkSession, given: set[str]) -> dict[str, str]:
    """The session's Auto Loader settings for the options not in ``given`` (lower-cased
    names, with or without ``cloudFiles.``), as ``cloudFiles.<option>`` options."""
    found = {}
    for option in SESSION_OPTIONS:
        if option.lower() in given or f"cloudfiles.{option.lower()}" in given:
            continue
        value = spark.conf.get(_PREFIX + option, None)
        if value is not None:
            found[f"cloudFiles.{option}"] = value
    return found
