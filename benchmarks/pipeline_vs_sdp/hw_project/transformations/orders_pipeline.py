"""The benchmark pipeline for headwater (`headwater run --project DIR`).

JSON files -> bronze (streaming table) -> silver (streaming table) -> gold (materialized view).
The logic lives in orders_transforms.py, shared with the SDP project; the harness puts its
directory on PYTHONPATH.
"""

import time

LOADED_AT = time.time()  # first: the harness's startup marker (see orders_transforms)

import orders_transforms as ot
from pyspark.sql import SparkSession

import headwater

spark = SparkSession.active()
ot.report_session(spark, LOADED_AT)


@headwater.table
def bronze():
    return ot.bronze(spark)


@headwater.table
def silver():
    return ot.silver(headwater.read_stream("bronze"))


@headwater.materialized_view
def gold():
    return ot.gold(headwater.read("silver"))
