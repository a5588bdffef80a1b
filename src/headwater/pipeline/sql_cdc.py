"""AUTO CDC in SQL files, the parts Spark's grammar does not have, read at the token level
before Spark's parser sees the statement (line breaks kept, so its line numbers still point
into the file):

- ``APPLY CHANGES INTO [LIVE.]target ...``, DLT's older spelling, is ``CREATE FLOW target AS
  AUTO CDC INTO target ...`` (the flow takes the target's name, as create_auto_cdc_flow's
  default does);
- ``IGNORE NULL UPDATES`` and ``APPLY AS TRUNCATE WHEN condition`` (Databricks' clauses, absent
  from Spark 4.x's AUTO CDC grammar) are taken out and passed to the flow as
  ``ignore_null_updates`` / ``apply_as_truncates``.

The tokens come from sql_files.tokenize (quotes and comments respected).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from headwater.errors import HeadwaterError
from headwater.pipeline.model import Location

# Clauses that may follow APPLY AS TRUNCATE WHEN's condition (Databricks' clause order)
_NEXT_CLAUSE = {"SEQUENCE", "COLUMNS", "STORED", "TRACK", "APPLY", "IGNORE"}


def apply_changes_as_flow(text: str, toks: Sequence[Any], file: Path) -> str:
    """``APPLY CHANGES INTO [LIVE.]target <rest>`` -> ``CREATE FLOW target AS AUTO CDC INTO
    target <rest>``; other statements unchanged."""
    if [t.upper for t in toks[:2]] != ["APPLY", "CHANGES"]:
        return text
    if len(toks) < 4 or toks[2].upper != "INTO" or not _is_name(toks[3].text):
        raise HeadwaterError(
            "HW_PIPELINE_SQL_INVALID", f"{Location(str(file), toks[min(2, len(toks) - 1)].line)}:"
            " malformed APPLY CHANGES: expected INTO and the target's name after APPLY CHANGES.",
            "APPLY CHANGES INTO is DLT's spelling of CREATE FLOW ... AS AUTO CDC INTO.",
            "Write APPLY CHANGES INTO target FROM STREAM(source) KEYS (id) SEQUENCE BY seq "
            "[STORED AS SCD TYPE 2].")
    last, parts = 3, [toks[3].text]
    while last + 2 < len(toks) and toks[last + 1].text == ".":
        last += 2
        parts.append(toks[last].text)
    if len(parts) > 1 and parts[0].upper() == "LIVE":  # DLT's LIVE. is the pipeline's own
        parts = parts[1:]
    target = ".".join(parts)
    head = text[toks[0].start:toks[last].end]
    return (text[:toks[0].start] + f"CREATE FLOW {target} AS AUTO CDC INTO {target}"
            + "\n" * head.count("\n") + text[toks[last].end:])


def strip_cdc_clauses(text: str, toks: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """An AUTO CDC statement without IGNORE NULL UPDATES / APPLY AS TRUNCATE WHEN, and those
    clauses as create_auto_cdc_flow arguments. Other statements are returned unchanged."""
    uppers = [t.upper for t in toks]
    if not any(uppers[i:i + 3] == ["AUTO", "CDC", "INTO"] for i in range(len(uppers))):
        return text, {}
    clauses: dict[str, Any] = {}
    cut: list[tuple[int, int]] = []
    depth, i = 0, 0
    while i < len(toks):
        depth += {"(": 1, ")": -1}.get(toks[i].text, 0)
        if depth == 0 and uppers[i:i + 3] == ["IGNORE", "NULL", "UPDATES"]:
            clauses["ignore_null_updates"] = True
            cut.append((toks[i].start, toks[i + 2].end))
            i += 3
            continue
        if depth == 0 and uppers[i:i + 4] == ["APPLY", "AS", "TRUNCATE", "WHEN"]:
            end, inner = i + 4, 0
            while end < len(toks) and not (inner == 0 and uppers[end] in _NEXT_CLAUSE):
                inner += {"(": 1, ")": -1}.get(toks[end].text, 0)
                end += 1
            if end > i + 4:  # an empty condition is left for Spark's parser to reject
                clauses["apply_as_truncates"] = text[toks[i + 4].start:toks[end - 1].end]
                cut.append((toks[i].start, toks[end - 1].end))
            i = end
            continue
        i += 1
    for start, end in reversed(cut):
        text = text[:start] + "".join(c if c == "\n" else " " for c in text[start:end]) \
            + text[end:]
    return text, clauses


def _is_name(token: str) -> bool:
    return token.replace("_", "a").isalnum() or (token.startswith("`") and token.endswith("`"))
