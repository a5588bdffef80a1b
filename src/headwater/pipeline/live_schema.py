"""DLT's ``LIVE`` virtual schema in Python definitions: while a pipeline's definitions run,
``spark.table("LIVE.x")``, ``spark.read.table("LIVE.x")``, ``spark.readStream.table("LIVE.x")``
and ``spark.sql("... FROM LIVE.x")`` read the pipeline's dataset ``x`` (as ``dlt.read("LIVE.x")``
and SQL files' ``LIVE.x`` do). Outside a pipeline's definitions, ``LIVE`` is an ordinary
database name, as in Spark.

The four methods are wrapped class-level (Spark makes a new reader per ``spark.readStream``),
the ``live`` rows of :mod:`headwater.spark.patches`, only while some :func:`live_schema` block
runs: the outermost block (a graph's build, a materialized view's refresh, a snapshot function)
puts them on, the last to end takes them off. Inside, they apply to the block's own context
(a ContextVar): another thread's ``spark.table`` meanwhile is Spark's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from headwater.pipeline.sql_dlt import drop_live
from headwater.pipeline.sql_files import tokens
from headwater.spark import patches

_active: ContextVar[bool] = ContextVar("headwater_live_schema", default=False)


@contextlib.contextmanager
def live_schema() -> Iterator[None]:
    """``LIVE.x`` means the pipeline's ``x`` in the block (see the module docstring)."""
    with patches.scoped(patches.LIVE):
        token = _active.set(True)
        try:
            yield
        finally:
            _active.reset(token)


def without_live(name: str) -> str:
    """``LIVE.x`` -> ``x``; other names unchanged."""
    return name[5:] if isinstance(name, str) and name[:5].lower() == "live." else name


def _table(original: Callable[..., Any]) -> Callable[..., Any]:
    def table(self: Any, tableName: str) -> Any:  # noqa: N803 (Spark's name)
        return original(self, without_live(tableName) if _active.get() else tableName)

    table.__doc__ = original.__doc__
    return table


def _sql(original: Callable[..., Any]) -> Callable[..., Any]:
    def sql(self: Any, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:  # noqa: N803
        if _active.get() and isinstance(sqlQuery, str) and "live." in sqlQuery.lower():
            sqlQuery = drop_live(sqlQuery, tokens(sqlQuery))
        return original(self, sqlQuery, args, **kwargs)

    sql.__doc__ = original.__doc__
    return sql
