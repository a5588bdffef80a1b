"""Error codes survive Spark's wrapping and come back as HeadwaterError."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import headwater
from headwater.errors import CODES, HeadwaterError, find_code, unwrap


def test_message_has_code_what_why_fix_on_one_line():
    err = HeadwaterError("HW_FLOW_FAILED", "It broke.", "Because.", "Do this.")
    assert str(err) == "[HW_FLOW_FAILED] It broke. Why: Because. Fix: Do this."
    assert err.code == "HW_FLOW_FAILED"


def test_unwrap_finds_the_code_inside_a_wrapped_traceback():
    inner = HeadwaterError("HW_SOURCE_NOT_APPEND_ONLY", "Version 3 deletes rows.")
    wrapped = RuntimeError(f"Traceback (most recent call last):\n  File x\n{inner}\n\tat org...")
    plain = unwrap(wrapped)
    assert isinstance(plain, HeadwaterError)
    assert plain.code == "HW_SOURCE_NOT_APPEND_ONLY"
    assert "Version 3 deletes rows." in str(plain)
    assert find_code(ValueError("nothing here")) is None


def test_translated_reraises_with_cause():
    with pytest.raises(HeadwaterError) as err, headwater.translated():
        raise RuntimeError("org.apache.spark... [HW_SINK_NO_PATH] no path given")
    assert err.value.code == "HW_SINK_NO_PATH"
    assert isinstance(err.value.__cause__, RuntimeError)
    with pytest.raises(KeyError), headwater.translated():
        raise KeyError("not ours")


def test_codes_must_be_prefixed():
    with pytest.raises(ValueError):
        HeadwaterError("SOMETHING", "x")


def test_a_code_outside_the_catalog_is_refused():
    with pytest.raises(ValueError, match="codes.py"):
        HeadwaterError("HW_NOT_IN_THE_CATALOG", "x")


def test_a_code_outside_the_catalog_is_not_found_in_a_message():
    assert find_code(RuntimeError("[HW_SOMETHING_ELSE] not ours")) is None


# --- the catalog cannot rot: every code in the source is in it, every code in it is used ---

SRC = Path(headwater.__file__).resolve().parent
_LITERAL = re.compile(r"\bHW_[A-Z0-9_]*[A-Z0-9]\b")


def _codes_in_source() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "errors" / "codes.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for code in _LITERAL.findall(line):
                found.setdefault(code, []).append(f"{path.relative_to(SRC)}:{number}")
    return found


def test_every_code_in_the_source_is_in_the_catalog():
    unknown = {code: where for code, where in _codes_in_source().items() if code not in CODES}
    assert not unknown, f"codes missing from errors/codes.py: {unknown}"


def test_every_catalog_code_is_raised_somewhere():
    used = _codes_in_source()
    unused = sorted(code for code in CODES if code not in used)
    assert not unused, f"catalog codes no module uses: {unused}"


def test_catalog_entries_are_one_line_meanings():
    assert len(CODES) == len(set(CODES))
    for code, meaning in CODES.items():
        assert re.fullmatch(r"HW_[A-Z0-9_]+", code), code
        assert meaning and "\n" not in meaning and meaning.endswith("."), code


# --- what / why / fix survive Spark's wrapping -----------------------------------------------

def test_unwrap_keeps_what_why_and_fix_of_a_wrapped_message():
    inner = HeadwaterError("HW_SINK_NO_PATH", "No path.", "We never guess.", "Pass a path.")
    wrapped = RuntimeError(f"py4j.Py4JJavaError: An error occurred\nTraceback ...\n"
                           f"headwater.errors.base.HeadwaterError: {inner}\n\tat org.apache...")
    plain = unwrap(wrapped)
    assert isinstance(plain, HeadwaterError)
    assert (plain.code, plain.what, plain.why, plain.fix) == \
        ("HW_SINK_NO_PATH", "No path.", "We never guess.", "Pass a path.")
    assert str(plain) == str(inner)
    only_what = unwrap(RuntimeError("x [HW_SINK_NO_PATH] Just this. SQLSTATE: 38000"))
    assert (only_what.what, only_what.why, only_what.fix) == ("Just this.", "", "")


def test_a_spark_wrapped_error_comes_back_with_what_why_fix(spark, tmp):
    """An error raised in a data source's schema() reaches us as Spark's AnalysisException."""
    with pytest.raises(Exception) as raised:
        _ = spark.read.format("delta").load(str(tmp / "no-table")).schema
    assert not isinstance(raised.value, HeadwaterError)
    plain = unwrap(raised.value)
    assert isinstance(plain, HeadwaterError)
    assert plain.code == "HW_DELTA_TABLE_NOT_FOUND"
    assert plain.what == f"No Delta table at {tmp / 'no-table'}."
    assert plain.why.startswith("The folder has no Delta log")
    assert plain.fix.startswith("Check the path, or write to it first")


def test_errors_package_has_no_import_cycle():
    """errors.base and errors.codes import nothing of errors.spark (nor the package)."""
    for name in ("base.py", "codes.py"):
        text = (SRC / "errors" / name).read_text()
        assert "errors.spark" not in text and "from headwater.errors import" not in text
    spark_text = (SRC / "errors" / "spark.py").read_text()
    assert "from headwater.errors import" not in spark_text
    code = ("import headwater.errors.spark, sys; "
            "assert 'headwater.errors.base' in sys.modules")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
