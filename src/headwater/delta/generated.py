"""Generated and identity columns: what a Delta schema declares, and the values a write adds.

Delta keeps both in the columns' metadata: ``delta.generationExpression`` (a Spark SQL
expression over the table's other columns; writer version 4) and ``delta.identity.start`` /
``.step`` / ``.highWaterMark`` / ``.allowExplicitInsert`` (writer version 6). delta-spark
computes them on every write, and so does headwater: on the DataFrame before it is written
(driver side, with Spark's own SQL), never in the Arrow writer.

- A generated column missing from the data is computed; one the data gives must equal its
  expression (delta-spark's CHECK constraint, DELTA_VIOLATE_CONSTRAINT_WITH_VALUES).
- An identity column missing from the data gets values as delta-spark's
  ``GenerateIdentityValues`` gives them: partition ``p`` of ``n`` writes ``base + step * (p +
  n * i)`` for its ``i``-th row, where ``base`` is the start, or the high-water mark plus one
  step once values exist. Unique without a shuffle; contiguous when every partition writes as
  many rows. GENERATED ALWAYS refuses given values, BY DEFAULT keeps them.
- The commit that adds generated identity values raises the column's high-water mark in the
  same commit (:func:`raised_high_water_marks`, from the new files' max / min stats; given
  values do not move it, as in delta-spark).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from headwater.delta.column_defaults import CURRENT_DEFAULT, default_value
from headwater.errors import HeadwaterError
from headwater.spark.active import data_frame
from headwater.spark.jvm import analyzed_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GENERATION_EXPRESSION = "delta.generationExpression"
IDENTITY_START = "delta.identity.start"
IDENTITY_STEP = "delta.identity.step"
IDENTITY_HIGH_WATER_MARK = "delta.identity.highWaterMark"
IDENTITY_ALLOW_EXPLICIT_INSERT = "delta.identity.allowExplicitInsert"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
# Bits of monotonically_increasing_id() below the partition index (Spark's layout).
_ROW_BITS = 33


@dataclass(frozen=True)
class IdentitySpec:
    """One identity column's settings, as its field metadata holds them."""

    name: str
    start: int
    step: int
    high_water_mark: int | None
    allow_explicit_insert: bool

    @property
    def base(self) -> int:
        """The first value the next write generates."""
        return self.start if self.high_water_mark is None else self.high_water_mark + self.step


@dataclass(frozen=True)
class Generation:
    """The generated, identity and DEFAULT columns of one table schema (Delta metadata
    included): what a write computes for the columns it does not give."""

    schema: StructType
    expressions: dict[str, str]  # generated column -> its SQL expression
    identities: tuple[IdentitySpec, ...]
    defaults: dict[str, str] = dataclasses.field(default_factory=dict)  # column -> its DEFAULT's SQL

    @classmethod
    def of(cls, schema: StructType) -> Generation:
        expressions: dict[str, str] = {}
        identities: list[IdentitySpec] = []
        defaults: dict[str, str] = {}
        for column in schema.fields:
            meta = column.metadata or {}
            if GENERATION_EXPRESSION in meta:
                expressions[column.name] = str(meta[GENERATION_EXPRESSION])
            if IDENTITY_START in meta or IDENTITY_STEP in meta:
                hwm = meta.get(IDENTITY_HIGH_WATER_MARK)
                identities.append(IdentitySpec(
                    column.name, int(meta.get(IDENTITY_START, 1)),
                    int(meta.get(IDENTITY_STEP, 1)), None if hwm is None else int(hwm),
                    bool(meta.get(IDENTITY_ALLOW_EXPLICIT_INSERT, False))))
            if CURRENT_DEFAULT in meta:
                defaults[column.name] = str(meta[CURRENT_DEFAULT])
        return cls(schema, expressions, tuple(identities), defaults)

    def __bool__(self) -> bool:
        return bool(self.expressions or self.identities or self.defaults)

    def identity(self, name: str) -> IdentitySpec | None:
        return next((i for i in self.identities if i.name.lower() == name.lower()), None)


def declares_generation(schema_json: str) -> bool:
    """True when a Delta schema (its JSON) has a generated, identity or DEFAULT column: a
    write must compute values, so Spark's SQL on the driver's DataFrame writes it."""
    return GENERATION_EXPRESSION in schema_json or IDENTITY_START in schema_json or \
        f'"{CURRENT_DEFAULT}"' in schema_json


