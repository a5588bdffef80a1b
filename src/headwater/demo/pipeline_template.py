"""The demo's medallion pipeline (written by `headwater demo`; edit it and run again).

orders:  JSON files -> bronze_orders (rescued data) -> silver_orders (one row per item,
         expectations, quarantine) -> revenue_by_country, revenue_by_hour (materialized views)
devices: devices_bronze (a Delta table the factory appends to) -> device_counts (complete mode)
colours: colors_bronze (a Delta table) -> color_counts (10-minute event-time windows behind a
         watermark; events that arrive after their window closed are kept in color_counts__late)
customers: Debezium change events of the factory's customer database -> customer_changes ->
         customers (AUTO CDC, SCD type 1: the table as it is now) and customers_history (SCD
         type 2: every version) -> revenue_by_tier (orders joined to today's customers)
"""

from pathlib import Path

from pyspark.sql import functions as F

import headwater
from headwater.demo.schemas import CUSTOMER_ROW, ORDER_SCHEMA

ROOT = Path(__file__).resolve().parents[1]


@headwater.table(comment="Order files as they landed; what did not fit is in _rescued_data.")
def bronze_orders():
    return headwater.read_files(ROOT / "landing" / "orders", multi_line=True,
                                schema=ORDER_SCHEMA)


@headwater.table(comment="One row per order item (line), typed; bad records quarantined.")
@headwater.expect_or_drop("parsable", "order_id IS NOT NULL")
@headwater.expect_or_drop("valid_quantity", "quantity IS NOT NULL AND quantity > 0")
def silver_orders():
    orders = headwater.read_stream("bronze_orders")
    return (orders
            .select("order_id", F.to_timestamp("timestamp").alias("ts"),
                    F.col("customer.address.country").alias("country"),
                    F.col("customer.customer_id").alias("customer_id"),
                    F.posexplode_outer("items").alias("line", "item"), "_rescued_data")
            .select("order_id", "ts", "country", "customer_id", "line",
                    F.col("item.item_id").alias("item_id"),
                    F.col("item.quantity").alias("quantity"), F.col("item.price").alias("price"),
                    "_rescued_data"))


def order_lines():
    """Feeds resend orders: each (order, line) counts once in gold."""
    return (headwater.read("silver_orders")
            .select("order_id", "line", "ts", "country", "customer_id", "quantity", "price")
            .distinct())


def revenue():
    return F.round(F.sum(F.col("quantity") * F.col("price")), 2).alias("revenue")


@headwater.materialized_view(comment="Revenue per country.")
def revenue_by_country():
    lines = order_lines()
    return lines.groupBy("country").agg(revenue(), F.count("*").alias("lines"))


@headwater.materialized_view(comment="Revenue per hour (event time) and country.")
def revenue_by_hour():
    lines = order_lines()
    return (lines.groupBy(F.window("ts", "1 hour").start.alias("hour"), "country")
            .agg(revenue()))


@headwater.table(output_mode="complete", comment="Readings per device.")
def device_counts():
    return (headwater.read_stream("devices_bronze")
            .groupBy("device_id").agg(F.count("*").alias("readings")))


@headwater.table(keep_late_rows=True,
                 comment="Colour events per 10-minute window (event time), emitted when the "
                         "window closes; late events are in color_counts__late.")
def color_counts():
    return (headwater.read_stream("colors_bronze")
            .withWatermark("event_date", "10 minutes")
            .groupBy(F.window("event_date", "10 minutes").alias("window"), "color")
            .agg(F.count("*").alias("events")))


@headwater.table(comment="The customer database's changes, one row per Debezium event.")
@headwater.expect_or_drop("envelope_fits", "_rescued_data IS NULL")
def customer_changes():
    events = headwater.read_files(ROOT / "landing" / "customers_cdc",
                                  schema=headwater.debezium_schema(CUSTOMER_ROW))
    return headwater.debezium_changes(events)


headwater.create_streaming_table("customers", comment="Customers as they are now (SCD 1).")
headwater.create_auto_cdc_flow(
    target="customers", source="customer_changes", keys=["customer_id"], sequence_by="lsn",
    apply_as_deletes="op = 'd'", except_column_list=["op", "ts_ms", "_rescued_data"])

headwater.create_streaming_table("customers_history",
                                 comment="Every version of every customer (SCD 2).")
headwater.create_auto_cdc_flow(
    target="customers_history", source="customer_changes", keys=["customer_id"],
    sequence_by="lsn", apply_as_deletes="op = 'd'", stored_as_scd_type=2,
    except_column_list=["op", "ts_ms", "lsn", "_rescued_data"])


@headwater.materialized_view(comment="Revenue per customer tier, today's tiers; orders of "
                                     "customers not (or no longer) in the database: 'unknown'.")
def revenue_by_tier():
    tiers = headwater.read("customers").select("customer_id", "tier")
    return (order_lines().join(tiers, "customer_id", "left")
            .groupBy(F.coalesce("tier", F.lit("unknown")).alias("tier"))
            .agg(revenue(), F.count("*").alias("lines")))
