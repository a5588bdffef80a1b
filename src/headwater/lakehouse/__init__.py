"""A lakehouse: one root folder of Delta tables, addressed by name through Spark's catalog."""

from headwater.lakehouse.catalog import active_lakehouse
from headwater.lakehouse.names import SYSTEM_TABLES, TableName, list_tables, parse_name
from headwater.lakehouse.tables import Lakehouse

__all__ = ["SYSTEM_TABLES", "Lakehouse", "TableName", "active_lakehouse", "list_tables",
           "parse_name"]
