"""Error codes survive Spark's wrapping and come back as HeadwaterError."""

from __future__ import annotations

import pytest

import headwater
from headwater.errors import HeadwaterError, find_code, unwrap


def test_message_has_code_what_why_fix_on_one_line():
    err = HeadwaterError("HW_X", "It broke.", "Because.", "Do this.")
    assert str(err) == "[HW_X] It broke. Why: Because. Fix: Do this."
    assert err.code == "HW_X"


def test_unwrap_finds_the_code_inside_a_wrapped_traceback():
    inner = HeadwaterError("HW_SOURCE_NOT_APPEND_ONLY", "Version 3 deletes rows.")
    wrapped = RuntimeError(f"Traceback (most recent call last):\n  File x\n{inner}\n\tat org...")
    plain = unwrap(wrapped)
    assert isinstance(plain, HeadwaterError)
    assert plain.code == "HW_SOURCE_NOT_APPEND_ONLY"
    assert "Version 3 deletes rows." in str(plain)
    assert find_code(ValueError("nothing here")) is None


def test_translated_reraises_with_cause():
    with pytest.raises(HeadwaterError) as err:
        with headwater.translated():
            raise RuntimeError("org.apache.spark... [HW_SINK_NO_PATH] no path given")
    assert err.value.code == "HW_SINK_NO_PATH"
    assert isinstance(err.value.__cause__, RuntimeError)
    with pytest.raises(KeyError):
        with headwater.translated():
            raise KeyError("not ours")


def test_codes_must_be_prefixed():
    with pytest.raises(ValueError):
        HeadwaterError("SOMETHING", "x")
