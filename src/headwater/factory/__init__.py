"""The data factory: deterministic batches of demo data that land like real feeds, and an
operational database (SQLite) whose changes land as Debezium events."""

from headwater.factory.debezium import CdcRates, CustomerDatabase
from headwater.factory.factory import DataFactory, GroundTruth

__all__ = ["CdcRates", "CustomerDatabase", "DataFactory", "GroundTruth"]
