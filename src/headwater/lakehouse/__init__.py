"""A lakehouse: one root folder of Delta tables, addressed by name through Spark's catalog.

Modules: lakehouse (the Lakehouse class), names (table names and folders), catalog (per-table
data sources, which lakehouse is attached to which session), hooks (spark.sql and the writers
while attached), native_reads, session (``headwater.spark_session``); the packages sql (the
statement router on Spark's parser and its handlers) and delta_spark (delta-spark's Python
API: DeltaTable, its table builder, configure_spark_with_delta_pip).
"""

from headwater.lakehouse.lakehouse import Lakehouse, active_lakehouse
from headwater.lakehouse.names import SYSTEM_TABLES, TableName, list_tables, parse_name

__all__ = ["SYSTEM_TABLES", "Lakehouse", "TableName", "active_lakehouse", "list_tables",
           "parse_name"]
