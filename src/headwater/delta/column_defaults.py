"""Column DEFAULT values: Delta's ``allowColumnDefaults`` writer feature.

Delta keeps a column's default in its field metadata, ``CURRENT_DEFAULT`` (the SQL text, as
Spark writes it), on tables whose protocol lists the ``allowColumnDefaults`` writer feature
(docs.delta.io, "Delta default column values"). As in delta-spark:

- a table gets the feature with ``TBLPROPERTIES ('delta.feature.allowColumnDefaults' =
  'enabled')`` (or ``'supported'``), in CREATE TABLE or ALTER TABLE SET TBLPROPERTIES; a
  DEFAULT on a table without it is refused (WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED);
- ``ALTER TABLE ... ADD COLUMN c INT DEFAULT 16`` is refused
  (WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED); ``ALTER COLUMN c SET
  DEFAULT 16`` / ``DROP DEFAULT`` change an existing column's default;
- every write that leaves a column out (an INSERT column list, a DataFrame or a micro-batch
  without the column, a MERGE insert that does not assign it) stores the column's default, or
  NULL where it has none; the ``DEFAULT`` keyword (INSERT's VALUES, UPDATE SET, MERGE's SET and
  VALUES) is that value too;
- a default is a constant expression of the column's type (Spark's INVALID_DEFAULT_VALUE).

The defaults apply to writes only: reads never see the metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from pyspark.errors import AnalysisException
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, MapType, StructType

from headwater.errors import HeadwaterError
from headwater.spark.jvm import analyzed_plan, jvm_data_type, jvm_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructField

CURRENT_DEFAULT = "CURRENT_DEFAULT"
FEATURE = "allowColumnDefaults"
FEATURE_PROPERTY = "delta.feature.allowColumnDefaults"
_ENABLED = ("enabled", "supported")
V = TypeVar("V")


def defaults_of(schema: StructType) -> dict[str, str]:
    """Column -> its DEFAULT's SQL text, for the top-level columns that have one."""
    return {f.name: str(f.metadata[CURRENT_DEFAULT]) for f in schema.fields
            if f.metadata and CURRENT_DEFAULT in f.metadata}


def declares_defaults(schema_json: str) -> bool:
    """True when a schema (its JSON) gives some column a DEFAULT."""
    return f'"{CURRENT_DEFAULT}"' in schema_json


def default_value(field: StructField) -> Column:
    """The value a write that leaves ``field`` out stores: its DEFAULT, else NULL."""
    text = (field.metadata or {}).get(CURRENT_DEFAULT)
    value = F.lit(None) if text is None else F.expr(str(text))
    return value.cast(field.dataType)


def is_default_keyword(value: object) -> bool:
    """True for the SQL keyword ``DEFAULT`` given as a value (any case)."""
    return isinstance(value, str) and value.strip().upper() == "DEFAULT"


def default_text(field: StructField) -> str:
    """The SQL the ``DEFAULT`` keyword stands for in a value of ``field``."""
    text = (field.metadata or {}).get(CURRENT_DEFAULT)
    return f"CAST(NULL AS {field.dataType.simpleString()})" if text is None else f"({text})"


def with_keyword_resolved(assignments: Mapping[str, V], columns: Mapping[str, StructField],
                          name_of: Callable[[str], str]) -> dict[str, V | str]:
    """``assignments`` (target key -> value) with each ``DEFAULT`` value replaced by the
    SQL of the target column's default (NULL where it has none). ``columns``: the table's
    top-level fields by name; ``name_of``: key -> the table's column name."""
    out: dict[str, V | str] = {}
    for key, value in assignments.items():
        if is_default_keyword(value):
            out[key] = default_text(columns[name_of(key)])
        else:
            out[key] = value
    return out


def feature_requested(properties: Mapping[str, str], label: str) -> tuple[dict[str, str], bool]:
    """(the properties without ``delta.feature.allowColumnDefaults``, whether it was set):
    Delta records the feature in the protocol, not as a property. A value other than
    ``enabled`` / ``supported`` is refused, as delta-spark does."""
    rest: dict[str, str] = {}
    requested = False
    for key, value in properties.items():
        if key.lower() != FEATURE_PROPERTY.lower():
            rest[key] = value
            continue
        if str(value).strip().lower() not in _ENABLED:
            raise HeadwaterError(
                "HW_TABLE_PROPERTY_INVALID",
                f"{key} = {value!r} on {label}: a table feature property takes 'enabled' or "
                "'supported'.", "Setting it adds the feature to the table's protocol; it "
                "cannot be switched off by a property.",
                f"Write '{FEATURE_PROPERTY}' = 'enabled' (drop a feature with ALTER TABLE "
                "... DROP FEATURE).", error_class="DELTA_UNSUPPORTED_FEATURE_STATUS")
        requested = True
    return rest, requested


