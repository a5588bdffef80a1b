"""SQL text as Spark's lexer reads it: comments, tokens and statements.

Spark's parser skips ``-- line`` and ``/* bracketed */`` comments (nested ones too) and keeps
``/*+ hints */``; headwater reads some statements from their text before or instead of
Spark's parser (Delta's own grammar, pipeline SQL files, the SQL router's rewrites), so it
blanks comments the same way first. Blanking keeps every other character where it was (each
comment character becomes a space, newlines stay), so line numbers and the offsets Spark's
parsed plans give (``origin.startIndex``) still point into the text the user wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Token:
    """One token of SQL text: its characters, offsets and line (1-based)."""

    text: str
    start: int
    end: int
    line: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def without_comments(text: str) -> str:
    """``text`` with its comments blanked (hints kept; quoted text untouched)."""
    out, i, quote = list(text), 0, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        elif text.startswith("/*", i) and not text.startswith("/*+", i):
            end = _comment_end(text, i)
            out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
            i = end
            continue
        i += 1
    return "".join(out)


def _comment_end(text: str, start: int) -> int:
    """The offset after the bracketed comment opening at ``start`` (Spark nests them)."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(text)


_TOKEN = re.compile(r"""\s+|(?P<tok>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`]|``)*`|\w+|.)""",
                    re.DOTALL)


def tokens(text: str, first_line: int = 1) -> list[Token]:
    """The tokens of ``text`` (comments already blanked), with the line each starts on."""
    found, line = [], first_line
    for match in _TOKEN.finditer(text):
        if match.group("tok") is not None:
            found.append(Token(match.group("tok"), match.start(), match.end(), line))
        line += match.group(0).count("\n")
    return found


def statements(text: str) -> list[tuple[str, int]]:
    """(statement text without comments, its first line), split on top-level ``;``."""
    clean = without_comments(text)
    result, current = [], []
    for tok in tokens(clean):
        if tok.text == ";":
            if current:
                result.append((clean[current[0].start:current[-1].end], current[0].line))
            current = []
        else:
            current.append(tok)
    if current:
        result.append((clean[current[0].start:current[-1].end], current[0].line))
    return result