def prepare(df: DataFrame, generation: Generation, table: str) -> tuple[DataFrame, list[str]]:
    """``df`` as the table's rows: every table column in table order, generated values added,
    given ones checked, NOT NULL columns checked (a missing one refused). Returns it and the
    identity columns whose values this write generates (their high-water marks move with the
    commit). Columns the table lacks are refused."""
    fields = generation.schema.fields
    given = {c.lower(): c for c in df.columns}
    known = {f.name.lower() for f in fields}
    extra = [c for c in df.columns if c.lower() not in known]
    if extra:
        raise HeadwaterError(
            "HW_SINK_SCHEMA_MISMATCH",
            f"The data has columns the Delta table {table} does not: {', '.join(extra)}.",
            "A table with generated or identity columns keeps its schema on every write.",
            "Drop those columns, or add them to the table first (ALTER TABLE ADD COLUMNS).")
    missing = [f.name for f in fields if not f.nullable and f.name.lower() not in given
               and f.name not in generation.expressions and generation.identity(f.name) is None
               and f.name not in generation.defaults]
    if missing:
        raise HeadwaterError(
            "HW_DML_NOT_NULL_VIOLATED",
            f"Column {missing[0]}, which has a NOT NULL constraint, is missing from the data "
            f"being written into the table {table}.",
            "Delta enforces NOT NULL on every write; a missing column would be NULL.",
            f"Give {', '.join(missing)} a value in every written row.",
            error_class="DELTA_MISSING_NOT_NULL_COLUMN_VALUE")
    for spec in generation.identities:
        if spec.name.lower() in given and not spec.allow_explicit_insert:
            raise explicit_identity_error(spec.name, table)
    generated = [i for i in generation.identities if i.name.lower() not in given]
    if generated:
        # A fixed upper bound of the partitions that write (coalesce never adds any), so the
        # values stay unique whatever Spark's adaptive execution does to the partitioning.
        slots = df.sparkSession.sparkContext.defaultParallelism
        df = df.coalesce(slots)
        slot = _identity_slot(slots)
    columns: list[Column] = []
    for field in fields:
        spec = generation.identity(field.name)
        if field.name.lower() in given:
            value = F.col(_quoted(given[field.name.lower()]))
        elif spec is not None:
            value = F.lit(spec.base) + F.lit(spec.step) * slot
        elif field.name in generation.defaults:
            value = default_value(field)
        else:  # a generated column (computed below) or a column the write leaves NULL
            value = F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    rows = df.select(*columns)
    checked = dict.fromkeys(n for n in generation.expressions if n.lower() in given)
    return rows.select(*_finished(generation, table, checked)), [i.name for i in generated]


def recompute(df: DataFrame, generation: Generation, table: str,
              checked: Iterable[str] | Mapping[str, Column] = ()) -> DataFrame:
    """``df`` (every table column) with its generated columns computed again from the other
    columns (UPDATE / MERGE: a changed ``col1`` changes ``col2 = col1 + 10``); the columns in
    ``checked`` were assigned by the statement and are checked against their expression (a
    mapping: on the rows where its condition holds, e.g. a MERGE's clauses that assign it)."""
    where = dict(checked) if isinstance(checked, Mapping) else dict.fromkeys(checked)
    return df.select(*_finished(generation, table, where))


def _finished(generation: Generation, table: str,
              checked: Mapping[str, Column | None]) -> list[Column]:
    """Every column of the table: generated ones computed (or, in ``checked``, verified on
    the rows its condition selects, all rows for None); NOT NULL columns refuse NULL."""
    out = []
    for field in generation.schema.fields:
        column = F.col(_quoted(field.name))
        expression = generation.expressions.get(field.name)
        if expression is not None:
            computed = F.expr(expression).cast(field.dataType)
            if field.name in checked:
                verified = F.when(column.eqNullSafe(computed), column).otherwise(
                    F.raise_error(_mismatch_message(field.name, expression, table, column,
                                                    computed)))
                condition = checked[field.name]
                column = verified if condition is None else F.when(
                    condition, verified).otherwise(computed)
            else:
                column = computed
        if not field.nullable:
            column = F.when(column.isNull(), F.raise_error(F.lit(
                f"[HW_DML_NOT_NULL_VIOLATED] [DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL "
                f"constraint violated for column: {field.name} of {table}. Why: Delta enforces "
                "NOT NULL on every write. Fix: give the column a value."))).otherwise(column)
        out.append(column.cast(field.dataType).alias(field.name))
    return out


def _mismatch_message(name: str, expression: str, table: str, given: Column,
                      computed: Column) -> Column:
    return F.concat(
        F.lit(f"[HW_GENERATED_COLUMN_MISMATCH] [DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK "
              f"constraint Generated Column ({name} <=> {expression}) violated by row with "
              f"values: {name} : "), F.coalesce(given.cast("string"), F.lit("null")),
        F.lit(f", {expression} : "), F.coalesce(computed.cast("string"), F.lit("null")),
        F.lit(f" (table {table}). Why: a generated column always holds its expression's value. "
              f"Fix: leave {name} out of the written columns (it is computed), or give the "
              "value the expression gives."))


