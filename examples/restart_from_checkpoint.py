"""Seeds 001 and 004 (checkpoints): a stream stopped and started again from its checkpoint
processes only the data that arrived in between.

    python examples/restart_from_checkpoint.py [--root DIR]

A processing-time stream copies the factory's device readings to ``silver``; it is stopped,
two more batches land, and the same query (same checkpoint) started again reads only those.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import headwater
from headwater.factory import DataFactory


def main(root: str, interval: str = "2 seconds", spark=None) -> dict[str, int]:
    base = Path(root)
    factory = DataFactory(base, seed=6)
    factory.load()
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    lake = headwater.Lakehouse(root, spark)

    def start():
        return (spark.readStream.table("devices_bronze")
                .writeStream
                .trigger(processingTime=interval)
                .option("checkpointLocation", lake.checkpoint("silver"))
                .table("silver"))

    def wait_for(rows: int) -> None:
        deadline = time.monotonic() + 120
        while lake.read("silver").count() < rows and time.monotonic() < deadline:
            time.sleep(0.2)

    first = start()
    wait_for(factory.truth().count("devices"))
    headwater.stop_all_streams(spark)
    read_first = sum(p["numInputRows"] for p in first.recentProgress)

    factory.load(2)  # lands while the stream is stopped
    second = start()
    wait_for(factory.truth().count("devices"))
    headwater.stop_all_streams(spark)
    read_second = sum(p["numInputRows"] for p in second.recentProgress)
    out = {"first_run": read_first, "second_run": read_second,
           "silver": lake.read("silver").count()}
    print(out)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/restart_from_checkpoint")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
