"""What every DML shares: conditions and values as SQL text or Columns, their argument checks
(delta-spark's own, so the same mistakes raise the same TypeError / ValueError), and the
result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError
from headwater.spark.active import data_frame

ColumnOrSql = Union[str, Column]


def checked_condition(condition: object, argname: str = "'condition'") -> ColumnOrSql | None:
    """``condition`` when it is None, SQL text or a Column; else delta-spark's TypeError
    (``DeltaTable._condition_to_jcolumn``)."""
    if condition is None or isinstance(condition, Column) or type(condition) is str:
        return condition
    raise TypeError(f"{argname} must be a Spark SQL Column or a string (expression in SQL "
                    f"syntax), found to be of type {type(condition)}")


def checked_assignments(pydict: object, argname: str) -> dict[str, ColumnOrSql]:
    """``pydict`` when it is a dict of column name -> SQL text or Column; else delta-spark's
    ValueError / TypeError (``DeltaTable._dict_to_jmap``): ``argname`` names the argument as
    delta-spark does, e.g. ``'set' in whenMatchedUpdate``."""
    if pydict is None:
        raise ValueError(f"{argname} cannot be None")
    if type(pydict) is not dict:
        raise TypeError(f"{argname} must be a dict, found to be {type(pydict)}")
    for key, value in pydict.items():
        if type(key) is not str:
            raise TypeError(f"Keys of dict in {argname} must contain only strings with column "
                            f"names, found '{key}' of type '{type(key)}")
        if not (isinstance(value, Column) or type(value) is str):
            raise TypeError(f"Values of dict in {argname} must contain only Spark SQL Columns "
                            "or strings (expressions in SQL syntax) as values, found "
                            f"'{value}' of type '{type(value)}'")
    return dict(pydict)


def to_column(value: ColumnOrSql | None, what: str = "condition") -> Column | None:
    """SQL text -> ``F.expr(text)``; a Column stays as it is; None stays None."""
    if value is None:
        return None
    if isinstance(value, Column):
        return value
    if isinstance(value, str):
        if not value.strip():
            raise HeadwaterError("HW_DML_INVALID", f"An empty {what} was given.",
                                 "Conditions and values are SQL expressions or Columns.",
                                 f"Pass e.g. 'id > 5' or col('id') > 5, or leave the {what} out.")
        try:
            return F.expr(value)
        except Exception as exc:  # noqa: BLE001 - Spark's parser error, re-raised with its words
            raise HeadwaterError(
                "HW_DML_INVALID", f"The {what} {value!r} is not a valid SQL expression: "
                f"{str(exc).splitlines()[0]}", "Spark's parser reads conditions and values.",
                "Fix the expression's syntax.") from exc
    raise HeadwaterError("HW_DML_INVALID",
                         f"The {what} must be SQL text or a Column, got {type(value).__name__}.",
                         "delta-spark's API takes both.", "Pass a string or a pyspark Column.")


def sql_text(value: ColumnOrSql | None) -> str | None:
    """A readable form for commitInfo's operationParameters."""
    if value is None or isinstance(value, str):
        return value
    text = str(value)
    return text[len("Column<'"):-2] if text.startswith("Column<'") else text


def assigned_name(key: str, alias: str | None) -> str:
    """The column an assignment's key (``value``, ``t.value``, `` `a b` ``) names, unquoted."""
    name = key.strip()
    if alias and name.lower().startswith(alias.lower() + "."):
        name = name[len(alias) + 1:]
    if name.startswith("`") and name.endswith("`"):
        name = name[1:-1].replace("``", "`")
    return name


def target_column_name(key: str, columns: list[str], alias: str | None, path: str) -> str:
    """An assignment's key (``value``, ``t.value``, `` `a b` ``) -> the table column it names
    (delta-spark's DELTA_MISSING_SET_COLUMN, an AnalysisException, when there is none)."""
    name = assigned_name(key, alias)
    by_lower = {c.lower(): c for c in columns}
    if name.lower() not in by_lower:
        raise DeltaAnalysisError(
            "HW_DML_UNKNOWN_COLUMN",
            f"SET column {key!r} not found given columns: {', '.join(columns)} (the table at "
            f"{path}).",
            "SET and INSERT assign values to the target table's columns.",
            "Use one of the table's column names (add withSchemaEvolution() for MERGE to add "
            "new columns from the source).",
            error_class="DELTA_MISSING_SET_COLUMN",
        )
    return by_lower[name.lower()]


@dataclass
class DmlResult:
    """What a DML did, with delta-spark's result columns and operation metrics.

    version: the table version committed (None when nothing changed). engine: "spark" (copy-on-
    write on executors) or "delta-rs" (driver-side). metrics: the commit's operationMetrics.
    """

    operation: str
    num_affected_rows: int = 0
    num_updated_rows: int = 0
    num_deleted_rows: int = 0
    num_inserted_rows: int = 0
    version: int | None = None
    engine: str = "spark"
    metrics: dict[str, Any] = field(default_factory=dict)

    def frame(self, spark: SparkSession) -> DataFrame:
        """:meth:`as_row` as the one-row DataFrame delta-spark returns (non-null longs)."""
        row = self.as_row()
        schema = StructType([StructField(k, LongType(), False) for k in row])
        return data_frame(spark, [tuple(row.values())], schema)

    def as_row(self) -> dict[str, int]:
        """The row delta-spark's SQL statement returns (DELETE/UPDATE: num_affected_rows)."""
        if self.operation == "MERGE":
            return {"num_affected_rows": self.num_affected_rows,
                    "num_updated_rows": self.num_updated_rows,
                    "num_deleted_rows": self.num_deleted_rows,
                    "num_inserted_rows": self.num_inserted_rows}
        return {"num_affected_rows": self.num_affected_rows}
