"""AUTO CDC (SCD type 1 and 2) on real Delta tables, batch by batch through the engine, and
as streams (apply_changes_stream, a pipeline). Ground truth is an independent replay of the
events in plain Python."""

from __future__ import annotations

import random

import pytest
from deltalake import DeltaTable
from tests.support import CDC_SCHEMA as SCHEMA
from tests.support import cdc_apply as apply
from tests.support import random_batches, rows_of, scd1_truth, state_rows

from headwater.delta.cdc import CdcSpec
from headwater.errors import HeadwaterError


def test_scd1_out_of_order_duplicates_and_late_events(spark, tmp):
    path = tmp / "customers"
    b0 = [(1, "a", "x", 1, "I"), (1, "a2", "x", 3, "U"), (1, "a1", "y", 2, "U"),
          (2, "b", "x", 1, "I"), (2, "b", "x", 1, "I")]  # out of order; a duplicate
    b1 = [(1, "old", "z", 2, "U"),  # late: older than what is applied
          (2, "b2", "w", 5, "U"), (3, "c", "v", 4, "I")]
    r0 = apply(spark, path, b0, 0)
    assert r0.applied and r0.upserted == 2
    apply(spark, path, b1, 1)
    assert rows_of(path) == scd1_truth([b0, b1]) == [
        (1, "a2", "x"), (2, "b2", "w"), (3, "c", "v")]
    # the target's change data feed is on
    assert DeltaTable(str(path)).metadata().configuration[
        "delta.enableChangeDataFeed"] == "true"


def test_scd1_delete_leaves_a_tombstone_and_replays_change_nothing(spark, tmp):
    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I"), (2, "b", "x", 1, "I")], 0)
    apply(spark, path, [(1, None, None, 5, "D")], 1)
    version = DeltaTable(str(path)).version()
    # an older upsert arriving after the delete must not resurrect the row
    apply(spark, path, [(1, "zombie", "x", 3, "U")], 2)
    assert rows_of(path) == [(2, "b", "x")]
    # batches 1 and 2 again (a replay after a crash): nothing changes, nothing is committed
    assert apply(spark, path, [(1, "again", "x", 9, "U")], 1).applied is False
    apply(spark, path, [(1, "zombie", "x", 3, "U")], 2)
    assert DeltaTable(str(path)).version() == version
    assert rows_of(path) == [(2, "b", "x")]
    # a newer upsert brings it back
    apply(spark, path, [(1, "back", "x", 6, "U")], 3)
    assert rows_of(path) == [(1, "back", "x"), (2, "b", "x")]


def test_scd1_tombstones_expire(spark, tmp):
    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I")], 0, tombstone_gc_seconds=0)
    apply(spark, path, [(1, None, None, 5, "D")], 1, tombstone_gc_seconds=0)
    apply(spark, path, [(2, "b", "x", 1, "I")], 2, tombstone_gc_seconds=0)  # GC runs here
    apply(spark, path, [(1, "late", "x", 3, "U")], 3, tombstone_gc_seconds=0)
    assert rows_of(path) == [(1, "late", "x"), (2, "b", "x")]


def test_scd1_truncate(spark, tmp):
    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I"), (2, "b", "x", 2, "I")], 0,
          apply_as_truncates="op = 'T'")
    r = apply(spark, path, [(None, None, None, 3, "T"), (3, "c", "x", 4, "I"),
                            (4, "d", "x", 2, "I")], 1, apply_as_truncates="op = 'T'")
    assert r.truncated
    assert rows_of(path) == [(3, "c", "x")]
    # an event older than the truncate is void
    apply(spark, path, [(5, "e", "x", 1, "I")], 2, apply_as_truncates="op = 'T'")
    assert rows_of(path) == [(3, "c", "x")]


