"""AUTO CDC FROM SNAPSHOT in SQL files (Databricks' ``CREATE FLOW f AS AUTO CDC INTO target
FROM SNAPSHOT source KEYS (...) [COLUMNS ...] [STORED AS SCD TYPE n] [TRACK HISTORY ON ...]``),
which Spark 4.3's grammar lacks.

The snapshot source (a table or view name, or a parenthesized query) is cut out at the token
level; what is left is written as the AUTO CDC statement Spark's parser knows (``FROM
STREAM(<placeholder>)`` and a placeholder ``SEQUENCE BY`` after KEYS), so Spark's parser reads
the keys, COLUMNS, STORED AS and TRACK HISTORY clauses; line breaks are kept, so its line
numbers still point into the file. Each run reads the source's rows as one snapshot, versioned
by the run's time, as the Python API's table source.

Databricks' ``WITH VERSION (query)`` clause (with ``last_snapshot_version()`` /
``current_snapshot_version()``) is refused with HW_PIPELINE_UNSUPPORTED: its version query's
schema is only known by running it, and it reads its own previous answer; use the Python
API's ``next_snapshot_and_version`` function for historical snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.errors import HeadwaterError
from headwater.pipeline import model
from headwater.pipeline.model import Location
from headwater.pipeline.snapshot import snapshot_flow

PLACEHOLDER_SOURCE = "__hw_snapshot_source"
PLACEHOLDER_SEQUENCE = "__hw_snapshot_sequence"


@dataclass(frozen=True)
class SnapshotSql:
    """The source of a ``FROM SNAPSHOT`` clause: a table name or a query's text."""

    table: str | None = None
    query: str | None = None


def _invalid(where: Location, what: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_PIPELINE_SQL_INVALID", f"{where}: {what}.",
        "AUTO CDC FROM SNAPSHOT reads: CREATE FLOW f AS AUTO CDC INTO target FROM SNAPSHOT "
        "source KEYS (...) [COLUMNS ...] [STORED AS SCD TYPE 1|2] [TRACK HISTORY ON ...].",
        "Write e.g. CREATE FLOW orders_flow AS AUTO CDC INTO orders FROM SNAPSHOT "
        "orders_snapshot KEYS (order_id) STORED AS SCD TYPE 2.")


def _blank(text: str) -> str:
    return "".join(c if c == "\n" else " " for c in text)


def _close(toks: Sequence[Any], open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[i].text, 0)
        if depth == 0:
            return i
    return None


def cut_snapshot_source(text: str, toks: Sequence[Any], file: Path
                        ) -> tuple[str, SnapshotSql | None]:
    """An AUTO CDC ... FROM SNAPSHOT statement as Spark can parse it, and its source; other
    statements unchanged (and None)."""
    uppers = [t.upper for t in toks]
    at = next((i for i in range(2, len(toks) - 1)
               if uppers[i:i + 2] == ["FROM", "SNAPSHOT"]
               and "CDC" in uppers[:i] and "INTO" in uppers[:i]), None)
    if at is None:
        return text, None
    where = Location(str(file), toks[at].line)
    first = at + 2
    if first >= len(toks):
        raise _invalid(where, "FROM SNAPSHOT names no source")
    if toks[first].text == "(":
        last = _close(toks, first)
        if last is None or last == first + 1:
            raise _invalid(where, "the FROM SNAPSHOT query is empty or its '(' is never closed")
        source = SnapshotSql(query=text[toks[first + 1].start:toks[last - 1].end])
    else:
        last, parts = first, [toks[first].text]
        while last + 2 < len(toks) and toks[last + 1].text == ".":
            last += 2
            parts.append(toks[last].text)
        if len(parts) > 1 and parts[0].upper() == "LIVE":  # DLT's LIVE. is the pipeline's own
            parts = parts[1:]
        source = SnapshotSql(table=".".join(parts))
    rest = last + 1
    if uppers[rest:rest + 2] == ["WITH", "VERSION"]:
        raise HeadwaterError(
            "HW_PIPELINE_UNSUPPORTED", f"{Location(str(file), toks[rest].line)}: AUTO CDC FROM "
            "SNAPSHOT ... WITH VERSION (...) is not supported.",
            "The version query reads its own previous answer (last_snapshot_version()) and "
            "its schema is known only by running it; headwater takes SQL snapshots of a "
            "table or query once per run, versioned by the run's time.",
            "Drop WITH VERSION for periodic snapshots, or write the flow in Python with "
            "create_auto_cdc_from_snapshot_flow(source=next_snapshot_and_version, ...).")
    if uppers[rest:rest + 1] != ["KEYS"] or rest + 1 >= len(toks) or toks[rest + 1].text != "(":
        raise _invalid(Location(str(file), toks[min(rest, len(toks) - 1)].line),
                       "expected KEYS (...) after the FROM SNAPSHOT source")
    keys_end = _close(toks, rest + 1)
    if keys_end is None:
        raise _invalid(where, "the KEYS list's '(' is never closed")
    for clause in (["SEQUENCE", "BY"], ["APPLY", "AS"], ["IGNORE", "NULL"]):
        found = next((i for i in range(keys_end, len(toks) - 1)
                      if uppers[i:i + 2] == clause), None)
        if found is not None:
            raise _invalid(Location(str(file), toks[found].line),
                           f"{' '.join(clause)} does not apply to AUTO CDC FROM SNAPSHOT (the "
                           "snapshot's version orders the changes; missing keys are deletes)")
    statement = (text[:toks[at].start] + f"FROM STREAM({PLACEHOLDER_SOURCE})"
                 + "\n" * text[toks[at].start:toks[last].end].count("\n")
                 + text[toks[last].end:toks[keys_end].end]
                 + f" SEQUENCE BY {PLACEHOLDER_SEQUENCE}" + text[toks[keys_end].end:])
    return statement, source


def snapshot_flow_from_sql(plan: Any, name: str, target: str, location: Location,
                           source: SnapshotSql) -> model.Flow:
    """The parsed ``AutoCdcInto`` (placeholders in) and the cut-out source -> a snapshot
    flow."""
    def names(option: Any) -> list[str] | None:
        if not option.isDefined():
            return None
        seq = option.get()
        return [str(seq.apply(i).name()) for i in range(seq.size())]

    keys = plan.keys()
    include, exclude = names(plan.includeColumns()), names(plan.excludeColumns())
    return snapshot_flow(
        target=target, source=source.table, query=source.query, name=name, location=location,
        keys=[str(keys.apply(i).name()) for i in range(keys.size())],
        stored_as_scd_type=int(plan.storedAsScdType()),
        track_history_column_list=names(plan.trackHistoryColumns()),
        track_history_except_column_list=names(plan.trackHistoryExceptColumns()),
        column_list=include, except_column_list=exclude)
