"""AUTO CDC over a real change feed: the factory's SQLite database changes at random, its
Debezium events land out of order, duplicated and late; read_files + debezium_changes +
create_auto_cdc_flow must give the database's final rows (SCD1) and its history (SCD2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headwater.errors import HeadwaterError
from headwater.factory.debezium import COLUMNS, ROW_DDL, CdcRates, CustomerDatabase
from pipelines import CDC_CHANGES, build, cdc_project, check_against_database, project, run, table_rows


def messy_feed_checks(db: CustomerDatabase, wrapped: bool) -> None:
    # the feed was messy: some events landed twice, some in a later batch, some out of order
    events = [json.loads(line) for f in sorted(db.landing.glob("*.json"))
              for line in f.read_text().splitlines()]
    lsns = [(e["payload"] if wrapped else e)["source"]["lsn"] for e in events]
    assert len(lsns) > len(set(lsns))  # duplicates
    assert any(a > b for a, b in zip(lsns, lsns[1:], strict=False))  # out of order
    assert {(e["payload"] if wrapped else e)["op"] for e in events} == {"r", "c", "u", "d"}
    assert len(db.history()) > len(db.current()) > 0


def test_scd1_and_scd2_equal_the_database(spark, tmp):
    """Two runs: the second brings updates and deletes of rows the first applied, late
    events and duplicates of events already applied."""
    db = CustomerDatabase(tmp / "factory", seed=7)
    db.load(3)
    root = cdc_project(tmp, db)
    lake, results = run(spark, root)
    assert results["customers_changes"].rows_written > 0
    db.load(2)
    db.drain()  # the late events of the last batch land too
    lake, _ = run(spark, root)
    check_against_database(Path(lake.path("customers")).parent, db)
    messy_feed_checks(db, wrapped=False)


def test_wrapped_envelopes_into_apply_changes_sql(spark, tmp):
    """{"schema", "payload"} events, and the targets declared with APPLY CHANGES INTO."""
    db = CustomerDatabase(tmp / "factory", seed=8, rates=CdcRates(envelope=True))
    db.load(3)
    db.drain()
    lake, results = run(spark, cdc_project(tmp, db, wrapped=True, sql=True))
    check_against_database(Path(lake.path("customers")).parent, db)
    messy_feed_checks(db, wrapped=True)
    # every event fitted the schema: none was dropped by the expectation
    assert results["customers_changes"].rows_written == sum(
        len(f.read_text().splitlines()) for f in db.landing.glob("*.json"))


def test_delete_then_an_older_upsert_does_not_resurrect(spark, tmp):
    db = CustomerDatabase(tmp / "factory", seed=3, rates=CdcRates(
        snapshot=5, changes=0, out_of_order=0, duplicate=0, late=0))
    db.load(1)
    victim = db.current()[0]
    # the database updates, then deletes a row; the update's event arrives after the delete's
    with db.connect() as conn:
        conn.execute("UPDATE customers SET tier = 'gold' WHERE customer_id = ?", (victim[0],))
        conn.execute("DELETE FROM customers WHERE customer_id = ?", (victim[0],))
        conn.execute("UPDATE customers_history SET end_lsn = 6 WHERE customer_id = ? AND "
                     "end_lsn IS NULL", (victim[0],))
        conn.execute("INSERT INTO customers_history VALUES (?, ?, ?, ?, ?, 'gold', 6, 7)",
                     victim[:5])
    row = dict(zip(COLUMNS, victim, strict=True))
    upsert = {**row, "tier": "gold"}

    def event(before, after, op, lsn):
        return json.dumps({"before": before, "after": after, "op": op, "ts_ms": lsn,
                           "source": {"lsn": lsn, "table": "customers"}}) + "\n"

    (db.landing / "customers-00001-0.json").write_text(event(upsert, None, "d", 7))
    root = cdc_project(tmp, db)
    lake, _ = run(spark, root)
    (db.landing / "customers-00002-0.json").write_text(event(row, upsert, "u", 6))
    lake, _ = run(spark, root)
    check_against_database(Path(lake.path("customers")).parent, db)
    assert victim[0] not in {r[0] for r in table_rows(lake.path("customers"), COLUMNS)}


def test_debezium_changes_refuses_what_is_not_an_envelope(spark):
    import headwater

    with pytest.raises(HeadwaterError) as err:
        headwater.debezium_changes(spark.createDataFrame([(1, "x")], "id INT, op STRING"))
    assert err.value.code == "HW_DEBEZIUM_NOT_ENVELOPE" and "before" in str(err.value)
    clashing = spark.createDataFrame([], headwater.debezium_schema("id INT, lsn BIGINT"))
    with pytest.raises(HeadwaterError) as err:
        headwater.debezium_changes(clashing)
    assert err.value.code == "HW_DEBEZIUM_NOT_ENVELOPE" and "lsn" in str(err.value)
    renamed = headwater.debezium_changes(clashing, sequence_column="_lsn")
    assert renamed.columns == ["id", "lsn", "op", "_lsn", "ts_ms"]
    with pytest.raises(HeadwaterError) as err:
        headwater.debezium_schema("id INT,, name")
    assert err.value.code == "HW_INGEST_BAD_SCHEMA"


@pytest.mark.parametrize(("statement", "line", "says"), [
    ("APPLY CHANGES customers FROM STREAM(customers_changes) KEYS (customer_id)\n"
     "  SEQUENCE BY lsn;", 4, "expected INTO"),
    ("APPLY CHANGES INTO customers FROM STREAM(customers_changes)\n  KEYS customer_id\n"
     "  SEQUENCE BY lsn;", 5, "Spark's SQL parser rejected"),
])
def test_malformed_apply_changes_names_file_and_line(spark, tmp, statement, line, says):
    root = project(tmp, {"changes.py": CDC_CHANGES.format(landing=str(tmp), ddl=ROW_DDL,
                                                          wrapped=False, limit=1000),
                         "flows.sql": "-- customers\n\nCREATE STREAMING TABLE customers;\n"
                                      + statement})
    with pytest.raises(HeadwaterError) as err:
        build(spark, root, dry=True)
    assert err.value.code == "HW_PIPELINE_SQL_INVALID"
    assert f"flows.sql:{line}" in str(err.value) and says in str(err.value)


def test_apply_changes_clauses_spark_lacks_reach_the_flow(spark, tmp):
    """IGNORE NULL UPDATES and APPLY AS TRUNCATE WHEN are not in Spark's AUTO CDC grammar:
    they are read first and given to the flow; the rest goes through Spark's parser."""
    changes = CDC_CHANGES.format(landing=str(tmp), ddl=ROW_DDL, wrapped=False, limit=1000)
    root = project(tmp, {"changes.py": changes, "flows.sql": """
        CREATE STREAMING TABLE customers;
        APPLY CHANGES INTO LIVE.customers FROM STREAM(customers_changes)
          KEYS (customer_id)
          IGNORE NULL UPDATES
          APPLY AS DELETE WHEN op = 'd'
          APPLY AS TRUNCATE WHEN op = 't' AND (lsn > 0)
          SEQUENCE BY lsn
          COLUMNS * EXCEPT (op, ts_ms, _rescued_data);
        CREATE STREAMING TABLE plain;
        CREATE FLOW plain_flow AS AUTO CDC INTO plain FROM STREAM(customers_changes)
          KEYS (customer_id) SEQUENCE BY lsn STORED AS SCD TYPE 2;
        """})
    graph = build(spark, root, dry=True)
    spec = graph.flows["customers"].flow.cdc
    assert spec.ignore_null_updates is True
    assert spec.apply_as_truncates == "op = 't' AND (lsn > 0)"
    assert spec.apply_as_deletes.replace("(", "").replace(")", "") == "op = 'd'"
    assert spec.except_column_list == ("op", "ts_ms", "_rescued_data")
    plain = graph.flows["plain/plain_flow"].flow.cdc
    assert plain.stored_as_scd_type == 2 and not plain.ignore_null_updates
    assert plain.apply_as_truncates is None


