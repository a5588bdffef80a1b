"""MERGE: the clauses of a merge and their rules, engine-independent.

A :class:`MergeSpec` is what ``MERGE INTO target USING source ON cond WHEN ...`` says; the SQL
layer and :class:`headwater.DeltaTable` both build one. Clauses of one kind are evaluated in
the order given; the first whose condition holds acts on the row (Delta's rule), and only the
last clause of a kind may have no condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from headwater.delta.dml.common import ColumnOrSql
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE = "matched", "not_matched", "not_matched_by_source"
_SQL = {MATCHED: "WHEN MATCHED", NOT_MATCHED: "WHEN NOT MATCHED",
        NOT_MATCHED_BY_SOURCE: "WHEN NOT MATCHED BY SOURCE"}


@dataclass
class MergeClause:
    """kind: matched / not_matched / not_matched_by_source. action: update / delete / insert.
    assignments: target column -> value; None means ``*`` (every column from the source)."""

    kind: str
    action: str
    condition: ColumnOrSql | None = None
    assignments: Mapping[str, ColumnOrSql] | None = None

    @property
    def star(self) -> bool:
        return self.action in ("update", "insert") and self.assignments is None

    def describe(self) -> str:
        what = {"update": "UPDATE SET *" if self.star else "UPDATE SET ...",
                "insert": "INSERT *" if self.star else "INSERT ...", "delete": "DELETE"}
        cond = " AND <cond>" if self.condition is not None else ""
        return f"{_SQL[self.kind]}{cond} THEN {what[self.action]}"


@dataclass
class MergeSpec:
    """A whole MERGE. target_alias / source_alias: names the conditions use (``t.id``);
    source_alias is informational (alias the DataFrame itself: ``df.alias('s')``).
    schema_evolution: ``*`` clauses add the source's new columns to the table."""

    path: str
    source: DataFrame
    condition: ColumnOrSql
    clauses: list[MergeClause] = field(default_factory=list)
    target_alias: str | None = None
    schema_evolution: bool = False

    def of_kind(self, kind: str) -> list[MergeClause]:
        return [c for c in self.clauses if c.kind == kind]

    def validate(self) -> None:
        if self.condition is None:
            raise HeadwaterError("HW_DML_INVALID", f"MERGE into {self.path} has no ON condition.",
                                 "MERGE pairs source and target rows by its ON condition.",
                                 "Pass a condition such as 't.id = s.id'.")
        if not self.clauses:
            raise HeadwaterError(
                "HW_DML_INVALID", f"MERGE into {self.path} has no WHEN clause.",
                "A MERGE needs at least one clause to do anything.",
                "Add e.g. .whenMatchedUpdateAll() or .whenNotMatchedInsertAll().")
        for kind in (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE):
            clauses = self.of_kind(kind)
            for clause in clauses[:-1]:
                if clause.condition is None:
                    raise HeadwaterError(
                        "HW_MERGE_CLAUSE_ORDER",
                        f"MERGE into {self.path}: '{clause.describe()}' has no condition but is "
                        f"not the last {_SQL[kind]} clause.",
                        "Clauses of a kind are tried in order; a clause after an unconditional "
                        "one could never run (delta-spark refuses this too).",
                        "Give the earlier clause a condition, or move it last.")
        for clause in self.clauses:
            if clause.kind == NOT_MATCHED_BY_SOURCE and clause.star:
                raise HeadwaterError(
                    "HW_DML_INVALID",
                    f"MERGE into {self.path}: {clause.describe()} is not possible.",
                    "Rows not matched by the source have no source row to take values from.",
                    "Use whenNotMatchedBySourceUpdate(set={...}) with explicit values.")

    @property
    def checks_multiple_matches(self) -> bool:
        """Delta's rule: two source rows may not modify one target row, unless the only
        matched clause is an unconditional DELETE (deleting twice is still one delete)."""
        matched = self.of_kind(MATCHED)
        if not matched:
            return False
        return not (len(matched) == 1 and matched[0].action == "delete"
                    and matched[0].condition is None)


def multiple_match_error(path: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_MERGE_MULTIPLE_SOURCE_ROWS",
        f"MERGE into {path} failed: multiple source rows matched and attempted to modify the "
        "same target row (as delta-spark's DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE)."
        " Nothing was committed.",
        "It is ambiguous which source row should update or delete the target row.",
        "Deduplicate the source so each target row matches at most one source row, e.g. keep "
        "the newest row per key with a window (row_number) before the MERGE.")
