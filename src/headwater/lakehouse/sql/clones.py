"""``CREATE [OR REPLACE] TABLE t SHALLOW CLONE source``, ``CREATE TABLE t LIKE source``,
``SHOW PARTITIONS t`` and ``CONVERT TO DELTA name`` on lakehouse tables (handlers of the SQL
router).

CLONE is delta-spark's grammar, which Spark's parser does not know
(:func:`headwater.lakehouse.sql.parse` names it ``Clone`` when ``SHALLOW CLONE`` / ``DEEP
CLONE`` follows CREATE / REPLACE TABLE); it is read word by word as delta-spark's
``cloneTableHeader SHALLOW CLONE source [temporalClause] [TBLPROPERTIES (...)] [LOCATION
'path']`` and run by :func:`headwater.delta.clone.clone`: one commit whose add actions name
the source's files by absolute path. ``SHOW PARTITIONS`` gives one typed column per partition
column, as delta-spark 3.3+ does (not Spark's ``key=value/...`` strings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from headwater.delta import maintenance
from headwater.delta.clone import clone
from headwater.delta.clone import create_like as create_delta_like
from headwater.delta.convert import convert_parquet
from headwater.delta.definition import TableDefinition
from headwater.delta.definition import create as create_definition
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.lakehouse.names import name_taken_error, parse_name
from headwater.lakehouse.sql import delta_admin
from headwater.lakehouse.sql.ddl import (
    _map,
    done,
    is_delta_path,
    lakehouse_table,
    new_table_target,
    table_location,
)
from headwater.lakehouse.sql.delta_admin import Shape, _parser, _table
from headwater.lakehouse.sql.dml import unsupported
from headwater.lakehouse.sql.statements import Statement, evaluate_timestamp, option, seq, target
from headwater.spark.active import data_frame
from headwater.spark.jvm import catalog_table, is_temp_view
from headwater.spark.raw_sql import raw_sql
from headwater.spark.sql_text import tokens

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse.sql.statements import SqlLakehouse as Lakehouse

_CLONE_RESULT = ("source_table_size long, source_num_of_files long, num_removed_files long, "
                 "num_copied_files long, removed_files_size long, copied_files_size long")


def is_clone(text: str) -> bool:
    """True for ``CREATE ... | REPLACE TABLE ... SHALLOW|DEEP CLONE ...`` (comments blanked)."""
    words = [t.upper for t in tokens(text)]
    if not words or words[0] not in ("CREATE", "REPLACE"):
        return False
    return any(w == "CLONE" and i > 0 and words[i - 1] in ("SHALLOW", "DEEP")
               for i, w in enumerate(words))


def clone_table(lake: Lakehouse, st: Statement) -> DataFrame:
    """CREATE TABLE [IF NOT EXISTS] t | CREATE OR REPLACE TABLE t | REPLACE TABLE t
    SHALLOW|DEEP CLONE source [VERSION AS OF n | TIMESTAMP AS OF ts] [TBLPROPERTIES (...)]
    [LOCATION 'path']: the clone's one commit, and delta-spark's metrics row."""
    shape = Shape(st, 0)
    if_not_exists = replace = must_exist = False
    if shape.take("CREATE", "OR", "REPLACE", "TABLE"):
        replace = True
    elif shape.take("REPLACE", "TABLE"):
        replace = must_exist = True
    elif shape.take("CREATE", "TABLE"):
        if_not_exists = shape.take("IF", "NOT", "EXISTS")
    else:
        raise unsupported("a CLONE header other than CREATE [OR REPLACE] TABLE / REPLACE "
                          "TABLE", st)
    target_word = shape.word("target table")
    shallow = shape.take("SHALLOW")
    if not shallow and not shape.take("DEEP"):
        raise unsupported("CLONE without SHALLOW or DEEP", st)
    if not shape.take("CLONE"):
        raise unsupported("SHALLOW without CLONE", st)
    source = _table(lake, st, shape.word("source table"))
    version = None
    if shape.take("VERSION", "AS", "OF"):
        word = shape.word("version")
        if not word.isdigit():
            raise unsupported(f"VERSION AS OF {word!r} (a version number is expected)", st)
        version = int(word)
    elif shape.take("TIMESTAMP", "AS", "OF"):
        when = evaluate_timestamp(st, shape.until("TBLPROPERTIES", "LOCATION"))
        version = maintenance.version_at(source, maintenance.commit_times(source), when)
    properties = {}
    if shape.take("TBLPROPERTIES"):
        group = shape.word("properties")
        plan = _parser(st).parsePlan(f"ALTER TABLE x SET TBLPROPERTIES {group}")
        properties = _map(st.session, plan.properties())
    where = None
    if shape.take("LOCATION"):
        quoted = shape.word("location")
        if quoted[:1] not in "'\"":
            raise unsupported(f"LOCATION {quoted} (a quoted path is expected)", st)
        where = normalize_uri(quoted[1:-1])
    shape.end()
    name, path = _target(lake, st, target_word, where)
    label = name or f"delta.`{path}`"
    exists = (name is not None and lake.exists(name)) or DeltaLog(path).exists()
    if exists and if_not_exists:
        return data_frame(st.session, [], _CLONE_RESULT)  # delta-spark: a no-op
    if must_exist and not exists:
        raise DeltaAnalysisError(
            "HW_TABLE_NOT_FOUND", f"REPLACE TABLE {label} ... CLONE: the table does not exist.",
            "REPLACE TABLE replaces an existing table only.",
            "Use CREATE OR REPLACE TABLE ... CLONE to create it when missing.",
            error_class="TABLE_OR_VIEW_NOT_FOUND")
    if exists and not replace:
        raise DeltaAnalysisError(
            "HW_TABLE_EXISTS", f"Table {label} already exists.",
            "CREATE TABLE ... CLONE creates a new table.",
            "Use CREATE TABLE IF NOT EXISTS, CREATE OR REPLACE TABLE ... CLONE, or another "
            "name.", error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
    result = clone(source, path, version, shallow=shallow, replace=replace,
                   properties=properties)
    if name is not None:
        if where is None:
            lake.register(name)
        else:
            lake.register_external(name, path)
    m = result.metrics
    row = (m.get("sourceTableSize", 0), m.get("sourceNumOfFiles", 0),
           m.get("numRemovedFiles", 0), m.get("numCopiedFiles", 0),
           m.get("removedFilesSize", 0), m.get("copiedFilesSize", 0))
    return data_frame(st.session, [row], _CLONE_RESULT)


def _target(lake: Lakehouse, st: Statement, word: str, where: str | None
            ) -> tuple[str | None, str]:
    """(lakehouse name or None, folder) of a CLONE's target."""
    try:
        parts = [str(p) for p in seq(_parser(st).parseMultipartIdentifier(word))]
    except Exception as exc:  # noqa: BLE001 - Spark's ParseException, said in our words
        raise unsupported(f"the table name {word!r}", st) from exc
    if is_delta_path(parts):
        path = normalize_uri(parts[1])
        if where is not None and where != path:
            raise DeltaAnalysisError(
                "HW_SQL_UNSUPPORTED", f"CLONE into delta.`{parts[1]}` LOCATION '{where}': two "
                "paths were given for the target.", "A table by path has its path as its "
                "location.", "Leave the LOCATION clause out.",
                error_class="DELTA_CLONE_AMBIGUOUS_TARGET")
        return None, path
    name = lake.resolve(parts, st.session).qualified
    if where is None and lake.exists(name):
        return name, str(table_location(lake, parts) or lake.path(name))
    return name, where or str(lake.path(name))


