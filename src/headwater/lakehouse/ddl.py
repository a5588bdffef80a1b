"""DDL on lakehouse tables, read from Spark's parsed plans (handlers of the SQL router).

The Delta table is the truth and Spark's catalog entry a copy: every statement that changes a
table changes the Delta table first and then registers the catalog entry again. A statement
that cannot be applied to the Delta table is refused with an HW_ error naming it, never applied
to the catalog alone. Statements on names that are not lakehouse tables (temp views, tables of
another provider) go to Spark unchanged (the handler returns None).

CREATE OR REPLACE computes the query first and replaces the table in one Delta commit
(:meth:`Lakehouse.replace`), so the old versions stay readable and a failing query changes
nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError
from headwater.lakehouse.names import parse_name
from headwater.lakehouse.statements import (
    ANY_KIND,
    Statement,
    handles,
    not_supported_yet,
    option,
    seq,
    target,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from headwater.lakehouse import Lakehouse

# Spark commands that change a table in its catalog (Spark's own command names).
_CHANGING = ("ALTER TABLE", "TRUNCATE TABLE", "LOAD DATA", "MSCK REPAIR TABLE", "REPAIR TABLE")


def done(spark: SparkSession) -> DataFrame:
    """What a DDL statement returns (an empty result, as before)."""
    return spark.createDataFrame([], "result string")


def lakehouse_table(lake: Lakehouse, parts: list[str]) -> str | None:
    """The qualified name when ``parts`` names an existing lakehouse table, else None."""
    try:
        name = parse_name(".".join(parts))
    except HeadwaterError:
        return None
    return name.qualified if lake.exists(name.qualified) else None


def is_delta_path(parts: list[str]) -> bool:
    return len(parts) == 2 and parts[0].lower() == "delta"


# --- CREATE [OR REPLACE] TABLE [AS SELECT] --------------------------------------------------

@handles("CreateTable", "CreateTableAsSelect", "ReplaceTable", "ReplaceTableAsSelect")
def create(lake: Lakehouse, st: Statement) -> DataFrame | None:
    plan, spark = st.plan, st.session
    spec = plan.tableSpec()
    provider = option(spec.provider())
    if provider is not None and str(provider).lower() != "delta":
        return None  # USING parquet/csv/...: Spark's own table, not a lakehouse one
    parts = [str(p) for p in seq(plan.name().nameParts())]
    if is_delta_path(parts):
        raise not_supported_yet("CREATE TABLE delta.`path`", st.text)
    name = parse_name(".".join(parts)).qualified
    _refuse_clauses(name, spec, st.text)
    replace = st.kind.startswith("Replace")
    partition_by = _partitioning(seq(plan.partitioning()), st.text)
    comment = option(spec.comment())
    properties = _map(spark, spec.properties())
    comment = properties.pop("comment", comment)
    exists = lake.exists(name)
    if exists and not replace and not plan.ignoreIfExists():
        raise HeadwaterError(
            "HW_TABLE_EXISTS", f"Table {name} already exists in {lake.root}.",
            "CREATE TABLE does not replace a table.",
            "Use CREATE TABLE IF NOT EXISTS, CREATE OR REPLACE TABLE, or another name.")
    if exists and not replace:
        lake.register(name)
        return done(spark)
    if replace and not exists and not plan.orCreate():
        raise HeadwaterError(
            "HW_TABLE_NOT_FOUND", f"REPLACE TABLE {name}: no such table in {lake.root}.",
            "REPLACE TABLE replaces an existing table only.",
            "Use CREATE OR REPLACE TABLE to create it when missing.")
    if st.kind.endswith("AsSelect"):
        df = dataframe(spark, plan.query())
    else:
        schema = _schema(seq(plan.columns()), name, st.text)
        if not replace:
            lake.create_table(name, schema, partition_by, comment, properties)
            return done(spark)
        df = spark.createDataFrame([], schema)
    lake.replace(name, df, partition_by=partition_by, comment=comment, properties=properties)
    return done(spark)


def dataframe(spark: SparkSession, plan: Any) -> DataFrame:
    """A DataFrame of a parsed query plan (analysed now: a wrong query fails before any write)."""
    from pyspark.errors.exceptions.captured import capture_sql_exception
    from pyspark.sql import DataFrame

    datasets = spark._jvm.org.apache.spark.sql.classic.Dataset
    jdf = capture_sql_exception(datasets.ofRows)(spark._jsparkSession, plan)
    return DataFrame(jdf, spark)


def _refuse_clauses(name: str, spec: Any, text: str) -> None:
    clauses = {
        "LOCATION": option(spec.location()),
        "OPTIONS": _has_options(spec),
        "EXTERNAL": bool(spec.external()),
        "ROW FORMAT / STORED AS": option(spec.serde()),
    }
    used = [clause for clause, value in clauses.items() if value]
    if used:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED",
            f"CREATE TABLE {name}: {', '.join(used)} cannot be used for a lakehouse table "
            f"(near {text[:60]!r}).",
            "Lakehouse tables are Delta tables that headwater keeps under the lakehouse root.",
            "Leave the clause out; write CREATE TABLE name (col TYPE, ...) [USING DELTA] "
            "[PARTITIONED BY (col)] [COMMENT '...'] [TBLPROPERTIES ('k'='v')] [AS SELECT ...].")


def _has_options(spec: Any) -> bool:
    options = spec.optionExpression().options()
    return options.size() > 0


def _partitioning(transforms: list[Any], text: str) -> list[str]:
    columns = []
    for transform in transforms:
        refs = transform.references()
        if str(transform.name()) != "identity" or len(refs) != 1:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED",
                f"PARTITIONED BY {transform.describe()} is not supported (near {text[:60]!r}).",
                "Delta tables are partitioned by column values only.",
                "Partition by plain columns, e.g. PARTITIONED BY (event_date).")
        columns.append(str(refs[0].fieldNames()[0]))
    return columns


def _schema(columns: list[Any], name: str, text: str) -> StructType:
    """The table's columns. Generated (``GENERATED ALWAYS AS (expr)``) and identity
    (``GENERATED ALWAYS|BY DEFAULT AS IDENTITY``) columns carry Delta's column metadata, as
    the table builder writes it (headwater.delta.generated); the table is then created
    through headwater.delta.definition, which keeps NOT NULL too."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_json_string

    from headwater.delta.generated import (
        GENERATION_EXPRESSION,
        IDENTITY_ALLOW_EXPLICIT_INSERT,
        IDENTITY_START,
        IDENTITY_STEP,
    )

    fields = []
    for col in columns:
        if option(col.defaultValue()) is not None:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED",
                f"Column {col.name()} of {name} uses DEFAULT, which headwater does not "
                f"support yet (near {text[:60]!r}).",
                "Column defaults need Delta's allowColumnDefaults writer feature.",
                "Declare the column without DEFAULT and give its value in the writes.")
        meta: dict[str, Any] = {}
        comment = option(col.comment())
        if comment:
            meta["comment"] = str(comment)
        generated = option(col.generationExpression())
        if generated is not None:
            meta[GENERATION_EXPRESSION] = str(generated.originalSQL())
        identity = option(col.identityColumnSpec())
        if identity is not None:
            meta[IDENTITY_ALLOW_EXPLICIT_INSERT] = bool(identity.isAllowExplicitInsert())
            meta[IDENTITY_START] = int(identity.getStart())
            meta[IDENTITY_STEP] = int(identity.getStep())
        fields.append(StructField(str(col.name()), _parse_datatype_json_string(
            col.dataType().json()), bool(col.nullable()), meta))
    return StructType(fields)


