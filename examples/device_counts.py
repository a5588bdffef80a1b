"""Seed 001: device readings counted through a streaming temp view and SQL, complete mode.

    python examples/device_counts.py [--root DIR] [--interval "4 seconds"]

The data factory appends readings to the Delta table ``bronze``. As in the seed:

    spark.readStream.table("bronze").createOrReplaceTempView("streaming_tmp_vw")
    CREATE OR REPLACE TEMP VIEW device_counts_tmp_vw AS (SELECT device_id, COUNT(device_id) ...)
    spark.table("device_counts_tmp_vw").writeStream...outputMode("complete").table("device_counts")

first as one incremental batch (availableNow: the seed's ``once=True`` is deprecated in
Spark 4), then every 4 seconds while the factory lands a new batch; ``SELECT * FROM
device_counts`` shows the counts change.
"""

from __future__ import annotations

import argparse
import time

import headwater
from headwater.factory import DataFactory


def counts(spark) -> dict[int, int]:
    return {r.device_id: r.total_recordings
            for r in spark.sql("SELECT * FROM device_counts ORDER BY device_id").collect()}


def main(root: str, interval: str = "4 seconds", spark=None) -> tuple[dict, dict]:
    factory = DataFactory(root, seed=1, device_table="bronze")
    factory.load()
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    lake = headwater.Lakehouse(root, spark)

    (spark.readStream
        .table("bronze")
        .createOrReplaceTempView("streaming_tmp_vw"))
    spark.sql("""CREATE OR REPLACE TEMP VIEW device_counts_tmp_vw AS (
        SELECT device_id, COUNT(device_id) AS total_recordings
        FROM streaming_tmp_vw
        GROUP BY device_id)""")

    (spark.table("device_counts_tmp_vw")
        .writeStream
        .option("checkpointLocation", lake.checkpoint("device_counts"))
        .outputMode("complete")
        .trigger(availableNow=True)
        .table("device_counts")
        .awaitTermination())
    before = counts(spark)
    print("after one incremental batch:", before)

    query = (spark.table("device_counts_tmp_vw")
             .writeStream
             .option("checkpointLocation", lake.checkpoint("device_counts"))
             .outputMode("complete")
             .trigger(processingTime=interval)
             .table("device_counts"))
    headwater.block_until_stream_is_ready(query, min_batches=1)

    factory.load()  # DA.data_factory.load(): the next batch lands in bronze
    expected = sum(1 for _ in factory.truth().of("devices"))
    deadline = time.monotonic() + 120
    while sum(counts(spark).values()) < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    after = counts(spark)
    print("while streaming, after the next batch landed:", after)
    headwater.stop_all_streams(spark)
    return before, after


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/device_counts")
    parser.add_argument("--interval", default="4 seconds")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root, args.interval)
