"""The floor of benchmarks/pipeline_20.py: the same 20 datasets as one hand-written PySpark
batch script, Spark's native parquet reads and writes and nothing else (no Delta, no
checkpoints, no streams): each dataset is computed by transforms20.py from its inputs and
written with `df.write.parquet`; a downstream dataset reads its inputs back from that parquet,
as a pipeline reads its upstream tables. The streams are batch reads of the same files, the
CDC target is the newest change per key (dropped when a delete), and the watermark aggregate
is the batch aggregate keeping the windows the stream closes (transforms20.closed_windows).

    PIPELINE20_INPUT=<input> PIPELINE20_CONF='{"spark.master": ...}' \\
        python native20.py <output folder>
"""

import json
import os
import sys
import time

import transforms20 as t
from pyspark.sql import SparkSession


def main(out: str) -> None:
    builder = SparkSession.builder.appName("pipeline20-native")
    for key, value in json.loads(os.environ["PIPELINE20_CONF"]).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    t.report_session(spark, time.time())  # the session is up: the user's code starts

    def write(name, df):
        t0 = time.perf_counter()
        df.write.mode("overwrite").parquet(os.path.join(out, name))
        print(f"written {name} in {time.perf_counter() - t0:.3f}s", flush=True)

    def read(name):
        return spark.read.parquet(os.path.join(out, name))

    write("orders_raw", spark.read.schema(t.ORDERS).json(t.source("orders")))
    write("clicks_raw", spark.read.schema(t.CLICKS).json(t.source("clicks")))
    write("changes_raw", spark.read.schema(t.CHANGES).json(t.source("changes")))
    write("customers_raw", spark.read.schema(t.CUSTOMERS).option("header", "true")
          .csv(t.source("customers")))
    write("products_raw", t.products_batch(spark))
    write("orders_clean", t.orders_clean(read("orders_raw")))
    write("clicks_clean", t.clicks_clean(read("clicks_raw")))
    write("customers_clean", t.customers_clean(read("customers_raw")))
    write("products_clean", t.products_clean(read("products_raw")))
    write("orders_enriched", t.orders_enriched(read("orders_clean"), read("customers_clean"),
                                               read("products_clean")))
    write("clicks_enriched", t.clicks_enriched(read("clicks_clean"), read("products_clean")))
    write("revenue_by_country", t.revenue_by(read("orders_enriched"), "country"))
    write("revenue_by_category", t.revenue_by(read("orders_enriched"), "category"))
    write("revenue_by_day", t.revenue_by(read("orders_enriched"), "order_date"))
    write("customer_ltv", t.customer_ltv(read("orders_enriched")))
    write("clicks_by_category", t.clicks_by_category(read("clicks_enriched")))
    write("conversion_by_product", t.conversion_by_product(read("clicks_clean"),
                                                           read("orders_enriched")))
    write("segment_summary", t.segment_summary(read("customers_clean"), read("customer_ltv")))
    clicks = read("clicks_clean")
    write("clicks_per_window", t.closed_windows(t.clicks_per_window(clicks, stream=False),
                                                clicks))
    write("customers_cdc", t.latest_per_key(read("changes_raw")))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
