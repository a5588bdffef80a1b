"""``configure_spark_with_delta_pip(builder).getOrCreate()``: delta-spark's session recipe, giving
a headwater session.

delta-spark users build their session from ``SparkSession.builder`` with Delta's SQL extension
(``io.delta.sql.DeltaSparkSessionExtension``), Delta's catalog, and (through
``configure_spark_with_delta_pip``) the delta-spark Maven package. None of those classes exist
here and Maven may be out of reach, so the builder's settings are read back, Delta's own are
dropped (they would make Spark fail on a missing class or jar), the rest become
``spark_session``'s ``conf``, and a lakehouse is attached at the builder's
``spark.sql.warehouse.dir`` (default ``./spark-warehouse``: where delta-spark keeps managed
tables), so ``CREATE TABLE t ... USING delta`` and ``saveAsTable`` work by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from headwater.lakehouse.session import spark_session

# Settings that name delta-spark's JVM classes or fetch its jars: dropped, never given to Spark.
_DELTA_CLASSES = ("io.delta.", "org.apache.spark.sql.delta.")
_DROPPED_KEYS = ("spark.jars.repositories", "spark.jars.ivy", "spark.jars.ivySettings")


def session_settings(options: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """(the settings Spark gets, the keys dropped) of a delta-spark builder's options."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for key, raw in options.items():
        value = str(raw)
        if key in ("spark.sql.extensions", "spark.jars.packages", "spark.jars"):
            parts = [p.strip() for p in value.split(",") if p.strip()]
            rest = [p for p in parts if not _names_delta(p)]
            if len(rest) < len(parts):
                dropped.append(key)
            if rest:
                kept[key] = ",".join(rest)
        elif (key.startswith("spark.sql.catalog.") and _names_delta(value)) \
                or key in _DROPPED_KEYS:
            dropped.append(key)
        else:
            kept[key] = value
    return kept, dropped


def _names_delta(value: str) -> bool:
    return value.startswith(_DELTA_CLASSES) or value.startswith("io.delta:")


class DeltaSessionBuilder:
    """What ``configure_spark_with_delta_pip(builder)`` returns: ``config`` / ``master`` /
    ``appName`` go on as before; ``getOrCreate()`` starts a headwater session."""

    def __init__(self, builder: Any) -> None:
        self._builder = builder

    def config(self, key: str | None = None, value: Any = None, conf: Any = None,
               map: dict[str, Any] | None = None) -> DeltaSessionBuilder:  # noqa: A002
        self._builder = self._builder.config(key, value, conf, map=map)
        return self

    def master(self, master: str) -> DeltaSessionBuilder:
        self._builder = self._builder.master(master)
        return self

    def appName(self, name: str) -> DeltaSessionBuilder:  # noqa: N802 (Spark's name)
        self._builder = self._builder.appName(name)
        return self

    def enableHiveSupport(self) -> DeltaSessionBuilder:  # noqa: N802 (Spark's name)
        return self  # no Hive metastore: the lakehouse is the catalog

    def getOrCreate(self) -> SparkSession:  # noqa: N802 (Spark's name)
        options = dict(getattr(self._builder, "_options", {}))
        master = options.pop("spark.master", None)
        app_name = options.pop("spark.app.name", "headwater")
        warehouse = options.pop("spark.sql.warehouse.dir", None) or "spark-warehouse"
        conf, _ = session_settings(options)
        root = Path(str(warehouse).removeprefix("file:")).absolute()
        return spark_session(master, app_name=app_name, conf=conf, lakehouse=root)


def configure_spark_with_delta_pip(spark_session_builder: Any,
                                   extra_packages: list[str] | None = None) -> DeltaSessionBuilder:
    """delta-spark's ``configure_spark_with_delta_pip``: the builder, whose ``getOrCreate()``
    gives a headwater session (Delta without jars). ``extra_packages`` (Maven coordinates) are
    passed to Spark as ``spark.jars.packages``, as delta-spark does; delta-spark's own
    coordinates are never added."""
    if not isinstance(spark_session_builder, (SparkSession.Builder, DeltaSessionBuilder)):
        raise TypeError(
            "This function must be called with a SparkSession builder as the argument. The "
            f"argument found is of type {type(spark_session_builder)}.")
    builder = spark_session_builder
    if extra_packages:
        builder = builder.config("spark.jars.packages", ",".join(extra_packages))
    return builder if isinstance(builder, DeltaSessionBuilder) else DeltaSessionBuilder(builder)
