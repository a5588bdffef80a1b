"""The 20-dataset benchmark pipeline as an SDP project (benchmarks/pipeline_20.py): headwater
runs it unchanged (`headwater run`), and so does `spark-pipelines run`, without
customers_cdc.py and clicks_per_window.py (see those files). The logic lives in
transforms20.py, shared with the hand-written script; the harness puts its folder on
PYTHONPATH. `spark` is the session the tool injects into this module.
"""

import time

LOADED_AT = time.time()  # first: the harness's startup marker

import transforms20 as t
from pyspark import pipelines as dp

t.report_session(spark, LOADED_AT)  # noqa: F821 - `spark` is injected by the tool


# --- bronze ----------------------------------------------------------------------------------

@dp.table
def orders_raw():
    return t.json_stream(spark, "orders", t.ORDERS)  # noqa: F821


@dp.table
def clicks_raw():
    return t.json_stream(spark, "clicks", t.CLICKS)  # noqa: F821


@dp.table
def changes_raw():
    return t.json_stream(spark, "changes", t.CHANGES)  # noqa: F821


@dp.table
def customers_raw():
    return t.customers_stream(spark)  # noqa: F821


@dp.materialized_view
def products_raw():
    return t.products_batch(spark)  # noqa: F821


# --- silver ----------------------------------------------------------------------------------

@dp.table
def orders_clean():
    return t.orders_clean(spark.readStream.table("orders_raw"))  # noqa: F821


@dp.table
def clicks_clean():
    return t.clicks_clean(spark.readStream.table("clicks_raw"))  # noqa: F821


@dp.materialized_view
def customers_clean():
    return t.customers_clean(spark.read.table("customers_raw"))  # noqa: F821


@dp.materialized_view
def products_clean():
    return t.products_clean(spark.read.table("products_raw"))  # noqa: F821


@dp.materialized_view
def orders_enriched():
    return t.orders_enriched(spark.read.table("orders_clean"),  # noqa: F821
                             spark.read.table("customers_clean"),  # noqa: F821
                             spark.read.table("products_clean"))  # noqa: F821


@dp.materialized_view
def clicks_enriched():
    return t.clicks_enriched(spark.read.table("clicks_clean"),  # noqa: F821
                             spark.read.table("products_clean"))  # noqa: F821


# --- gold ------------------------------------------------------------------------------------

@dp.materialized_view
def revenue_by_country():
    return t.revenue_by(spark.read.table("orders_enriched"), "country")  # noqa: F821


@dp.materialized_view
def revenue_by_category():
    return t.revenue_by(spark.read.table("orders_enriched"), "category")  # noqa: F821


@dp.materialized_view
def revenue_by_day():
    return t.revenue_by(spark.read.table("orders_enriched"), "order_date")  # noqa: F821


@dp.materialized_view
def customer_ltv():
    return t.customer_ltv(spark.read.table("orders_enriched"))  # noqa: F821


@dp.materialized_view
def clicks_by_category():
    return t.clicks_by_category(spark.read.table("clicks_enriched"))  # noqa: F821


@dp.materialized_view
def conversion_by_product():
    return t.conversion_by_product(spark.read.table("clicks_clean"),  # noqa: F821
                                   spark.read.table("orders_enriched"))  # noqa: F821


@dp.materialized_view
def segment_summary():
    return t.segment_summary(spark.read.table("customers_clean"),  # noqa: F821
                             spark.read.table("customer_ltv"))  # noqa: F821