def checked_default(spark: SparkSession, column: str, text: str, data_type: DataType,
                    table: str) -> str:
    """``text`` when it is a valid DEFAULT for ``column``, as Spark's ResolveDefaultColumns
    decides: a constant expression (no column reference, subquery or non-deterministic
    function) whose type is the column's or up-casts to it, or a literal that a try-cast
    turns into a value of the column's type (not NULL; never to or from BOOLEAN or a
    complex type): ``INT DEFAULT 'abc'``, ``BOOLEAN DEFAULT 1``, ``INT DEFAULT 5000000000``
    are refused, ``DATE DEFAULT '2024-01-01'`` is taken. Refused: Spark's
    INVALID_DEFAULT_VALUE as a HeadwaterError, before anything is written."""
    try:
        plan = spark.sql(f"SELECT ({text}) AS v")
        expression = analyzed_plan(plan).expressions().apply(0).child()
    except AnalysisException as exc:
        raise _invalid(column, text, table, "it is not an expression without column "
                       f"references ({exc.getCondition() or 'analysis'})",
                       "NOT_CONSTANT") from None
    if not bool(expression.foldable()):
        raise _invalid(column, text, table, "it is not a constant (a random or "
                       "non-deterministic function, or a subquery)", "NOT_CONSTANT")
    given = plan.schema.fields[0].dataType
    if given == data_type or _up_casts(spark, given, data_type):
        return text
    complex_or_bool = (BooleanType, ArrayType, MapType, StructType)
    if expression.getClass().getSimpleName() == "Literal" and not isinstance(
            given, complex_or_bool) and not isinstance(data_type, complex_or_bool):
        fits = spark.sql(f"SELECT try_cast(({text}) AS {data_type.simpleString()}) IS NOT NULL"
                         ).first()
        if fits is not None and fits[0]:
            return text
    raise _invalid(column, text, table, f"its type {given.simpleString()} does not fit the "
                   f"column's type {data_type.simpleString()}", "DATA_TYPE")


def _up_casts(spark: SparkSession, given: DataType, wanted: DataType) -> bool:
    """Spark's ``Cast.canUpCast``: the cast never loses information."""
    cast = jvm_view(spark).org.apache.spark.sql.catalyst.expressions.Cast
    return bool(cast.canUpCast(jvm_data_type(spark, given), jvm_data_type(spark, wanted)))


def _invalid(column: str, text: str, table: str, why: str, sub_class: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_COLUMN_DEFAULT_INVALID",
        f"Column {column} of {table} has the DEFAULT value {text!r}, which is invalid: {why}.",
        "A DEFAULT is evaluated once per written row, without the row: it must be a constant "
        "of the column's type (a literal, or an expression of literals and functions such "
        "as current_date()).",
        "Give a literal of the column's type, e.g. DEFAULT 0 or DEFAULT 'n/a'.",
        error_class=f"INVALID_DEFAULT_VALUE.{sub_class}")


def not_enabled_error(table: str, statement: str) -> HeadwaterError:
    """delta-spark's refusal of a DEFAULT on a table without the allowColumnDefaults feature."""
    return HeadwaterError(
        "HW_COLUMN_DEFAULT_INVALID",
        f"Failed to execute {statement} on {table} because it assigned a column DEFAULT "
        "value, but the corresponding table feature was not enabled.",
        "Column defaults are Delta's allowColumnDefaults writer feature: a table's protocol "
        "must list it before any column has a DEFAULT (readers older than Delta 2.3 then "
        "cannot write the table).",
        f"Enable it: ALTER TABLE {table} SET TBLPROPERTIES ('{FEATURE_PROPERTY}' = "
        "'enabled'), or add that property to CREATE TABLE's TBLPROPERTIES.",
        error_class="WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED")


def add_column_default_error(table: str, column: str) -> HeadwaterError:
    """delta-spark's refusal of ``ALTER TABLE ... ADD COLUMN c T DEFAULT v``."""
    return HeadwaterError(
        "HW_COLUMN_DEFAULT_INVALID",
        f"ALTER TABLE {table} ADD COLUMN {column} ... DEFAULT: Delta does not add a column "
        "with a DEFAULT value.",
        "The rows already in the table would have to read the default without being "
        "rewritten, which Delta's protocol does not describe.",
        f"Add the column without DEFAULT, then ALTER TABLE {table} ALTER COLUMN {column} SET "
        "DEFAULT ...: new writes then store the default, old rows keep NULL.",
        error_class="WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED")
