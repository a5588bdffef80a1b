"""Plain-text tables for the commands' output (``sql``, ``status``, ``history``)."""

from __future__ import annotations


def text_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of columns padded to their widest cell, a dashed rule under the header."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return lines
