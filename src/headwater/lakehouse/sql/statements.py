"""The SQL router's vocabulary: a parsed :class:`Statement`, the handler type, the lakehouse a
handler acts on (:class:`SqlLakehouse`: the few members of a Lakehouse the handlers use, so
this package never imports the Lakehouse class, which imports the router), and helpers to read
Spark's parsed plans. The table from statement kind to handler is in
:mod:`headwater.lakehouse.sql.router` (one explicit dict, read top to bottom)."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from headwater.conf.location import AnyPath
    from headwater.lakehouse.names import TableName


class SqlLakehouse(Protocol):
    """What the router and its handlers use of a lakehouse (:class:`headwater.Lakehouse`
    is the one implementation): its session and root, tables by name, and the changes
    DDL makes to them."""

    @property
    def spark(self) -> SparkSession: ...
    @property
    def root(self) -> AnyPath: ...
    def path(self, name: str) -> str: ...
    def exists(self, name: str) -> bool: ...
    def is_external(self, name: str) -> bool: ...
    def tables(self) -> list[str]: ...
    def register(self, name: str) -> None: ...
    def catalog_holder(self, name: str) -> str | None: ...
    def foreign_holder(self, name: str) -> str | None: ...
    def register_external(self, name: str, path: str) -> None: ...
    def rename(self, name: str, new_name: str) -> None: ...
    def set_location(self, name: str, path: str) -> None: ...
    def drop(self, name: str) -> None: ...
    def resolve(self, name: str | list[str], session: SparkSession | None = None) -> TableName: ...
    def catalogs(self) -> list[str]: ...
    def create_catalog(self, name: str, comment: str | None = None) -> bool: ...
    def forget_catalog(self, name: str) -> None: ...

    def create_table(self, name: str, schema: StructType, partition_by: Iterable[str] = (),
                     comment: str | None = None, properties: dict[str, str] | None = None,
                     declared: bool = False,
                     cluster_by: Iterable[str] | None = None) -> str: ...

    def replace(self, name: str, df: DataFrame, partition_by: Iterable[str] = (),
                comment: str | None = None, properties: dict[str, str] | None = None,
                declared: bool | StructType = False,
                cluster_by: Iterable[str] | None = None) -> int: ...


@dataclass(frozen=True)
class Statement:
    """One SQL statement as Spark's parser sees it.

    text: the statement (``delta.`path``` reads already replaced by temp views).
    kind: the parsed plan's root class name, or a Delta kind (``Optimize``, ``Vacuum``,
        ``Restore``, ``DescribeHistory``, ``DescribeDetail``, ``ConvertToDelta``) for Delta's
        own grammar, or ``Unparsed`` when Spark cannot parse it (Spark then reports why).
    plan: the parsed (unresolved) JVM logical plan; None for Delta grammar and Unparsed.
    session: the SparkSession the statement runs in (a cloned one inside foreachBatch).
    """

    text: str
    kind: str
    plan: Any
    session: SparkSession


# The session of the statement the router is running: names it holds resolve in that
# session's current catalog and schema (a newSession or a foreachBatch clone may differ from
# the lakehouse's own session). Set by the router around each handler.
_statement_session: contextvars.ContextVar[SparkSession | None] = contextvars.ContextVar(
    "headwater_statement_session", default=None)


@contextlib.contextmanager
def running_in(session: SparkSession) -> Iterator[None]:
    """Names resolved by the handlers while the block runs are ``session``'s."""
    token = _statement_session.set(session)
    try:
        yield
    finally:
        _statement_session.reset(token)


def statement_session(lake: SqlLakehouse) -> SparkSession:
    """The session names of the running statement resolve in (the lakehouse's outside one)."""
    return _statement_session.get() or lake.spark


Handler = Callable[[SqlLakehouse, Statement], "DataFrame | None"]

