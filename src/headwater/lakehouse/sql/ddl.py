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

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.errors.exceptions.captured import capture_sql_exception
from pyspark.sql import DataFrame
from pyspark.sql.functions import lit
from pyspark.sql.types import StructField, StructType, _parse_datatype_json_string

from headwater.conf.location import location
from headwater.delta import clustering, column_defaults, column_mapping, definition, metadata
from headwater.delta.create import create_delta_table
from headwater.delta.defaults import with_defaults
from headwater.delta.generated import (
    GENERATION_EXPRESSION,
    IDENTITY_ALLOW_EXPLICIT_INSERT,
    IDENTITY_START,
    IDENTITY_STEP,
)
from headwater.delta.log import DeltaLog, normalize_uri, open_table
from headwater.delta.metadata import unset_table_properties
from headwater.delta.protocol import (
    Protocol,
    add_feature,
    enabled_features,
    set_properties_with_features,
)
from headwater.delta.schema import as_nullable
from headwater.delta.table_protocol import check_properties
from headwater.delta.write.checks import deltalake_writes
from headwater.delta.write.native import write_rows
from headwater.delta.write.replace_table import replace_native
from headwater.delta.write.request import WriteRequest
from headwater.errors import HeadwaterError, translated
from headwater.errors.delta import DeltaAnalysisError
from headwater.lakehouse.locations import check_location
from headwater.lakehouse.names import name_taken_error
from headwater.lakehouse.sql.statements import (
    Statement,
    option,
    seq,
    statement_session,
    target,
)
from headwater.spark.active import data_frame
from headwater.spark.jvm import dataframe_of_plan, java_map

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from headwater.lakehouse.sql.statements import SqlLakehouse


# Spark commands that change a table in its catalog (Spark's own command names).
_CHANGING = ("ALTER TABLE", "TRUNCATE TABLE", "LOAD DATA", "MSCK REPAIR TABLE", "REPAIR TABLE")


def done(spark: SparkSession) -> DataFrame:
    """What a DDL statement returns (an empty result, as before)."""
    return data_frame(spark, [], "result string")


def lakehouse_table(lake: SqlLakehouse, parts: list[str]) -> str | None:
    """The qualified name when ``parts`` names an existing lakehouse table, else None."""
    try:
        name = lake.resolve(parts, statement_session(lake))
    except HeadwaterError:
        return None
    return name.qualified if lake.exists(name.qualified) else None


def is_delta_path(parts: list[str]) -> bool:
    return len(parts) == 2 and parts[0].lower() == "delta"


def new_table_target(lake: SqlLakehouse, spark: SparkSession, parts: list[str],
                     where: Any, statement: str) -> tuple[str | None, str]:
    """(lakehouse name or None, folder) of a new table ``parts`` names (``delta.`path``` or a
    name) with an optional LOCATION ``where``: a table by path has its path as its location."""
    if is_delta_path(parts):
        path = normalize_uri(parts[1])
        if where is not None and normalize_uri(str(where)) != path:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED", f"{statement} delta.`{parts[1]}` LOCATION '{where}': "
                "a table by path has its path as its location.",
                "The two locations disagree.", "Leave the LOCATION clause out.")
        return None, path
    name = lake.resolve(parts, spark).qualified
    return name, normalize_uri(str(where)) if where is not None else str(lake.path(name))


# --- CREATE [OR REPLACE] TABLE [AS SELECT] --------------------------------------------------

