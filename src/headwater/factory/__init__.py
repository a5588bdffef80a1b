"""The data factory: deterministic batches of demo data that land like real feeds."""

from headwater.factory.factory import DataFactory, GroundTruth

__all__ = ["DataFactory", "GroundTruth"]