def _identity_slot(slots: int) -> Column:
    """The generator's position: partition p of ``slots`` writes p, p + slots, p + 2 * slots."""
    partition = F.spark_partition_id().cast("long")
    row = F.monotonically_increasing_id() - F.shiftleft(partition, _ROW_BITS)
    return partition + row * F.lit(slots)


def identity_values(df: DataFrame, specs: Iterable[IdentitySpec],
                    where: Column | None = None) -> DataFrame:
    """``df`` with fresh identity values for ``specs`` (on the rows where ``where`` holds,
    e.g. a MERGE's inserted rows; the others keep theirs)."""
    specs = list(specs)
    if not specs:
        return df
    slots = df.sparkSession.sparkContext.defaultParallelism
    df = df.coalesce(slots)
    slot = _identity_slot(slots)
    replaced = {s.name: F.lit(s.base) + F.lit(s.step) * slot for s in specs}
    columns = []
    for name in df.columns:
        value = replaced.get(name)
        if value is None:
            columns.append(F.col(_quoted(name)))
            continue
        if where is not None:
            value = F.when(where, value).otherwise(F.col(_quoted(name)))
        columns.append(value.cast(LongType()).alias(name))
    return df.select(*columns)


def raised_high_water_marks(schema: StructType, generated: Iterable[str],
                            adds: Iterable[Mapping[str, Any]]) -> StructType | None:
    """The schema with the high-water marks of the ``generated`` identity columns raised to
    the values the new files (``adds``, with their stats) hold; None when none moves.
    As delta-spark: a mark rounds to the column's start + n * step, never goes back, and a
    value before the start does not move it."""
    generation = Generation.of(schema)
    stats = [json.loads(a["stats"]) for a in adds if a.get("stats")]
    marks: dict[str, int] = {}
    for name in generated:
        spec = generation.identity(name)
        if spec is None:
            continue
        key = "maxValues" if spec.step > 0 else "minValues"
        values = [int(s[key][spec.name]) for s in stats if s.get(key, {}).get(spec.name)
                  is not None]
        if not values:
            continue
        candidate = max(values) if spec.step > 0 else min(values)
        mark = _valid_mark(spec, candidate)
        if mark is not None:
            marks[spec.name] = mark
    if not marks:
        return None
    fields = []
    for field in schema.fields:
        if field.name in marks:
            meta = dict(field.metadata or {})
            meta[IDENTITY_HIGH_WATER_MARK] = marks[field.name]
            field = StructField(field.name, field.dataType, field.nullable, meta)
        fields.append(field)
    return StructType(fields)


def merged_high_water_marks(schema: StructType, other: StructType) -> StructType:
    """``schema`` with each identity column's high-water mark raised to ``other``'s mark of
    the same column (by physical name) where that is further along: delta-spark's
    ``IdentityColumn.copySchemaWithMergedHighWaterMarks``, which RESTORE uses so that values
    generated after a restore never repeat values generated before it."""
    def physical(field: StructField) -> str:
        return str((field.metadata or {}).get(PHYSICAL_NAME, field.name))

    theirs = {physical(f): (f.metadata or {}).get(IDENTITY_HIGH_WATER_MARK)
              for f in other.fields}
    generation = Generation.of(schema)
    fields = []
    for field in schema.fields:
        spec = generation.identity(field.name)
        candidate = theirs.get(physical(field))
        if spec is not None and candidate is not None:
            mark = _valid_mark(spec, int(candidate))
            if mark is not None:
                field = StructField(field.name, field.dataType, field.nullable,
                                    {**(field.metadata or {}), IDENTITY_HIGH_WATER_MARK: mark})
        fields.append(field)
    return StructType(fields)


