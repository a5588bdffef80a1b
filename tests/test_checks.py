"""headwater.pipeline.checks: Spark's own streaming checker plus state-growth warnings.

Queries are only built and analyzed, never started: the checks are static.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from headwater.errors import HeadwaterError
from headwater.pipeline.checks import CheckResult, check_stream

TABLE = "sales_silver"


@pytest.fixture
def rate(spark):
    def make():
        return spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    return make


def one_error(result: CheckResult) -> HeadwaterError:
    assert len(result.errors) == 1, result
    err = result.errors[0]
    assert err.code == "HW_STREAM_UNSUPPORTED"
    text = str(err)
    assert TABLE in text and "\n" not in text and "SQLSTATE" not in text, text
    return err


def sides(rate, watermark: bool):
    a = rate().select(F.col("value").alias("a"), F.col("timestamp").alias("ta"))
    b = rate().select(F.col("value").alias("b"), F.col("timestamp").alias("tb"))
    if watermark:
        a, b = a.withWatermark("ta", "10 seconds"), b.withWatermark("tb", "10 seconds")
    return a, b


BOUNDED = "a = b AND tb BETWEEN ta AND ta + INTERVAL 1 MINUTE"


def test_order_by_on_a_stream_is_an_error(rate):
    err = one_error(check_stream(rate().orderBy("value"), "append", TABLE))
    assert "Sorting is not supported" in err.why
    assert "ORDER BY" in err.fix


def test_complete_mode_without_aggregation_is_an_error(rate):
    err = one_error(check_stream(rate().select("value"), "complete", TABLE))
    assert "no streaming aggregations" in err.why
    assert "'append'" in err.fix


def test_append_aggregation_without_watermark_is_an_error(rate):
    df = rate().groupBy((F.col("value") % 3).alias("k")).count()
    err = one_error(check_stream(df, "append", TABLE))
    assert "without watermark" in err.why and "Invalid streaming output mode" in err.why
    assert "withWatermark" in err.fix


def test_append_windowed_aggregation_with_watermark_is_clean(rate):
    df = (rate().withWatermark("timestamp", "10 seconds")
          .groupBy(F.window("timestamp", "5 seconds")).count())
    assert check_stream(df, "append", TABLE) == CheckResult([], [])
    assert check_stream(df, "update", TABLE) == CheckResult([], [])


def test_clean_append_select_has_no_errors_or_warnings(rate):
    df = rate().where("value % 2 = 0").select("value", (F.col("value") * 2).alias("double"))
    assert check_stream(df, "append", TABLE) == CheckResult([], [])
    assert check_stream(df, "update", TABLE) == CheckResult([], [])


def test_drop_duplicates_without_watermark_warns(rate):
    result = check_stream(rate().dropDuplicates(["value"]), "append", TABLE)
    assert result.errors == []
    assert len(result.warnings) == 1
    assert TABLE in result.warnings[0] and "dropDuplicates" in result.warnings[0]
    assert "withWatermark" in result.warnings[0]


def test_drop_duplicates_on_watermarked_column_does_not_warn(rate):
    df = rate().withWatermark("timestamp", "10 seconds").dropDuplicates(["value", "timestamp"])
    assert check_stream(df, "append", TABLE) == CheckResult([], [])
    within = (rate().withWatermark("timestamp", "10 seconds")
              .dropDuplicatesWithinWatermark(["value"]))
    assert check_stream(within, "append", TABLE) == CheckResult([], [])


def test_complete_mode_aggregation_warns_about_state_per_group(rate):
    keyed = rate().groupBy((F.col("value") % 3).alias("k")).count()
    result = check_stream(keyed, "complete", TABLE)
    assert result.errors == []
    assert len(result.warnings) == 1 and TABLE in result.warnings[0]
    assert "complete mode keeps one state row per group" in result.warnings[0]
    # a global aggregate keeps a single state row: nothing to warn about
    assert check_stream(rate().groupBy().count(), "complete", TABLE) == CheckResult([], [])


def test_update_mode_aggregation_without_watermark_warns(rate):
    keyed = rate().groupBy((F.col("value") % 3).alias("k")).count()
    result = check_stream(keyed, "update", TABLE)
    assert result.errors == []
    assert len(result.warnings) == 1 and TABLE in result.warnings[0]
    assert "keeps every group forever" in result.warnings[0]


def test_stream_stream_inner_join_without_watermark_per_mode(rate):
    a, b = sides(rate, watermark=False)
    joined = a.join(b, F.expr("a = b"))
    # append: Spark accepts it, but both inputs stay in state forever
    result = check_stream(joined, "append", TABLE)
    assert result.errors == []
    assert len(result.warnings) == 1 and TABLE in result.warnings[0]
    assert "left and right input forever" in result.warnings[0]
    # complete: Spark refuses (no aggregation)
    one_error(check_stream(joined, "complete", TABLE))


def test_stream_stream_outer_join_without_watermark_is_an_error(rate):
    a, b = sides(rate, watermark=False)
    joined = a.join(b, F.expr("a = b"), "left")
    err = one_error(check_stream(joined, "append", TABLE))
    assert "Stream-stream LeftOuter join" in err.why
    assert "withWatermark" in err.fix and "BETWEEN" in err.fix
    err = one_error(check_stream(joined, "update", TABLE))
    assert "Update output mode" in err.why and "'append'" in err.fix


def test_stream_stream_join_with_watermarks_and_time_bound_is_clean(rate):
    a, b = sides(rate, watermark=True)
    for how in ("inner", "left"):
        df = a.join(b, F.expr(BOUNDED), how)
        assert check_stream(df, "append", TABLE) == CheckResult([], []), how


def test_join_bounded_on_one_side_only_names_the_growing_input(rate):
    a, b = sides(rate, watermark=True)
    result = check_stream(a.join(b, F.expr("a = b AND tb >= ta")), "append", TABLE)
    assert result.errors == []
    assert len(result.warnings) == 1
    assert "of its left input forever" in result.warnings[0]


def test_groups_with_state_without_timeout_warns(rate):
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key, frames, state):
        yield from frames

    def build(timeout):
        return rate().groupBy("value").applyInPandasWithState(
            count, "timestamp timestamp, value long", "n long", "append", timeout)

    result = check_stream(build(GroupStateTimeout.NoTimeout), "append", TABLE)
    assert result.errors == []
    assert len(result.warnings) == 1 and "state.remove()" in result.warnings[0]
    timed = build(GroupStateTimeout.ProcessingTimeTimeout)
    assert check_stream(timed, "append", TABLE) == CheckResult([], [])


def test_unknown_output_mode_is_refused(rate):
    with pytest.raises(HeadwaterError) as info:
        check_stream(rate(), "upsert", TABLE)
    assert info.value.code == "HW_OPTION_INVALID" and TABLE in str(info.value)


def test_batch_dataframe_is_not_checked(spark):
    assert check_stream(spark.range(3).orderBy("id"), "append", TABLE) == CheckResult([], [])


def test_disabled_spark_check_is_honoured(spark, rate):
    key = "spark.sql.streaming.unsupportedOperationCheck"
    spark.conf.set(key, "false")
    try:
        result = check_stream(rate().orderBy("value"), "append", TABLE)
    finally:
        spark.conf.unset(key)
    assert result == CheckResult([], [])
    assert len(check_stream(rate().orderBy("value"), "append", TABLE).errors) == 1
