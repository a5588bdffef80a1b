"""Code beside the definitions (issue 38 item 5): a helper module next to the definition
files imports as on Databricks, and UDFs defined or registered in a definition file (a
Python UDF, a pandas UDF, ``spark.udf.register`` then used from SQL) work in every flow; run
twice with new rows landing between the runs."""

from __future__ import annotations

import json

from pipelines import project, run

CONFIG = """
RULES = {"small": 10, "large": 100}


def label(amount):
    return "large" if amount >= RULES["large"] else "small" if amount >= RULES["small"] else "tiny"
"""

DEFS = """
import pandas as pd
from pyspark import pipelines as dp
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf, udf

from config import label


@udf("string")
def _classify(amount):
    return label(amount)


@pandas_udf("long")
def _doubled(values: pd.Series) -> pd.Series:
    return values * 2


spark.udf.register("size_of", lambda amount: label(amount), "string")


@dp.table
def orders():
    return (spark.readStream.schema("id long, amount long").json({landing!r})
            .withColumn("size", _classify("amount")).withColumn("twice", _doubled("amount")))
"""

SQL = """
CREATE OR REFRESH MATERIALIZED VIEW sized AS
SELECT id, size_of(amount) AS sql_size FROM orders;
"""


def _land(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_helper_modules_and_udfs_of_definition_files(spark, tmp_path):
    landing = tmp_path / "landing"
    _land(landing, "a.json", [{"id": 1, "amount": 5}, {"id": 2, "amount": 50}])
    root = project(tmp_path, globs=("defs/*.py", "defs/*.sql"), files={
        "defs.py": DEFS.format(landing=str(landing)), "sized.sql": SQL})
    (root / "defs" / "config.py").write_text(CONFIG)
    (root / "headwater.toml").write_text(
        (root / "headwater.toml").read_text().replace('"defs/*.py"', '"defs/defs.py"'))
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    _land(landing, "b.json", [{"id": 3, "amount": 500}])
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    orders = sorted((r.id, r.size, r.twice) for r in lake.read("orders").collect())
    assert orders == [(1, "tiny", 10), (2, "small", 100), (3, "large", 1000)]
    sized = sorted((r.id, r.sql_size) for r in lake.read("sized").collect())
    assert sized == [(1, "tiny"), (2, "small"), (3, "large")]


def test_a_definition_file_with_a_bom_loads_and_pickling_is_taken_back(spark, tmp_path):
    from pyspark import cloudpickle  # noqa: PLC0415 - the registry under test

    from pipelines import build  # noqa: PLC0415 - the tests' pipeline helpers

    root = project(tmp_path, globs=("defs/*.py",), files={"defs.py": """
        @headwater.materialized_view
        def one():
            return spark.range(1)
        """})
    text = (root / "defs" / "defs.py").read_bytes()
    (root / "defs" / "defs.py").write_bytes(b"\xef\xbb\xbf" + text)  # a Windows editor's BOM
    graph = build(spark, root)
    modules = list(graph.registry.pickled_by_value)
    assert [m.__name__ for m in modules] == ["headwater_pipeline.defs"]
    assert cloudpickle.cloudpickle._is_registered_pickle_by_value(modules[0])
    graph.close()
    assert not cloudpickle.cloudpickle._is_registered_pickle_by_value(modules[0])
