"""Errors headwater raises: what happened, why, and how to fix it.

Errors raised inside data-source code reach the user wrapped by Spark (AnalysisException,
StreamingQueryException, Py4J errors) with a Python traceback around them. Every message
therefore starts with a stable code such as ``[HW_SOURCE_NOT_APPEND_ONLY]`` and stays on one
line, so :func:`unwrap` can find it again in any wrapper and re-raise a ``HeadwaterError``.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

_CODE_RE = re.compile(r"\[(HW_[A-Z0-9_]+)\] ([^\n]*)")


class HeadwaterError(Exception):
    """Base class of every error headwater raises itself.

    ``code`` is stable (tests and callers match on it); the message says what happened,
    why, and how to fix it.
    """

    def __init__(self, code: str, what: str, why: str = "", fix: str = "") -> None:
        if not code.startswith("HW_"):
            raise ValueError(f"error codes start with HW_: {code}")
        self.code = code
        self.what = what
        self.why = why
        self.fix = fix
        parts = [f"[{code}] {what}"]
        if why:
            parts.append(f"Why: {why}")
        if fix:
            parts.append(f"Fix: {fix}")
        super().__init__(" ".join(p.replace("\n", " ") for p in parts))

    @classmethod
    def from_message(cls, code: str, message: str) -> "HeadwaterError":
        err = cls.__new__(cls)
        Exception.__init__(err, f"[{code}] {message}")
        err.code, err.what, err.why, err.fix = code, message, "", ""
        return err


def find_code(exc: BaseException) -> tuple[str, str] | None:
    """The first ``[HW_...]`` code and message inside an exception or its causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, HeadwaterError):
            return current.code, str(current)[len(current.code) + 3 :]
        texts = [str(current)]
        desc = getattr(current, "desc", None)  # Py4J-backed pyspark errors
        if isinstance(desc, str):
            texts.append(desc)
        for text in texts:
            match = _CODE_RE.search(text)
            if match:
                return match.group(1), match.group(2).strip()
        current = current.__cause__ or current.__context__
    return None


def unwrap(exc: BaseException) -> BaseException:
    """The ``HeadwaterError`` hidden inside a Spark wrapper, or ``exc`` itself."""
    if isinstance(exc, HeadwaterError):
        return exc
    found = find_code(exc)
    if found is None:
        return exc
    return HeadwaterError.from_message(*found)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise Spark-wrapped headwater errors, and Spark's unsupported-operation errors on
    streams, as ``HeadwaterError`` (cause kept)."""
    try:
        yield
    except HeadwaterError:
        raise
    except Exception as exc:  # noqa: BLE001 - we only re-raise, never swallow
        plain = unwrap(exc)
        if plain is exc:
            from headwater.errors.spark import as_headwater

            plain = as_headwater(exc)  # ORDER BY on a stream, say: the same words as validate
            if plain is None:
                raise
        raise plain from exc
