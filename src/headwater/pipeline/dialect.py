"""Which Spark defaults a pipeline's code was written for: DLT's or Spark 4's.

Why: Databricks' DLT pipelines ran on Databricks Runtime releases before 17.0, where
``spark.sql.ansi.enabled`` is false ("Enabled by default in Apache Spark 4.0 and Databricks
Runtime 17.0 and above": https://docs.databricks.com/aws/en/sql/language-manual/sql-ref-ansi-compliance).
Their code counts on it: ``CAST('' AS FLOAT)`` is NULL there, an error (CAST_INVALID_INPUT)
under ANSI mode. Code written in DLT's dialect therefore runs with ANSI mode off; a Spark
Declarative Pipelines project written for Spark 4 keeps Spark's default.

DLT's dialect is recognized from the definition files' text, before any of them runs (the
setting has to be in place when the first DataFrame is analysed): a file in Databricks'
notebook source format, Python importing ``dlt`` (or ``headwater.dlt``), SQL with DLT's
spellings (``LIVE.x``, ``LIVE TABLE``, ``cloud_files(``). A pipeline whose configuration
sets ``spark.sql.ansi.enabled``, or whose code mentions it (a ``SET`` or ``spark.conf.set``),
keeps what it says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from headwater.conf.layout import ANSI_CONF
from headwater.pipeline.notebook import notebook_language

ANSI_DOCS = "https://docs.databricks.com/aws/en/sql/language-manual/sql-ref-ansi-compliance"

_PYTHON_DLT = re.compile(
    r"^[ \t]*(?:import[ \t]+(?:headwater\.)?dlt\b|from[ \t]+(?:headwater\.)?dlt[ \t]+import\b"
    r"|from[ \t]+headwater[ \t]+import[ \t]+dlt\b)", re.M)
_SQL_DLT = re.compile(
    r"\bLIVE\s*\.\s*[`\w]|\bLIVE\s+(?:TABLE|VIEW)\b|\bcloud_files\s*\(", re.I)
_MENTIONS_ANSI = re.compile(r"spark\.sql\.ansi\.enabled|\bansi_mode\b", re.I)


@dataclass(frozen=True)
class SessionDefaults:
    """Settings a pipeline's session gets while its definitions load and its flows run,
    and the lines that say why (printed by ``headwater run`` / ``validate``)."""

    settings: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def dlt_evidence(files: Iterable[Path]) -> str | None:
    """The first sign that the files are written in DLT's dialect ("<file>: ..."), or None."""
    for file in files:
        text = _read(file)
        if text is None:
            continue
        if notebook_language(text) is not None:
            return f"{file.name} is a Databricks notebook"
        if file.suffix == ".py" and (match := _PYTHON_DLT.search(text)):
            return f"{file.name} has `{match.group(0).strip()}`"
        if file.suffix == ".sql" and (match := _SQL_DLT.search(text)):
            return f"{file.name} says `{match.group(0)}`"
    return None


def session_defaults(files: list[Path], configuration: Mapping[str, str]) -> SessionDefaults:
    """ANSI mode off for DLT code unless the configuration or the code sets it (see the module
    docstring); nothing for any other pipeline."""
    if ANSI_CONF in configuration:
        return SessionDefaults()
    evidence = dlt_evidence(files)
    if evidence is None:
        return SessionDefaults()
    if any(_MENTIONS_ANSI.search(text or "") for text in map(_read, files)):
        return SessionDefaults()  # the code sets it itself
    return SessionDefaults(
        {ANSI_CONF: "false"},
        (f"ANSI mode off: DLT's default for pipelines written in its dialect ({evidence}); "
         f"set {ANSI_CONF} in the pipeline's configuration to choose",))


def _read(file: Path) -> str | None:
    try:
        return file.read_text()
    except (OSError, UnicodeDecodeError):
        return None  # the loader reports unreadable files itself
