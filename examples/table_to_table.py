"""Seeds 000 and 002: stream Table_1 into Table_2 by name, appending, on a timer.

    python examples/table_to_table.py [--root DIR] [--interval "2 minutes"]

The seed's code, unchanged but for the checkpoint (Databricks manages it for tables;
open-source Spark needs one) and a 5-second interval to keep the demo short:

    streamDF = spark.readStream.table("Table_1")
    streamDF.writeStream.trigger(processingTime="2 minutes").outputMode("append")
            .option("checkpointLocation", ...).table("Table_2")

It then inserts rows into Table_1 while the stream runs and waits until Table_2 has them.
"""

from __future__ import annotations

import argparse
import time

import headwater


def main(root: str, interval: str = "5 seconds", spark=None) -> list[tuple]:
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    lake = headwater.Lakehouse(root, spark)
    lake.sql("CREATE TABLE IF NOT EXISTS Table_1 (id BIGINT, name STRING)")
    spark.sql("INSERT INTO Table_1 VALUES (1, 'alpha'), (2, 'beta')")

    streamDF = spark.readStream.table("Table_1")
    query = (streamDF.writeStream
             .trigger(processingTime=interval)
             .outputMode("append")
             .option("checkpointLocation", lake.checkpoint("Table_2"))
             .table("Table_2"))
    headwater.block_until_stream_is_ready(query, min_batches=1)

    spark.sql("INSERT INTO Table_1 VALUES (3, 'gamma')")  # picked up by the next trigger
    deadline = time.monotonic() + 120
    while lake.read("Table_2").count() < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    headwater.stop_all_streams(spark)
    rows = sorted(tuple(r) for r in spark.table("Table_2").collect())
    for row in rows:
        print(row)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/table_to_table")
    parser.add_argument("--interval", default="5 seconds")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root, args.interval)