def create(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """CREATE [OR REPLACE] TABLE name | delta.`path` [(cols)] [USING DELTA] [PARTITIONED BY]
    [LOCATION 'path'] [COMMENT] [TBLPROPERTIES] [AS SELECT]: a lakehouse table, an external
    table (a name with a LOCATION) or a table by path, as delta-spark creates them."""
    plan, spark = st.plan, st.session
    spec = plan.tableSpec()
    provider = option(spec.provider())
    if provider is not None and str(provider).lower() != "delta":
        return None  # USING parquet/csv/...: Spark's own table, not a lakehouse one
    parts = [str(p) for p in seq(plan.name().nameParts())]
    where = option(spec.location())
    name, path = new_table_target(lake, spark, parts, where, "CREATE TABLE")
    label = name or f"delta.`{parts[1]}`"
    _refuse_clauses(label, spec, st.text)
    replace = st.kind.startswith("Replace")
    partition_by, cluster_by = _layout(seq(plan.partitioning()), st.text)
    comment = option(spec.comment())
    properties = _map(spark, spec.properties())
    comment = properties.pop("comment", comment)
    if any(k.lower() == clustering.FEATURE_PROPERTY for k in properties):
        raise clustering.feature_property_error(label, "CREATE TABLE")
    named = name is not None and lake.exists(name)
    holder = lake.foreign_holder(name) if name is not None and not named else None
    if holder is not None:
        if plan.ignoreIfExists() and not replace:
            return done(spark)  # CREATE TABLE IF NOT EXISTS: the name exists
        raise name_taken_error(name, holder, "REPLACE TABLE" if replace else "CREATE TABLE")
    if replace and name is not None and named and where is not None:
        check_location(lake, name, path)  # before any write
    exists = named or DeltaLog(path).exists()
    if exists and not replace and not plan.ignoreIfExists():
        if named or where is None:
            raise DeltaAnalysisError(
                "HW_TABLE_EXISTS", f"Table {label} already exists.",
                "CREATE TABLE does not replace a table.",
                "Use CREATE TABLE IF NOT EXISTS, CREATE OR REPLACE TABLE, or another name.",
                error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
        # a name for an existing table at LOCATION (delta-spark: the table's own schema)
        _check_declared(st, path, label)
        lake.register_external(name, path)  # type: ignore[arg-type]
        return done(spark)
    if exists and not replace:
        if name is not None and not named:
            lake.register_external(name, path)
        elif name is not None:
            lake.register(name)
        return done(spark)
    if not exists:  # a new table: the session's properties.defaults.* apply
        properties = with_defaults(properties, spark)
    if replace and not exists and not plan.orCreate():
        raise DeltaAnalysisError(
            "HW_TABLE_NOT_FOUND", f"REPLACE TABLE {label}: the table did not exist.",
            "REPLACE TABLE replaces an existing table only.",
            "Use CREATE OR REPLACE TABLE to create it when missing.",
            error_class="TABLE_OR_VIEW_NOT_FOUND")
    if st.kind.endswith("AsSelect"):
        df = dataframe(spark, plan.query())
    else:
        schema = _schema(spark, seq(plan.columns()), label, st.text)
        if not replace:
            if name is not None and where is None:
                lake.create_table(name, schema, partition_by, comment, properties,
                                  declared=True, cluster_by=cluster_by)
            elif cluster_by is not None:  # the clustering domain: headwater's own commit
                location(path).parent.mkdir(parents=True, exist_ok=True)
                definition.create(spark, path, definition.TableDefinition(
                    schema, partition_by, cluster_by, comment, properties, parts[-1]), label)
                if name is not None:
                    lake.register_external(name, path)
            else:
                _check_new_columns(label, schema, partition_by)
                create_delta_table(path, schema, partition_by, parts[-1], comment, properties)
                if name is not None:
                    lake.register_external(name, path)
            return done(spark)
        df = data_frame(spark, [], schema)
    declared = not st.kind.endswith("AsSelect")  # REPLACE TABLE t (id INT NOT NULL)
    if name is not None and where is None:
        lake.replace(name, df, partition_by=partition_by, comment=comment, properties=properties,
                     declared=declared, cluster_by=cluster_by)
    elif cluster_by is not None:
        _replace_clustered(spark, path, df, definition.TableDefinition(
            df.schema if declared else as_nullable(df.schema), partition_by, cluster_by,
            comment, properties, parts[-1]), label)
        if name is not None:
            if named and not lake.is_external(name):
                lake.register(name)
            else:
                lake.register_external(name, path)
    else:
        _check_new_columns(label, df.schema, partition_by)
        replace_native(df, path, partition_by, name=parts[-1], description=comment,
                       configuration=properties, declared=declared)
        if name is not None:
            if named and not lake.is_external(name):
                lake.register(name)
            else:
                lake.register_external(name, path)
    return done(spark)


def _check_declared(st: Statement, path: str, label: str) -> None:
    """CREATE TABLE name (cols) LOCATION of an existing table: the declared columns must be the
    table's (delta-spark: DELTA_CREATE_TABLE_SCHEMA_MISMATCH); no columns means the table's."""
    declared = [str(c.name()).lower() for c in seq(st.plan.columns())] \
        if st.kind == "CreateTable" else []
    have = [f.name.lower() for f in open_table(path).schema().fields]
    if declared and declared != have:
        raise DeltaAnalysisError(
            "HW_TABLE_SCHEMA_INVALID", f"CREATE TABLE {label}: the declared columns "
            f"{declared} differ from those of the Delta table at {path}: {have}.",
            "A table created on an existing location takes that table's schema.",
            "Leave the column list out, or declare the table's columns.",
            error_class="DELTA_CREATE_TABLE_SCHEMA_MISMATCH")


def _check_new_columns(label: str, schema: StructType, partition_by: list[str]) -> None:
    missing = [c for c in partition_by if c not in schema.fieldNames()]
    if missing:
        raise HeadwaterError(
            "HW_SINK_PARTITION_MISMATCH", f"PARTITIONED BY names columns {missing} that "
            f"table {label} does not have.", "Partition columns must be columns of the table.",
            f"Use some of: {', '.join(schema.fieldNames())}.")


def dataframe(spark: SparkSession, plan: Any) -> DataFrame:
    """A DataFrame of a parsed query plan (analysed now: a wrong query fails before any write)."""
    return capture_sql_exception(dataframe_of_plan)(spark, plan)


def _refuse_clauses(name: str, spec: Any, text: str) -> None:
    clauses = {
        "OPTIONS": _has_options(spec),
        # EXTERNAL with a LOCATION is an external table, as a name with a LOCATION is
        "EXTERNAL without LOCATION": bool(spec.external()) and option(spec.location()) is None,
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
            "[PARTITIONED BY (col)] [LOCATION 'path'] [COMMENT '...'] [TBLPROPERTIES ('k'='v')] "
            "[AS SELECT ...].")


def _has_options(spec: Any) -> bool:
    options = spec.optionExpression().options()
    return options.size() > 0


def _layout(transforms: list[Any], text: str) -> tuple[list[str], list[str] | None]:
    """(partition columns, clustering columns or None) of CREATE TABLE's PARTITIONED BY /
    CLUSTER BY (Spark parses CLUSTER BY (a, b) as one ``cluster_by`` transform)."""
    clustered = [t for t in transforms if str(t.name()) == "cluster_by"]
    if not clustered:
        return _partitioning(transforms, text), None
    return [], [".".join(str(p) for p in ref.fieldNames())
                for t in clustered for ref in t.references()]


def _replace_clustered(spark: SparkSession, path: str, df: DataFrame,
                       table_def: definition.TableDefinition, label: str) -> None:
    """CREATE [OR REPLACE] TABLE delta.`path` | name LOCATION ... CLUSTER BY ... [AS SELECT]:
    the rows computed first (a failing query changes nothing), then the clustered definition
    in one commit and the rows in a second, as Lakehouse.replace does for managed tables."""
    with translated():
        df = df.localCheckpoint(eager=True)
    uri = normalize_uri(path)
    location(uri).parent.mkdir(parents=True, exist_ok=True)
    if DeltaLog(uri).exists():
        definition.replace(spark, uri, table_def, label, or_create=True)
    else:
        definition.create(spark, uri, table_def, label)
    if not df.isEmpty():
        write_rows(df, WriteRequest(path=uri))


def _partitioning(transforms: list[Any], text: str) -> list[str]:
    columns = []
    for transform in transforms:
        refs = transform.references()
        if str(transform.name()) != "identity" or len(refs) != 1:
            raise HeadwaterError(
                "HW_SQL_UNSUPPORTED",
                f"PARTITIONED BY {transform.name()}(...) is not supported (near {text[:60]!r}).",
                "Delta tables are partitioned by column values only.",
                "Partition by plain columns, e.g. PARTITIONED BY (event_date).")
        columns.append(str(refs[0].fieldNames()[0]))
    return columns


def _schema(spark: SparkSession, columns: list[Any], name: str, text: str) -> StructType:
    """The table's columns. Generated (``GENERATED ALWAYS AS (expr)``) and identity
    (``GENERATED ALWAYS|BY DEFAULT AS IDENTITY``) columns carry Delta's column metadata, as
    the table builder writes it (headwater.delta.generated), and so does a ``DEFAULT``
    (``CURRENT_DEFAULT``, headwater.delta.column_defaults); such a table is then created
    through headwater.delta.definition, which keeps NOT NULL too."""
    fields = []
    for col in columns:
        meta: dict[str, Any] = {}
        default = option(col.defaultValue())
        if default is not None:
            meta[column_defaults.CURRENT_DEFAULT] = column_defaults.checked_default(
                spark, str(col.name()), str(default.originalSQL()),
                _parse_datatype_json_string(col.dataType().json()), name)
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
    return java_map(spark, scala_map)


# --- DROP TABLE ---------------------------------------------------------------------------

def drop(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """DROP TABLE [IF EXISTS] t: the table, its files and its checkpoints are deleted (an
    external table's data is kept); views and other providers' tables are Spark's."""
    parts = [str(p) for p in seq(st.plan.child().nameParts())]
    name = lakehouse_table(lake, parts) or _stale_external(lake, parts)
    if name is not None:
        lake.drop(name)
        return done(st.session)
    if st.plan.ifExists() or st.session.catalog.tableExists(".".join(parts)):
        return None  # a view or another provider's table: Spark's
    raise HeadwaterError(
        "HW_TABLE_NOT_FOUND", f"DROP TABLE {'.'.join(parts)}: no such table in {lake.root}.",
        "Only existing tables can be dropped.", "Use DROP TABLE IF EXISTS.")


def _stale_external(lake: SqlLakehouse, parts: list[str]) -> str | None:
    """An external table whose data was deleted (``rm -r`` of its location): DROP TABLE still
    forgets the name, as delta-spark's catalog does."""
    try:
        name = lake.resolve(parts, statement_session(lake)).qualified
    except HeadwaterError:
        return None
    return name if lake.is_external(name) else None


# --- ALTER TABLE --------------------------------------------------------------------------

def rename(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t RENAME TO u: a table under the root moves to the new name's folder; an
    external table keeps its location under the new name."""
    found = target(st.plan)
    if found is None or lakehouse_table(lake, found[0]) is None:
        return None  # a view or another provider's table: Spark's
    new = [str(p) for p in seq(st.plan.newName())]
    lake.rename(".".join(found[0]), ".".join(new))
    return done(st.session)


def set_location(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t SET LOCATION 'path': the name now refers to the Delta table at that path
    (the old data is kept aside, as delta-spark does)."""
    found = target(st.plan)
    if found is None or lakehouse_table(lake, found[0]) is None:
        return None
    if option(st.plan.partitionSpec()) is not None:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", "ALTER TABLE ... PARTITION ... SET LOCATION is not "
            "supported: a Delta table's partitions have no locations of their own.",
            "Delta keeps every file of a table under the table's folder.",
            "Set the table's location instead.")
    lake.set_location(".".join(found[0]), str(st.plan.location()))
    return done(st.session)


def describe(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """DESCRIBE [EXTENDED] t of a Delta table as delta-spark prints it: its columns, then
    "# Partition Information" when partitioned (Spark knows neither for a Python data source),
    and "# Detailed Table Information" for EXTENDED."""
    found = target(st.plan)
    if found is None or "PARTITION" in st.text.upper():
        return None  # DESCRIBE t PARTITION (...): Spark's (and its error)
    path = table_location(lake, found[0])
    if path is None:
        return None
    table = open_table(path)
    meta = table.metadata()
    fields = {f.name: f for f in _spark_schema(table).fields}
    rows = [(f.name, f.dataType.simpleString(), f.metadata.get("comment"))
            for f in fields.values()]
    if meta.partition_columns:
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [(c, fields[c].dataType.simpleString(), fields[c].metadata.get("comment"))
                 for c in meta.partition_columns]
    if st.plan.isExtended():
        name = ".".join(found[0])
        rows += [("", "", ""), ("# Detailed Table Information", "", ""),
                 ("Name", name, ""), ("Location", path, ""), ("Provider", "delta", ""),
                 ("Comment", meta.description or "", ""),
                 ("Table Properties", "[" + ",".join(
                     f"{k}={v}" for k, v in sorted((meta.configuration or {}).items())) + "]",
                  "")]
    return data_frame(st.session, rows, "col_name string, data_type string, comment string")


def _spark_schema(table: Any) -> StructType:
    return StructType.fromJson(json.loads(table.schema().to_json()))


def table_location(lake: SqlLakehouse, parts: list[str]) -> str | None:
    """The folder of a lakehouse table or a ``delta.`path```, None for anything else."""
    if is_delta_path(parts):
        return normalize_uri(parts[1])
    name = lakehouse_table(lake, parts)
    return None if name is None else str(lake.path(name))


def set_properties(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t SET TBLPROPERTIES (...): Delta table properties (a `comment` is the
    table's description), one commit."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    properties = _map(st.session, st.plan.properties())
    if any(k.lower() == clustering.FEATURE_PROPERTY for k in properties):
        raise clustering.feature_property_error(altered.label, "ALTER TABLE")
    properties, defaults = column_defaults.feature_requested(properties, altered.label)
    check_properties(properties, altered.label)
    if defaults:  # recorded in the protocol, as delta-spark does, not as a property
        add_feature(altered.path, column_defaults.FEATURE)
    table = open_table(altered.path)
    # identity columns / clustering / column mapping: headwater commits (deltalake refuses)
    own = not deltalake_writes(table) or column_mapping.is_mapped(table)
    if column_mapping.requested_mode(properties) is not None:
        # column mapping enabled: field ids and physical names with the protocol, one commit
        if "comment" in properties:
            metadata.set_description(altered.path, properties.pop("comment"))
        column_mapping.enable(altered.path, properties, altered.label)
        return altered.done(lake, st)
    if "comment" in properties:  # Spark's table comment is Delta's description
        if own:
            metadata.set_description(altered.path, properties.pop("comment"))
        else:
            table.alter.set_table_description(properties.pop("comment"))
    # deltalake's set_table_properties lists variantType in every table-features protocol
    # it writes (and when it upgrades one for deletion vectors): headwater's own commit does
    # what delta-spark does, on local tables
    enabling = enabled_features(properties)
    uri = normalize_uri(altered.path)
    listed = Protocol.of_table(table).lists_writers
    local = "://" not in uri or uri.startswith("file://")
    own_features = [f for f in enabling if f in ("typeWidening", "rowTracking")]
    if own_features and not local:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"SET TBLPROPERTIES of {altered.label}: the "
            f"{own_features[0]} feature is written by headwater's own commit, which needs "
            "local or mounted storage.", "deltalake (the engine on object stores) refuses "
            "the feature.", "Keep the table on local or mounted storage, or leave the "
            "property out.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    if properties and (enabling or listed) and local \
            and not any(k.lower().startswith("delta.columnmapping.") for k in properties):
        set_properties_with_features(altered.path, properties, enabling)
    elif properties and own:
        metadata.set_properties(altered.path, properties,
                                Protocol.of_table(open_table(altered.path)).names())
    elif properties:
        table.alter.set_table_properties(properties, raise_if_not_exists=False)
    return altered.done(lake, st)


def cluster_by(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t CLUSTER BY (cols) | NONE: the table's clustering columns, one commit
    (headwater.delta.clustering.alter); files are not rewritten: OPTIMIZE clusters new data
    by the new columns, OPTIMIZE FULL every file."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    spec = option(st.plan.clusterBySpec())
    columns = [] if spec is None else [
        ".".join(str(p) for p in ref.fieldNames()) for ref in seq(spec.columnNames())]
    clustering.alter(altered.path, columns, altered.label)
    return altered.done(lake, st)


def unset_properties(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] (...): removes table properties."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    keys = [str(k) for k in seq(st.plan.propertyKeys())]
    have = open_table(altered.path).metadata().configuration or {}
    missing = [k for k in keys if k not in have]
    if missing and not st.plan.ifExists():
        raise HeadwaterError(
            "HW_TABLE_PROPERTY_NOT_FOUND",
            f"ALTER TABLE {altered.label} UNSET TBLPROPERTIES: {missing} are not set on the "
            "table.", "Only properties the table has can be removed.",
            f"Use UNSET TBLPROPERTIES IF EXISTS; the table has: {sorted(have) or 'none'}.")
    column_mapping.check_unset(keys, open_table(altered.path), altered.label)
    if len(missing) < len(keys):
        unset_table_properties(altered.path, keys)
    return altered.done(lake, st)


def comment_on(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """COMMENT ON TABLE t IS '...': the Delta table's description."""
    altered = altered_table(lake, st)
    if altered is None:
        return None
    table = open_table(altered.path)
    comment = st.plan.comment()
    # identity columns / clustering / column mapping: headwater commits
    if not deltalake_writes(table) or column_mapping.is_mapped(table):
        metadata.set_description(altered.path, None if comment is None else str(comment))
    else:
        table.alter.set_table_description(str(comment))
    return altered.done(lake, st)


@dataclass(frozen=True)
class Altered:
    """The Delta table an ALTER statement changes: a lakehouse table (``name``) or a
    ``delta.`path``` (no name)."""

    name: str | None
    path: str

    @property
    def label(self) -> str:
        return self.name or f"delta.`{self.path}`"

    def done(self, lake: SqlLakehouse, st: Statement) -> DataFrame:
        if self.name is not None:
            lake.register(self.name)  # the catalog copy gets the new schema
        return done(st.session)


def altered_table(lake: SqlLakehouse, st: Statement) -> Altered | None:
    found = target(st.plan)
    if found is None:
        return None
    if is_delta_path(found[0]):
        path = normalize_uri(found[0][1])
        if not DeltaLog(path).exists():
            raise DeltaAnalysisError(
                "HW_DELTA_TABLE_NOT_FOUND", f"{found[1] or st.kind}: {found[0][1]} is not a "
                "Delta table.", "delta.`path` names a folder with a _delta_log.",
                "Check the path.", error_class="DELTA_MISSING_DELTA_TABLE")
        return Altered(None, path)
    name = lakehouse_table(lake, found[0])
    return None if name is None else Altered(name, str(lake.path(name)))


def insert(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """INSERT INTO | OVERWRITE delta.`path` [(cols)] query: Spark cannot resolve a table by path
    for a Python data source, so the query is written with ``format("delta")``: by position
    (or by the listed columns; unlisted ones are NULL), cast to the table's types, as Spark's
    INSERT does. Lakehouse tables by name are Spark's own INSERT (the per-table source)."""
    plan, spark = st.plan, st.session
    relation = plan.table()
    if relation.getClass().getSimpleName() != "UnresolvedRelation":
        return None
    parts = [str(p) for p in seq(relation.multipartIdentifier())]
    if not is_delta_path(parts):
        return None
    path = normalize_uri(parts[1])
    if not DeltaLog(path).exists():
        raise DeltaAnalysisError(
            "HW_DELTA_TABLE_NOT_FOUND", f"INSERT INTO delta.`{parts[1]}`: there is no Delta "
            "table at that path.", "INSERT adds rows to an existing table.",
            "Create it first (CREATE TABLE delta.`path` (...) or df.write.format('delta')).",
            error_class="DELTA_MISSING_DELTA_TABLE")
    if plan.partitionSpec().nonEmpty():
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", "INSERT ... PARTITION (...) is not supported on "
            f"delta.`{parts[1]}` (near {st.text[:60]!r}).",
            "Delta tables take partition values from the rows themselves.",
            "Leave the PARTITION clause out and select the partition columns.")
    table = _spark_schema(open_table(path))
    df = dataframe(spark, plan.query())
    listed = [str(c) for c in seq(plan.userSpecifiedCols())]
    names = listed or ([f.name for f in table.fields if f.name in df.columns]
                       if plan.byName() else [f.name for f in table.fields])
    if len(names) != len(df.columns) and not plan.byName():
        raise DeltaAnalysisError(
            "HW_SINK_SCHEMA_MISMATCH", f"INSERT INTO delta.`{parts[1]}`: the query has "
            f"{len(df.columns)} columns, the {'list' if listed else 'table'} has {len(names)}.",
            "INSERT matches columns by position.", "Select one value per column.",
            error_class="INSERT_COLUMN_ARITY_MISMATCH")
    if not plan.byName():
        df = df.toDF(*names)
    df = df.select(*[(df[f.name] if f.name in names else lit(None)).cast(f.dataType)
                     .alias(f.name) for f in table.fields])
    df.write.format("delta").mode("overwrite" if plan.overwrite() else "append").save(path)
    return done(spark)


def guard(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
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
