"""The checked fields of a stored dataset (streaming table or materialized view), shared by the
SDP registry, headwater's decorators and SQL files; and a sink's checked fields."""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from headwater.errors import HeadwaterError
from headwater.ingest.schema_hints import parse_ddl
from headwater.kafka import FORMAT_NAME as KAFKA
from headwater.kafka.alias import kafka_format
from headwater.pipeline.model import Location

# The folder the run was launched from, while a spark-pipeline.yml project's definitions load
# in the spec's folder (pipeline.loader). Spark takes a relative path from the folder it was
# launched in (its JVM's working directory), not from Python's, so a sink's relative path is
# made absolute against this one, as `spark-pipelines run` does (pyspark/pipelines/cli.py
# changes only Python's working directory while it loads the definitions).
LAUNCH_DIR: ContextVar[str | None] = ContextVar("headwater_launch_dir", default=None)


def stored_fields(name: str, where: Location, comment: str | None, properties: Any,
                  partition_cols: Any, cluster_by: Any, schema: Any,
                  format: str | None) -> dict[str, Any]:
    """The fields of a stored dataset, checked: delta only, partitioned or clustered (liquid
    clustering, ``cluster_by``) but not both, schema parsed."""
    if isinstance(cluster_by, str):
        cluster_by = [cluster_by]
    if cluster_by and partition_cols:
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{where}: {name!r} asks for both partition columns "
            f"{list(partition_cols)} and cluster_by={list(cluster_by)}.",
            "A Delta table is either partitioned or clustered.",
            "Keep one of them (cluster_by for liquid clustering).",
            error_class="DELTA_CLUSTER_BY_WITH_PARTITIONED_BY")
    if format is not None and str(format).lower() != "delta":
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{where}: {name!r} asks for format={format!r}.",
            "Every table headwater stores is a Delta table.",
            "Remove format=..., or write format='delta'.")
    return dict(name=name, location=where, comment=comment,
                properties={str(k): str(v) for k, v in dict(properties or {}).items()},
                partition_by=tuple(partition_cols or ()), schema=declared_schema(schema, where),
                cluster_by=tuple(str(c) for c in cluster_by) if cluster_by else None)


def declared_schema(schema: Any, where: Location) -> Any:
    """A StructType from a StructType or a DDL string; None when not given."""
    if schema is None:
        return None
    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, str):
        try:
            return parse_ddl(schema, "schema")
        except HeadwaterError as exc:
            raise HeadwaterError(exc.code, f"{where}: {exc.what}", exc.why, exc.fix) from exc
    raise HeadwaterError(
        "HW_PIPELINE_SCHEMA_INVALID", f"{where}: schema is a {type(schema).__name__}.",
        "A declared schema lists the table's columns and types.",
        "Pass a StructType or a DDL string such as 'id BIGINT, name STRING'.")


# Formats whose streaming writer writes files under a ``path`` option.
PATH_FORMATS = ("delta", "parquet", "json", "csv", "orc", "text")


def sink_fields(name: str, where: Location, format: str, options: Any,
                comment: str | None = None) -> dict[str, Any]:
    """A sink's fields, checked: a format, string options, and a ``path`` where the format
    writes files, made absolute now (against the folder the run was launched from, as Spark
    and SDP take it, even while a spark-pipeline.yml project loads in its spec's folder), so
    runs do not depend on the working directory."""
    format = str(format or "").strip()
    spark = SparkSession.getActiveSession()
    if spark is not None:  # "kafka" without Spark's connector: headwater's Kafka sink
        format = kafka_format(spark, format, KAFKA)
    opts = {str(k): str(v) for k, v in dict(options or {}).items()}
    if not format:
        raise HeadwaterError(
            "HW_PIPELINE_SINK_FORMAT", f"{where}: sink {name!r} has no format.",
            "A sink is a streaming write in a format Spark or headwater provides.",
            "Pass format='delta', 'parquet', 'json', ... or 'headwater.kafka'.")
    path_key = next((k for k in opts if k.lower() == "path"), None)
    if format.lower() in PATH_FORMATS:
        if path_key is None or not opts[path_key]:
            raise HeadwaterError(
                "HW_PIPELINE_SINK_FORMAT", f"{where}: sink {name!r} in format {format!r} has "
                "no 'path' option.", f"A {format} sink writes files into a folder.",
                f"Pass options={{'path': '/data/{name}'}} to create_sink.")
        if "://" not in opts[path_key]:
            opts[path_key] = os.path.abspath(
                os.path.join(LAUNCH_DIR.get() or os.getcwd(), opts[path_key]))
    return dict(name=name, location=where, comment=comment, format=format, options=opts)
