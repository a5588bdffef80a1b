"""Databricks' notebook source format, as DLT pipelines hold their definitions.

A ``.py`` file whose first line is ``# Databricks notebook source`` (a ``.sql`` file:
``-- Databricks notebook source``) is a notebook exported as source: cells separated by
``# COMMAND ----------`` (``-- COMMAND ----------``) lines, each in the notebook's language unless
its lines start with ``# MAGIC`` (``-- MAGIC``), whose first line names the cell's language:
``%sql``, ``%python``, ``%md`` (text), ``%pip``, ``%run``, ``%sh`` ... A ``# DBTITLE`` line may
precede a cell's code.

:func:`cells` gives each cell's language and its code with the ``MAGIC`` prefixes removed,
laid out on the file's own lines (earlier lines left empty), so Python's tracebacks and
Spark's parser errors name the line of the file. The loader decides what each language means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADERS = {"# Databricks notebook source": "python", "-- Databricks notebook source": "sql"}
_PREFIX = {"python": "#", "sql": "--"}
# what a magic word means; any other %word is a cell headwater does not run
_LANGUAGES = {"python": "python", "py": "python", "sql": "sql", "md": "md",
              "md-sandbox": "md", "pip": "pip", "run": "run"}


@dataclass(frozen=True)
class Cell:
    """One cell: language ("python", "sql", "md", "pip", "run", or the magic word of a kind
    headwater does not run, e.g. "sh"), the file line of its first code (or magic) line, and
    its code padded with empty lines so that line n of ``code`` is line n of the file."""

    language: str
    line: int
    code: str
    magic: str | None = None  # the magic word as written ("%sql"), None in the notebook's own

    @property
    def body(self) -> str:
        """The code without the padding and the magic word (e.g. ``install pkg`` of %pip)."""
        return self.code.strip()


def notebook_language(text: str) -> str | None:
    """"python" or "sql" for a notebook's source, None for a plain file."""
    first = text.lstrip("\ufeff").split("\n", 1)[0].strip()
    return HEADERS.get(first)


def cells(text: str) -> list[Cell]:
    """The cells of a notebook's source (see the module docstring)."""
    language = notebook_language(text)
    if language is None:
        raise ValueError("not a Databricks notebook source")
    mark = _PREFIX[language]
    separator = f"{mark} COMMAND ----------"
    magic_line = re.compile(rf"^{re.escape(mark)} MAGIC( |$)")
    lines = text.lstrip("\ufeff").split("\n")
    found: list[Cell] = []
    start = 1  # 0-based index of the current cell's first line (line 0 is the header)
    for i in range(1, len(lines) + 1):
        if i < len(lines) and lines[i].rstrip() != separator:
            continue
        if any(line.strip() for line in lines[start:i]):
            found.append(_cell(lines, start, i, language, mark, magic_line))
        start = i + 1
    return found


def _cell(lines: list[str], start: int, end: int, language: str, mark: str,
          magic_line: re.Pattern[str]) -> Cell:
    own = list(lines[start:end])
    title = re.compile(rf"^{re.escape(mark)} DBTITLE\b")
    code_lines = [k for k, line in enumerate(own) if line.strip() and not title.match(line)]
    magic: str | None = None
    kind = language
    if code_lines and magic_line.match(own[code_lines[0]]):
        own = [magic_line.sub("", line, count=1) if magic_line.match(line) else
               ("" if title.match(line) else line) for line in own]
        first = code_lines[0]
        word = own[first].strip().split(None, 1)
        if word and word[0].startswith("%"):
            magic = word[0]
            kind = _LANGUAGES.get(magic[1:].lower(), magic[1:].lower())
            # the magic word goes; what follows it on its line (%pip's arguments) stays
            own[first] = own[first].replace(magic, " " * len(magic), 1)
    padding = "\n" * start
    first_code = start + 1 + (code_lines[0] if code_lines else 0)
    return Cell(kind, first_code, padding + "\n".join(own), magic)
