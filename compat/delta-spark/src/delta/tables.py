"""delta-spark's ``delta.tables``: headwater's classes under delta-spark's names."""

from headwater.lakehouse.delta_spark.delta_table import (
    DeltaMergeBuilder,
    DeltaOptimizeBuilder,
    DeltaTable,
    DeltaTableBuilder,
    IdentityGenerator,
)

__all__ = ["DeltaMergeBuilder", "DeltaOptimizeBuilder", "DeltaTable", "DeltaTableBuilder",
           "IdentityGenerator"]
