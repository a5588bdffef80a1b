"""What every DML shares: conditions and values as SQL text or Columns, and the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import Column

ColumnOrSql = Union[str, "Column"]


def to_column(value: ColumnOrSql | None, what: str = "condition") -> Column | None:
    """SQL text -> ``F.expr(text)``; a Column stays as it is; None stays None."""
    if value is None:
        return None
    from pyspark.sql import Column
    from pyspark.sql import functions as F

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


def target_column_name(key: str, columns: list[str], alias: str | None, path: str) -> str:
    """An assignment's key (``value``, ``t.value``, `` `a b` ``) -> the table column it names."""
    name = key.strip()
    if alias and name.lower().startswith(alias.lower() + "."):
        name = name[len(alias) + 1:]
    if name.startswith("`") and name.endswith("`"):
        name = name[1:-1].replace("``", "`")
    by_lower = {c.lower(): c for c in columns}
    if name.lower() not in by_lower:
        raise HeadwaterError(
            "HW_DML_UNKNOWN_COLUMN",
            f"{key!r} is not a column of the table at {path} ({', '.join(columns)}).",
            "SET and INSERT assign values to the target table's columns.",
            "Use one of the table's column names (add withSchemaEvolution() for MERGE to add "
            "new columns from the source).",
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

    def as_row(self) -> dict[str, int]:
        """The row delta-spark's SQL statement returns (DELETE/UPDATE: num_affected_rows)."""
        if self.operation == "MERGE":
            return {"num_affected_rows": self.num_affected_rows,
                    "num_updated_rows": self.num_updated_rows,
                    "num_deleted_rows": self.num_deleted_rows,
                    "num_inserted_rows": self.num_inserted_rows}
        return {"num_affected_rows": self.num_affected_rows}