def test_scd1_column_lists_and_ignore_null_updates(spark, tmp):
    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I")], 0, except_column_list=["op"],
          ignore_null_updates=True)
    apply(spark, path, [(1, None, "y", 2, "U"), (1, "a3", None, 3, "U")], 1,
          except_column_list=["op"], ignore_null_updates=True)
    assert DeltaTable(str(path)).schema().to_arrow().names == ["id", "name", "city", "seq"]
    assert rows_of(path, ("id", "name", "city", "seq")) == [(1, "a3", "y", 3)]
    other = tmp / "u"
    apply(spark, other, [(1, "a", "x", 1, "I")], 0, column_list=["name"])
    assert DeltaTable(str(other)).schema().to_arrow().names == ["id", "name"]


def test_scd1_equals_an_independent_replay(spark, tmp):
    rng = random.Random(14)
    path = tmp / "t"
    batches, seq = [], 0
    for _ in range(4):
        rows = []
        for _ in range(60):
            seq += 1
            key = rng.randint(1, 15)
            late = seq - rng.randint(0, 40) if rng.random() < 0.2 else seq
            op = rng.choice("IUUD")
            rows.append((key, rng.choice(["a", "b", None]), rng.choice(["x", None]),
                         late * 1000 + seq, op))  # unique per key
        batches.append(rows)
    for i, rows in enumerate(batches):
        apply(spark, path, rows, i, ignore_null_updates=True)
    assert rows_of(path) == scd1_truth(batches, ignore_null_updates=True)


def test_bad_events_are_named_and_nothing_is_committed(spark, tmp):
    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I")], 0)
    version = DeltaTable(str(path)).version()
    with pytest.raises(HeadwaterError) as err:
        apply(spark, path, [(2, "a", "x", 4, "I"), (2, "b", "x", 4, "U")], 1)
    assert err.value.code == "HW_CDC_DUPLICATE_SEQUENCE" and "(2,)" in str(err.value)
    with pytest.raises(HeadwaterError) as err:
        apply(spark, path, [(3, "a", "x", None, "I")], 1)
    assert err.value.code == "HW_CDC_SEQUENCE_NULL"
    with pytest.raises(HeadwaterError) as err:
        apply(spark, path, [(3, "a", "x", 1, "I")], 1, column_list=["nope"])
    assert err.value.code == "HW_CDC_COLUMN_UNKNOWN"
    with pytest.raises(HeadwaterError) as err:
        CdcSpec.build(["id"], "seq", stored_as_scd_type=2, apply_as_truncates="op = 'T'")
    assert err.value.code == "HW_CDC_INVALID"
    assert DeltaTable(str(path)).version() == version


def history(path):
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["name"], r["city"], r["__START_AT"], r["__END_AT"]) for r in rows)


def test_scd2_history_out_of_order_and_deletes(spark, tmp):
    path = tmp / "t"
    kw = {"stored_as_scd_type": 2, "except_column_list": ["op", "seq"]}
    apply(spark, path, [(1, "a", "x", 1, "I"), (1, "b", "x", 5, "U"), (2, "c", "y", 2, "I")],
          0, **kw)
    # a late event belongs between 1 and 5; key 2 is deleted; key 3 deleted before it appears
    apply(spark, path, [(1, "late", "x", 3, "U"), (2, None, None, 4, "D"),
                        (3, None, None, 9, "D")], 1, **kw)
    apply(spark, path, [(3, "zombie", "z", 8, "I"), (1, "b", "x", 5, "U")], 2, **kw)
    assert history(path) == [
        (1, "a", "x", 1, 3), (1, "b", "x", 5, None), (1, "late", "x", 3, 5),
        (2, "c", "y", 2, 4), (3, "zombie", "z", 8, 9)]
    # __START_AT / __END_AT take the sequence's type
    assert DeltaTable(str(path)).to_pyarrow_table().schema.field("__START_AT").type == "int32"
    version = DeltaTable(str(path)).version()
    assert apply(spark, path, [(1, "replayed", "x", 7, "U")], 1, **kw).applied is False
    assert DeltaTable(str(path)).version() == version


