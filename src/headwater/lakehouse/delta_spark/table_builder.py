"""delta-spark's table builder: ``DeltaTable.create / createIfNotExists / replace /
createOrReplace(spark)`` ... ``.execute()``, on headwater.

delta-spark's Python builder checks its arguments (TypeError / ValueError with delta-spark's
words, kept here) and hands each call to a Scala ``DeltaTableBuilder`` held in ``_jbuilder``,
which turns them into a CREATE / REPLACE TABLE. Here ``_jbuilder`` is :class:`TableSpec`, a
Python object with the Scala builder's methods, so code that calls ``_jbuilder`` directly
(delta-spark's own tests pass it a Scala ``Seq`` from ``_to_seq``) keeps working; nothing else
of the JVM is involved until ``execute()`` asks Spark's parser for the column types.

Where the table goes: ``tableName`` alone, a table of the session's lakehouse
(``headwater.Lakehouse.of(spark)``); ``location`` alone, a Delta table at that path
(``tableName("delta.`/path`")`` says the same); both, an external table: the lakehouse's name
for a table at that path. The table itself is written by :mod:`headwater.delta.definition`
(one commit; NOT NULL, comments, generated and identity columns, clustering kept).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, TypeVar, Union, overload

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, StructField, StructType

from headwater.delta import definition
from headwater.delta.generated import (
    GENERATION_EXPRESSION,
    IDENTITY_ALLOW_EXPLICIT_INSERT,
    IDENTITY_START,
    IDENTITY_STEP,
)
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.lakehouse.catalog import lakehouse_of
from headwater.lakehouse.locations import check_location
from headwater.lakehouse.names import TableName, parse_name
from headwater.spark.jvm import JavaObject

if TYPE_CHECKING:
    from headwater.lakehouse.catalog import AttachedLakehouse

# The table a builder returns (DeltaTable: its module imports this one, so this one names it
# only through the type its caller gives).
T = TypeVar("T")

Mode = Literal["create", "createIfNotExists", "replace", "createOrReplace"]


@dataclass
class IdentityGenerator:
    """An identity column's generator: ``addColumn("id", "BIGINT",
    generatedAlwaysAs=IdentityGenerator(start=1, step=1))``. start: the first value
    (default 1); step: the difference between values (default 1; not 0)."""

    start: int = 1
    step: int = 1


@dataclass(frozen=True)
class ColumnSpec:
    """One ``addColumn``: its type as given (SQL text or a DataType) and its settings."""

    name: str
    data_type: str | DataType
    nullable: bool = True
    generated_as: str | None = None
    identity: IdentityGenerator | None = None
    allow_explicit_insert: bool = False
    comment: str | None = None

    def build(self, parse: Callable[[str], DataType]) -> StructField:
        """The column as a Delta schema field (delta-spark's DeltaColumnBuilder.build)."""
        data_type = parse(self.data_type) if isinstance(self.data_type, str) \
            else self.data_type
        meta: dict[str, Any] = {}
        if self.generated_as is not None:
            meta[GENERATION_EXPRESSION] = self.generated_as
        if self.identity is not None:
            if data_type.typeName() != "long":
                raise definition.identity_type_error(self.name, type(data_type).__name__)
            meta[IDENTITY_ALLOW_EXPLICIT_INSERT] = self.allow_explicit_insert
            meta[IDENTITY_START] = int(self.identity.start)
            meta[IDENTITY_STEP] = int(self.identity.step)
        if self.comment is not None:
            meta["comment"] = self.comment
        return StructField(self.name, data_type, self.nullable, meta)


@dataclass
class TableSpec(Generic[T]):
    """What the builder was told: the Scala ``DeltaTableBuilder``'s methods and state.

    open_table: makes the returned table from (session, path), so this module needs no
    import of :class:`~headwater.lakehouse.delta_spark.delta_table.DeltaTable` (which imports it)."""

    spark: SparkSession
    mode: Mode
    open_table: Callable[[SparkSession, str], T]
    identifier: str | None = None
    path: str | None = None
    table_comment: str | None = None
    columns: list[ColumnSpec | StructField] = field(default_factory=list)
    partitioning: list[str] = field(default_factory=list)
    clustering: list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def tableName(self, identifier: str) -> TableSpec[T]:  # noqa: N802 (delta-spark's name)
        self.identifier = identifier
        return self

    def location(self, location: str) -> TableSpec[T]:
        self.path = location
        return self

    def comment(self, comment: str) -> TableSpec[T]:
        self.table_comment = comment
        return self

    def addColumn(self, column: ColumnSpec | StructField) -> TableSpec[T]:  # noqa: N802
        self.columns.append(column)
        return self

    def addColumns(self, schema: StructType) -> TableSpec[T]:  # noqa: N802
        self.columns.extend(schema.fields)
        return self

    def partitionedBy(self, *columns: str | JavaObject) -> TableSpec[T]:  # noqa: N802
        self.partitioning = _names(columns)
        self._check_partitioning()
        return self

    def clusterBy(self, *columns: str | JavaObject) -> TableSpec[T]:  # noqa: N802
        self.clustering = _names(columns)
        self._check_partitioning()
        return self

    def property(self, key: str, value: str) -> TableSpec[T]:
        self.properties[key] = value
        return self

    def _check_partitioning(self) -> None:
        if self.partitioning and self.clustering:
            raise definition.cluster_and_partition_error()

    def execute(self) -> T:
        """Create / replace the table as the mode says; the table, as delta-spark returns it."""
        target = self._target()
        schema = StructType([c if isinstance(c, StructField) else c.build(self._parse)
                             for c in self.columns])
        table_def = definition.TableDefinition(
            schema=schema, partition_by=list(self.partitioning), cluster_by=self.clustering,
            description=self.table_comment, properties=dict(self.properties),
            name=target.name.table if target.name else None)
        exists = target.exists()
        if exists and self.mode == "create":
            raise target.already_exists()
        if not exists and self.mode == "replace":
            raise target.missing()
        named = target.name is not None and target.lake is not None and target.lake.exists(
            target.name.qualified)
        if named and self.mode == "createIfNotExists":  # Spark: nothing to do, nor to register
            assert target.lake is not None and target.name is not None
            return self.open_table(self.spark, target.lake.path(target.name.qualified))
        if named and target.external:  # before any write: the name keeps its table
            assert target.lake is not None and target.name is not None
            check_location(target.lake, target.name.qualified, target.path)
        if exists and self.mode in ("replace", "createOrReplace"):
            definition.replace(self.spark, target.path, table_def, target.label,
                               or_create=self.mode == "createOrReplace")
        elif not exists:
            definition.create(self.spark, target.path, table_def, target.label)
        target.register()
        return self.open_table(self.spark, target.path)

    def _parse(self, text: str) -> DataType:
        """A column type through Spark's parser (ParseException when it cannot read it)."""
        return DataType.fromDDL(text)

    def _target(self) -> _Target:
        if self.identifier is None and self.path is None:
            raise DeltaAnalysisError(
                "HW_TABLE_DEFINITION_INVALID", "Table name or location has to be specified.",
                "The builder creates a table of the lakehouse (tableName), a Delta table at a "
                "path (location), or both (an external table).",
                "Call .tableName(name) or .location(path) before execute().",
                error_class="DELTA_CREATE_TABLE_MISSING_TABLE_NAME_OR_LOCATION")
        identifier = (self.identifier or "").strip()
        if identifier.lower().startswith("delta.`") and identifier.endswith("`"):
            by_path = identifier[len("delta.`"):-1]
            if self.path is not None and self.path != by_path:
                raise DeltaAnalysisError(
                    "HW_TABLE_DEFINITION_INVALID", "Creating path-based Delta table with a "
                    f"different location isn't supported. Identifier: {identifier}, Location: "
                    f"{self.path}", "delta.`path` names the table by its location already.",
                    "Give the path once: tableName('delta.`/p`') or location('/p').",
                    error_class="DELTA_CREATE_TABLE_IDENTIFIER_LOCATION_MISMATCH")
            return _Target(None, normalize_uri(by_path), None)
        if not identifier:
            assert self.path is not None
            return _Target(None, normalize_uri(self.path), None)
        lake = lakehouse_of(self.spark)
        name = parse_name(identifier) if lake is None else lake.resolve(identifier, self.spark)
        if lake is None:
            raise HeadwaterError(
                "HW_LAKEHOUSE_NOT_ATTACHED", f"DeltaTable builder: table {identifier!r} needs "
                "a lakehouse, and none is attached to this session.",
                "headwater keeps table names in a lakehouse (no metastore).",
                "Start the session with headwater.spark_session(lakehouse=...), or give only "
                ".location(path).")
        if self.path is not None:
            return _Target(name, normalize_uri(self.path), lake, external=True)
        return _Target(name, normalize_uri(lake.path(name.qualified)), lake)


@dataclass(frozen=True)
class _Target:
    """Where a builder's table goes: a path, and the lakehouse name it has (if any)."""

    name: TableName | None
    path: str
    lake: AttachedLakehouse | None
    external: bool = False

    @property
    def label(self) -> str:
        return self.name.qualified if self.name else f"delta.`{self.path}`"

    @property
    def quoted(self) -> str:
        assert self.name is not None
        return f"`spark_catalog`.`{self.name.schema or 'default'}`.`{self.name.table}`"

    def exists(self) -> bool:
        if self.name is not None and self.lake is not None and self.lake.exists(
                self.name.qualified):
            return True
        return DeltaLog(self.path).exists()

    def already_exists(self) -> HeadwaterError:
        if self.name is None:
            return DeltaAnalysisError(
                "HW_TABLE_EXISTS", f"Table delta.`{self.path}` already exists.",
                "DeltaTable.create makes a new table only.",
                "Use createIfNotExists, replace or createOrReplace, or another location.",
                error_class="DELTA_TABLE_ALREADY_EXISTS")
        return DeltaAnalysisError(
            "HW_TABLE_EXISTS", f"Cannot create table or view {self.quoted} because it already "
            "exists.", "DeltaTable.create makes a new table only.",
            "Choose a different name, drop or replace the existing object, or use "
            "createIfNotExists to tolerate pre-existing objects.",
            error_class="TABLE_OR_VIEW_ALREADY_EXISTS")

    def missing(self) -> HeadwaterError:
        if self.name is None:
            return DeltaAnalysisError(
                "HW_TABLE_NOT_FOUND", f"Table delta.`{self.path}` cannot be replaced as it "
                "does not exist.", "DeltaTable.replace replaces an existing table only.",
                "Use createOrReplace to create the table.",
                error_class="DELTA_CANNOT_REPLACE_MISSING_TABLE")
        return DeltaAnalysisError(
            "HW_TABLE_NOT_FOUND", f"The table or view {self.quoted} cannot be found.",
            "DeltaTable.replace replaces an existing table only.",
            "Verify the spelling, or use createOrReplace to create the table.",
            error_class="TABLE_OR_VIEW_NOT_FOUND")

    def register(self) -> None:
        if self.name is None or self.lake is None:
            return
        if self.external:
            self.lake.register_external(self.name.qualified, self.path)
        else:
            self.lake.register(self.name.qualified)


def _names(columns: Iterable[str | JavaObject]) -> list[str]:
    """Column names, from names or from one Scala Seq / Java collection of names."""
    out: list[str] = []
    for column in columns:
        if isinstance(column, JavaObject):
            if column.getClass().getName().startswith("scala."):
                out.extend(str(column.apply(i)) for i in range(column.size()))
            else:
                out.extend(str(c) for c in column)
        else:
            out.append(str(column))
    return out


class DeltaTableBuilder(Generic[T]):
    """Builder to specify how to create / replace a Delta table (delta-spark's
    ``DeltaTableBuilder``): the table name or the location (one is needed), columns,
    partitioning or clustering columns, comment and properties, then ``execute()``.

    Use ``DeltaTable.create``, ``createIfNotExists``, ``replace`` or ``createOrReplace``::

        DeltaTable.create(spark).tableName("events") \\
            .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator()) \\
            .addColumn("day", "DATE", nullable=False) \\
            .addColumn("month", "INT", generatedAlwaysAs="month(day)") \\
            .partitionedBy("month").execute()
    """

    def __init__(self, spark: SparkSession, jbuilder: TableSpec[T]) -> None:
        self._spark = spark
        self._jbuilder = jbuilder

    def _raise_type_error(self, msg: str, objs: Iterable[Any]) -> NoReturn:
        error = msg
        for obj in objs:
            error += f" Found {obj} with type {type(obj)}"
        raise TypeError(error)

    def _check_identity_column_spec(self, identity_generator: IdentityGenerator) -> None:
        if identity_generator.step == 0:
            raise ValueError("Column identity generation requires step to be non-zero.")

    def tableName(self, identifier: str) -> DeltaTableBuilder[T]:  # noqa: N802
        """The table's name, optionally qualified: [database_name.]table_name."""
        if type(identifier) is not str:
            self._raise_type_error("Identifier must be str.", [identifier])
        self._jbuilder = self._jbuilder.tableName(identifier)
        return self

    def location(self, location: str) -> DeltaTableBuilder[T]:
        """The folder (or object-store path) holding the table's data."""
        if type(location) is not str:
            self._raise_type_error("Location must be str.", [location])
        self._jbuilder = self._jbuilder.location(location)
        return self

    def comment(self, comment: str) -> DeltaTableBuilder[T]:
        """The table's comment (Delta's description)."""
        if type(comment) is not str:
            self._raise_type_error("Table comment must be str.", [comment])
        self._jbuilder = self._jbuilder.comment(comment)
        return self

    def addColumn(  # noqa: N802 (delta-spark's names, here and below)
        self,
        colName: str,  # noqa: N803
        dataType: str | DataType,  # noqa: N803
        nullable: bool = True,
        generatedAlwaysAs: str | IdentityGenerator | None = None,  # noqa: N803
        generatedByDefaultAs: IdentityGenerator | None = None,  # noqa: N803
        comment: str | None = None,
    ) -> DeltaTableBuilder[T]:
        """A column: its name and type (SQL text such as ``"BIGINT"`` or a DataType);
        nullable (default True); generatedAlwaysAs: a SQL expression over the other columns
        (a generated column) or an IdentityGenerator (values always generated);
        generatedByDefaultAs: an IdentityGenerator whose values may also be given;
        comment: the column's comment."""
        if type(colName) is not str:
            self._raise_type_error("Column name must be str.", [colName])
        if type(dataType) is not str and not isinstance(dataType, DataType):
            self._raise_type_error("Column data type must be str or DataType.", [dataType])
        if type(nullable) is not bool:
            self._raise_type_error("Column nullable must be bool.", [nullable])
        if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
            raise ValueError(
                "generatedByDefaultAs and generatedAlwaysAs cannot both be set.",
                [generatedByDefaultAs, generatedAlwaysAs])
        generated_as, identity, explicit = None, None, False
        if generatedAlwaysAs is not None:
            if type(generatedAlwaysAs) is str:
                generated_as = generatedAlwaysAs
            elif isinstance(generatedAlwaysAs, IdentityGenerator):
                self._check_identity_column_spec(generatedAlwaysAs)
                identity = generatedAlwaysAs
            else:
                self._raise_type_error(
                    "Generated always as expression must be str or IdentityGenerator.",
                    [generatedAlwaysAs])
        elif generatedByDefaultAs is not None:
            if not isinstance(generatedByDefaultAs, IdentityGenerator):
                self._raise_type_error(
                    "Generated by default expression must be IdentityGenerator.",
                    [generatedByDefaultAs])
            self._check_identity_column_spec(generatedByDefaultAs)
            identity, explicit = generatedByDefaultAs, True
        if comment is not None and type(comment) is not str:
            self._raise_type_error("Column comment must be str.", [comment])
        self._jbuilder = self._jbuilder.addColumn(ColumnSpec(
            colName, dataType, nullable, generated_as, identity, explicit, comment))
        return self

    def addColumns(self, cols: StructType | list[StructField]) -> DeltaTableBuilder[T]:  # noqa: N802
        """Columns of an existing schema (a StructType or a list of StructFields)."""
        if isinstance(cols, list):
            for col in cols:
                if type(col) is not StructField:
                    self._raise_type_error("Column in existing schema must be StructField.",
                                           [col])
            cols = StructType(cols)
        if type(cols) is not StructType:
            self._raise_type_error("Schema must be StructType or a list of StructField.",
                                   [cols])
        self._jbuilder = self._jbuilder.addColumns(cols)
        return self

    @overload
    def partitionedBy(self, *cols: str) -> DeltaTableBuilder[T]: ...  # noqa: N802

    @overload
    def partitionedBy(self, __cols: list[str] | tuple[str, ...]) -> DeltaTableBuilder[T]: ...

    def partitionedBy(  # noqa: N802
            self, *cols: Union[str, list[str], tuple[str, ...]]) -> DeltaTableBuilder[T]:
        """Partition columns: names, or one list of names."""
        names = self._column_names(cols, "Partitioning column must be str.")
        self._jbuilder = self._jbuilder.partitionedBy(*names)
        return self

    @overload
    def clusterBy(self, *cols: str) -> DeltaTableBuilder[T]: ...  # noqa: N802

    @overload
    def clusterBy(self, __cols: list[str] | tuple[str, ...]) -> DeltaTableBuilder[T]: ...

    def clusterBy(  # noqa: N802
            self, *cols: Union[str, list[str], tuple[str, ...]]) -> DeltaTableBuilder[T]:
        """Clustering columns (liquid clustering): names, or one list of names."""
        names = self._column_names(cols, "Clustering column must be str.")
        self._jbuilder = self._jbuilder.clusterBy(*names)
        return self

    def _column_names(self, cols: tuple[Any, ...], message: str) -> list[str]:
        if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
            cols = tuple(cols[0])
        for c in cols:
            if type(c) is not str:
                self._raise_type_error(message, [c])
        return list(cols)

    def property(self, key: str, value: str) -> DeltaTableBuilder[T]:
        """A table property."""
        if type(key) is not str or type(value) is not str:
            self._raise_type_error("Key and value of property must be string.", [key, value])
        self._jbuilder = self._jbuilder.property(key, value)
        return self

    def execute(self) -> T:
        """Create or replace the table; the DeltaTable."""
        return self._jbuilder.execute()


def builder(spark: SparkSession | None, mode: Mode,
            open_table: Callable[[SparkSession, str], T]) -> DeltaTableBuilder[T]:
    """A builder in ``spark`` (default: the active session) for ``mode``."""
    session = spark if spark is not None else SparkSession.getActiveSession()
    if session is None:
        raise HeadwaterError(
            "HW_OPTION_INVALID", "DeltaTable builder: no SparkSession was given and none is "
            "active.", "The builder creates the table in a session's lakehouse or path.",
            "Pass the session, e.g. DeltaTable.create(spark), or start one first.")
    return DeltaTableBuilder(session, TableSpec(session, mode, open_table))