# Spark's own properties of a catalog table or view, not the user's: not copied by LIKE
_SPARK_PROPERTY_PREFIXES = ("view.", "spark.sql.", "transient_lastddltime", "option.")


def create_like(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """CREATE TABLE [IF NOT EXISTS] t LIKE source [USING DELTA] [LOCATION 'path']
    [TBLPROPERTIES (...)], as delta-spark runs it when the source is a Delta table or the
    target is USING DELTA: a Delta source's protocol, schema, partitioning, description and
    properties (:func:`headwater.delta.clone.create_like`); another source's (a view, a
    parquet table) catalog schema, partition columns, comment and properties. Anything else
    (``LIKE parquet_table`` without USING DELTA) is Spark's own CREATE TABLE LIKE."""
    plan, spark = st.plan, st.session
    src_parts = _name_parts(plan.source())
    parts = _name_parts(plan.name())
    provider = option(plan.provider())
    # a temporary view hides a table of its name, as in Spark's resolution
    src_path = None if is_temp_view(spark, ".".join(f"`{p}`" for p in src_parts)) \
        else table_location(lake, src_parts)
    if src_path is None and (provider is None or str(provider).lower() != "delta"):
        return None  # neither side is Delta: Spark's own
    if option(plan.serdeInfo()) is not None:
        raise unsupported("ROW FORMAT / STORED AS with a Delta table", st)
    where = option(plan.location())
    name, path = new_table_target(lake, spark, parts, where, "CREATE TABLE ... LIKE")
    label = name or f"delta.`{path}`"
    holder = lake.foreign_holder(name) if name is not None else None
    if (name is not None and lake.exists(name)) or holder is not None:
        if plan.ifNotExists():
            return done(spark)  # delta-spark: SaveMode.Ignore
        if holder is not None:
            raise name_taken_error(name, holder, "CREATE TABLE ... LIKE")
        raise DeltaAnalysisError(
            "HW_TABLE_EXISTS", f"Table {label} already exists.",
            "CREATE TABLE ... LIKE creates a new table.",
            "Use CREATE TABLE IF NOT EXISTS, or another name.",
            error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
    if DeltaLog(path).exists():  # a LOCATION (or a path) that holds a table already
        raise DeltaAnalysisError(
            "HW_DELTA_PATH_EXISTS", f"CREATE TABLE {label} LIKE ...: {path} holds a Delta "
            "table already.", "CREATE TABLE ... LIKE makes a new, empty table there.",
            "Choose an empty location, or name the existing table with CREATE TABLE name "
            "LOCATION '...' (no LIKE).", error_class="DELTA_TABLE_ALREADY_EXISTS")
    properties = _map(spark, plan.properties())
    if src_path is not None:
        create_delta_like(src_path, path, properties, name)
    else:
        _create_like_catalog(lake, st, src_parts, name, path, properties)
    if name is not None:
        if where is None:
            lake.register(name)
        else:
            lake.register_external(name, path)
    return done(spark)


def _create_like_catalog(lake: Lakehouse, st: Statement, src_parts: list[str],
                         name: str | None, path: str, properties: dict[str, str]) -> None:
    """The Delta table of CREATE TABLE ... LIKE a view or another provider's table: the
    source's catalog schema, partition columns, comment and properties (Spark's own view and
    table properties left out), as delta-spark copies them; a temporary view has only its
    schema."""
    spark, source = st.session, ".".join(f"`{p}`" for p in src_parts)
    schema = spark.table(source).schema
    meta = None if is_temp_view(spark, source) else catalog_table(spark, source)
    partition_by, comment, copied = [], None, {}
    if meta is not None:
        partition_by = [str(c) for c in seq(meta.partitionColumnNames())]
        comment = option(meta.comment())
        copied = {k: v for k, v in _map(spark, meta.properties()).items()
                  if not k.lower().startswith(_SPARK_PROPERTY_PREFIXES)}
    create_definition(spark, path, TableDefinition(
        schema, partition_by, None, None if comment is None else str(comment),
        {**copied, **properties}, name.split(".")[-1] if name else None),
        name or f"delta.`{path}`")


def _name_parts(node: Any) -> list[str]:
    """The name parts of an unresolved name node of Spark's plan."""
    if node.getClass().getSimpleName() == "UnresolvedIdentifier":
        return [str(p) for p in seq(node.nameParts())]
    return [str(p) for p in seq(node.multipartIdentifier())]  # UnresolvedTableOrView...


def show_partitions(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """SHOW PARTITIONS t [PARTITION (col = value, ...)] of a Delta table: its distinct
    partition values, one typed column per partition column (delta-spark 3.3+)."""
    found = target(st.plan)
    if found is None:
        return None
    path = table_location(lake, found[0])
    if path is None:
        return None  # another provider's table: Spark's
    table = DeltaLog(path).table()
    columns = list(table.metadata().partition_columns)
    label = ".".join(found[0]) if not is_delta_path(found[0]) else f"delta.`{path}`"
    if not columns:
        raise DeltaAnalysisError(
            "HW_SQL_UNSUPPORTED", f"SHOW PARTITIONS {label}: the table is not partitioned.",
            "SHOW PARTITIONS lists the values of a table's partition columns.",
            "Use DESCRIBE DETAIL to see how the table is laid out (partitionColumns, "
            "clusteringColumns).", error_class="INVALID_PARTITION_OPERATION.PARTITION_SCHEMA_IS_EMPTY")
    df = st.session.read.format("delta").load(path)
    spec = option(st.plan.pattern()) if hasattr(st.plan, "pattern") else None
    if spec is not None:
        values = _map(st.session, spec.spec())
        unknown = [k for k in values if k.lower() not in {c.lower() for c in columns}]
        if unknown:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED", f"SHOW PARTITIONS {label} PARTITION ({', '.join(unknown)} "
                "...): not partition columns of the table.",
                "The PARTITION clause filters by partition columns.",
                f"Use some of: {', '.join(columns)}.")
        for key, value in values.items():
            column = next(c for c in columns if c.lower() == key.lower())
            df = df.where(F.col(f"`{column}`") == F.lit(value).cast(df.schema[column].dataType))
    return df.select(*[F.col(f"`{c}`") for c in columns]).distinct().orderBy(*columns)


def convert(lake: Lakehouse, st: Statement) -> DataFrame:
    """CONVERT TO DELTA name: a lakehouse (Delta) table is already Delta (a no-op, as in
    delta-spark); an external parquet table of Spark's catalog is converted in place
    (partition columns and types from the catalog) and becomes a lakehouse external table at
    its location. ``parquet.`path``` forms are delta_admin.convert's."""
    shape = Shape(st, 3)
    word = shape.word("table")
    parts = [str(p) for p in seq(_parser(st).parseMultipartIdentifier(word))]
    if len(parts) == 2 and parts[0].lower() in ("parquet", "delta", "iceberg"):
        return delta_admin.convert(lake, st)
    stats = not shape.take("NO", "STATISTICS")
    if shape.take("PARTITIONED", "BY"):
        raise unsupported("PARTITIONED BY with a table name (the catalog gives the partition "
                          "columns)", st)
    shape.end()
    if lakehouse_table(lake, parts) is not None:
        return done(st.session)  # already a Delta table
    name = ".".join(parts)
    if not st.session.catalog.tableExists(name):
        raise HeadwaterError(
            "HW_TABLE_NOT_FOUND", f"CONVERT TO DELTA {name}: no such table.",
            "CONVERT TO DELTA converts a parquet table of the catalog, or parquet.`/path`.",
            "Check the name, or write CONVERT TO DELTA parquet.`/path/to/folder`.")
    info = {str(r[0]).strip(): str(r[1]) for r in raw_sql(
        st.session, f"DESCRIBE TABLE EXTENDED {parse_name(name).sql}").collect()
        if r[0] is not None and r[1] is not None}
    provider = info.get("Provider", "").lower()
    if provider != "parquet":
        raise DeltaAnalysisError(
            "HW_SQL_UNSUPPORTED", f"CONVERT TO DELTA only supports parquet tables, but you are "
            f"trying to convert a {provider or 'non-parquet'} source: {name}.",
            "Delta keeps the parquet files as they are and writes a log naming them.",
            "Rewrite the table as Delta: CREATE TABLE new_name AS SELECT * FROM " + name + ".",
            error_class="DELTA_CONVERT_NON_PARQUET_TABLE")
    if info.get("Type", "").upper() != "EXTERNAL":
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"CONVERT TO DELTA {name}: a managed parquet table of Spark's "
            "catalog cannot become a lakehouse table in place.",
            "Spark's catalog owns a managed table's folder (DROP TABLE deletes it), so "
            "headwater cannot hand the converted folder to the lakehouse without a copy.",
            f"Convert its folder (CONVERT TO DELTA parquet.`{info.get('Location', '<path>')}`) "
            f"and read it by path, or copy it: CREATE TABLE {name}_delta AS SELECT * FROM "
            f"{name}.")
    location = info["Location"]
    columns = st.session.catalog.listColumns(name)
    partitions = StructType([StructField(c.name, _parse_datatype_string(c.dataType))
                             for c in columns if c.isPartition])
    path = convert_parquet(location, partitions if partitions.fields else None,
                           collect_stats=stats)
    raw_sql(st.session, f"DROP TABLE {parse_name(name).sql}")  # external: the files stay
    lake.register_external(parse_name(name).qualified, path)
    return done(st.session)
