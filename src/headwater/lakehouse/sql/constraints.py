"""ALTER TABLE ... ADD CONSTRAINT name CHECK (expr) / DROP CONSTRAINT [IF EXISTS] name on
lakehouse tables and ``delta.`path``` (handlers of the SQL router): Spark parses both
(``AddCheckConstraint``, ``DropConstraint``) but refuses them for Python data source tables;
headwater applies them to the Delta table (:mod:`headwater.delta.constraints`): existing rows
checked, the ``delta.constraints.<name>`` property and the checkConstraints feature committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.delta.constraints import add_check, drop_check
from headwater.delta.log import DeltaLog
from headwater.errors.delta import DeltaAnalysisError
from headwater.lakehouse.sql.ddl import done
from headwater.lakehouse.sql.dml import table_path
from headwater.lakehouse.sql.statements import Statement, seq, walk

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse.sql.statements import SqlLakehouse


def _target(lake: SqlLakehouse, node: Any) -> tuple[str, str] | None:
    """(path, label) of the altered Delta table, None when it is not one of ours."""
    relation = next((n for n in walk(node)
                     if n.getClass().getSimpleName() in ("UnresolvedRelation", "UnresolvedTable")),
                    None)
    if relation is None:
        return None
    parts = [str(p) for p in seq(relation.multipartIdentifier())]
    path = table_path(lake, parts)
    if path is None:
        return None
    label = ".".join(parts) if parts[0].lower() != "delta" else f"delta.`{parts[-1]}`"
    if not DeltaLog(path).exists():
        raise DeltaAnalysisError(
            "HW_DELTA_TABLE_NOT_FOUND", f"ALTER TABLE {label}: there is no Delta table there.",
            "Constraints belong to an existing table.", "Create the table first.",
            error_class="DELTA_MISSING_DELTA_TABLE")
    return path, label


def add_constraint(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    found = _target(lake, st.plan)
    if found is None:
        return None
    path, label = found
    check = st.plan.checkConstraint()
    add_check(st.session, path, str(check.name()), str(check.condition()), label)
    return done(st.session)


def drop_constraint(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    found = _target(lake, st.plan)
    if found is None:
        return None
    path, label = found
    drop_check(path, str(st.plan.name()), bool(st.plan.ifExists()), label)
    return done(st.session)
