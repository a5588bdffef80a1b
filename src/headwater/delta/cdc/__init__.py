"""AUTO CDC (``APPLY CHANGES``) on Delta tables: SCD type 1 and 2, exactly once per batch.

:mod:`.spec` holds what a flow asks for, :mod:`.timeline` the Spark arithmetic, :mod:`.apply`
the commits (and where the per-key state lives).
"""

from headwater.delta.cdc.apply import (
    CDC_TARGET_PROPERTIES,
    CdcResult,
    apply_changes_batch,
    state_path,
    target_schema,
)
from headwater.delta.cdc.spec import CdcSpec

__all__ = ["CDC_TARGET_PROPERTIES", "CdcResult", "CdcSpec", "apply_changes_batch", "state_path",
           "target_schema"]