def test_scd2_track_history_columns(spark, tmp):
    path = tmp / "t"
    kw = {"stored_as_scd_type": 2, "column_list": ["name", "city"],
          "track_history_column_list": ["city"]}
    apply(spark, path, [(1, "a", "x", 1, "I"), (1, "renamed", "x", 2, "U")], 0, **kw)
    apply(spark, path, [(1, "again", "moved", 3, "U"), (1, "fixed", "moved", 4, "U")], 1, **kw)
    # name is untracked: it changes the current version in place; city opens a version
    assert history(path) == [(1, "fixed", "moved", 3, None), (1, "renamed", "x", 1, 3)]


def test_apply_changes_stream_from_plain_pyspark(spark, tmp):
    import headwater

    source = tmp / "events"
    source.mkdir()
    (source / "0.json").write_text(
        '{"id": 1, "name": "a", "city": "x", "seq": 1, "op": "I"}\n'
        '{"id": 2, "name": "b", "city": "x", "seq": 2, "op": "I"}\n')
    (source / "1.json").write_text(
        '{"id": 1, "name": null, "city": null, "seq": 4, "op": "D"}\n'
        '{"id": 2, "name": "b2", "city": "y", "seq": 3, "op": "U"}\n')
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = headwater.apply_changes_stream(
        stream, str(tmp / "t"), keys=["id"], sequence_by="seq", apply_as_deletes="op = 'D'",
        except_column_list=["op"], checkpoint_location=str(tmp / "cp"),
        trigger={"availableNow": True})
    query.awaitTermination(120)
    assert query.exception() is None
    assert rows_of(tmp / "t", ("id", "name", "city", "seq")) == [(2, "b2", "y", 3)]


def test_auto_cdc_flow_in_a_pipeline(spark, tmp):
    """Python and SQL flows, SCD1 and SCD2, an expectation on the CDC source quarantining an
    event without a sequence, and the per-batch counts in the event log and the dashboard."""
    import json

    from headwater.monitor.events import read_events
    from headwater.monitor.state import DashboardState
    from pipelines import project, run

    root = project(tmp, {"p.py": f"""
        @headwater.table
        @headwater.expect_or_drop("sequenced", "seq IS NOT NULL")
        def changes():
            return (spark.readStream.schema("id INT, name STRING, seq INT, op STRING")
                    .json({str(tmp / "in")!r}))

        headwater.create_streaming_table("customers")
        headwater.create_auto_cdc_flow(target="customers", source="changes", keys=["id"],
                                       sequence_by="seq", apply_as_deletes="op = 'D'",
                                       except_column_list=["op"])
        headwater.create_streaming_table("customers_history")
        headwater.apply_changes(target="customers_history", source="changes", keys=["id"],
                                sequence_by="seq", apply_as_deletes="op = 'D'",
                                except_column_list=["op", "seq"], stored_as_scd_type=2)
        """, "c.sql": """
        CREATE STREAMING TABLE customers_sql;
        CREATE FLOW from_sql AS AUTO CDC INTO customers_sql FROM STREAM(changes) KEYS (id)
          APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (op)
          STORED AS SCD TYPE 1;
        """})
    (tmp / "in").mkdir()
    (tmp / "in" / "0.json").write_text(
        '{"id": 1, "name": "a", "seq": 1, "op": "I"}\n{"id": 1, "name": "b", "seq": 2, "op": "U"}\n'
        '{"id": 2, "name": "c", "seq": 1, "op": "I"}\n{"id": 2, "seq": 3, "op": "D"}\n'
        '{"id": 3, "name": "no sequence", "op": "I"}\n')
    lake, results = run(spark, root)
    # without the expectation the NULL sequence fails the flows (HW_CDC_SEQUENCE_NULL)
    assert results["changes"].quarantined == 1
    assert [r["id"] for r in lake.read("changes__quarantine").collect()] == [3]
    assert rows_of(lake.path("customers"), ("id", "name", "seq")) == [(1, "b", 2)]
    hist = DeltaTable(str(lake.path("customers_history"))).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["name"], r["__START_AT"], r["__END_AT"]) for r in hist) == [
        (1, "a", 1, 2), (1, "b", 2, None), (2, "c", 1, 3)]
    assert results["customers"].rows_written == 2  # one upsert, one delete (of nothing)
    assert results["customers"].cdc == {"upserted": 1, "deleted": 1, "history_rows": 0}
    assert results["customers_history"].cdc == {"upserted": 1, "deleted": 0, "history_rows": 3}
    progress = read_events(lake.root, where=None).to_pylist()
    logged = {(e["flow"], e["batch_id"]): json.loads(e["details"] or "{}").get("cdc")
              for e in progress if e["event"] == "progress"}
    assert logged[("customers_history", 0)] == {
        "upserted": 1, "deleted": 0, "history_rows": 3}, logged
    flows = {f["flow"]: f for f in DashboardState(lake.root).snapshot()["flows"]}
    assert flows["customers"]["cdc"] == {"upserted": 1, "deleted": 1,
                                                   "history_rows": 0}
    assert flows["changes"]["cdc"] is None
    assert rows_of(lake.path("customers_sql"), ("id", "name", "seq")) == [(1, "b", 2)]
    assert DeltaTable(str(lake.path("customers"))).metadata().configuration[
        "delta.enableChangeDataFeed"] == "true"


