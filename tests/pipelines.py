"""Pipeline projects for tests: a project folder from definition texts, its graph, a run."""

from __future__ import annotations

import textwrap
from pathlib import Path

from deltalake import DeltaTable

from headwater import Lakehouse
from headwater.conf.project_file import Project
from headwater.conf.triggers import trigger_kwargs
from headwater.factory.debezium import COLUMNS, ROW_DDL, CustomerDatabase
from headwater.pipeline.graph import Graph
from headwater.pipeline.loader import load_definitions
from headwater.pipeline.run import Runner

HEADER = """
import headwater
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.active()
"""


def project(tmp_path: Path, files: dict[str, str],
            globs: tuple[str, ...] = ("defs/*.py", "defs/*.sql")) -> Path:
    """A project folder: headwater.toml loading ``globs`` in that order, and these definition
    files (Python ones get HEADER)."""
    root = tmp_path / "proj"
    (root / "defs").mkdir(parents=True, exist_ok=True)
    definitions = ", ".join(f'"{g}"' for g in globs)
    (root / "headwater.toml").write_text(
        f'[pipeline]\nname = "t"\nroot = "lake"\ndefinitions = [{definitions}]\n')
    for name, text in files.items():
        body = textwrap.dedent(text)
        (root / "defs" / name).write_text(HEADER + body if name.endswith(".py") else body)
    if not any(n.endswith(".sql") for n in files):
        (root / "defs" / "empty.sql").write_text("-- nothing\n")
    return root


def build(spark, root: Path, dry: bool = False) -> Graph:
    proj = Project.load(root)
    lake = Lakehouse(proj.root, spark)
    return Graph(load_definitions(proj), lake, dry=dry).build()


def run(spark, root: Path, select=None):
    graph = build(spark, root)
    results = Runner(graph, trigger_kwargs("available-now"), False, select, echo=lambda _: None).run()
    return graph.lakehouse, {r.key: r for r in results}


# --- AUTO CDC over the factory's Debezium change feed --------------------------------------

CDC_CHANGES = """
@headwater.expect_or_drop("envelope_fits", "_rescued_data IS NULL")
@headwater.table
def customers_changes():
    events = headwater.read_files({landing!r}, schema=headwater.debezium_schema(
        {ddl!r}, wrapped={wrapped}), max_files_per_trigger={limit})
    return headwater.debezium_changes(events)
"""
CDC_PYTHON_FLOWS = """
headwater.create_streaming_table("customers")
headwater.create_auto_cdc_flow(target="customers", source="customers_changes",
                               keys=["customer_id"], sequence_by="lsn",
                               apply_as_deletes="op = 'd'",
                               except_column_list=["op", "ts_ms", "_rescued_data"])
headwater.create_streaming_table("customers_history")
headwater.create_auto_cdc_flow(target="customers_history", source="customers_changes",
                               keys=["customer_id"], sequence_by="lsn",
                               apply_as_deletes="op = 'd'", stored_as_scd_type=2,
                               except_column_list=["op", "ts_ms", "lsn", "_rescued_data"])
"""
# the same two flows in DLT's older SQL spelling
CDC_SQL_FLOWS = """
CREATE OR REFRESH STREAMING TABLE customers;
APPLY CHANGES INTO LIVE.customers
  FROM STREAM(customers_changes)
  KEYS (customer_id)
  APPLY AS DELETE WHEN op = 'd'
  SEQUENCE BY lsn
  COLUMNS * EXCEPT (op, ts_ms, _rescued_data)
  STORED AS SCD TYPE 1;

CREATE OR REFRESH STREAMING TABLE customers_history;
APPLY CHANGES INTO customers_history FROM STREAM(customers_changes) KEYS (customer_id)
  APPLY AS DELETE WHEN op = 'd' SEQUENCE BY lsn
  COLUMNS * EXCEPT (op, ts_ms, lsn, _rescued_data) STORED AS SCD TYPE 2;
"""


def cdc_project(tmp_path: Path, db: CustomerDatabase, wrapped: bool = False, sql: bool = False,
                max_files_per_trigger: int = 1000) -> Path:
    """A project reading the factory's Debezium files into customers (SCD1) and
    customers_history (SCD2), declared in Python or with APPLY CHANGES INTO (sql=True)."""
    changes = CDC_CHANGES.format(landing=str(db.landing), ddl=ROW_DDL, wrapped=wrapped,
                                 limit=max_files_per_trigger)
    if sql:
        return project(tmp_path, {"changes.py": changes, "flows.sql": CDC_SQL_FLOWS})
    return project(tmp_path, {"cdc.py": changes + CDC_PYTHON_FLOWS})


def table_rows(path, columns) -> list[tuple]:
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows),
                  key=lambda r: tuple((v is None, v) for v in r))


def check_against_database(tables: Path, db: CustomerDatabase) -> None:
    """``tables``/customers equals the database's table row for row; customers_history holds
    its versions, ``__START_AT`` / ``__END_AT`` being the lsns of the changes."""
    assert table_rows(tables / "customers", COLUMNS) == db.current()
    history = table_rows(tables / "customers_history", (*COLUMNS, "__START_AT", "__END_AT"))
    truth = sorted(db.history(), key=lambda r: tuple((v is None, v) for v in r))
    assert history == truth
