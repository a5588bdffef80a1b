"""INSERT INTO / INSERT OVERWRITE into lakehouse tables (a handler of the SQL router).

Spark would run ``INSERT INTO t`` on a lakehouse table through the table's Python data source,
which moves every row through Python, and writes the rows it is handed: wrong for tables with
generated or identity columns, whose values Spark would leave NULL (delta-spark computes them,
and raises an identity column's high-water mark in the same commit). So inserts into a
lakehouse table (and into ``delta.`path``` tables with such columns) go through
:func:`headwater.delta.write.native.write_native`: values computed by Spark's SQL on the driver's
DataFrame, files written by Spark's parquet writer, one commit. Where that writer cannot write
the table (an object store, column mapping) Spark's INSERT runs as before; other inserts into
``delta.`path``` go to :func:`headwater.lakehouse.sql.ddl.insert` (``format("delta")``).

Columns are matched as Spark matches them: by the column list when there is one (``INSERT
INTO t (a, b) ...``), by name with ``BY NAME``, else by position, where a query that gives
only the columns that are not generated (or identity) columns fills those. Values are cast
to the table's types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from headwater.conf import storage
from headwater.delta import column_defaults
from headwater.delta.generated import Generation
from headwater.delta.log import DeltaLog
from headwater.delta.schema import as_nullable, spark_schema
from headwater.delta.write.checks import type_widening_enabled, written_type
from headwater.delta.write.native import write_native, write_rows, written_on_driver
from headwater.delta.write.request import WriteRequest, reset_session_txn, with_session_settings
from headwater.errors import HeadwaterError, translated
from headwater.lakehouse.sql import ddl
from headwater.lakehouse.sql.ddl import dataframe, done, is_delta_path, lakehouse_table
from headwater.lakehouse.sql.dml import expression_text, table_path, unsupported
from headwater.lakehouse.sql.statements import Statement, option, seq
from headwater.spark.jvm import parse_plan
from headwater.spark.sql_text import tokens

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from headwater.lakehouse.sql.statements import SqlLakehouse


def insert(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """INSERT into a Delta table (a lakehouse table or ``delta.`path```): the rows through
    Spark's parquet writer and one driver commit
    (:func:`headwater.delta.write.native.write_native`; generated / identity values computed
    first), the Python data source writer where the native writer cannot write the table (an
    object store, column mapping). ``INSERT INTO t REPLACE WHERE pred``, ``INSERT OVERWRITE
    t PARTITION (p = v)`` (static values: a replaceWhere on them; the values fill the
    columns) and the session's dynamic partition overwrite replace only what they name;
    ``INSERT WITH SCHEMA EVOLUTION`` adds the query's new columns."""
    plan = st.plan
    relation = plan.table()
    if relation.getClass().getSimpleName() != "UnresolvedRelation":
        return None
    parts = [str(p) for p in seq(relation.multipartIdentifier())]
    path = table_path(lake, parts)
    if path is None or not DeltaLog(path).exists():
        return ddl.insert(lake, st)  # not a Delta table (yet): ddl's error, or Spark's
    spec = _partition_spec(plan)
    criteria = option(plan.replaceCriteriaOpt())
    replace_where = None if criteria is None else expression_text(st, criteria.cond())
    evolve = bool(plan.withSchemaEvolution())
    plain = not spec and replace_where is None and not evolve
    driver = written_on_driver(path)
    if not driver and plain and (is_delta_path(parts) or storage.bucket_of(path) is not None):
        # delta.`path`: ddl's (format("delta")); an object store: Spark's INSERT
        return ddl.insert(lake, st)
    table = DeltaLog(path).table()
    schema = spark_schema(table.schema().to_json())
    generation = Generation.of(schema)
    target = ".".join(parts)
    static = _static_values(st, spec, schema, list(table.metadata().partition_columns), target)
    rows = _default_keyword_rows(st, schema, generation, target, set(static))
    if rows is None:
        rows = dataframe(st.session, plan.query())
    # schema evolution (WITH SCHEMA EVOLUTION, autoMerge) on a table with type widening:
    # a wider type Delta widens by itself is kept, and the write widens the column
    widen = (evolve or with_session_settings({}, st.session.conf).get("mergeschema") == "true") \
        and type_widening_enabled(table)
    if evolve:  # as delta-spark: by position (or name / column list), extra columns added
        listed = [str(c) for c in seq(plan.userSpecifiedCols())]
        fields = [f.name for f in schema.fields if f.name not in static]
        if listed or plan.byName():
            names = listed or list(rows.columns)
        else:
            names = [fields[i] if i < len(fields) else c for i, c in enumerate(rows.columns)]
        known = {f.name.lower(): f.name for f in schema.fields}
        types = {f.name: f.dataType for f in as_nullable(schema).fields}  # constraints: checked on write
        rows = rows.toDF(*names)
        given = {f.name: f.dataType for f in rows.schema.fields}
        rows = rows.select(*[F.col(f"`{c}`").cast(
                                 written_type(types[known[c.lower()]], given[c], widen))
                             .alias(known[c.lower()]) if c.lower() in known
                             else F.col(f"`{c}`") for c in names],
                           *[F.lit(v).cast(types[c]).alias(c) for c, v in static.items()])
    else:
        names = _target_columns(st, list(rows.columns), schema, generation, target,
                                [str(c) for c in seq(plan.userSpecifiedCols())], plan.byName(),
                                exclude=set(static))
        types = {f.name: f.dataType for f in as_nullable(schema).fields}  # constraints: checked on write
        rows = rows.toDF(*names)
        given = {f.name: f.dataType for f in rows.schema.fields}
        rows = rows.select(
            *[F.col(f"`{n}`").cast(written_type(types[n], given[n], widen)).alias(n)
              for n in names],
            *[F.lit(v).cast(types[c]).alias(c) for c, v in static.items()])
    overwrite = bool(plan.overwrite()) or replace_where is not None
    if static and overwrite:
        if replace_where is not None:
            raise unsupported("REPLACE WHERE with a PARTITION clause", st)
        replace_where = " AND ".join(f"`{c}` = {_sql_literal(v)}" for c, v in static.items())
    if overwrite and any(v is None for v in spec.values()) and static:
        raise unsupported("a PARTITION clause mixing static and dynamic partition columns "
                          "in INSERT OVERWRITE", st)
    request = sql_write_request(st, path, "overwrite" if overwrite else "append",
                                replace_where, merge_schema=evolve)
    if driver:
        write_rows(rows, request)
    else:
        with translated():
            written = write_native(rows, request)
        if written is None:  # the Python data source writer, with the same request's options
            options = {"replaceWhere": request.replace_where} if request.replace_where else {}
            if request.dynamic_partitions:
                options["partitionOverwriteMode"] = "dynamic"
            if request.merge_schema:
                options["mergeSchema"] = "true"
            rows.write.format("delta").mode(request.mode).options(**options).save(path)
    if request.txn is not None:
        reset_session_txn(st.session.conf)  # delta-spark's txnVersion.autoReset, when on
    name = lakehouse_table(lake, parts) if request.merge_schema else None
    if name is not None:
        lake.register(name)  # the catalog copy gets the evolved schema
    return done(st.session)