# --- where the arithmetic runs: the driver (Arrow + delta-rs) or Spark; the same rows ---------

@pytest.mark.parametrize("ignore_null_updates", [True, False])
def test_scd1_driver_and_spark_engines_agree_and_share_state(spark, tmp, monkeypatch,
                                                             ignore_null_updates):
    # without ignore_null_updates the driver's MERGE compares the stored sequences itself
    from headwater.delta.cdc import driver

    batches = random_batches(41, n=3)
    truth = scd1_truth(batches, ignore_null_updates=ignore_null_updates)
    counts = {}
    # every batch on the driver, and the two taking turns on one table (the same state)
    for name, engines in {"driver": "ddd", "mixed": "sds"}.items():
        got = []
        for i, (rows, engine) in enumerate(zip(batches, engines, strict=True)):
            # a bound of 0 events sends the batch to Spark (the driver never collects it whole)
            monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", 0 if engine == "s" else 2_000_000)
            r = apply(spark, tmp / name, rows, i, ignore_null_updates=ignore_null_updates)
            assert r.engine == {"d": "driver", "s": "spark"}[engine]
            got.append((r.upserted, r.deleted))
        assert rows_of(tmp / name) == truth, name
        counts[name] = got
    assert counts["driver"] == counts["mixed"]


def test_scd1_without_the_sequence_kept_runs_on_the_driver_as_in_spark(spark, tmp,
                                                                      monkeypatch):
    # The target drops the sequence: the state holds every key's applied sequence, which
    # is all the driver needs (no stored rows read, no MERGE guard).
    from headwater.delta.cdc import driver

    batches = random_batches(43, n=4)
    truth = scd1_truth(batches)
    counts, states = {}, {}
    for name, engines in {"driver": "dddd", "mixed": "sdsd", "spark": "ssss"}.items():
        got = []
        for i, (rows, engine) in enumerate(zip(batches, engines, strict=True)):
            monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", 0 if engine == "s" else 2_000_000)
            r = apply(spark, tmp / name, rows, i, except_column_list=["op", "seq"])
            assert r.engine == {"d": "driver", "s": "spark"}[engine]
            got.append((r.upserted, r.deleted))
        assert DeltaTable(str(tmp / name)).schema().to_arrow().names == ["id", "name", "city"]
        assert rows_of(tmp / name) == truth, name
        counts[name], states[name] = got, state_rows(tmp / name)
    assert counts["driver"] == counts["mixed"] == counts["spark"]
    assert states["driver"] == states["mixed"] == states["spark"]
    # ignore_null_updates needs the stored rows: that shape stays in Spark
    monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", 2_000_000)
    r = apply(spark, tmp / "nulls", batches[0], 0, except_column_list=["op", "seq"],
              ignore_null_updates=True)
    assert r.engine == "spark"


