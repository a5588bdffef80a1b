"""Delta's table constraints: NOT NULL and CHECK, enforced on every write, added and dropped.

A NOT NULL column is ``nullable: false`` in the log's schema; a CHECK constraint is the table
property ``delta.constraints.<name>`` holding a SQL expression (Delta's PROTOCOL.md, the
checkConstraints feature, legacy writer version 3). delta-spark checks both on every write:
a row whose NOT NULL column is NULL fails it with DELTA_NOT_NULL_CONSTRAINT_VIOLATED, a row
for which a CHECK expression is false or NULL with DELTA_VIOLATE_CONSTRAINT_WITH_VALUES
(naming the constraint and the row's values). headwater does the same: :meth:`Constraints.
enforce` adds the checks to the projection Spark writes, so a violating row fails the Spark
job before anything is committed, at no extra pass over the data.

``ALTER TABLE t ADD CONSTRAINT name CHECK (expr)`` checks the existing rows first
(DELTA_NEW_CHECK_CONSTRAINT_VIOLATION, nothing changed), then commits the property and the
protocol upgrade in one version; ``DROP CONSTRAINT [IF EXISTS] name`` removes the property.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from headwater.delta.commit import Transaction, commit
from headwater.delta.log import normalize_uri, open_table
from headwater.delta.metadata import metadata_action
from headwater.delta.schema import spark_schema
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PREFIX = "delta.constraints."
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def not_null_error(column: str, table: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_CONSTRAINT_VIOLATED", f"NOT NULL constraint violated for column: {column} "
        f"(writing into {table}).", "The column is declared NOT NULL; Delta checks it on "
        "every write. Nothing was written.", "Give the column a value (coalesce(...)), or "
        f"drop the constraint: ALTER TABLE ... ALTER COLUMN {column} DROP NOT NULL.",
        error_class="DELTA_NOT_NULL_CONSTRAINT_VIOLATED")


def check_error(name: str, expression: str, table: str, values: str = "") -> HeadwaterError:
    return HeadwaterError(
        "HW_CONSTRAINT_VIOLATED", f"CHECK constraint {name} ({expression}) violated by row "
        f"with values: {values} (writing into {table}).", "Every row of the table must "
        "satisfy its CHECK constraints (false and NULL both violate); nothing was written.",
        f"Fix or filter the rows, or drop the constraint: ALTER TABLE ... DROP CONSTRAINT "
        f"{name}.", error_class="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES")


@dataclass(frozen=True)
class Constraints:
    """A table's constraints: its NOT NULL columns (top-level names) and CHECK constraints
    (name -> SQL expression)."""

    not_null: tuple[str, ...] = ()
    checks: tuple[tuple[str, str], ...] = ()
    nested_not_null: tuple[tuple[str, ...], ...] = ()  # struct fields: (column, field, ...)

    def __bool__(self) -> bool:
        return bool(self.not_null or self.checks or self.nested_not_null)

    @classmethod
    def of(cls, schema: StructType, configuration: Mapping[str, str] | None) -> Constraints:
        checks = tuple(sorted((key[len(PREFIX):], str(value))
                              for key, value in (configuration or {}).items()
                              if key.lower().startswith(PREFIX)))
        nested: list[tuple[str, ...]] = []

        def visit(path: tuple[str, ...], struct: Any) -> None:
            for field in struct.fields:
                if not field.nullable:
                    nested.append((*path, field.name))
                if isinstance(field.dataType, StructType):
                    visit((*path, field.name), field.dataType)

        for top in schema.fields:
            if isinstance(top.dataType, StructType):
                visit((top.name,), top.dataType)
        return cls(tuple(f.name for f in schema.fields if not f.nullable), checks,
                   tuple(nested))

    @classmethod
    def of_table(cls, table: Any) -> Constraints:
        return cls.of(spark_schema(table.schema().to_json()),
                      table.metadata().configuration or {})

    def enforce(self, df: DataFrame, table: str) -> DataFrame:
        """``df`` whose rows Spark checks while it writes them: the first violation fails the
        job with delta-spark's error class (as a HeadwaterError once translated). A NOT NULL
        column ``df`` lacks would be written NULL: refused now."""
        if not self:
            return df
        present = {c.lower(): c for c in df.columns}
        missing = [c for c in self.not_null if c.lower() not in present]
        if missing:
            raise not_null_error(missing[0], table)
        failures: list[Column] = []
        for column in self.not_null:
            failures.append(F.when(F.col(f"`{present[column.lower()]}`").isNull(),
                                   F.lit(str(not_null_error(column, table)))))
        for path in self.nested_not_null:  # NULL only where every parent struct is present
            if path[0].lower() not in present:
                continue
            parts = [present[path[0].lower()], *path[1:]]
            parents = [F.col(".".join(f"`{p}`" for p in parts[:i])).isNotNull()
                       for i in range(1, len(parts))]
            violated = F.col(".".join(f"`{p}`" for p in parts)).isNull()
            for parent in parents:
                violated = parent & violated
            failures.append(F.when(violated, F.lit(str(not_null_error(".".join(path), table)))))
        for name, expression in self.checks:
            used = [c for c in df.columns
                    if re.search(rf"(?<![\w.]){re.escape(c)}(?!\w)", expression, re.I)]
            values = F.concat_ws(", ", *[F.concat(F.lit(f"{c} : "), F.coalesce(
                F.col(f"`{c}`").cast("string"), F.lit("null"))) for c in used]) \
                if used else F.lit("")
            what, _, rest = str(check_error(name, expression, table, "\x00")).partition("\x00")
            ok = F.expr(expression)
            failures.append(F.when(ok.isNull() | ~ok,
                                   F.concat(F.lit(what), values, F.lit(rest))))
        if not failures:
            return df
        error = F.coalesce(*failures) if len(failures) > 1 else failures[0]
        first = df.columns[0]
        guarded = F.when(error.isNull(), F.col(f"`{first}`")).otherwise(
            F.raise_error(error)).alias(first)
        return df.select(guarded, *[F.col(f"`{c}`") for c in df.columns[1:]])

    def check_arrow(self, batch: Any, table: str) -> None:
        """NOT NULL on an Arrow batch (the Python data source writers, in their worker)."""
        names = {n.lower(): n for n in batch.schema.names}
        for column in self.not_null:
            name = names.get(column.lower())
            if name is None or batch.column(name).null_count:
                raise not_null_error(column, table)


def refuse_checks_on_python_writer(table: Any, path: str, why: str) -> None:
    """The Python data source writers cannot evaluate Spark SQL: a table with CHECK
    constraints written there is refused (never written unchecked)."""
    constraints = Constraints.of_table(table)
    if constraints.nested_not_null:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"The table at {path} has NOT NULL struct fields "
            f"({'.'.join(constraints.nested_not_null[0])}), and this write goes through the "
            f"Python data source writer ({why}).", "Only headwater's native writer checks "
            "NOT NULL inside structs; a write that cannot check it is refused.",
            "Write the table from a local path (df.write / INSERT / saveAsTable / streams).",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    if constraints.checks:
        name, expression = constraints.checks[0]
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"The table at {path} has the CHECK constraint "
            f"{name} ({expression}), and this write goes through the Python data source writer "
            f"({why}).", "Only headwater's native writer (Spark's parquet writer) evaluates "
            "CHECK constraints; a write that cannot check them is refused, never written "
            "unchecked.", "Write the table from a local path with df.write / INSERT / "
            "saveAsTable / writeStream in append or complete mode, or drop the constraint.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def refuse_checks_on_deltalake(table: Any, path: str, operation: str) -> None:
    """deltalake checks CHECK constraints in its own SQL dialect and lets a NULL result pass
    (delta-spark fails it): a MERGE it would run on a table with CHECK constraints is
    refused rather than checked differently."""
    constraints = Constraints.of_table(table)
    if constraints.checks:
        name, expression = constraints.checks[0]
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"{operation} into {path}: the table has the CHECK "
            f"constraint {name} ({expression}), and this {operation} runs in deltalake.",
            "deltalake evaluates CHECK constraints with another SQL dialect and lets a NULL "
            "result through, where delta-spark (and headwater's Spark writers) fail the row.",
            "MERGE with headwater's DeltaTable.merge / SQL MERGE INTO (Spark's engine), or drop "
            "the constraint.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def schema_overwrite(df: DataFrame, path: str) -> tuple[DataFrame, dict[str, str]]:
    """An overwrite with ``overwriteSchema`` of the table at ``path``: delta-spark keeps the
    table's properties and refuses an append-only table; a table with CHECK constraints is
    refused (the replace cannot carry them yet). Returns ``df`` and the properties to keep."""
    table = open_table(normalize_uri(path))
    configuration = dict(table.metadata().configuration or {})
    if str(configuration.get("delta.appendOnly", "false")).lower() == "true":
        raise HeadwaterError(
            "HW_DELTA_APPEND_ONLY", f"This table is configured to only allow appends: {path} "
            "cannot be overwritten, overwriteSchema included.",
            "delta.appendOnly=true forbids removing files.",
            "Append instead, or set 'delta.appendOnly' = 'false' first.",
            error_class="DELTA_CANNOT_MODIFY_APPEND_ONLY")
    checks = Constraints.of(StructType(), configuration).checks
    if checks:  # deltalake's replace cannot carry them, and they must not be lost silently
        name, expression = checks[0]
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE", f"overwriteSchema on {path}, which has the CHECK "
            f"constraint {name} ({expression}).", "headwater's schema-replacing commit cannot "
            "carry CHECK constraints yet; replacing the table would drop them.",
            f"Drop the constraint first (ALTER TABLE ... DROP CONSTRAINT {name}) and add it "
            "again after, or overwrite without overwriteSchema.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
    return df, configuration


def _local(path: str, operation: str) -> str:
    uri = normalize_uri(path)
    if "://" in uri and not uri.startswith("file:"):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"{operation} on {path} is not supported.",
            "Changing a table's constraints needs headwater's own commit, which is local-only.",
            "Run it on a local or mounted table.")
    return uri


def add_check(spark: SparkSession, path: str, name: str, expression: str, label: str) -> int:
    """``ALTER TABLE label ADD CONSTRAINT name CHECK (expression)``: the existing rows checked
    (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION and nothing changed when some fail), then the
    property and the checkConstraints feature committed in one version."""
    uri = _local(path, "ADD CONSTRAINT")
    if not _NAME.match(name):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"ADD CONSTRAINT {name!r} on {label}: not a valid constraint "
            "name.", "Constraint names are identifiers.", "Use letters, digits and _.",
            error_class="DELTA_INVALID_CHARACTERS_IN_COLUMN_NAME")
    table = open_table(uri)
    configuration = dict(table.metadata().configuration or {})
    if any(k.lower() == PREFIX + name.lower() for k in configuration):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"Constraint '{name}' already exists on {label}.",
            "Constraint names are unique per table.", "Drop it first, or pick another name.",
            error_class="DELTA_CONSTRAINT_ALREADY_EXISTS")
    # (headwater's load reads through Spark's parquet reader where the table allows it)
    rows = spark.read.format("delta").option("versionAsOf", table.version()).load(uri)
    try:
        ok = F.expr(expression)
        violating = rows.where(ok.isNull() | ~ok).count()
    except Exception as exc:  # noqa: BLE001 - Spark's analysis error names what is wrong
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"ADD CONSTRAINT {name} CHECK ({expression}) on {label}: "
            f"{str(exc).splitlines()[0]}", "The expression must be a boolean expression on "
            "the table's columns.", "Fix the expression.",
            error_class="DELTA_NON_BOOLEAN_CHECK_CONSTRAINT") from exc
    if violating:
        raise HeadwaterError(
            "HW_CONSTRAINT_VIOLATED", f"{violating} rows in {label} violate the new CHECK "
            f"constraint ({expression}).", "A constraint is added only when every existing "
            "row satisfies it; the table was not changed.", "Fix or delete those rows first "
            f"(DELETE FROM {label} WHERE NOT ({expression})), then add the constraint.",
            error_class="DELTA_NEW_CHECK_CONSTRAINT_VIOLATION")
    from headwater.delta.protocol import Protocol, feature  # noqa: PLC0415 - worker: the Python writers check constraints without deltalake's protocol stack

    configuration[PREFIX + name] = expression
    actions: list[dict[str, Any]] = []
    current = Protocol.of_table(table)
    check_feature = feature("checkConstraints")
    assert check_feature is not None
    if current.lists_writers or current.writer >= 3:
        upgraded = current.with_feature(check_feature)
    else:  # a legacy protocol: writer version 3 brings check constraints (as delta-spark)
        upgraded = dataclasses.replace(current, writer=3)
    if upgraded != current:
        actions.append(upgraded.action())
    actions.append(metadata_action(table, configuration=configuration))
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation="ADD CONSTRAINT",
        parameters={"name": name, "expr": expression}, metrics={}, actions=actions,
        reads_data=True, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


def drop_check(path: str, name: str, if_exists: bool, label: str) -> int | None:
    """``ALTER TABLE label DROP CONSTRAINT [IF EXISTS] name``: the property removed (the
    feature stays, as in delta-spark). None when IF EXISTS found nothing."""
    uri = _local(path, "DROP CONSTRAINT")
    table = open_table(uri)
    configuration = dict(table.metadata().configuration or {})
    key = next((k for k in configuration if k.lower() == PREFIX + name.lower()), None)
    if key is None:
        if if_exists:
            return None
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"Cannot drop nonexistent constraint {name} from {label}.",
            "The table has no constraint of that name.", "Use DROP CONSTRAINT IF EXISTS, or "
            "SHOW TBLPROPERTIES to see the table's delta.constraints.*.",
            error_class="DELTA_CONSTRAINT_DOES_NOT_EXIST")
    expression = configuration.pop(key)
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation="DROP CONSTRAINT",
        parameters={"name": name, "expr": json.dumps(expression)}, metrics={},
        actions=[metadata_action(table, configuration=configuration)], reads_data=False,
        conflict_code="HW_DELTA_COMMIT_CONFLICT"))
