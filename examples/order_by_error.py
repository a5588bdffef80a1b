"""Seed 001 (unsupported operations): sorting a stream fails with a clear error.

    python examples/order_by_error.py [--root DIR]

The seed's commented-out cell ``SELECT * FROM streaming_tmp_vw ORDER BY time`` fails when the
query starts: Spark cannot sort an unbounded stream without an aggregation. headwater reports
it as ``HW_STREAM_UNSUPPORTED`` with the fix; ``headwater validate`` finds the same in a
pipeline before anything runs.
"""

from __future__ import annotations

import argparse

import headwater
from headwater.factory import DataFactory


def main(root: str, spark=None) -> str:
    DataFactory(root, seed=1, device_table="bronze").load()
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    lake = headwater.Lakehouse(root, spark)
    spark.readStream.table("bronze").createOrReplaceTempView("streaming_tmp_vw")
    sorted_stream = spark.sql("SELECT * FROM streaming_tmp_vw ORDER BY event_time")
    try:
        with headwater.translated():
            (sorted_stream.writeStream.option("checkpointLocation", lake.checkpoint("sorted"))
             .trigger(availableNow=True).table("sorted").awaitTermination())
    except headwater.HeadwaterError as exc:
        print(f"error, as expected:\n  {exc}")
        return str(exc)
    raise SystemExit("sorting a stream should have failed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/order_by_error")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
