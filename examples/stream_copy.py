"""Seed 000 in miniature: stream one Delta table into another, exactly once.

    python examples/stream_copy.py [ROOT]

Writes a few batches to ROOT/table_1, streams them to ROOT/table_2 with availableNow, lands
more data, streams again from the checkpoint, and prints what table_2 holds.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import headwater


def main(root: str) -> int:
    base = Path(root)
    shutil.rmtree(base, ignore_errors=True)
    spark = headwater.spark_session("local[2]", app_name="headwater-stream-copy")
    table_1, table_2, checkpoint = (str(base / n) for n in ("table_1", "table_2", "_checkpoints/t2"))

    def land(start: int, count: int) -> None:
        (spark.range(start, start + count)
         .selectExpr("id", "concat('device-', id % 5) AS device_id",
                     "timestamp_seconds(1700000000 + id) AS event_time", "rand(7) * 100 AS reading")
         .write.format("delta").mode("append").save(table_1))

    def copy() -> None:
        with headwater.translated():
            (spark.readStream.format("delta").load(table_1)
             .writeStream.format("delta")
             .outputMode("append")
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start(table_2)
             .awaitTermination())

    land(0, 1000)
    copy()
    first = spark.read.format("delta").load(table_2).count()
    land(1000, 500)
    copy()
    copy()  # nothing new: appends nothing
    total = spark.read.format("delta").load(table_2).count()
    print(f"table_2 after first run: {first} rows; after the second: {total} rows")
    (spark.read.format("delta").load(table_2).groupBy("device_id").count()
     .orderBy("device_id").show())
    ok = first == 1000 and total == 1500
    print("exactly once:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="headwater-")))