def _valid_mark(spec: IdentitySpec, candidate: int) -> int | None:
    """delta-spark's IdentityColumn.updateToValidHighWaterMark: the new mark, or None."""
    forward = spec.step > 0
    if (candidate < spec.start) if forward else (candidate > spec.start):
        return None  # before the start: the mark stays
    offset = candidate - spec.start  # same sign as the step (not before the start)
    if offset % spec.step:
        candidate = spec.start + spec.step * (abs(offset) // abs(spec.step) + 1)
    old = spec.high_water_mark
    if old is not None:
        candidate = max(old, candidate) if forward else min(old, candidate)
    return None if candidate == old else candidate


def explicit_identity_error(column: str, table: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_IDENTITY_COLUMN_INVALID",
        f"Providing values for GENERATED ALWAYS AS IDENTITY column {column} is not supported "
        f"(table {table}).", "Delta generates every value of such a column itself.",
        f"Leave {column} out of the written columns; declare it GENERATED BY DEFAULT AS "
        "IDENTITY to allow given values.",
        error_class="DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED")


def identity_update_error(column: str, table: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_IDENTITY_COLUMN_INVALID", f"UPDATE on IDENTITY column {column} is not supported "
        f"(table {table}).", "Identity values are assigned once, when a row is inserted.",
        f"Leave {column} out of the assignments.",
        error_class="DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED")


def check_expressions(spark: SparkSession, schema: StructType, table: str) -> None:
    """delta-spark's checks of a new table's generation expressions: they read only the
    table's other (not generated) columns and give exactly the column's type."""
    generation = Generation.of(schema)
    if not generation.expressions:
        return
    plain = StructType([f for f in schema.fields if f.name not in generation.expressions])
    empty = data_frame(spark, [], plain)
    for name, expression in generation.expressions.items():
        field = schema[name]
        try:
            selected = empty.select(F.expr(expression).alias(name))
            result = selected.schema[name].dataType
        except AnalysisException as exc:
            raise HeadwaterError(
                "HW_GENERATED_COLUMN_INVALID",
                f"The generated column {name} of {table} has the expression {expression!r}, "
                f"which Spark cannot resolve: {str(exc).splitlines()[0]}",
                "A generated column cannot use a non-existent column or another generated "
                "column.", "Write the expression over the table's other columns.",
                error_class="DELTA_INVALID_GENERATED_COLUMN_REFERENCES") from exc
        _check_deterministic(selected, name, expression, table)
        if result.simpleString() != field.dataType.simpleString():
            raise HeadwaterError(
                "HW_GENERATED_COLUMN_INVALID",
                f"The expression type of the generated column {name} is "
                f"{result.simpleString()}, but the column type is "
                f"{field.dataType.simpleString()} (table {table}).",
                "Delta stores the expression's value in the column as it is.",
                f"Cast in the expression, e.g. CAST({expression} AS "
                f"{field.dataType.simpleString()}), or change the column's type.",
                error_class="DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH")


def _check_deterministic(selected: DataFrame, name: str, expression: str, table: str) -> None:
    """delta-spark's refusals of a generation expression Spark resolved: a UDF, a
    non-deterministic expression (rand(), uuid()), a time of the query (current_timestamp())
    or an aggregate; found on the expression tree of Spark's analyzed plan."""
    plan = analyzed_plan(selected)
    if plan.getClass().getSimpleName() == "Aggregate":
        raise _refused(name, expression, table, "DELTA_AGGREGATE_IN_GENERATED_COLUMN",
                       f"Found {expression}. A generated column cannot use an aggregate "
                       "expression.")
    pending = [plan.expressions().apply(0)]
    while pending:
        node = pending.pop()
        kind = node.getClass().getSimpleName()
        if kind in _UDFS:
            raise _refused(name, expression, table, "DELTA_UDF_IN_GENERATED_COLUMN",
                           f"Found {node.sql()}. A generated column cannot use a "
                           "user-defined function.")
        if not node.deterministic():
            raise _refused(name, expression, table,
                           "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN",
                           f"Found {node.sql()}. A generated column cannot use a non "
                           "deterministic expression.")
        if kind in _QUERY_TIME:
            raise _refused(name, expression, table,
                           "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN",
                           f"{node.sql()} cannot be used in a generated column.")
        children = node.children()
        pending.extend(children.apply(i) for i in range(children.size()))


# Spark's expression classes of user-defined functions, and of the query's time / context
# (deterministic within one query, different in the next: delta-spark refuses them too).
_UDFS = frozenset({"ScalaUDF", "PythonUDF", "ScalaUDAF", "ScalaAggregator", "HiveSimpleUDF",
                   "HiveGenericUDF", "HiveUDAFFunction"})
_QUERY_TIME = frozenset({"CurrentTimestamp", "Now", "CurrentDate", "LocalTimestamp",
                         "CurrentTimeZone", "CurrentUser", "CurrentDatabase", "CurrentCatalog",
                         "CurrentTime"})


def _refused(name: str, expression: str, table: str, error_class: str,
             what: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_GENERATED_COLUMN_INVALID", f"{what} (generated column {name} of {table}: "
        f"{expression!r})", "A generated column's value must follow from the row's other "
        "columns alone, the same on every write and every check.",
        "Use deterministic built-in functions of the table's other columns; compute other "
        "values in the written data instead.", error_class=error_class)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
