"""The missing feature behind a failure, from its first error (patterns refined as the
failures are read; an error no pattern knows is "other")."""

from __future__ import annotations

import re

# (pattern over the first error, feature); first match wins
FEATURES: list[tuple[str, str]] = [
    (r"no Kafka broker", "the test Kafka broker (not installed here)"),
]


def feature_of(error: str, notebook: str = "") -> str:
    for pattern, feature in FEATURES:
        if re.search(pattern, error):
            return feature
    return "other"