def _partition_spec(plan: Any) -> dict[str, str | None]:
    """The PARTITION clause: column -> static value (text), or None for a dynamic one."""
    spec: dict[str, str | None] = {}
    entries = plan.partitionSpec().toList()
    for entry in seq(entries):
        value = option(entry._2())
        spec[str(entry._1())] = None if value is None else str(value)
    return spec


def _static_values(st: Statement, spec: dict[str, str | None], schema: StructType,
                   partition_columns: list[str], target: str) -> dict[str, str]:
    """The static values of the PARTITION clause, by the table's spelling of each column;
    a column that is not a partition column is refused (as Spark does)."""
    spelled = {c.lower(): c for c in partition_columns}
    static: dict[str, str] = {}
    for column, value in spec.items():
        name = spelled.get(column.lower())
        if name is None:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED", f"INSERT into {target}: {column} in the PARTITION clause "
                f"is not a partition column of the table ({', '.join(partition_columns) or 'none'}).",
                "A PARTITION clause names partition columns only.",
                "Select the column's values in the query instead.",
                error_class="PARTITIONS_NOT_FOUND")
        if value is not None:
            static[name] = value
    return static


def _sql_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_write_request(st: Statement, path: str, mode: str,
                      replace_where: str | None = None, merge_schema: bool = False
                      ) -> WriteRequest:
    """The write request of a SQL INSERT into the table at ``path``: delta-spark's session
    settings (``SET spark.databricks.delta.write.txnAppId`` / ``txnVersion``,
    ``commitInfo.userMetadata``, ``autoMerge``, Spark's ``partitionOverwriteMode``) are what
    a SQL statement has for writer options."""
    options = with_session_settings({}, st.session.conf, overwrite=mode == "overwrite")
    if replace_where is not None:
        options["replacewhere"] = replace_where
        options.pop("partitionoverwritemode", None)  # the statement says what it replaces
    if merge_schema:
        options["mergeschema"] = "true"
    return WriteRequest.from_options(options, path=path, mode=mode)


