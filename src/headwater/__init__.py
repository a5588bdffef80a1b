"""headwater: incremental data pipelines on Spark Structured Streaming over Delta Lake."""

from headwater.delta.cdc.stream import apply_changes_stream
from headwater.errors import HeadwaterError, translated, unwrap
from headwater.helpers import active_streams, block_until_stream_is_ready, cleanup, stop_all_streams
from headwater.ingest import read_files
from headwater.ingest.debezium import change_rows as debezium_changes
from headwater.ingest.debezium import envelope_schema as debezium_schema
from headwater.lakehouse import Lakehouse, active_lakehouse
from headwater.lakehouse.delta_table import DeltaTable
from headwater.lakehouse.session import spark_session
from headwater.pipeline.api import (
    append_flow,
    apply_changes,
    create_auto_cdc_flow,
    create_sink,
    create_streaming_table,
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
    materialized_view,
    read,
    read_stream,
    table,
    temporary_view,
    view,
)
from headwater.spark.session import stop_spark

__all__ = [
    "DeltaTable", "HeadwaterError", "Lakehouse", "active_streams", "block_until_stream_is_ready",
    "apply_changes", "apply_changes_stream", "cleanup", "create_auto_cdc_flow",
    "create_sink", "create_streaming_table", "debezium_changes", "debezium_schema", "temporary_view",
    "stop_all_streams", "active_lakehouse", "append_flow", "expect", "expect_all",
    "expect_all_or_drop", "expect_all_or_fail", "expect_or_drop", "expect_or_fail",
    "materialized_view", "read", "read_files", "read_stream", "spark_session", "stop_spark", "table",
    "translated", "unwrap", "view",
]
__version__ = "0.1.0"
