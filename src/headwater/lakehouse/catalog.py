"""Spark's catalog side of a lakehouse: a data source per table, and which lakehouse is attached
to which session.

There is no process-wide "active lakehouse". A lakehouse is attached to one SparkSession: its
root is recorded in that session's runtime conf under ``headwater.lakehouse.root`` (lower rooms
read the key without importing the lakehouse; Spark's cloned sessions, e.g. a foreachBatch
batch's ``sparkSession``, inherit it), and :func:`lakehouse_of` finds the Lakehouse object by
that key. The list of attachments below is bookkeeping for that lookup (several sessions may
each have their own lakehouse), not a default: a session without the key has no lakehouse.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from headwater.conf import storage
from headwater.conf.layout import LAKEHOUSE_ROOT_CONF, LAKEHOUSE_STATE_CONF
from headwater.conf.options import parse_columns
from headwater.delta.datasource import DeltaDataSource
from headwater.ingest.registration import with_parallelism
from headwater.lakehouse.names import TableName

if TYPE_CHECKING:
    from headwater.lakehouse.lakehouse import Lakehouse

ROOT_KEY = LAKEHOUSE_ROOT_CONF


def per_table_source(name: TableName, path: str, parallelism: int) -> type:
    """A DeltaDataSource subclass whose path is fixed (Spark's catalog keeps the name only)
    and whose scans aim for the session's ``parallelism``, as ``format("delta")``'s do.

    A table on an object store carries its credentials (pickled with the class, registered
    in Spark's Python workers when unpickled; never in the session conf)."""
    source_name = name.source_name
    base = with_parallelism(DeltaDataSource, parallelism)
    credentials = storage.Credentials.for_uri(path) if storage.bucket_of(path) else None

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k: v for k, v in options.items() if k.lower() != "path"}
        opts["path"] = path
        base.__init__(self, opts)

    cls = type(source_name, (base,), {
        "__init__": __init__,
        "name": classmethod(lambda cls: source_name),
        "__module__": __name__,
        "storage_credentials": credentials,
    })
    return cls


# --- attachments ------------------------------------------------------------------------------

_attached: list[Lakehouse] = []
_guard = threading.RLock()


def attach(lakehouse: Lakehouse) -> Lakehouse | None:
    """Make ``lakehouse`` the one of its session (replacing a previous one there).

    A previous lakehouse of the same root and session (``spark_session(lakehouse=root)``
    then ``Lakehouse(root, spark)``) is handed over, not detached: its tables stay in Spark's
    catalog, and it is returned so the new object takes over what it registered.
    """
    with _guard:
        previous = lakehouse_of(lakehouse.spark)
        handed_over = None
        if previous is not None and previous is not lakehouse:
            if previous.root == lakehouse.root and previous.spark is lakehouse.spark:
                _attached.remove(previous)
                handed_over = previous
            else:
                previous.detach()
        if lakehouse not in _attached:
            _attached.append(lakehouse)
        lakehouse.spark.conf.set(ROOT_KEY, str(lakehouse.root))
        lakehouse.spark.conf.set(LAKEHOUSE_STATE_CONF, str(lakehouse.state_dir))
        return handed_over


def detach(lakehouse: Lakehouse) -> bool:
    """Forget the attachment. False when it was not attached."""
    with _guard:
        if lakehouse not in _attached:
            return False
        _attached.remove(lakehouse)
        if _conf_root(lakehouse.spark) == str(lakehouse.root):
            lakehouse.spark.conf.unset(ROOT_KEY)
            lakehouse.spark.conf.unset(LAKEHOUSE_STATE_CONF)
        return True


def any_attached() -> bool:
    return bool(_attached)


def lakehouse_of(spark: SparkSession | None) -> Lakehouse | None:
    """The lakehouse attached to ``spark`` (or to the session it was cloned from), else None."""
    if spark is None or not _attached:
        return None  # the common case without a lakehouse costs no JVM call
    root = _conf_root(spark)
    if not root:
        return None
    with _guard:
        same_root = [lake for lake in _attached if str(lake.root) == root
                     and lake.spark.sparkContext is spark.sparkContext]
    for lake in same_root:  # the session's own first, then the one it was cloned from
        if lake.spark is spark or lake.spark._jsparkSession.equals(spark._jsparkSession):
            return lake
    return same_root[0] if same_root else None


def active_lakehouse() -> Lakehouse | None:
    """The lakehouse attached to the active SparkSession (``Lakehouse.of(active session)``)."""
    if not _attached:
        return None
    try:
        spark = SparkSession.active()
    except Exception:  # no session at all
        return None
    return lakehouse_of(spark)


def _conf_root(spark: SparkSession) -> str | None:
    try:
        return spark.conf.get(ROOT_KEY, None)
    except Exception:  # a stopped session, or Spark Connect without the key
        return None


def columns_option(value: Any) -> list[str]:
    """``"a, b"``, ``'["a", "b"]'`` or ``["a", "b"]`` (a writer's partitionBy) as names."""
    return parse_columns("partitionBy", value)
