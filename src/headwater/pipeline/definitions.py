"""Compatibility names for code written before the split of this module (issue 12):
the model lives in :mod:`headwater.pipeline.model`, the registry in
:mod:`headwater.pipeline.registry`, the decorators in :mod:`headwater.pipeline.api`.
Import from those; this module only re-exports them."""

from headwater.pipeline.api import (
    append_flow,
    create_streaming_table,
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
    materialized_view,
    table,
    view,
)
from headwater.pipeline.model import (
    MATERIALIZED_VIEW,
    TABLE,
    VIEW,
    Flow,
    Kind,
    Location,
    MaterializedView,
    StreamingTable,
    View,
)
from headwater.pipeline.registry import Registry

__all__ = [
    "MATERIALIZED_VIEW", "TABLE", "VIEW", "Flow", "Kind", "Location", "MaterializedView",
    "Registry", "StreamingTable", "View", "append_flow", "create_streaming_table", "expect",
    "expect_all", "expect_all_or_drop", "expect_all_or_fail", "expect_or_drop",
    "expect_or_fail", "materialized_view", "table", "view",
]
