"""headwater: incremental data pipelines on Spark Structured Streaming over Delta Lake."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headwater.delta.cdc.stream import apply_changes_stream
    from headwater.errors import HeadwaterError, translated, unwrap
    from headwater.helpers import (
        active_streams,
        block_until_stream_is_ready,
        cleanup,
        stop_all_streams,
    )
    from headwater.ingest.api import read_files
    from headwater.ingest.debezium import change_rows as debezium_changes
    from headwater.ingest.debezium import envelope_schema as debezium_schema
    from headwater.lakehouse import Lakehouse, active_lakehouse
    from headwater.lakehouse.delta_spark.delta_table import DeltaTable
    from headwater.lakehouse.session import spark_session
    from headwater.pipeline.api import (
        append_flow,
        apply_changes,
        apply_changes_from_snapshot,
        create_auto_cdc_flow,
        create_auto_cdc_from_snapshot_flow,
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
    from headwater.spark.patches import uninstall
    from headwater.spark.session import stop_spark

# Each public name -> (its module, its name there), imported on first use. Spark starts a new
# Python process for every streaming query's source and every planning step of headwater's
# data sources, and each one imports ``headwater`` first: importing every room there cost
# 0.23 s of CPU per process; the data sources need only delta/, conf/ and errors.
_EXPORTS: dict[str, tuple[str, str]] = {
    "apply_changes_stream": ("headwater.delta.cdc.stream", "apply_changes_stream"),
    "HeadwaterError": ("headwater.errors", "HeadwaterError"),
    "translated": ("headwater.errors", "translated"),
    "unwrap": ("headwater.errors", "unwrap"),
    "active_streams": ("headwater.helpers", "active_streams"),
    "block_until_stream_is_ready": ("headwater.helpers", "block_until_stream_is_ready"),
    "cleanup": ("headwater.helpers", "cleanup"),
    "stop_all_streams": ("headwater.helpers", "stop_all_streams"),
    "read_files": ("headwater.ingest.api", "read_files"),
    "debezium_changes": ("headwater.ingest.debezium", "change_rows"),
    "debezium_schema": ("headwater.ingest.debezium", "envelope_schema"),
    "Lakehouse": ("headwater.lakehouse", "Lakehouse"),
    "active_lakehouse": ("headwater.lakehouse", "active_lakehouse"),
    "DeltaTable": ("headwater.lakehouse.delta_spark.delta_table", "DeltaTable"),
    "spark_session": ("headwater.lakehouse.session", "spark_session"),
    **{name: ("headwater.pipeline.api", name) for name in (
        "append_flow", "apply_changes", "apply_changes_from_snapshot", "create_auto_cdc_flow",
        "create_auto_cdc_from_snapshot_flow", "create_sink",
        "create_streaming_table", "expect", "expect_all", "expect_all_or_drop",
        "expect_all_or_fail", "expect_or_drop", "expect_or_fail", "materialized_view", "read",
        "read_stream", "table", "temporary_view", "view")},
    "stop_spark": ("headwater.spark.session", "stop_spark"),
    "uninstall": ("headwater.spark.patches", "uninstall"),
}

__all__ = [
    "DeltaTable", "HeadwaterError", "Lakehouse", "active_streams", "block_until_stream_is_ready",
    "apply_changes", "apply_changes_from_snapshot", "apply_changes_stream", "cleanup",
    "create_auto_cdc_flow", "create_auto_cdc_from_snapshot_flow",
    "create_sink", "create_streaming_table", "debezium_changes", "debezium_schema", "temporary_view",
    "stop_all_streams", "active_lakehouse", "append_flow", "expect", "expect_all",
    "expect_all_or_drop", "expect_all_or_fail", "expect_or_drop", "expect_or_fail",
    "materialized_view", "read", "read_files", "read_stream", "spark_session", "stop_spark", "table",
    "translated", "uninstall", "unwrap", "view",
]
__version__ = "0.1.0"


if not TYPE_CHECKING:  # type checkers see the imports above: a misspelled name stays an error

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = _EXPORTS[name]
        except KeyError:
            raise AttributeError(f"module 'headwater' has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value  # the next lookup is an ordinary attribute
        return value


def __dir__() -> list[str]:  # the public names, not this module's own imports
    return sorted({*__all__, "__version__", *(n for n in globals() if n.startswith("__"))})
