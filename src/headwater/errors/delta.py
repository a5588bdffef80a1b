"""delta-spark's exception classes (``delta.exceptions``) as headwater errors.

delta-spark raises ``ConcurrentAppendException`` and its siblings when another writer's commit
conflicts with a transaction; users' retry loops catch them by class. headwater raises these
subclasses of :class:`HeadwaterError` (code ``HW_DELTA_COMMIT_CONFLICT`` or
``HW_DML_CONCURRENT_CONFLICT``, what/why/fix as every error) where a commit conflicts, so
``except ConcurrentAppendException``, ``except HeadwaterError`` and, as with delta-spark,
``except PySparkException`` all work. ``error_class`` is delta-spark's name for the conflict.
Which class a conflict is follows delta-spark's conflict checker; ``headwater.delta.commit``
decides it for headwater's own commits and for delta-rs's.
"""

from __future__ import annotations

from typing import Any

from pyspark.errors import AnalysisException, PySparkException
from pyspark.errors.exceptions.base import UnsupportedOperationException

from headwater.errors.base import HeadwaterError


class DeltaAnalysisError(HeadwaterError, AnalysisException):
    """An error delta-spark raises as ``AnalysisException`` (a path that exists, a table that
    does not): headwater's what/why/fix and delta-spark's error class, and an instance of both
    classes, so ``except AnalysisException`` in users' code catches it as before."""

    def __init__(self, code: str, what: str, why: str = "", fix: str = "",
                 error_class: str | None = None) -> None:
        HeadwaterError.__init__(self, code, what, why, fix, error_class=error_class)
        # CapturedException's fields, without a JVM exception behind them
        self._desc = Exception.__str__(self)
        self._stackTrace = ""
        self._cause = None
        self._origin = None
        self._errorClass = error_class
        self._messageParameters: dict[str, str] = {}
        self._contexts: list[Any] = []

    def __str__(self) -> str:
        return Exception.__str__(self)

    def getCondition(self) -> str | None:  # noqa: N802 (PySpark's name)
        return self.error_class

    def getErrorClass(self) -> str | None:  # noqa: N802 (PySpark's name)
        return self.error_class

    def getMessageParameters(self) -> dict[str, str]:  # noqa: N802 (PySpark's name)
        return {}

    def getSqlState(self) -> str | None:  # noqa: N802 (PySpark's name)
        return None


class DeltaConcurrentModificationException(HeadwaterError, PySparkException):
    """A concurrent commit conflicts with this transaction (the base of the others)."""

    delta_error_class = "DELTA_CONCURRENT_MODIFICATION"

    def __init__(self, what: str, why: str = "", fix: str = "",
                 code: str = "HW_DELTA_COMMIT_CONFLICT") -> None:
        HeadwaterError.__init__(self, code, what, why, fix, error_class=self.delta_error_class)
        # PySparkException's fields, without reading Spark's error catalog (not its class)
        self._message = Exception.__str__(self)
        self._errorClass = self.delta_error_class
        self._messageParameters: dict[str, str] = {}
        self._contexts: list[Any] = []

    def __str__(self) -> str:
        return Exception.__str__(self)

    def getSqlState(self) -> str | None:  # noqa: N802 (PySpark's name)
        return "2D521"  # delta-spark's SQLSTATE for every commit conflict

    def getMessage(self) -> str:  # noqa: N802 (PySpark's name)
        return Exception.__str__(self)


class ConcurrentWriteException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_CONCURRENT_WRITE"


class MetadataChangedException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_METADATA_CHANGED"


class ProtocolChangedException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_PROTOCOL_CHANGED"


class ConcurrentAppendException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_CONCURRENT_APPEND"


class ConcurrentDeleteReadException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_CONCURRENT_DELETE_READ"


class ConcurrentDeleteDeleteException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_CONCURRENT_DELETE_DELETE"


class ConcurrentTransactionException(DeltaConcurrentModificationException):
    delta_error_class = "DELTA_CONCURRENT_TRANSACTION"


class DeltaUnsupportedOperationError(HeadwaterError, UnsupportedOperationException):
    """An error delta-spark raises as ``UnsupportedOperationException`` (an identity column
    that is not BIGINT, say): headwater's what/why/fix and delta-spark's error class, and an
    instance of both classes."""

    def __init__(self, code: str, what: str, why: str = "", fix: str = "",
                 error_class: str | None = None) -> None:
        HeadwaterError.__init__(self, code, what, why, fix, error_class=error_class)
        # PySparkException's fields, without reading Spark's error catalog (not its class)
        self._message = Exception.__str__(self)
        self._errorClass = error_class
        self._messageParameters: dict[str, str] = {}
        self._contexts: list[Any] = []

    def __str__(self) -> str:
        return Exception.__str__(self)

    def getMessage(self) -> str:  # noqa: N802 (PySpark's name)
        return Exception.__str__(self)
