"""delta-spark's exception classes (``delta.exceptions``) as headwater errors.

delta-spark raises ``ConcurrentAppendException`` and its siblings when another writer's commit
conflicts with a transaction; users' retry loops catch them by class. headwater raises these
subclasses of :class:`HeadwaterError` (code ``HW_DELTA_COMMIT_CONFLICT``, what/why/fix as
every error) where a commit conflicts, so both ``except ConcurrentAppendException`` and
``except HeadwaterError`` work. ``error_class`` is delta-spark's name for the conflict.
"""

from __future__ import annotations

from headwater.errors.base import HeadwaterError


class DeltaConcurrentModificationException(HeadwaterError):
    """A concurrent commit conflicts with this transaction (the base of the others)."""

    error_class = "DELTA_CONCURRENT_MODIFICATION"

    def __init__(self, what: str, why: str = "", fix: str = "",
                 code: str = "HW_DELTA_COMMIT_CONFLICT") -> None:
        super().__init__(code, f"[{self.error_class}] {what}", why, fix)


class ConcurrentWriteException(DeltaConcurrentModificationException):
    error_class = "DELTA_CONCURRENT_WRITE"


class MetadataChangedException(DeltaConcurrentModificationException):
    error_class = "DELTA_METADATA_CHANGED"


class ProtocolChangedException(DeltaConcurrentModificationException):
    error_class = "DELTA_PROTOCOL_CHANGED"


class ConcurrentAppendException(DeltaConcurrentModificationException):
    error_class = "DELTA_CONCURRENT_APPEND"


class ConcurrentDeleteReadException(DeltaConcurrentModificationException):
    error_class = "DELTA_CONCURRENT_DELETE_READ"


class ConcurrentDeleteDeleteException(DeltaConcurrentModificationException):
    error_class = "DELTA_CONCURRENT_DELETE_DELETE"


class ConcurrentTransactionException(DeltaConcurrentModificationException):
    error_class = "DELTA_CONCURRENT_TRANSACTION"