# Delta statements Spark's parser does not know, by their leading keywords.
DELTA_GRAMMAR = {
    ("OPTIMIZE",): "Optimize", ("VACUUM",): "Vacuum", ("RESTORE",): "Restore",
    ("CONVERT", "TO", "DELTA"): "ConvertToDelta", ("GENERATE",): "Generate",
    ("REORG",): "Reorg", ("DESCRIBE", "HISTORY"): "DescribeHistory",
    ("DESC", "HISTORY"): "DescribeHistory", ("DESCRIBE", "DETAIL"): "DescribeDetail",
    ("DESC", "DETAIL"): "DescribeDetail",
}
# How error messages name a kind.
STATEMENT_NAMES = {
    "Optimize": "OPTIMIZE", "Vacuum": "VACUUM", "Restore": "RESTORE",
    "ConvertToDelta": "CONVERT TO DELTA", "Generate": "GENERATE", "Reorg": "REORG",
    "DescribeHistory": "DESCRIBE HISTORY", "DescribeDetail": "DESCRIBE DETAIL",
    "Clone": "CREATE TABLE ... CLONE", "DropFeature": "ALTER TABLE ... DROP FEATURE",
    "DeleteFromTable": "DELETE FROM", "UpdateTable": "UPDATE", "MergeIntoTable": "MERGE INTO",
}


def not_supported_yet(kind: str, text: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_SQL_NOT_SUPPORTED_YET",
        f"{STATEMENT_NAMES.get(kind, kind)} is a Delta statement headwater cannot run yet "
        f"(near {text[:60]!r}).",
        "Spark runs it only with delta-spark's jar; headwater implements Delta statements one "
        "by one in its SQL router.",
        "Use the deltalake Python API on the table's path (Lakehouse.path(name)) meanwhile.")


# --- reading parsed plans -------------------------------------------------------------------

def children(node: Any) -> Iterator[Any]:
    kids = node.children()
    for i in range(kids.size()):
        yield kids.apply(i)


def walk(plan: Any) -> Iterator[Any]:
    """Every node of a parsed plan, subqueries in expressions included, parents first."""
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))
        if hasattr(node, "subqueries"):
            subs = node.subqueries()
            stack.extend(subs.apply(i) for i in range(subs.size()))


def seq(value: Any) -> list[Any]:
    """A Scala Seq as a Python list."""
    return [value.apply(i) for i in range(value.size())]


def option(value: Any) -> Any:
    """A Scala Option as its value or None."""
    return value.get() if value.isDefined() else None


def target(plan: Any) -> tuple[list[str], str] | None:
    """(name parts, Spark's command name) of the table a command acts on, if any."""
    for node in [plan, *children(plan)]:
        kind = node.getClass().getSimpleName()
        if kind in ("UnresolvedTable", "UnresolvedTableOrView"):
            return [str(p) for p in seq(node.multipartIdentifier())], str(node.commandName())
        if kind == "UnresolvedIdentifier":
            return [str(p) for p in seq(node.nameParts())], ""
        if kind == "UnresolvedRelation" and node is not plan:
            return [str(p) for p in seq(node.multipartIdentifier())], ""
    return None


def evaluate_timestamp(st: Statement, text: str) -> dt.datetime:
    """A timestamp expression of a statement (``'2024-01-01 10:00'``, ``current_timestamp() -
    INTERVAL 1 HOUR``), evaluated by Spark in the session's time zone, as an aware UTC time."""
    try:
        micros = st.session.range(1).selectExpr(
            f"unix_micros(CAST({text} AS TIMESTAMP))").first()[0]
    except Exception as exc:  # noqa: BLE001 - Spark's error, named in ours
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{text!r} is not a timestamp (near {st.text[:60]!r}).",
            "AS OF takes a timestamp literal or expression.",
            "Write e.g. TIMESTAMP AS OF '2024-01-01 10:00:00'.") from exc
    if micros is None:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{text!r} is not a valid timestamp (near {st.text[:60]!r}).",
            "AS OF takes a timestamp literal or expression.",
            "Write e.g. TIMESTAMP AS OF '2024-01-01 10:00:00'.")
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(micros))
