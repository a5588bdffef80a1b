"""Triggers as the seeds write them, checked before a query starts.

``trigger`` is either the keywords of PySpark's ``DataStreamWriter.trigger`` as a dict
(``{"processingTime": "2 minutes"}``, ``{"availableNow": True}``, ``{"once": True}``) or a
shorthand string: ``"available-now"``, ``"once"``, ``"2 minutes"``, ``"500 ms"``. No trigger
means Spark's default, a micro-batch every 500 ms as soon as the previous one ends.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Union

from headwater.errors import HeadwaterError

Trigger = Union[str, dict[str, Any], None]

DEFAULT_INTERVAL = "500 milliseconds"
log = logging.getLogger("headwater")

_UNITS = {
    "ms": "milliseconds", "millisecond": "milliseconds", "milliseconds": "milliseconds",
    "s": "seconds", "sec": "seconds", "second": "seconds", "seconds": "seconds",
    "m": "minutes", "min": "minutes", "minute": "minutes", "minutes": "minutes",
    "h": "hours", "hour": "hours", "hours": "hours",
}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_KEYS = {"processingtime": "processingTime", "once": "once", "availablenow": "availableNow",
         "continuous": "continuous"}


def _bad(value: Any, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_TRIGGER_INVALID", f"Trigger {value!r} is not valid: {why}.",
        "A trigger says when the next micro-batch runs.",
        'Use "available-now", "once", an interval such as "30 seconds", or a dict like '
        '{"processingTime": "2 minutes"} / {"availableNow": True}.',
    )


def parse_interval(text: str) -> str:
    """'500ms' / '2 minutes' / '1.5 s' -> Spark's interval text ('2 minutes')."""
    match = _INTERVAL.match(str(text).lower())
    if not match or match.group(2) not in _UNITS:
        raise _bad(text, "an interval is a number and a unit (ms, seconds, minutes, hours)")
    return f"{match.group(1)} {_UNITS[match.group(2)]}"


def trigger_kwargs(trigger: Trigger) -> dict[str, Any]:
    """The keywords for ``DataStreamWriter.trigger``; the 500 ms default when ``None``."""
    if trigger is None:
        return {"processingTime": DEFAULT_INTERVAL}
    if isinstance(trigger, dict):
        if len(trigger) != 1:
            raise _bad(trigger, "give exactly one of processingTime, availableNow, once")
        key, value = next(iter(trigger.items()))
        canonical = _KEYS.get(str(key).replace("_", "").lower())
        if canonical is None:
            raise _bad(trigger, f"unknown trigger keyword {key!r}")
        if canonical == "continuous":
            raise HeadwaterError(
                "HW_TRIGGER_INVALID",
                "Spark's continuous processing trigger does not work with headwater's sources.",
                "Continuous processing needs JVM sources with continuous readers; Delta through "
                "Python data sources reads in micro-batches.",
                'Use a short processingTime interval instead, e.g. {"processingTime": "500 ms"} '
                "(headwater's continuous pipeline mode does exactly that).",
            )
        if canonical == "processingTime":
            return {"processingTime": parse_interval(value)}
        if value is not True:
            raise _bad(trigger, f"{canonical} takes True")
        if canonical == "once":
            _warn_once()
        return {canonical: True}
    if not isinstance(trigger, str):
        raise _bad(trigger, "expected a string or a dict")
    text = trigger.strip().lower().replace("_", "-")
    if text in ("available-now", "availablenow"):
        return {"availableNow": True}
    if text == "once":
        _warn_once()
        return {"once": True}
    return {"processingTime": parse_interval(text)}


def is_triggered(kwargs: dict[str, Any]) -> bool:
    """True when the query stops by itself once the available data is processed."""
    return bool(kwargs.get("availableNow") or kwargs.get("once"))


def _warn_once() -> None:
    log.warning(
        "Trigger once is deprecated in Spark: it runs one micro-batch with all available data, "
        "ignoring rate limits (maxFilesPerTrigger, maxBytesPerTrigger). availableNow processes "
        "the same data in several batches that respect them; prefer trigger 'available-now'."
    )
