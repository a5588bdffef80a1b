"""The 20 datasets' logic, shared by the SDP project (run by headwater and by SDP) and by the
hand-written PySpark script (native20.py), so all three do the same work: the sources'
schemas (given, never inferred) and one function per dataset from its inputs' DataFrames.
Plain DataFrame code: a classic session (headwater, the script) and a Spark Connect session
(SDP) alike.

    bronze  orders_raw, clicks_raw, changes_raw, customers_raw (streams of JSON / CSV files),
            products_raw (parquet, batch)
    silver  orders_clean, clicks_clean (streams), customers_clean, products_clean,
            orders_enriched (orders x customers x products), clicks_enriched (clicks x
            products), customers_cdc (AUTO CDC of changes_raw: the latest row per customer)
    gold    revenue_by_country, revenue_by_category, revenue_by_day, customer_ltv,
            clicks_by_category, conversion_by_product, segment_summary, clicks_per_window
            (a stream: 5-minute windows per page with a 10-minute watermark)
"""

from __future__ import annotations

import json
import os

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

ORDERS = ("order_id LONG, customer_id LONG, product_id LONG, quantity INT, status STRING, "
          "order_ts STRING")
CUSTOMERS = "customer_id LONG, name STRING, country STRING, segment STRING, signup_date STRING"
PRODUCTS = "product_id LONG, name STRING, category STRING, price DOUBLE"
CHANGES = ("customer_id LONG, name STRING, country STRING, segment STRING, seq LONG, "
           "op STRING")
CLICKS = "click_id LONG, customer_id LONG, product_id LONG, page STRING, event_time STRING"
WATERMARK = "10 minutes"
WINDOW = "5 minutes"
CDC_KEYS, CDC_SEQUENCE, CDC_DELETE = ["customer_id"], "seq", "op = 'D'"

# the datasets in the order the script builds them (SDP runs all but the last two)
DATASETS = (
    "orders_raw", "clicks_raw", "changes_raw", "customers_raw", "products_raw",
    "orders_clean", "clicks_clean", "customers_clean", "products_clean",
    "orders_enriched", "clicks_enriched",
    "revenue_by_country", "revenue_by_category", "revenue_by_day", "customer_ltv",
    "clicks_by_category", "conversion_by_product", "segment_summary", "clicks_per_window",
    "customers_cdc",
)
CDC_TARGET = "customers_cdc"

MARKER = "PIPELINE_BENCH_SESSION_UP "
CHECKED_CONF = ["spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
                "spark.sql.session.timeZone"]


def report_session(spark, loaded_at: float) -> None:
    """The harness's startup marker (benchmarks/pipeline_vs_sdp.py's): when the tool first
    ran the user's code, and the effective settings it checks."""
    conf = {}
    for key in CHECKED_CONF:
        try:
            conf[key] = spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a conf a session will not show is reported as None
            conf[key] = None
    print(MARKER + json.dumps({"t": loaded_at, "conf": conf}), flush=True)


def source(name: str) -> str:
    """A source folder under the input the harness passes in PIPELINE20_INPUT."""
    root = os.environ.get("PIPELINE20_INPUT")
    if not root:
        raise RuntimeError("PIPELINE20_INPUT is not set: run benchmarks/pipeline_20.py, or "
                           "export it to a folder of generated input (data20.py)")
    return os.path.join(root, name)


# --- bronze: the sources as they land --------------------------------------------------------


def json_stream(spark, name: str, schema: str) -> DataFrame:
    return spark.readStream.format("json").schema(schema).load(source(name))


def customers_stream(spark) -> DataFrame:
    return (spark.readStream.format("csv").schema(CUSTOMERS).option("header", "true")
            .load(source("customers")))


def products_batch(spark) -> DataFrame:
    return spark.read.schema(PRODUCTS).parquet(source("products"))


# --- silver ----------------------------------------------------------------------------------


def orders_clean(orders: DataFrame) -> DataFrame:
    ts = F.to_timestamp("order_ts")
    return (orders.where("status <> 'cancelled' AND quantity > 0")
            .select("order_id", "customer_id", "product_id", "quantity", "status",
                    ts.alias("order_ts"), F.to_date(ts).alias("order_date")))


def clicks_clean(clicks: DataFrame) -> DataFrame:
    return (clicks.where("page IS NOT NULL")
            .select("click_id", "customer_id", "product_id", "page",
                    F.to_timestamp("event_time").alias("event_time")))


