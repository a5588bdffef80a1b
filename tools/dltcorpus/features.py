"""The missing feature behind a failure, read from its first error (patterns written from the
failures the corpus met; an error no pattern knows is "other: <the error's code>")."""

from __future__ import annotations

import re

# (pattern over the first error, feature); first match wins
FEATURES: list[tuple[str, str]] = [
    (r"no Kafka broker", "the test Kafka broker (not installed here)"),
    (r"PARSE_SYNTAX_ERROR|not a pipeline statement \((?!SetCommand)",
     "Databricks notebook SQL (cells without semicolons, CREATE OR REFRESH [STREAMING] LIVE "
     "TABLE, LIVE. names)"),
    (r"SetCommand|\$\{", "SET lines and ${...} parameters in SQL notebooks"),
    (r"cloud_files", "cloud_files() in SQL"),
    (r"create_target_table|create_streaming_live_table",
     "dlt.create_target_table (DLT's older name of create_streaming_table)"),
    (r"apply_changes_from_snapshot|APPLY CHANGES FROM SNAPSHOT|snapshot CDC",
     "apply_changes_from_snapshot"),
    (r"dbutils", "dbutils (Databricks utilities, e.g. dbutils.fs.ls)"),
    (r"KAFKA_DATA_SOURCE_NOT_ENABLED|data source: kafka", "format(\"kafka\") (Spark's name)"),
    (r"kafka\.sasl|kafka\.security|HW_KAFKA_CLIENT_CONFIG", "Kafka security options"),
    (r"temporary=True|TEMPORARY", "temporary tables (temporary=True, TEMPORARY)"),
    (r"view .* has expectations|constraints belong on a streaming table",
     "expectations on views"),
    (r"spark_conf", "per-dataset Spark settings (@dlt.table(spark_conf=...))"),
    (r"schemaLocation|PYTHON_DATA_SOURCE_ERROR.*cloudFiles|Failed to create Python data source",
     "Auto Loader (format(\"cloudFiles\")) without a schema location"),
    (r"STREAMING_OUTPUT_MODE|streaming aggregations without watermark|output mode",
     "a streaming query Spark refuses in its table's output mode (e.g. a declared append mode "
     "over an aggregation without a watermark; left undeclared, it is rewritten whole)"),
    (r"CAST_INVALID_INPUT|DIVIDE_BY_ZERO|ARITHMETIC_OVERFLOW|CANNOT_PARSE_TIMESTAMP|"
     r"DATATYPE_MISMATCH.*(BIGINT|INT).*DOUBLE",
     "ANSI SQL mode (on in Spark 4; off in the Databricks runtime the notebooks were written "
     "for)"),
    (r"_rescued_data", "Auto Loader's _rescued_data column"),
    (r"_metadata", "the _metadata column of read_files / Auto Loader (_metadata.file_name)"),
    (r"event_log", "the event_log table function"),
    (r"elementType", "applyInPandasWithState with an ArrayType state field: fails in pyspark "
                     "4.3.0's Python worker (KeyError 'elementType'), without headwater too"),
    (r"^after run \d: ", "rows differ from the answers"),
]


def feature_of(error: str, notebook: str = "") -> str:
    for pattern, feature in FEATURES:
        if re.search(pattern, error):
            return feature
    code = re.search(r"\[([A-Z][A-Z_.]+)\]", error)
    return f"other: {code.group(1)}" if code else "other"
