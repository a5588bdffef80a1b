"""docs/dlt-notebooks-compatibility.md, generated from a corpus run (never by hand)."""

from __future__ import annotations

from typing import Any


def render(data: dict[str, Any]) -> str:
    return "# DLT notebooks on headwater\n"
