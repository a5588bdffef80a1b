"""The checked fields of a stored dataset (streaming table or materialized view), shared by the
SDP registry, headwater's decorators and SQL files."""

from __future__ import annotations

from typing import Any

from headwater.errors import HeadwaterError
from headwater.pipeline.model import Location


def stored_fields(name: str, where: Location, comment: str | None, properties: Any,
                  partition_cols: Any, cluster_by: Any, schema: Any,
                  format: str | None) -> dict[str, Any]:
    """The fields of a stored dataset, checked: delta only, no clustering, schema parsed."""
    if cluster_by:
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{where}: {name!r} asks for cluster_by={list(cluster_by)}.",
            "Liquid clustering is not supported by headwater's Delta writer (delta-rs).",
            "Remove cluster_by, or use partition_cols for columns with few distinct values.")
    if format is not None and str(format).lower() != "delta":
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{where}: {name!r} asks for format={format!r}.",
            "Every table headwater stores is a Delta table.",
            "Remove format=..., or write format='delta'.")
    return dict(name=name, location=where, comment=comment,
                properties={str(k): str(v) for k, v in dict(properties or {}).items()},
                partition_by=tuple(partition_cols or ()), schema=declared_schema(schema, where))


def declared_schema(schema: Any, where: Location) -> Any:
    """A StructType from a StructType or a DDL string; None when not given."""
    if schema is None:
        return None
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, str):
        try:
            from headwater.ingest.ddl import parse_ddl

            return parse_ddl(schema, "schema")
        except HeadwaterError as exc:
            raise HeadwaterError(exc.code, f"{where}: {exc.what}", exc.why, exc.fix) from exc
    raise HeadwaterError(
        "HW_PIPELINE_SCHEMA_INVALID", f"{where}: schema is a {type(schema).__name__}.",
        "A declared schema lists the table's columns and types.",
        "Pass a StructType or a DDL string such as 'id BIGINT, name STRING'.")
