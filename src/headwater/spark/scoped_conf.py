"""Spark SQL settings set on a session for a block of code, and put back after it.

Why: a pipeline's flows share one SparkSession, but DLT's ``spark_conf=`` (and SDP's) asks for
settings "for the execution of this query only", and a DLT pipeline's defaults (ANSI mode off)
must not outlive its run in a session that goes on (a test suite, a notebook). Spark copies
the session's SQL settings when a streaming query starts (the query runs in a clone of the
session taken by ``DataStreamWriter.start``), so a setting present while a flow's DataFrame is
built and while its query starts stays with that query's micro-batches, whatever the session
holds later.

Settings are put back as they were: a key that was not set is unset again (so it reads
Spark's default), a key that was set gets its value back. Callers serialize blocks that
touch one session from several threads (the pipeline graph's lock does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextlib.contextmanager
def scoped_conf(spark: SparkSession, settings: Mapping[str, str | None],
                what: str = "") -> Iterator[None]:
    """Set ``settings`` on ``spark``'s runtime configuration while the block runs (a None
    value: the key unset meanwhile, so it reads Spark's default).

    what: whose settings these are, for the error naming a setting Spark refuses to change
    at runtime (a static or core setting: HW_OPTION_INVALID).
    """
    if not settings:
        yield
        return
    conf = spark.conf
    before: dict[str, str | None] = {}
    try:
        for key, value in settings.items():
            before[key] = conf.get(key, None)  # None: not set (Spark's default applies)
            try:
                if value is None:
                    conf.unset(key)
                else:
                    conf.set(key, str(value))
            except Exception as exc:  # noqa: BLE001 - Spark's CANNOT_MODIFY_CONFIG and kin
                before.pop(key)
                raise HeadwaterError(
                    "HW_OPTION_INVALID", f"{what + ': ' if what else ''}Spark setting "
                    f"{key}={value!r} cannot be set for one query: "
                    f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
                    "Per-query settings are Spark SQL runtime settings; static and cluster "
                    "settings (executor memory, the warehouse folder, ...) are fixed when the "
                    "session starts.",
                    "Move it to the pipeline's configuration (spark-pipeline.yml "
                    "`configuration:` or headwater.toml [spark]), or drop it.") from exc
        yield
    finally:
        for key, value in reversed(list(before.items())):
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)
