"""AUTO CDC (``APPLY CHANGES``) on Delta tables: SCD type 1 and 2, exactly once per batch.

:mod:`.spec` holds what a flow asks for; :mod:`.apply` runs a batch and commits it (and says
where it runs and where the state lives); :mod:`.driver` (SCD1) and :mod:`.history` (SCD2) do
the arithmetic on the driver in Arrow for the batch's keys, :mod:`.timeline` the same in Spark
for batches too large for the driver; :mod:`.state` writes the state table, :mod:`.targets`
opens both tables and runs the target's MERGE.
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