def test_a_string_sequence_without_the_sequence_kept_applies_batch_after_batch(spark, tmp,
                                                                             monkeypatch):
    # The state holds each key's applied sequence as a string (Databricks' Retail CDC
    # notebooks: a timestamp string): the second batch compares the events with it. delta-rs
    # reads those strings as string_view, which Arrow's comparisons refused beside the
    # events' strings ('greater_equal has no kernel'): such a batch applies in Spark.
    from headwater.delta.cdc import CdcSpec, apply_changes_batch, driver

    monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", 2_000_000)
    batches = random_batches(47, n=3)
    spec = CdcSpec.build(["id"], "seq", apply_as_deletes="op = 'D'",
                         except_column_list=["op", "seq"])
    for i, rows in enumerate(batches):
        events = spark.createDataFrame(
            [(k, n, c, f"{seq:012d}", op) for k, n, c, seq, op in rows],
            "id INT, name STRING, city STRING, seq STRING, op STRING")
        r = apply_changes_batch(events, i, str(tmp / "t"), spec, "test-flow")
        assert r.engine == "spark"
    assert rows_of(tmp / "t") == scd1_truth(batches)


@pytest.mark.parametrize("except_column_list", [["op"], ["op", "seq"]])
def test_a_truncate_of_an_earlier_spec_is_ignored_on_both_engines(spark, tmp, monkeypatch,
                                                                   except_column_list):
    # The flow applied truncates, then its spec dropped apply_as_truncates: the truncate row
    # left in the state counts for neither engine (events before it are applied).
    from headwater.delta.cdc import driver

    kw = {"except_column_list": except_column_list}
    got = {}
    for engine, bound in (("driver", 2_000_000), ("spark", 0)):
        path = tmp / engine
        monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", 0)
        apply(spark, path, [(1, "a", "x", 1, "I"), (2, "b", "x", 2, "I"),
                            (None, None, None, 10, "T")], 0, apply_as_truncates="op = 'T'", **kw)
        monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", bound)
        r = apply(spark, path, [(3, "c", "x", 5, "I"), (1, "a2", "x", 7, "U"),
                                (4, "d", "x", 12, "I")], 1, **kw)
        assert r.engine == engine
        got[engine] = (rows_of(path), r.upserted, r.deleted)
    assert got["driver"] == got["spark"] == ([(1, "a2", "x"), (3, "c", "x"), (4, "d", "x")],
                                             3, 0)


def test_scd1_truncate_on_both_engines(spark, tmp, monkeypatch):
    from headwater.delta.cdc import driver

    for engine, bound in (("driver", 2_000_000), ("spark", 0)):
        monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", bound)
        path, kw = tmp / engine, {"apply_as_truncates": "op = 'T'", "ignore_null_updates": True}
        apply(spark, path, [(1, "a", "x", 1, "I"), (2, "b", "x", 2, "I"), (6, "f", "x", 9, "I")],
              0, **kw)
        # a late truncate at 3 keeps key 6 (sequence 9), voids key 4's event at 2
        r = apply(spark, path, [(None, None, None, 3, "T"), (3, "c", "x", 4, "I"),
                                (4, "d", "x", 2, "I"), (6, None, "y", 10, "U")], 1, **kw)
        assert (r.engine, r.truncated, r.upserted) == (engine, True, 2)
        assert rows_of(path) == [(3, "c", "x"), (6, "f", "y")]
        apply(spark, path, [(5, "e", "x", 1, "I"), (7, "g", "x", 5, "I")], 2, **kw)
        assert rows_of(path) == [(3, "c", "x"), (6, "f", "y"), (7, "g", "x")]


