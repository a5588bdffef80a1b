"""One strict parser for every option (conf/options.py): each rule, and typos reaching the user
as HW_OPTION_INVALID from a real Delta stream and a real file stream (issue 12)."""

from __future__ import annotations

import pytest
from tests.support import write

import headwater
from headwater.conf.options import (
    SIZE_UNITS,
    parse_bool,
    parse_choice,
    parse_columns,
    parse_int,
    parse_size,
)
from headwater.errors import HeadwaterError, unwrap


def _invalid(call, *args):
    with pytest.raises(HeadwaterError) as raised:
        call(*args)
    assert raised.value.code == "HW_OPTION_INVALID"
    return raised.value


# --- booleans -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [("true", True), ("false", False), ("TRUE", True),
                                         ("False", False), (" true ", True), (True, True),
                                         (False, False)])
def test_booleans_are_true_or_false_in_any_case(text, value):
    assert parse_bool("opt", text, not value) is value


def test_a_missing_boolean_is_its_default():
    assert parse_bool("opt", None, True) is True
    assert parse_bool("opt", None, False) is False


@pytest.mark.parametrize("text", ["ture", "1", "0", "yes", "no", "on", "", "t"])
def test_anything_else_is_an_error_naming_option_and_value(text):
    err = _invalid(parse_bool, "ignoreDeletes", text, False)
    assert "ignoreDeletes" in err.what and repr(text) in err.what
    assert "true or false" in err.fix


# --- sizes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, size", [
    ("4096", 4096), (4096, 4096), ("10b", 10), ("10B", 10),
    ("1k", 1024), ("1kb", 1024), ("1KB", 1024), ("2m", 2 << 20), ("2mb", 2 << 20),
    ("2MB", 2 << 20), ("1g", 1 << 30), ("1Gb", 1 << 30), ("1t", 1 << 40), ("1tb", 1 << 40),
    ("1.5g", 3 << 29), ("128 m", 128 << 20),
])
def test_sizes_share_one_set_of_suffixes(text, size):
    assert parse_size("targetFileSize", text, None) == size


def test_the_suffix_set_is_documented_and_complete():
    assert set(SIZE_UNITS) == {"", "b", "k", "kb", "m", "mb", "g", "gb", "t", "tb"}
    doc = parse_size.__doc__ or ""
    assert all(unit in doc for unit in ("b,", "k/kb", "m/mb", "g/gb", "t/tb"))


@pytest.mark.parametrize("text", ["12x", "1.5", "m", "-1m", "0", "1kib", "ten", True])
def test_bad_sizes_are_errors(text):
    err = _invalid(parse_size, "maxBytesPerTrigger", text, None)
    assert "maxBytesPerTrigger" in err.what


def test_a_missing_size_is_its_default():
    assert parse_size("x", None, 7) == 7
    assert parse_size("x", " ", None) is None


# --- whole numbers ---------------------------------------------------------------------------

def test_whole_numbers():
    assert parse_int("maxFilesPerTrigger", "12", None) == 12
    assert parse_int("maxFilesPerTrigger", 12, None) == 12
    assert parse_int("startingVersion", "0", None, minimum=0) == 0
    assert parse_int("x", None, 1000) == 1000
    for bad in ("1.5", "ten", "1e3", True):
        _invalid(parse_int, "maxFilesPerTrigger", bad, None)
    err = _invalid(parse_int, "maxFilesPerTrigger", "0", None, 1)
    assert "positive whole number" in err.what
    _invalid(parse_int, "versionAsOf", "-1", None, 0)


# --- column lists and choices ----------------------------------------------------------------

def test_column_lists():
    assert parse_columns("partitionBy", "a, b") == ["a", "b"]
    assert parse_columns("partitionBy", '["a","b"]') == ["a", "b"]
    assert parse_columns("partitionBy", ["a"]) == ["a"]
    assert parse_columns("partitionBy", None) == []
    assert parse_columns("partitionBy", "") == []
    for bad in ("a,,b", '["a", 1]', "[broken"):
        _invalid(parse_columns, "partitionBy", bad)


def test_choices_match_ignoring_case_and_return_the_canonical_spelling():
    modes = ("addNewColumns", "rescue")
    assert parse_choice("schema_evolution_mode", "ADDNEWCOLUMNS", modes, None) == "addNewColumns"
    assert parse_choice("schema_evolution_mode", None, modes, "rescue") == "rescue"
    err = _invalid(parse_choice, "schema_evolution_mode", "addColumns", modes, None)
    assert "addNewColumns" in err.fix


# --- end to end: the typo reaches the user as HW_OPTION_INVALID -------------------------------

def test_a_boolean_typo_on_a_delta_stream_is_an_error(spark, tmp):
    """On a696c0f "ture" was silently false and the stream ran."""
    write(tmp / "t", {"id": [1, 2]})
    with pytest.raises(Exception) as raised:  # at load (the native source) or at start
        df = spark.readStream.format("delta").option("ignoreDeletes", "ture").load(str(tmp / "t"))
        query = (df.writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp / "cp")).start())
        query.awaitTermination(120)
        if query.exception() is not None:
            raise query.exception()
    err = unwrap(raised.value)
    assert isinstance(err, HeadwaterError) and err.code == "HW_OPTION_INVALID"
    assert "ignoreDeletes" in err.what and "'ture'" in err.what


def test_a_boolean_typo_in_read_files_is_an_error(spark, tmp):
    """On a696c0f include_existing_files="ture" was silently false (existing files skipped)."""
    (tmp / "landing").mkdir()
    (tmp / "landing" / "a.json").write_text('{"id": 1}\n')
    with pytest.raises(HeadwaterError) as raised:
        headwater.read_files(tmp / "landing", schema="id int", schema_location=tmp / "s",
                             include_existing_files="ture", spark=spark)
    assert raised.value.code == "HW_OPTION_INVALID"
    assert "includeExistingFiles" in raised.value.what and "'ture'" in raised.value.what


def test_a_boolean_typo_in_a_cloudfiles_option_is_an_error(spark, tmp):
    (tmp / "landing").mkdir()
    reader = (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
              .option("cloudFiles.schemaLocation", str(tmp / "s"))
              .option("cloudFiles.includeExistingFiles", "ture"))
    with pytest.raises(Exception) as raised, headwater.translated():
        reader.load(str(tmp / "landing"))
    assert isinstance(raised.value, HeadwaterError)
    assert raised.value.code == "HW_OPTION_INVALID"
    assert "includeExistingFiles" in raised.value.what
