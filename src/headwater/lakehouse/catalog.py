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
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import SparkSession

from headwater.conf import storage
from headwater.conf.layout import LAKEHOUSE_ROOT_CONF, LAKEHOUSE_STATE_CONF
from headwater.conf.options import parse_columns
from headwater.delta.datasource import DeltaDataSource
from headwater.ingest.registration import with_parallelism
from headwater.lakehouse.names import TableName
from headwater.spark.jvm import same_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from headwater.conf.location import AnyPath

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

class AttachedLakehouse(Protocol):
    """A lakehouse as the attachments and the rooms that find it by session use it (the
    session hooks, delta-spark's API): :class:`headwater.Lakehouse` is the one
    implementation (``Lakehouse.of`` returns it as itself). This module never imports the
    Lakehouse class, which imports it."""

    @property
    def spark(self) -> SparkSession: ...
    @property
    def root(self) -> AnyPath: ...
    @property
    def state_dir(self) -> Path: ...
    def path(self, name: str) -> str: ...
    def exists(self, name: str) -> bool: ...
    def tables(self) -> list[str]: ...
    def register(self, name: str) -> None: ...
    def register_external(self, name: str, path: str) -> None: ...
    def share_with(self, session: SparkSession) -> None: ...
    def detach(self) -> None: ...
    def resolve(self, name: str | list[str], session: SparkSession | None = None) -> TableName: ...
    def catalogs(self) -> list[str]: ...
    def create_catalog(self, name: str, comment: str | None = None) -> bool: ...

    def create_table(self, name: str, schema: StructType, partition_by: Iterable[str] = (),
                     comment: str | None = None, properties: dict[str, str] | None = None,
                     declared: bool = False,
                     cluster_by: Iterable[str] | None = None) -> str: ...

    def save_as_table(self, df: DataFrame, name: str, mode: str = "errorifexists",
                      partition_by: Iterable[str] = (),
                      options: dict[str, str] | None = None) -> None: ...

    def insert_into(self, df: DataFrame, name: str, overwrite: bool = False,
                    options: dict[str, str] | None = None) -> None: ...


_attached: list[AttachedLakehouse] = []
_guard = threading.RLock()


def attach(lakehouse: AttachedLakehouse) -> AttachedLakehouse | None:
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


def detach(lakehouse: AttachedLakehouse) -> bool:
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


def lakehouse_of(spark: SparkSession | None) -> AttachedLakehouse | None:
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
        if lake.spark is spark or same_session(lake.spark, spark):
            return lake
    return same_root[0] if same_root else None


def _conf_root(spark: SparkSession) -> str | None:
    try:
        return spark.conf.get(ROOT_KEY, None)
    except Exception:  # a stopped session, or Spark Connect without the key
        return None


def columns_option(value: Any) -> list[str]:
    """``"a, b"``, ``'["a", "b"]'`` or ``["a", "b"]`` (a writer's partitionBy) as names."""
    return parse_columns("partitionBy", value)