def _map(spark: SparkSession, scala_map: Any) -> dict[str, str]:
    converted = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_map)
    return {str(k): str(v) for k, v in dict(converted).items()}


# --- DROP TABLE ---------------------------------------------------------------------------

@handles("DropTable")
def drop(lake: Lakehouse, st: Statement) -> DataFrame | None:
    parts = [str(p) for p in seq(st.plan.child().nameParts())]
    name = lakehouse_table(lake, parts)
    if name is not None:
        lake.drop(name)
        return done(st.session)
    if st.plan.ifExists() or st.session.catalog.tableExists(".".join(parts)):
        return None  # a view or another provider's table: Spark's
    raise HeadwaterError(
        "HW_TABLE_NOT_FOUND", f"DROP TABLE {'.'.join(parts)}: no such table in {lake.root}.",
        "Only existing tables can be dropped.", "Use DROP TABLE IF EXISTS.")


# --- ALTER TABLE --------------------------------------------------------------------------

@handles("AddColumns")
def add_columns(lake: Lakehouse, st: Statement) -> DataFrame | None:
    from deltalake.schema import Field
    from pyspark.sql.types import StructField, StructType, _parse_datatype_json_string

    from headwater.delta.log import open_table
    from headwater.delta.schema import arrow_schema

    name = _altered(lake, st)
    if name is None:
        return None
    table = open_table(lake.path(name))
    have = {f.name.lower() for f in table.schema().fields}
    fields = []
    for col in seq(st.plan.columnsToAdd()):
        parts = [str(p) for p in seq(col.name())]
        problem = ("a nested column" if len(parts) > 1 else
                   "FIRST/AFTER" if option(col.position()) is not None else
                   "NOT NULL" if not col.nullable() else
                   "DEFAULT" if option(col.default()) is not None else
                   "an existing name" if parts[0].lower() in have else None)
        if problem:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED",
                f"ALTER TABLE {name} ADD COLUMNS: {'.'.join(parts)} uses {problem}, which "
                "headwater cannot add to the Delta table.",
                "Columns are added at the end, nullable, without defaults, with new names "
                "(old rows read them as NULL).",
                "Add a plain nullable top-level column with a new name.")
        fields.append(StructField(parts[0], _parse_datatype_json_string(col.dataType().json())))
    arrow = arrow_schema(StructType(fields))
    table.alter.add_columns([Field.from_arrow(arrow.field(f.name)) for f in fields])
    lake.register(name)
    return done(st.session)


