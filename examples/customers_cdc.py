"""Change data from a database, in plain PySpark: the factory's SQLite customers table
changes at random, Debezium-style events land as JSON files (some out of order, duplicated or
late), and ``headwater.apply_changes_stream`` keeps two Delta tables in step with it:

- ``customers``: the table as it is now (SCD type 1);
- ``customers_history``: every version of every row (SCD type 2, ``__START_AT`` /
  ``__END_AT`` are the lsns of the changes that opened and closed it).

    python examples/customers_cdc.py [--root DIR]

Each stream applies its micro-batches exactly once (a Delta txn per batch), so stopping and
restarting it, as done here after the first loads, never applies a change twice.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import headwater
from headwater.factory.debezium import ROW_DDL, CustomerDatabase


def changes(spark, db: CustomerDatabase, base: Path, name: str):
    """The change rows: customer_id ... tier, op, lsn, ts_ms (each stream its own file list)."""
    events = headwater.read_files(
        str(db.landing), schema=headwater.debezium_schema(ROW_DDL),
        schema_location=str(base / "_schemas" / name), spark=spark)
    # with a fixed schema, events that do not fit keep their fields in _rescued_data
    return headwater.debezium_changes(events).where("_rescued_data IS NULL")


def apply_all(spark, db: CustomerDatabase, base: Path) -> None:
    """Both streams, one after the other, each until the files landed so far are applied."""
    common = {"keys": ["customer_id"], "sequence_by": "lsn", "apply_as_deletes": "op = 'd'",
              "except_column_list": ["op", "ts_ms", "lsn", "_rescued_data"],
              "trigger": {"availableNow": True}}
    headwater.apply_changes_stream(
        changes(spark, db, base, "customers"), str(base / "customers"),
        checkpoint_location=str(base / "_checkpoints" / "customers"), **common,
    ).awaitTermination()
    headwater.apply_changes_stream(
        changes(spark, db, base, "customers_history"), str(base / "customers_history"),
        stored_as_scd_type=2,
        checkpoint_location=str(base / "_checkpoints" / "customers_history"), **common,
    ).awaitTermination()


def main(root: str, spark=None) -> dict[str, list[tuple]]:
    base = Path(root)
    spark = spark or headwater.spark_session("local[2]")
    db = CustomerDatabase(base / "factory", seed=4)
    db.load(2)
    apply_all(spark, db, base)  # the first run, then a restart with more changes
    db.load(2)
    db.drain()  # the events held back as late land too
    apply_all(spark, db, base)
    tables = {name: sorted(tuple(r) for r in spark.read.format("delta").load(
        str(base / name)).collect()) for name in ("customers", "customers_history")}
    print(f"{len(tables['customers'])} customers, "
          f"{len(tables['customers_history'])} versions in their history")
    return tables


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/customers_cdc")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
