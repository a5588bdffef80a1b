"""Seed 004's foreachBatch pattern as an upsert: each micro-batch MERGEd into a Delta table,
exactly once, with delta-spark's DeltaTable API (only the import changes).

    python examples/foreach_batch_upsert.py [--root DIR]

Each batch keeps the newest reading per device (a MERGE may not match one target row twice)
and upserts it. The MERGE is idempotent for a replayed batch: the update only applies when the
incoming reading is newer than the stored one (``s.ts > t.ts``) and the insert only when the
device is new, so a batch delivered again after a crash changes nothing. The example replays
batch 0 by hand to show it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import deltalake
from pyspark.sql import Window
from pyspark.sql import functions as F

import headwater
from headwater import DeltaTable  # was: from delta.tables import DeltaTable


def upsert(spark, target: str):
    def my_func(df, batch_id):
        newest = (df.withColumn("_rank", F.row_number().over(
            Window.partitionBy("device").orderBy(F.col("ts").desc(), F.col("reading").desc())))
            .where("_rank = 1").drop("_rank"))
        (DeltaTable.forPath(spark, target).alias("t")
         .merge(newest.alias("s"), "t.device = s.device")
         .whenMatchedUpdateAll(condition="s.ts > t.ts")
         .whenNotMatchedInsertAll()
         .execute())
    return my_func


def main(root: str, spark=None) -> list[tuple]:
    base = Path(root)
    spark = spark or headwater.spark_session("local[2]")
    source, target = str(base / "readings"), str(base / "latest")
    batches = [
        [("d1", 1, 10.0), ("d2", 1, 20.0), ("d1", 2, 11.0)],
        [("d2", 3, 21.0), ("d3", 3, 30.0)],
        [("d1", 4, 12.0), ("d3", 2, 99.0)],  # d3's reading at ts 2 is older: ignored
    ]
    schema = "device string, ts long, reading double"
    spark.createDataFrame([], schema).write.format("delta").mode("overwrite").save(target)
    # The change data feed shows what each upsert changed (and that a replay changed nothing).
    deltalake.DeltaTable(target).alter.set_table_properties(
        {"delta.enableChangeDataFeed": "true"})
    spark.createDataFrame(batches[0], schema).write.format("delta").mode("append").save(source)
    my_func = upsert(spark, target)

    def run_stream():
        (spark.readStream.format("delta").load(source).writeStream.foreachBatch(my_func)
         .trigger(availableNow=True)
         .option("checkpointLocation", str(base / "_checkpoints" / "upsert"))
         .start().awaitTermination())

    run_stream()
    for rows in batches[1:]:
        spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(source)
        run_stream()
    # A replay of batch 0 (what a restart after a crash does): nothing changes.
    my_func(spark.read.format("delta").option("versionAsOf", 0).load(source), 0)

    latest = sorted(tuple(r) for r in spark.read.format("delta").load(target).collect())
    print(latest)
    return latest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/foreach_batch_upsert")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
