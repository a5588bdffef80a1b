"""A lakehouse: one root folder of Delta tables, addressed by name through Spark's catalog.

Modules: names (table names and folders), catalog (per-table data sources, which lakehouse is
attached to which session), hooks (spark.sql and the writers while attached), tables (the
Lakehouse class), sql (the statement router on Spark's parser), ddl (CREATE/DROP/ALTER handlers),
session (``headwater.spark_session``).
"""

from headwater.lakehouse.catalog import active_lakehouse
from headwater.lakehouse.names import SYSTEM_TABLES, TableName, list_tables, parse_name
from headwater.lakehouse.tables import Lakehouse

__all__ = ["SYSTEM_TABLES", "Lakehouse", "TableName", "active_lakehouse", "list_tables",
           "parse_name"]
