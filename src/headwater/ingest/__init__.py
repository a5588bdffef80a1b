"""File ingestion: ``read_files`` (in :mod:`.api`) streams new files with schema inference and
evolution, rescued data and source cleaning (Auto Loader's features, on open-source Spark).

The package imports nothing itself: Spark's Python workers import ``headwater.ingest`` before
the file source's module (:mod:`.source`), and need none of ``read_files``' driver side.
"""
