"""Seed 004: colour counts by event time with a watermark, tumbling and sliding windows, in
complete, update and append modes.

    python examples/color_windows.py [--root DIR]

As in the seed: ``CREATE TABLE`` and ``INSERT INTO ... VALUES`` in SQL, then

    df_table = spark.readStream.table("myTable")
    df_table = df_table.withWatermark("event_date", "10 seconds")
    df_table = df_table.groupBy("color", window("event_date", "5 minutes")).count()

written after each of three inserts with availableNow (the seed's ``once=True`` is deprecated
in Spark 4). Differences from the seed: the table is ``mytable`` in the lakehouse (no Unity
Catalog ``workspace.`my-schema```); update mode goes through ``Lakehouse.write_stream``, which
MERGEs each batch by the group keys, because Spark refuses update mode for Python sinks.
"""

from __future__ import annotations

import argparse

from pyspark.sql.functions import window

import headwater

ROUNDS = [
    [("red", "2025-06-22 10:04:45"), ("blue", "2025-06-22 10:01:10"),
     ("red", "2025-06-22 10:06:30"), ("green", "2025-06-22 10:03:00")],
    [("red", "2025-06-22 10:12:00"), ("blue", "2025-06-22 10:08:20"),
     ("red", "2025-06-22 10:13:59")],
    [("green", "2025-06-22 10:31:00")],
]


def main(root: str, spark=None) -> dict[str, list[dict]]:
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    lake = headwater.Lakehouse(root, spark)
    lake.sql("CREATE TABLE myTable (color STRING, event_date TIMESTAMP)")

    def counts(df_table, size: str, slide: str | None = None):
        df_table = df_table.withWatermark("event_date", "10 seconds")
        return df_table.groupBy("color", window("event_date", size, slide)).count()

    def run(name: str, mode: str, size: str, slide: str | None = None) -> None:
        df_table = counts(spark.readStream.table("myTable"), size, slide)
        if mode == "update":
            lake.write_stream(df_table, name, trigger="available-now",
                              output_mode="update").awaitTermination()
            return
        (df_table.writeStream.format("delta")
         .trigger(availableNow=True)
         .outputMode(mode)
         .option("checkpointLocation", lake.checkpoint(name))
         .option("path", str(lake.path(name)))
         .start()
         .awaitTermination())

    for rows in ROUNDS:
        values = ", ".join(f"('{c}', TIMESTAMP('{t}'))" for c, t in rows)
        spark.sql(f"INSERT INTO myTable VALUES {values}")
        run("tumbling_complete", "complete", "5 minutes")
        run("sliding_update", "update", "10 minutes", "5 minutes")
        run("tumbling_append", "append", "5 minutes")

    out = {}
    for name in ("tumbling_complete", "sliding_update", "tumbling_append"):
        df = lake.sql(f"SELECT * FROM delta.`{lake.path(name)}` ORDER BY window.start, color")
        out[name] = [r.asDict(recursive=True) for r in df.collect()]
        print(f"{name}:")
        for r in out[name]:
            print(f"  {r['window']['start']} - {r['window']['end']}  {r['color']:6} {r['count']}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/color_windows")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
