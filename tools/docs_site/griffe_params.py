"""A griffe extension for headwater's docstrings: ``name: text`` lines become a list.

headwater documents parameters as plain lines, ``master: a Spark master URL; ...`` with
indented continuation lines, not in a Google or NumPy section. Rendered as Markdown those
lines run together into one paragraph; this extension turns each line that starts with one of
the function's parameter names into a list item (``- `name`: text``), keeping the rest of the
docstring as it is.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_LINE = re.compile(r"^(\w+(?:, \w+)*)(?: \([^)]*\))?: (.*)$")


def list_parameters(text: str, parameters: set[str]) -> str:
    out: list[str] = []
    in_item = False
    for line in text.splitlines():
        match = _LINE.match(line)
        names = match.group(1).split(", ") if match else []
        if match and names and all(n in parameters for n in names):
            label = ", ".join(f"`{n}`" for n in names)
            if out and out[-1].strip() and not in_item:
                out.append("")
            out.append(f"- {label}: {match.group(2)}")
            in_item = True
        elif in_item and line.startswith((" ", "\t")) and line.strip():
            out.append("  " + line.strip())
        else:
            if in_item and line.strip():
                out.append("")
            in_item = False
            out.append(line)
    return "\n".join(out)


class ParameterLines(griffe.Extension):
    def on_function(self, *, func: griffe.Function, **kwargs: Any) -> None:
        if func.docstring is None:
            return
        parameters = {p.name for p in func.parameters if p.name not in ("self", "cls")}
        if parameters:
            func.docstring.value = list_parameters(func.docstring.value, parameters)