@handles("SetTableProperties")
def set_properties(lake: Lakehouse, st: Statement) -> DataFrame | None:
    from headwater.delta.log import open_table

    name = _altered(lake, st)
    if name is None:
        return None
    properties = _map(st.session, st.plan.properties())
    table = open_table(lake.path(name))
    if "comment" in properties:  # Spark's table comment is Delta's description
        table.alter.set_table_description(properties.pop("comment"))
    if properties:
        table.alter.set_table_properties(properties, raise_if_not_exists=False)
    lake.register(name)
    return done(st.session)


@handles("UnsetTableProperties")
def unset_properties(lake: Lakehouse, st: Statement) -> DataFrame | None:
    from headwater.delta.log import open_table
    from headwater.delta.metadata import unset_table_properties

    name = _altered(lake, st)
    if name is None:
        return None
    keys = [str(k) for k in seq(st.plan.propertyKeys())]
    have = open_table(lake.path(name)).metadata().configuration or {}
    missing = [k for k in keys if k not in have]
    if missing and not st.plan.ifExists():
        raise HeadwaterError(
            "HW_TABLE_PROPERTY_NOT_FOUND",
            f"ALTER TABLE {name} UNSET TBLPROPERTIES: {missing} are not set on the table.",
            "Only properties the table has can be removed.",
            f"Use UNSET TBLPROPERTIES IF EXISTS; the table has: {sorted(have) or 'none'}.")
    if len(missing) < len(keys):
        unset_table_properties(lake.path(name), keys)
    lake.register(name)
    return done(st.session)


@handles("CommentOnTable")
def comment_on(lake: Lakehouse, st: Statement) -> DataFrame | None:
    from headwater.delta.log import open_table

    name = _altered(lake, st)
    if name is None:
        return None
    open_table(lake.path(name)).alter.set_table_description(str(st.plan.comment()))
    lake.register(name)
    return done(st.session)


def _altered(lake: Lakehouse, st: Statement) -> str | None:
    found = target(st.plan)
    if found is None:
        return None
    if is_delta_path(found[0]):
        raise not_supported_yet(f"{found[1] or st.kind} on delta.`path`", st.text)
    return lakehouse_table(lake, found[0])


@handles(ANY_KIND)
def guard(lake: Lakehouse, st: Statement) -> DataFrame | None:
    """Refuse what Spark would apply to its catalog alone, or cannot run on a lakehouse table."""
    found = target(st.plan) if st.plan is not None else None
    if found is None:
        return None
    parts, command = found
    mine = is_delta_path(parts) or lakehouse_table(lake, parts) is not None
    if mine and command.upper().startswith(_CHANGING):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED",
            f"{command} is not supported on lakehouse table {'.'.join(parts)}.",
            "headwater applies ALTER TABLE to the Delta table itself (ADD COLUMNS, SET/UNSET "
            "TBLPROPERTIES); Spark alone would change only its catalog copy, and the two "
            "would disagree.",
            "Rewrite the table instead: CREATE OR REPLACE TABLE name AS SELECT ... with the "
            "new columns (one commit, history kept).")
    return None
