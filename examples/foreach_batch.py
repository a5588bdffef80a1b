"""Seed 004 (ForEachBatch): each micro-batch written to two Delta tables, exactly once.

    python examples/foreach_batch.py [--root DIR]

The seed's ``my_func(df, batch_id)`` writes the batch twice; with ``txnAppId`` and
``txnVersion`` (the batch id) each write is skipped if that batch was already committed to
that table, so a micro-batch replayed after a crash lands once. The example replays one batch
by hand to show it. The seed's ``trigger(once=True)`` is availableNow here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import headwater
from headwater.factory import DataFactory


def main(root: str, spark=None) -> dict[str, int]:
    base = Path(root)
    factory = DataFactory(base, seed=5)
    factory.load(2)
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    headwater.Lakehouse(root, spark)
    ok_path, warn_path = str(base / "readings_ok"), str(base / "readings_warn")
    app_id = "foreach-batch-example"  # stable across restarts of this query

    def my_func(df, batch_id):
        (df.where("status = 'ok'").write.format("delta")
         .mode("append")
         .option("txnAppId", app_id)
         .option("txnVersion", batch_id)
         .option("path", ok_path)
         .save())
        (df.where("status != 'ok'").write.format("delta")
         .mode("append")
         .option("txnAppId", app_id)
         .option("txnVersion", batch_id)
         .option("path", warn_path)
         .save())

    df = spark.readStream.table("devices_bronze")
    (df.writeStream.foreachBatch(my_func)
     .outputMode("append")
     .trigger(availableNow=True)
     .option("checkpointLocation", str(base / "_checkpoints" / "foreach_batch"))
     .start()
     .awaitTermination())

    # A replay of batch 0 (what a restart after a crash does): both writes are skipped.
    my_func(spark.read.format("delta").load(str(base / "devices_bronze")), 0)

    counts = {"ok": spark.read.format("delta").load(ok_path).count(),
              "warn": spark.read.format("delta").load(warn_path).count()}
    print(counts)
    return counts


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/foreach_batch")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
