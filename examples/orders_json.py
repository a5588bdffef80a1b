"""Seed 004: nested order JSON flattened with explode_outer into a Delta table, availableNow,
source files archived, queried back in SQL.

    python examples/orders_json.py [--root DIR]

Two readers over the data factory's order files:

1. The seed's code as written: Spark's JSON file source with the seed's schema,
   ``multiline``, ``cleanSource=archive`` (over the multi-line files: Spark's multiLine
   reader needs one kind of file per folder). Spark nulls a mistyped value silently, and
   archives a batch's files only when the next batch runs (never the last batch's).
2. headwater's ``read_files`` over all order files: the same schema, mistyped and malformed
   records kept in ``_rescued_data``, and every file archived once its batch is committed.

The seed's ``trigger(once=True)`` is deprecated in Spark 4: availableNow does the same in
bounded micro-batches. ``SELECT * FROM delta.`path``` goes through ``Lakehouse.sql``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql.functions import explode_outer
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

import headwater
from headwater.factory import DataFactory

schema = StructType([
    StructField("order_id", StringType(), True),
    StructField("timestamp", StringType(), True),
    StructField("customer", StructType([
        StructField("customer_id", IntegerType(), True),
        StructField("name", StringType(), True),
        StructField("email", StringType(), True),
        StructField("address", StructType([
            StructField("city", StringType(), True),
            StructField("postal_code", StringType(), True),
            StructField("country", StringType(), True)
        ]))
    ])),
    StructField("items", ArrayType(StructType([
        StructField("item_id", StringType(), True),
        StructField("product_name", StringType(), True),
        StructField("quantity", IntegerType(), True),
        StructField("price", DoubleType(), True)
    ]))),
    StructField("payment", StructType([
        StructField("method", StringType(), True),
        StructField("transaction_id", StringType(), True)
    ])),
    StructField("metadata", ArrayType(StructType([
        StructField("key", StringType(), True),
        StructField("value", StringType(), True)
    ])))
])

COLUMNS = ["order_id", "customer.customer_id", "customer.email", "customer.name",
           "customer.address.city", "customer.address.country", "customer.address.postal_code",
           "payment.method", "payment.transaction_id", "timestamp", "metadata", "items"]


def flatten(_df, extra: tuple[str, ...] = ()):
    """The seed's select / explode_outer / select."""
    _df = _df.select(*COLUMNS, *extra)
    _df = _df.withColumn("metadata", explode_outer("metadata")) \
             .withColumn("items", explode_outer("items"))
    return _df.select("*", "items.item_id", "items.price", "items.product_name",
                      "items.quantity", "metadata.key", "metadata.value") \
              .drop("items", "metadata")


def main(root: str, spark=None) -> dict:
    base = Path(root)
    factory = DataFactory(base, seed=4)
    factory.load(2)
    spark = spark or headwater.spark_session("local[2]", lakehouse=root)
    lake = headwater.Lakehouse(root, spark)
    landing = base / "landing" / "orders"

    # 1. the seed's Spark file source
    _df = (spark.readStream.format("json")
           .option("multiline", "true")
           .option("cleanSource", "archive")
           .option("sourceArchiveDir", str(base / "archive" / "spark"))
           .schema(schema)
           .load(str(landing / "multiline")))
    (flatten(_df).writeStream.format("delta")
     .trigger(availableNow=True)
     .outputMode("append")
     .option("path", str(base / "sink" / "data"))
     .option("checkpointLocation", str(base / "sink" / "checkpoint"))
     .start()
     .awaitTermination())
    seed_rows = lake.sql(f"SELECT * FROM delta.`{base / 'sink' / 'data'}`").collect()
    print(f"Spark's file source: {len(seed_rows)} flattened rows")

    # 2. headwater's read_files: every order file, nothing lost, all archived
    raw = headwater.read_files(landing, multi_line=True, schema=schema,
                               schema_location=base / "_schemas" / "orders",
                               clean_source="archive", archive_dir=base / "archive" / "orders")
    (flatten(raw, ("_rescued_data",)).writeStream.format("delta")
     .trigger(availableNow=True)
     .option("checkpointLocation", str(base / "sink_new" / "checkpoint"))
     .start(str(base / "sink_new" / "data"))
     .awaitTermination())
    rows = lake.sql(f"SELECT * FROM delta.`{base / 'sink_new' / 'data'}`").collect()
    rescued = sum(1 for r in rows if r["_rescued_data"])
    print(f"read_files: {len(rows)} flattened rows, {rescued} with rescued data")
    return {"seed_rows": [r.asDict() for r in seed_rows], "rows": [r.asDict() for r in rows]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="./headwater-examples/orders_json")
    args = parser.parse_args()
    headwater.cleanup(args.root)
    main(args.root)