def test_scd1_state_holds_only_tombstones_when_the_target_keeps_the_sequence(spark, tmp):
    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I"), (2, "b", "x", 1, "I"), (3, "c", "x", 1, "I")], 0)
    apply(spark, path, [(1, None, None, 5, "D"), (2, None, None, 5, "D")], 1)
    assert state_rows(path) == [(1, 5, True, "key"), (2, 5, True, "key")]
    # key 1 comes back at 7; the tombstone at 5 stays behind and changes nothing:
    # a late event at 6 is older than the live row, one at 4 older than both
    apply(spark, path, [(1, "back", "x", 7, "U")], 2)
    apply(spark, path, [(1, "late", "x", 6, "U"), (2, "zombie", "x", 4, "U"),
                        (3, "older", "x", 0, "U")], 3)
    assert rows_of(path) == [(1, "back", "x"), (3, "c", "x")]
    assert state_rows(path) == [(1, 5, True, "key"), (2, 5, True, "key")]
    # without the sequence in the target, every key keeps its applied sequence in the state
    other = tmp / "u"
    apply(spark, other, [(1, "a", "x", 1, "I"), (2, None, None, 2, "D")], 0,
          column_list=["name", "city"])
    assert state_rows(other) == [(1, 1, False, "key"), (2, 2, True, "key")]
    apply(spark, other, [(1, "late", "x", 0, "U")], 1, column_list=["name", "city"])
    assert rows_of(other) == [(1, "a", "x")]


def test_scd1_crash_between_the_target_and_the_state_commit(spark, tmp, monkeypatch):
    from headwater.delta.cdc import state

    path = tmp / "t"
    apply(spark, path, [(1, "a", "x", 1, "I"), (2, "b", "x", 1, "I")], 0)

    def crash(*args, **kwargs):
        raise RuntimeError("killed between the two commits")

    with monkeypatch.context() as m:
        m.setattr(state, "append_tombstones", crash)
        with pytest.raises(RuntimeError):
            apply(spark, path, [(1, None, None, 5, "D"), (2, "b2", "x", 6, "U")], 1)
    version = DeltaTable(str(path)).version()
    assert rows_of(path) == [(2, "b2", "x")]
    # the replay commits only the state, with the same tombstone
    r = apply(spark, path, [(1, None, None, 5, "D"), (2, "b2", "x", 6, "U")], 1)
    assert r.applied and r.target_version is None and DeltaTable(str(path)).version() == version
    assert state_rows(path) == [(1, 5, True, "key")]
    assert apply(spark, path, [(1, None, None, 5, "D")], 1).applied is False
    apply(spark, path, [(1, "zombie", "x", 3, "U")], 2)
    assert rows_of(path) == [(2, "b2", "x")]


def test_scd2_driver_and_spark_engines_agree(spark, tmp, monkeypatch):
    """Late events rewriting history, deletes, tombstones, untracked columns and
    ignore_null_updates: the driver's history equals Spark's, row for row, count for count."""
    from headwater.delta.cdc import driver

    batches = random_batches(7, n=3, size=50, keys=8)
    kw = {"stored_as_scd_type": 2, "except_column_list": ["op"], "ignore_null_updates": True,
          "track_history_column_list": ["city"]}
    got = {}
    for name, engines in {"driver": "ddd", "mixed": "sds"}.items():
        counts = []
        for i, (rows, engine) in enumerate(zip(batches, engines, strict=True)):
            monkeypatch.setattr(driver, "DRIVER_MAX_EVENTS", 0 if engine == "s" else 2_000_000)
            r = apply(spark, tmp / name, rows, i, **kw)
            assert r.engine == {"d": "driver", "s": "spark"}[engine]
            counts.append(r.counts())
        table = DeltaTable(str(tmp / name)).to_pyarrow_table().to_pylist()
        got[name] = (sorted(tuple(map(repr, r.values())) for r in table), counts)
    assert got["driver"] == got["mixed"]
    assert sum(c["deleted"] for c in got["driver"][1]) > 0  # history was rewritten


def test_a_null_key_keeps_the_batch_in_spark(spark, tmp):
    # Arrow's joins never match NULL keys; Spark's null-safe ones do: such a batch stays there
    path = tmp / "t"
    r = apply(spark, path, [(None, "n", "x", 1, "I"), (1, "a", "x", 1, "I")], 0)
    assert (r.engine, r.upserted) == ("spark", 2)
    r = apply(spark, path, [(None, "n2", "x", 2, "U"), (2, "b", "x", 1, "I")], 1)
    assert (r.engine, r.upserted) == ("spark", 2)
    assert rows_of(path, ("name",)) == [("a",), ("b",), ("n2",)]
    assert apply(spark, path, [(3, "c", "x", 1, "I")], 2).engine == "driver"
