"""delta-spark's ``delta.exceptions``: the conflicts a concurrent commit raises, as headwater's
errors (subclasses of ``headwater.HeadwaterError``), so retry loops catch what they catch
with delta-spark."""

from headwater.errors.delta import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)

__all__ = ["ConcurrentAppendException", "ConcurrentDeleteDeleteException",
           "ConcurrentDeleteReadException", "ConcurrentTransactionException",
           "ConcurrentWriteException", "DeltaConcurrentModificationException",
           "MetadataChangedException", "ProtocolChangedException"]
