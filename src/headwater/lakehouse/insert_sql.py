"""INSERT INTO / INSERT OVERWRITE into lakehouse tables (a handler of the SQL router).

Spark would run ``INSERT INTO t`` on a lakehouse table through the table's Python data source,
which moves every row through Python, and writes the rows it is handed: wrong for tables with
generated or identity columns, whose values Spark would leave NULL (delta-spark computes them,
and raises an identity column's high-water mark in the same commit). So inserts into a
lakehouse table (and into ``delta.`path``` tables with such columns) go through
:func:`headwater.delta.native.write_native`: values computed by Spark's SQL on the driver's
DataFrame, files written by Spark's parquet writer, one commit. Where that writer cannot write
the table (an object store, column mapping) Spark's INSERT runs as before; other inserts into
``delta.`path``` go to :func:`headwater.lakehouse.ddl.insert` (``format("delta")``).

Columns are matched as Spark matches them: by the column list when there is one (``INSERT
INTO t (a, b) ...``), by name with ``BY NAME``, else by position, where a query that gives
only the columns that are not generated (or identity) columns fills those. Values are cast
to the table's types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from headwater.conf import storage
from headwater.delta.generated import Generation
from headwater.delta.log import DeltaLog
from headwater.delta.native import write_native, write_rows, written_on_driver
from headwater.delta.schema import spark_schema
from headwater.errors import HeadwaterError, translated
from headwater.lakehouse import ddl
from headwater.lakehouse.ddl import dataframe, done, is_delta_path
from headwater.lakehouse.delta_sql import table_path, unsupported
from headwater.lakehouse.hooks import refuse_dynamic_overwrite
from headwater.lakehouse.statements import Statement, seq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from headwater.lakehouse import Lakehouse


def insert(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """INSERT into a lakehouse table: the rows through Spark's parquet writer and one driver
    commit (:func:`headwater.delta.native.write_native`; generated / identity values computed
    first), Spark's own INSERT where the native writer cannot write the table (an object
    store, column mapping) or a plain table's PARTITION clause; ``delta.`path``` goes to
    :func:`headwater.lakehouse.ddl.insert` (``format("delta")``, native there too)."""
    plan = st.plan
    relation = plan.table()
    if relation.getClass().getSimpleName() != "UnresolvedRelation":
        return None
    parts = [str(p) for p in seq(relation.multipartIdentifier())]
    path = table_path(lake, parts)
    if path is None or not DeltaLog(path).exists():
        return ddl.insert(lake, st)  # not a Delta table (yet): ddl's error, or Spark's
    if plan.overwrite():
        refuse_dynamic_overwrite(st.session, None, ".".join(parts))
    driver = written_on_driver(path)
    if not driver and (is_delta_path(parts) or plan.partitionSpec().size() > 0
                       or storage.bucket_of(path) is not None):
        # delta.`path`: ddl's; a PARTITION clause or an object store: Spark's INSERT
        return ddl.insert(lake, st)
    schema = spark_schema(DeltaLog(path).table().schema().to_json())
    generation = Generation.of(schema)
    if plan.partitionSpec().size() > 0:
        raise unsupported("a PARTITION clause", st)
    target = ".".join(parts)
    rows = dataframe(st.session, plan.query())
    names = _target_columns(st, rows, schema, generation, target,
                            [str(c) for c in seq(plan.userSpecifiedCols())], plan.byName())
    types = {f.name: f.dataType for f in schema.fields}
    rows = rows.toDF(*names).select(*[F.col(f"`{n}`").cast(types[n]).alias(n) for n in names])
    mode = "overwrite" if plan.overwrite() else "append"
    if driver:
        write_rows(rows, path, mode)
        return done(st.session)
    with translated():
        written = write_native(rows, path, mode)
    if written is None:  # the table's Python data source writer (Spark's INSERT)
        return ddl.insert(lake, st)
    return done(st.session)


def _target_columns(st: Statement, rows: DataFrame, schema: StructType, generation: Generation,
                    target: str, listed: list[str], by_name: bool) -> list[str]:
    """The table column each of the query's columns goes to (the table's spelling)."""
    by_lower = {f.name.lower(): f.name for f in schema.fields}
    if by_name:
        listed = list(rows.columns)
    elif not listed:
        automatic = set(generation.expressions) | {i.name for i in generation.identities}
        plain = [f.name for f in schema.fields if f.name not in automatic]
        listed = schema.fieldNames() if len(rows.columns) == len(schema.fields) else plain
    unknown = [c for c in listed if c.lower() not in by_lower]
    if unknown:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH", f"INSERT into {target} names columns the table does "
            f"not have: {', '.join(unknown)}.", "INSERT writes the table's own columns.",
            f"Use some of: {', '.join(schema.fieldNames())}.")
    if len(listed) != len(rows.columns):
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH", f"INSERT into {target}: the query gives "
            f"{len(rows.columns)} columns for the {len(listed)} target columns "
            f"({', '.join(listed)}) (near {st.text[:60]!r}).",
            "Each value goes to one target column.",
            "List the target columns, INSERT INTO t (a, b) ..., or give one value per column.")
    return [by_lower[c.lower()] for c in listed]
