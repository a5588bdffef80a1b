"""Spark's read limits for a stream reader, shared by the Delta and file sources."""

from __future__ import annotations

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
)


def default_read_limit(max_files: int | None, max_bytes: int | None) -> ReadLimit:
    """maxFilesPerTrigger wins over maxBytesPerTrigger; neither means all available."""
    if max_files is not None:
        return ReadMaxFiles(max_files)
    if max_bytes is not None:
        return ReadMaxBytes(max_bytes)
    return ReadAllAvailable()


def limits_of(limit: ReadLimit, max_bytes_option: int | None) -> tuple[int | None, int | None]:
    """(max files, max bytes) of Spark's read limit; with maxFilesPerTrigger, the
    maxBytesPerTrigger option (if also set) applies too."""
    if isinstance(limit, ReadMaxFiles):
        return limit.max_files, max_bytes_option
    if isinstance(limit, ReadMaxBytes):
        return None, limit.max_bytes
    return None, None