def customers_clean(customers: DataFrame) -> DataFrame:
    return (customers.where("customer_id IS NOT NULL")
            .select("customer_id", F.trim("name").alias("name"),
                    F.upper("country").alias("country"), "segment",
                    F.to_date("signup_date").alias("signup_date")))


def products_clean(products: DataFrame) -> DataFrame:
    return products.where("price IS NOT NULL AND price > 0")


def orders_enriched(orders: DataFrame, customers: DataFrame, products: DataFrame) -> DataFrame:
    amount = (F.col("quantity").cast("decimal(10,0)") * F.col("price").cast("decimal(10,2)"))
    return (orders.join(customers.select("customer_id", "country", "segment"), "customer_id")
            .join(products.select("product_id", "category", "price"), "product_id")
            .withColumn("amount", amount))


def clicks_enriched(clicks: DataFrame, products: DataFrame) -> DataFrame:
    return clicks.join(products.select("product_id", "category"), "product_id")


# --- gold ------------------------------------------------------------------------------------


def revenue_by(enriched: DataFrame, key: str) -> DataFrame:
    return enriched.groupBy(key).agg(F.count(F.lit(1)).alias("orders"),
                                     F.sum("quantity").alias("quantity"),
                                     F.sum("amount").alias("revenue"))


def customer_ltv(enriched: DataFrame) -> DataFrame:
    return enriched.groupBy("customer_id").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("revenue"),
        F.min("order_ts").alias("first_order"), F.max("order_ts").alias("last_order"))


def clicks_by_category(clicks: DataFrame) -> DataFrame:
    return clicks.groupBy("category", "page").agg(
        F.count(F.lit(1)).alias("clicks"),
        F.approx_count_distinct("customer_id").alias("customers"))


def conversion_by_product(clicks: DataFrame, enriched: DataFrame) -> DataFrame:
    viewed = clicks.groupBy("product_id").agg(F.count(F.lit(1)).alias("clicks"))
    bought = enriched.groupBy("product_id").agg(F.count(F.lit(1)).alias("orders"),
                                                F.sum("amount").alias("revenue"))
    return (viewed.join(bought, "product_id", "full_outer")
            .select("product_id", F.coalesce("clicks", F.lit(0)).alias("clicks"),
                    F.coalesce("orders", F.lit(0)).alias("orders"), "revenue",
                    (F.coalesce("orders", F.lit(0)) / F.col("clicks")).alias("conversion")))


def segment_summary(customers: DataFrame, ltv: DataFrame) -> DataFrame:
    return (customers.join(ltv, "customer_id", "left")
            .groupBy("segment", "country").agg(
                F.count(F.lit(1)).alias("customers"),
                F.count("orders").alias("buyers"),
                F.sum("revenue").alias("revenue")))


def clicks_per_window(clicks: DataFrame, stream: bool) -> DataFrame:
    """Clicks per page in 5-minute event-time windows. On a stream (``stream``: a flag, not
    ``isStreaming``, which SDP would analyse outside its graph) the watermark holds each
    window until the watermark passes its end (append mode); a batch has no watermark, so
    :func:`closed_windows` keeps the windows the stream would have closed."""
    if stream:
        clicks = clicks.withWatermark("event_time", WATERMARK)
    counted = clicks.groupBy(F.window("event_time", WINDOW), "page").agg(
        F.count(F.lit(1)).alias("clicks"))
    return counted.select(F.col("window.start").alias("window_start"),
                          F.col("window.end").alias("window_end"), "page", "clicks")


def closed_windows(windows: DataFrame, clicks: DataFrame) -> DataFrame:
    """The batch side of the watermark: the windows ending at or before the latest event
    time less the delay, the ones an append-mode stream has emitted once all is read."""
    watermark = clicks.agg((F.max("event_time") - F.expr(f"INTERVAL {WATERMARK}")).alias("w"))
    return windows.join(watermark, F.col("window_end") <= F.col("w")).drop("w")


def latest_per_key(changes: DataFrame) -> DataFrame:
    """The batch side of AUTO CDC (SCD type 1): each customer's newest change by ``seq``,
    gone when that change is a delete; the columns the CDC target keeps."""
    newest = Window.partitionBy(*CDC_KEYS).orderBy(F.col(CDC_SEQUENCE).desc())
    return (changes.withColumn("_rank", F.row_number().over(newest))
            .where(f"_rank = 1 AND NOT ({CDC_DELETE})")
            .drop("_rank", "op", "seq"))
