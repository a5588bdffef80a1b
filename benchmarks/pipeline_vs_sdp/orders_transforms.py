"""The pipeline logic both tools run, so the two definitions files cannot drift apart:
the input schema (given explicitly, no inference), the silver flattening and the gold
aggregation. Plain DataFrame code: it works on a classic session (headwater) and on a
Spark Connect session (SDP) alike.
"""

from __future__ import annotations

import json
import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

# The shape of the seed's orders export (shared/seeds/004: customer.address, payment,
# items[] and metadata[] arrays of structs).
SCHEMA = StructType([
    StructField("order_id", StringType(), True),
    StructField("timestamp", StringType(), True),
    StructField("customer", StructType([
        StructField("customer_id", IntegerType(), True),
        StructField("name", StringType(), True),
        StructField("email", StringType(), True),
        StructField("address", StructType([
            StructField("city", StringType(), True),
            StructField("postal_code", StringType(), True),
            StructField("country", StringType(), True),
        ])),
    ])),
    StructField("items", ArrayType(StructType([
        StructField("item_id", StringType(), True),
        StructField("product_name", StringType(), True),
        StructField("quantity", IntegerType(), True),
        StructField("price", DoubleType(), True),
    ]))),
    StructField("payment", StructType([
        StructField("method", StringType(), True),
        StructField("transaction_id", StringType(), True),
    ])),
    StructField("metadata", ArrayType(StructType([
        StructField("key", StringType(), True),
        StructField("value", StringType(), True),
    ]))),
])


# Settings each definitions file prints, so the harness can check both tools really ran with
# the same ones (a tool that ignored a setting would make the comparison unfair).
CHECKED_CONF = ["spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
                "spark.sql.session.timeZone"]


def report_session(spark, loaded_at: float) -> None:
    """Print the startup marker the harness parses: when the tool first ran this definitions
    file (``loaded_at``, epoch seconds, taken before anything else in the file), and the
    effective values of CHECKED_CONF."""
    conf = {}
    for key in CHECKED_CONF:
        try:
            conf[key] = spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a conf a session will not show is reported as None
            conf[key] = None
    print("PIPELINE_BENCH_SESSION_UP " + json.dumps({"t": loaded_at, "conf": conf}), flush=True)


def input_dir() -> str:
    """The JSON input directory: the harness passes it in PIPELINE_BENCH_INPUT."""
    path = os.environ.get("PIPELINE_BENCH_INPUT")
    if not path:
        raise RuntimeError("PIPELINE_BENCH_INPUT is not set: run benchmarks/pipeline_vs_sdp.py, "
                           "or export it to a directory of orders JSON files")
    return path


def bronze(spark) -> DataFrame:
    """The raw orders, nested as they arrive: JSON Lines read with the explicit schema."""
    return spark.readStream.format("json").schema(SCHEMA).load(input_dir())


def silver(bronze_stream: DataFrame) -> DataFrame:
    """Flatten like the seed: pick the nested fields, explode_outer metadata then items.

    Columns are selected explicitly rather than with the seed's ``select("*", ...).drop(...)``:
    SDP analyses a Connect ``drop`` by name eagerly on the server, outside the pipeline graph,
    and then fails with TABLE_OR_VIEW_NOT_FOUND for ``bronze``. Same output either way.
    """
    flat = [
        "order_id", "customer_id", "email", "name", "city", "country", "postal_code",
        "method", "transaction_id", "timestamp",
    ]
    df = bronze_stream.select(
        "order_id", "customer.customer_id", "customer.email", "customer.name",
        "customer.address.city", "customer.address.country", "customer.address.postal_code",
        "payment.method", "payment.transaction_id", "timestamp", "metadata", "items",
    )
    df = (df.withColumn("metadata", F.explode_outer("metadata"))
            .withColumn("items", F.explode_outer("items")))
    return df.select(
        *flat, "items.item_id", "items.price", "items.product_name", "items.quantity",
        "metadata.key", "metadata.value", F.to_timestamp("timestamp").alias("order_ts"),
    )


def gold(silver_table: DataFrame) -> DataFrame:
    """Revenue per country. Revenue is summed as decimals so it is exact on both sides."""
    revenue = F.col("quantity").cast("decimal(10,0)") * F.col("price").cast("decimal(10,2)")
    return silver_table.groupBy("country").agg(
        F.countDistinct("order_id").alias("orders"),
        F.count(F.lit(1)).alias("lines"),
        F.sum("quantity").alias("quantity"),
        F.sum(revenue).alias("revenue"),
    )
