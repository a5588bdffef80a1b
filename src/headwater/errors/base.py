"""``HeadwaterError`` and finding it again inside Spark's wrappers.

Errors raised inside data-source code reach the user wrapped by Spark (AnalysisException,
StreamingQueryException, Py4J errors) with a Python traceback around them. Every message
therefore starts with a stable code such as ``[HW_SOURCE_NOT_APPEND_ONLY]`` and stays on one
line (``[code] what Why: why Fix: fix``), so :func:`find_code` finds it in any wrapper and
:func:`unwrap` rebuilds the ``HeadwaterError``, what/why/fix included.

This module imports nothing of headwater but the code catalog: every other module (Spark's
error translation in ``errors/spark.py`` included) builds on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from headwater.errors.codes import CODES

_CODE_RE = re.compile(r"\[(HW_[A-Z0-9_]+)\] ([^\n]*)")
# "what Why: why Fix: fix" as HeadwaterError writes it; Why and Fix are optional.
_PARTS_RE = re.compile(r"^(?P<what>.*?)(?: Why: (?P<why>.*?))?(?: Fix: (?P<fix>.*))?$", re.S)
_SQLSTATE_RE = re.compile(r"\s*SQLSTATE: \w+\s*$")  # Spark may append it to the same line
# delta-spark's error class, written after headwater's code ("[HW_...] [DELTA_Y] what")
_ERROR_CLASS_RE = re.compile(r"^\[([A-Z][A-Z0-9_.]+)\] ")


class HeadwaterError(Exception):
    """Base class of every error headwater raises itself.

    ``code`` is stable (tests and callers match on it) and must be in
    ``headwater.errors.codes.CODES``; the message says what happened, why, and how to fix it.
    ``error_class``: delta-spark's (or Spark's) name for the same error, e.g.
    ``DELTA_PATH_EXISTS``, written after the code (``[HW_...] [DELTA_PATH_EXISTS] what ...``)
    so code that matches delta-spark's messages keeps working.
    """

    def __init__(self, code: str, what: str, why: str = "", fix: str = "",
                 error_class: str | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"{code!r} is not a headwater error code: add it with its meaning "
                             "to headwater/errors/codes.py")
        self.code = code
        self.what = what
        self.why = why
        self.fix = fix
        self.error_class = error_class
        parts = [f"[{code}] [{error_class}] {what}" if error_class else f"[{code}] {what}"]
        if why:
            parts.append(f"Why: {why}")
        if fix:
            parts.append(f"Fix: {fix}")
        # Exception's own init, not the next class's: a subclass may also be a PySpark error
        # (errors/delta.py), whose init expects a JVM exception.
        Exception.__init__(self, " ".join(p.replace("\n", " ") for p in parts))

    @classmethod
    def from_message(cls, code: str, message: str) -> HeadwaterError:
        """The error again from its one-line message (``what Why: ... Fix: ...``)."""
        text = _SQLSTATE_RE.sub("", message).strip()
        error_class = _ERROR_CLASS_RE.match(text)
        if error_class:
            text = text[error_class.end():]
        match = _PARTS_RE.match(text)
        assert match is not None  # every part is optional
        return cls(code, match.group("what").strip(), (match.group("why") or "").strip(),
                   (match.group("fix") or "").strip(),
                   error_class=error_class.group(1) if error_class else None)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its cause (or context), and so on, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def find_code(exc: BaseException) -> tuple[str, str] | None:
    """The first known ``[HW_...]`` code and its message inside an exception or its causes."""
    for current in causes(exc):
        if isinstance(current, HeadwaterError):
            return current.code, str(current)[len(current.code) + 3 :]
        texts = [str(current)]
        desc = getattr(current, "desc", None)  # Py4J-backed pyspark errors
        if isinstance(desc, str):
            texts.append(desc)
        for text in texts:
            for match in _CODE_RE.finditer(text):
                if match.group(1) in CODES:
                    return match.group(1), _SQLSTATE_RE.sub("", match.group(2)).strip()
    return None


def unwrap(exc: BaseException) -> BaseException:
    """The ``HeadwaterError`` hidden inside a Spark wrapper (what, why and fix parsed back),
    or ``exc`` itself."""
    if isinstance(exc, HeadwaterError):
        return exc
    found = find_code(exc)
    if found is None:
        return exc
    return HeadwaterError.from_message(*found)
