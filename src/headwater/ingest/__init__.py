"""File ingestion: ``read_files`` streams new files with schema inference and evolution,
rescued data and source cleaning (Auto Loader's features, on open-source Spark)."""

from headwater.ingest.api import read_files

__all__ = ["read_files"]
