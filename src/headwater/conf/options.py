"""Strict parsing of every option headwater reads: one rule per kind of value.

Options reach data sources as strings (Spark lower-cases their names and ``str()``-s their
values), from ``read_files`` keywords, and from headwater.toml. Each parser takes the option's
name (as the user wrote it, for the message) and its raw value, and either returns the typed
value or raises ``HW_OPTION_INVALID`` naming the option and the value. Nothing is guessed:

- booleans: ``true`` / ``false`` in any case (and Python's True/False). ``"ture"``, ``"1"``,
  ``"yes"`` are errors: silently reading a typo as false is how data goes missing.
- sizes: a whole number of bytes, or a number with one of the suffixes ``b``, ``k``/``kb``,
  ``m``/``mb``, ``g``/``gb``, ``t``/``tb`` (any case, binary units: 1k = 1024 bytes), e.g.
  ``"4096"``, ``"128m"``, ``"1.5GB"``.
- whole numbers: base-10 integers, with an optional lower bound.
- column lists: ``"a, b"`` or a JSON list ``'["a","b"]'`` (what Spark's partitionBy sends).
- choices: one of a fixed set of words, matched ignoring case, returned as spelled in the set.

A value of None (the option was not given) returns the default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from headwater.errors import HeadwaterError

T = TypeVar("T")

SIZE_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")
_INT = re.compile(r"[+-]?\d+")


def option_error(option: str, value: Any, expected: str, fix: str = "") -> HeadwaterError:
    """``HW_OPTION_INVALID`` for ``option`` set to ``value``: what was expected and the fix."""
    return HeadwaterError(
        "HW_OPTION_INVALID", f"Option {option} is {value!r}; expected {expected}.",
        "headwater reads options strictly, so a typo is an error instead of a silent default.",
        fix or f"Set {option} to {expected}.")


def parse_bool(option: str, value: Any, default: bool) -> bool:
    """``true`` / ``false`` (any case, surrounding spaces ignored), True / False; None: default."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise option_error(option, value, "true or false", f"Set {option} to true or false.")


def parse_size(option: str, value: Any, default: T) -> int | T:
    """Bytes from ``"4096"``, ``"128m"``, ``"1.5g"``... (suffixes: b, k/kb, m/mb, g/gb,
    t/tb, any case); must be positive. None or "": default."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, bool):
        raise _size_error(option, value)
    if isinstance(value, int):
        number = value
    else:
        match = _SIZE.fullmatch(str(value).strip().lower())
        if match is None or match.group(2) not in SIZE_UNITS:
            raise _size_error(option, value)
        digits, unit = match.groups()
        if "." in digits and SIZE_UNITS[unit] == 1:
            raise _size_error(option, value)  # a fraction of a byte
        number = int(float(digits) * SIZE_UNITS[unit])
    if number <= 0:
        raise _size_error(option, value)
    return number


def _size_error(option: str, value: Any) -> HeadwaterError:
    return option_error(option, value, "a positive size in bytes, optionally with a suffix "
                        "b, k/kb, m/mb, g/gb or t/tb", f"Set {option} to e.g. '128m' or '1g'.")


def parse_int(option: str, value: Any, default: T, minimum: int | None = None) -> int | T:
    """A whole number (``"12"``, 12), at least ``minimum`` when given; None or "": default."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, bool) or not (isinstance(value, int) or
                                       _INT.fullmatch(str(value).strip())):
        raise _int_error(option, value, minimum)
    number = int(str(value).strip()) if not isinstance(value, int) else value
    if minimum is not None and number < minimum:
        raise _int_error(option, value, minimum)
    return number


def _int_error(option: str, value: Any, minimum: int | None) -> HeadwaterError:
    expected = "a whole number" if minimum is None else \
        ("a positive whole number" if minimum == 1 else f"a whole number >= {minimum}")
    return option_error(option, value, expected, f"Set {option} to {expected}.")


def parse_columns(option: str, value: Any) -> list[str]:
    """Column names from ``"a, b"``, a JSON list ``'["a", "b"]'`` or a Python list; None: []."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        names = [str(c) for c in value]
    else:
        text = str(value).strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise _columns_error(option, value) from exc
            if not isinstance(parsed, list) or not all(isinstance(c, str) for c in parsed):
                raise _columns_error(option, value)
            names = parsed
        else:
            names = text.split(",") if text else []
    names = [c.strip() for c in names]
    if any(not c for c in names):
        raise _columns_error(option, value)
    return names


def _columns_error(option: str, value: Any) -> HeadwaterError:
    return option_error(option, value, "column names separated by commas, or a JSON list of "
                        "names", f"Set {option} to e.g. 'date, region'.")


def parse_choice(option: str, value: Any, choices: Iterable[str], default: T) -> str | T:
    """One of ``choices`` matched ignoring case (and surrounding spaces), returned as spelled
    in ``choices``; None: default."""
    if value is None:
        return default
    allowed = list(choices)
    found = {c.lower(): c for c in allowed}.get(str(value).strip().lower())
    if found is None:
        raise option_error(option, value, f"one of {', '.join(allowed)}",
                           f"Use one of {', '.join(allowed)}.")
    return found
