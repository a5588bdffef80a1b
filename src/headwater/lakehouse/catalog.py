"""Spark's catalog side of a lakehouse: a data source per table, the attached lakehouse, and the
writer hooks that make a first ``toTable`` / ``saveAsTable`` create the table in the lakehouse."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError
from headwater.lakehouse.names import TableName, parse_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse.tables import Lakehouse

def per_table_source(name: TableName, path: str) -> type:
    """A DeltaDataSource subclass whose path is fixed: Spark's catalog keeps the name only."""
    from headwater.delta.datasource import DeltaDataSource

    source_name = name.source_name

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k: v for k, v in options.items() if k.lower() != "path"}
        opts["path"] = path
        DeltaDataSource.__init__(self, opts)

    cls = type(source_name, (DeltaDataSource,), {
        "__init__": __init__,
        "name": classmethod(lambda cls: source_name),
        "__module__": __name__,
    })
    return cls


_active: "Lakehouse | None" = None
_active_guard = threading.Lock()


def active_lakehouse() -> "Lakehouse | None":
    """The lakehouse attached to the current session, if any."""
    return _active


def set_active(lakehouse: "Lakehouse | None") -> None:
    global _active
    with _active_guard:
        _active = lakehouse


def columns_option(value: Any) -> list[str]:
    """``"a, b"``, ``'["a", "b"]'`` or ``["a", "b"]`` (a writer's partitionBy) as names."""
    from headwater.conf.options import parse_columns

    return parse_columns("partitionBy", value)


# --- seed-style table creation -------------------------------------------------------------

_hooks_installed = False


def install_catalog_hooks() -> None:
    """Make a stream's first ``toTable``/a first ``saveAsTable`` create the table in the
    lakehouse (Spark alone would create it at a default location headwater cannot see)."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    from pyspark.sql.readwriter import DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    original_to_table = DataStreamWriter.toTable
    original_save_as_table = DataFrameWriter.saveAsTable

    def toTable(self, tableName, format=None, outputMode=None, partitionBy=None,  # noqa: N802
                queryName=None, **options):
        _create_for(self._df, tableName, format, partitionBy)
        return original_to_table(self, tableName, format=None, outputMode=outputMode,
                                 partitionBy=None, queryName=queryName, **options)

    def saveAsTable(self, name, format=None, mode=None, partitionBy=None,  # noqa: N802
                    **options):
        lakehouse = active_lakehouse()
        if lakehouse is None or not _is_delta(format):
            return original_save_as_table(self, name, format=format, mode=mode,
                                          partitionBy=partitionBy, **options)
        existed = lakehouse.exists(name)
        mode_text = (mode or "errorifexists").lower()
        if existed and mode_text in ("error", "errorifexists"):
            raise HeadwaterError(
                "HW_TABLE_EXISTS", f"Table {parse_name(name).qualified} already exists.",
                "saveAsTable's default mode refuses to write into an existing table.",
                "Use .mode('append') or .mode('overwrite').")
        if existed and mode_text == "ignore":
            return None
        lakehouse.write(self._df, name, mode="overwrite" if mode_text == "overwrite" else
                        "append", partitionBy=partitionBy, **options)
        return None

    DataStreamWriter.toTable = toTable
    if not hasattr(DataStreamWriter, "table"):
        # Databricks' spelling, used throughout the seeds: writeStream...table("silver").
        DataStreamWriter.table = toTable
    DataFrameWriter.saveAsTable = saveAsTable


def _is_delta(fmt: str | None) -> bool:
    return fmt is None or fmt.lower() == "delta"


def _create_for(df: "DataFrame", name: str, fmt: str | None, partition_by: Any) -> None:
    lakehouse = active_lakehouse()
    if lakehouse is None or not _is_delta(fmt):
        return
    if not lakehouse.exists(name):
        lakehouse.create_table(name, df.schema, partition_by=columns_option(partition_by))
    else:
        lakehouse._existing(name)