def landed(db: CustomerDatabase) -> dict[str, str]:
    return {f.name: f.read_text() for f in sorted(db.landing.glob("*.json"))}


def test_factory_is_deterministic_and_an_interrupted_load_lands_the_same(tmp, monkeypatch):
    whole = CustomerDatabase(tmp / "a", seed=5)
    whole.load(3)
    interrupted = CustomerDatabase(tmp / "b", seed=5)
    interrupted.load(1)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the load dies after changing the database, before landing

    monkeypatch.setattr(CustomerDatabase, "_deliver", crash)
    with pytest.raises(KeyboardInterrupt):
        interrupted.load(1)
    monkeypatch.undo()
    assert interrupted.batches_landed == 1 and len(interrupted.history()) == 30  # rolled back
    interrupted.load(2)
    assert landed(interrupted) == landed(whole)
    assert interrupted.history() == whole.history() and interrupted.current() == whole.current()
    other = CustomerDatabase(tmp / "c", seed=6)
    other.load(3)
    assert landed(other) != landed(whole)  # another seed, other changes


def test_factory_cli_lands_the_change_feed(tmp):
    from click.testing import CliRunner

    from headwater.cli import main

    out = CliRunner().invoke(main, ["factory", "--root", str(tmp / "lake"), "--batches", "2",
                                    "--cdc"])
    assert out.exit_code == 0, out.output
    assert "landed change batch 1" in out.output
    db = CustomerDatabase(tmp / "lake")
    assert db.batches_landed == 2 and db.current()
    assert any(name.startswith("customers-00001-") for name in landed(db))
