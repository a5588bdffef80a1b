"""The benchmark pipeline for Spark Declarative Pipelines (`spark-pipelines run`).

JSON files -> bronze (streaming table) -> silver (streaming table) -> gold (materialized view).
The logic lives in orders_transforms.py, shared with the headwater project; the harness puts
its directory on PYTHONPATH. `spark` is the Spark Connect session SDP injects into this module.
"""

import time

LOADED_AT = time.time()  # first: the harness's startup marker (see orders_transforms)

import orders_transforms as ot
from pyspark import pipelines as dp

ot.report_session(spark, LOADED_AT)  # noqa: F821 - `spark` is injected by the SDP CLI


@dp.table
def bronze():
    return ot.bronze(spark)  # noqa: F821


@dp.table
def silver():
    return ot.silver(spark.readStream.table("bronze"))  # noqa: F821


@dp.materialized_view
def gold():
    return ot.gold(spark.read.table("silver"))  # noqa: F821