def _default_keyword_rows(st: Statement, schema: StructType, generation: Generation,
                          target: str, exclude: set[str]) -> DataFrame | None:
    """The query's rows with the ``DEFAULT`` keyword replaced by each target column's
    default (NULL where it has none), where Spark resolves it: an item of a top-level
    ``VALUES (1, DEFAULT), ...`` (also under ``SELECT * FROM``) or of the top-level SELECT
    list (``SELECT id, DEFAULT FROM s``). The keyword's text is replaced in place and the
    query parsed again. None when the query has no DEFAULT keyword; one anywhere else (an
    expression such as ``DEFAULT + 1``, a subquery) is refused, as Spark refuses it."""
    query = st.plan.query()
    begin = option(query.origin().startIndex()) or 0
    words = [t for t in tokens(st.text) if t.upper == "DEFAULT" and t.start >= begin]
    if not words:
        return None
    rows = _value_rows(query)
    placed: dict[int, int] = {}  # the keyword's offset -> its target column's index
    for row in rows:
        for i, item in enumerate(row):
            start = option(item.origin().startIndex()) if _is_default_keyword(item) else None
            if start is not None:
                placed[int(start)] = i
    stray = [t for t in words if t.start not in placed]
    if stray:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"INSERT into {target}: DEFAULT at offset {stray[0].start} "
            f"is not a whole value of a VALUES row or of the SELECT list (near "
            f"{st.text[max(0, stray[0].start - 20):stray[0].end + 20]!r}).",
            "DEFAULT stands for one target column's default, so it can only be a whole value "
            "given to a column.", "Write DEFAULT alone in the column's position, or write "
            "the default's expression itself.", error_class="DEFAULT_PLACEMENT_INVALID")
    names = _target_columns(st, [f"col{i + 1}" for i in range(len(rows[0]))], schema,
                            generation, target, [str(c) for c in seq(st.plan.userSpecifiedCols())],
                            bool(st.plan.byName()), exclude=exclude)
    fields = {f.name: f for f in schema.fields}
    text = st.text
    for start in sorted(placed, reverse=True):
        value = column_defaults.default_text(fields[names[placed[start]]])
        text = text[:start] + value + text[start + len("DEFAULT"):]
    return dataframe(st.session, parse_plan(st.session, text).query())


def _value_rows(query: Any) -> list[list[Any]]:
    """The value lists whose items are target columns by position: a top-level VALUES's
    rows (also under ``SELECT *``), or the top-level SELECT list."""
    node = query
    if node.getClass().getSimpleName() == "Project":
        items = seq(node.projectList())
        star = len(items) == 1 and items[0].getClass().getSimpleName() == "UnresolvedStar"
        if not star:  # Spark's UnresolvedAlias wraps some items: the item is its child
            return [[e.child() if e.getClass().getSimpleName() == "UnresolvedAlias" else e
                     for e in items]]
        node = node.child()
        while node.getClass().getSimpleName() == "SubqueryAlias":
            node = node.child()
    if node.getClass().getSimpleName() == "UnresolvedInlineTable":
        return [seq(row) for row in seq(node.rows())]
    return [[]]


def _is_default_keyword(expr: Any) -> bool:
    if expr.getClass().getSimpleName() != "UnresolvedAttribute":
        return False
    return column_defaults.is_default_keyword(".".join(str(p) for p in seq(expr.nameParts())))


def _target_columns(st: Statement, columns: list[str], schema: StructType,
                    generation: Generation, target: str, listed: list[str], by_name: bool,
                    exclude: set[str] | None = None) -> list[str]:
    """The table column each of the query's ``columns`` goes to (the table's spelling);
    ``exclude``: columns a PARTITION clause gives values to."""
    exclude = exclude or set()
    by_lower = {f.name.lower(): f.name for f in schema.fields if f.name not in exclude}
    if by_name:
        listed = list(columns)
    elif not listed:
        automatic = set(generation.expressions) | {i.name for i in generation.identities}
        fields = [f.name for f in schema.fields if f.name not in exclude]
        plain = [n for n in fields if n not in automatic]
        listed = fields if len(columns) == len(fields) else plain
    unknown = [c for c in listed if c.lower() not in by_lower]
    if unknown:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH", f"INSERT into {target} names columns the table does "
            f"not have: {', '.join(unknown)}.", "INSERT writes the table's own columns.",
            f"Use some of: {', '.join(schema.fieldNames())}.")
    if len(listed) != len(columns):
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH", f"INSERT into {target}: the query gives "
            f"{len(columns)} columns for the {len(listed)} target columns "
            f"({', '.join(listed)}) (near {st.text[:60]!r}).",
            "Each value goes to one target column.",
            "List the target columns, INSERT INTO t (a, b) ..., or give one value per column.")
    return [by_lower[c.lower()] for c in listed]
