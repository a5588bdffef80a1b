"""AUTO CDC on the driver: identical copies merged in Arrow, the SCD1 MERGE comparing stored
sequences itself, and SCD2 tombstones that outlive a key's return; each against the Spark
engine on real Delta tables."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from tests.support import cdc_apply as apply
from tests.support import rows_of, state_rows

from headwater.delta.cdc import CdcSpec, apply_changes_batch, driver
from headwater.delta.cdc.spec import OP, SEQ
from headwater.errors import HeadwaterError

ENGINES = {"driver": 2_000_000, "spark": 0}  # a bound of 0 events keeps a batch in Spark


def events(rows: list[tuple]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int32()),
                     "v": pa.array([r[1] for r in rows], pa.float64()),
                     SEQ: pa.array([r[2] for r in rows], pa.int32()),
                     OP: pa.array([r[3] for r in rows])})


def test_prepare_merges_copies_in_arrow_or_asks_spark():
    spec = CdcSpec.build(["id"], "seq")

    def no_spark():
        raise AssertionError("Spark's dropDuplicates was not needed")

    distinct = events([(1, 1.0, 1, "upsert"), (2, None, 1, "upsert")])
    assert driver.prepare(distinct, spec, ["id"], "t", no_spark) is distinct
    # copies (NULLs included) of exact types merge in Arrow; truncates are left as they are
    exact = events([(1, None, 1, "upsert"), (1, None, 1, "upsert"), (2, None, 3, "delete"),
                    (None, None, 4, "truncate"), (None, None, 4, "truncate")]).drop_columns(["v"])
    got = driver.prepare(exact, spec, ["id"], "t", no_spark)
    assert sorted(got.to_pylist(), key=str) == sorted([
        {"id": 1, SEQ: 1, OP: "upsert"}, {"id": 2, SEQ: 3, OP: "delete"},
        {"id": None, SEQ: 4, OP: "truncate"}, {"id": None, SEQ: 4, OP: "truncate"}], key=str)
    # floats compare differently in Spark (-0.0 = 0.0, NaN = NaN): Spark merges them
    floats = events([(1, 0.0, 1, "upsert"), (1, -0.0, 1, "upsert")])
    merged = events([(1, 0.0, 1, "upsert")])
    assert driver.prepare(floats, spec, ["id"], "t", lambda: merged) is merged
    # different events at one (key, sequence) stay an error
    with pytest.raises(HeadwaterError) as err:
        driver.prepare(events([(1, 1.0, 1, "upsert"), (1, 1.0, 1, "upsert"),
                               (1, 2.0, 1, "upsert")]).drop_columns(["v"]).append_column(
            "w", pa.array([1, 1, 2])), spec, ["id"], "t", no_spark)
    assert err.value.code == "HW_CDC_DUPLICATE_SEQUENCE" and "(1,)" in str(err.value)
    # a NULL key keeps the batch in Spark; a NULL sequence is an error
    assert driver.prepare(events([(None, 1.0, 1, "upsert")]), spec, ["id"], "t",
                          no_spark) is None
    with pytest.raises(HeadwaterError) as err:
        driver.prepare(events([(1, 1.0, None, "upsert")]), spec, ["id"], "t", no_spark)
    assert err.value.code == "HW_CDC_SEQUENCE_NULL"


def test_copies_with_floats_on_both_engines(spark, tmp, monkeypatch):
    schema = "id INT, amount DOUBLE, seq INT, op STRING"
    spec = CdcSpec.build(["id"], "seq", apply_as_deletes="op = 'D'", except_column_list=["op"])
    for engine, bound in ENGINES.items():
        monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", bound)
        path = str(tmp / engine)
        rows = [(1, 0.0, 1, "I"), (1, -0.0, 1, "I"), (2, float("nan"), 1, "I"),
                (2, float("nan"), 1, "I"), (3, 1.5, 2, "I"), (3, 1.5, 2, "I")]
        r = apply_changes_batch(spark.createDataFrame(rows, schema), 0, path, spec, "f")
        assert (r.engine, r.upserted) == (engine, 3)
        got = sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda x: x["id"])
        assert [(x["id"], x["seq"]) for x in got] == [(1, 1), (2, 1), (3, 2)]
        assert got[0]["amount"] == 0.0 and got[1]["amount"] != got[1]["amount"]  # NaN


def test_scd1_stale_events_change_nothing_and_count_nothing(spark, tmp, monkeypatch):
    """The driver's MERGE compares the stored sequence (t.seq < s.seq): events older than the
    live row leave it, count nothing, and a stale delete leaves no tombstone."""
    counts = {}
    for engine, bound in ENGINES.items():
        monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", bound)
        path = tmp / engine
        got = [apply(spark, path, [(1, "a", "x", 7, "I"), (2, "b", "x", 7, "I")], 0)]
        got.append(apply(spark, path, [(1, None, None, 6, "D"), (2, "old", "x", 5, "U"),
                                       (3, None, None, 4, "D")], 1))
        assert rows_of(path) == [(1, "a", "x"), (2, "b", "x")]
        assert state_rows(path) == [(3, 4, True, "key")]  # a delete of nothing still counts
        got.append(apply(spark, path, [(1, "new", "x", 8, "U"), (2, None, None, 9, "D"),
                                       (3, "zombie", "x", 3, "I")], 2))
        assert rows_of(path) == [(1, "new", "x")]
        assert state_rows(path) == [(2, 9, True, "key"), (3, 4, True, "key")]
        assert all(r.engine == engine for r in got)
        counts[engine] = [(r.upserted, r.deleted) for r in got]
    assert counts["driver"] == counts["spark"] == [(2, 0), (0, 1), (1, 1)]


def history(path):
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["name"], r["__START_AT"], r["__END_AT"]) for r in rows)


def test_scd2_tombstones_outlive_the_key_coming_back(spark, tmp, monkeypatch):
    """A delete stays a tombstone after a newer upsert brings its key back (as Spark's own
    SCD2 AUTO CDC keeps tombstones in its auxiliary table): a late upsert older than the
    delete becomes a version that ends at it, one between the delete and the upsert a
    version that ends at that upsert; the current row stays."""
    kw = {"stored_as_scd_type": 2, "except_column_list": ["op", "seq"]}
    batches = [
        # key 1's delete closes a row; key 2's closes none; key 3's closes one, until...
        [(1, "a", "x", 1, "I"), (1, None, None, 5, "D"), (2, None, None, 5, "D"),
         (3, "a", "x", 1, "I"), (3, None, None, 5, "D")],
        # ... a late delete at 3 closes it instead; keys 1 and 2 come back at 7
        [(1, "b", "x", 7, "U"), (2, "b", "x", 7, "U"), (3, None, None, 3, "D")],
        # late upserts, before and after the deletes at 5
        [(1, "six", "x", 6, "U"), (2, "six", "x", 6, "U"), (2, "four", "x", 4, "U"),
         (1, "three", "x", 3, "U"), (3, "four", "x", 4, "U")]]
    for engine, bound in ENGINES.items():
        monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", bound)
        path = tmp / engine
        for i, rows in enumerate(batches):
            assert apply(spark, path, rows, i, **kw).engine == engine
        assert history(path) == [
            (1, "a", 1, 3), (1, "b", 7, None), (1, "six", 6, 7), (1, "three", 3, 5),
            (2, "b", 7, None), (2, "four", 4, 5), (2, "six", 6, 7),
            (3, "a", 1, 3), (3, "four", 4, 5)], engine
        # every delete is a tombstone, once
        assert state_rows(path) == [(1, 5, True, "key"), (2, 5, True, "key"),
                                    (3, 3, True, "key"), (3, 5, True, "key")], engine


def test_scd1_stale_delete_in_the_same_millisecond_as_a_timestamp_sequence(spark, tmp):
    """delta-rs keeps timestamp statistics to the millisecond: a late delete 56 us older than
    the live row (same millisecond) must still be found stale by reading the row, not taken
    for newer than everything the statistics show: no count, no tombstone."""
    import datetime as dt


    live = dt.datetime(2026, 1, 1, 0, 0, 0, 123456)
    late = dt.datetime(2026, 1, 1, 0, 0, 0, 123400)
    schema = "id INT, name STRING, ts TIMESTAMP, op STRING"
    spec = CdcSpec.build(["id"], "ts", apply_as_deletes="op = 'D'", except_column_list=["op"])
    path = str(tmp / "t")
    first = apply_changes_batch(spark.createDataFrame([(1, "a", live, "U")], schema), 0, path,
                                spec, "ts-flow")
    second = apply_changes_batch(spark.createDataFrame([(1, None, late, "D")], schema), 1, path,
                                 spec, "ts-flow")
    assert first.engine == second.engine == "driver"
    assert (second.upserted, second.deleted) == (0, 0)
    assert [(r["id"], r["name"]) for r in DeltaTable(path).to_pyarrow_table().to_pylist()] == \
        [(1, "a")]
    assert state_rows(tmp / "t") == []
