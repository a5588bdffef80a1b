"""The corpus runner's own parts (tools/dltcorpus), without Spark: the mechanical edits a
published notebook gets, the comparison of a Delta table with its answers, and the first
error taken from ``headwater run``'s output. (``bash dev.sh corpus PATH`` runs the notebooks
themselves; they are not in this repository.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from dltcorpus import compare, files, project  # noqa: E402
from dltcorpus.cases.base import TableCheck, spark_round  # noqa: E402
from dltcorpus.edits import edit_notebook  # noqa: E402

NOTEBOOK = '''# Databricks notebook source
import dlt
from pyspark.sql.functions import *

path = "/databricks-datasets/retail-org/sales_orders/"
bucket = "s3a://logs-bucket/field-eng/workspaceId=1/"

@dlt.table(comment="ingested from /databricks-datasets.")
def raw():
  return (spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", "broker.cloud:9092")
    .option("kafka.security.protocol", "SASL_SSL")
    .option("kafka.sasl.jaas.config", "kafkashaded...required username='{}' password='{}';")
    .option("subscribe", "t")
    .load())
'''


def test_a_notebook_gets_only_the_listed_edits(tmp_path):
    data = tmp_path / "data"
    text, edits = edit_notebook(NOTEBOOK, data, "127.0.0.1:9092")
    assert "import headwater.dlt as dlt\n" in text and "\nimport dlt\n" not in text
    assert f'path = "{data}/databricks-datasets/retail-org/sales_orders/"' in text
    assert f'bucket = "{data}/s3/logs-bucket/field-eng/workspaceId=1/"' in text
    assert "ingested from /databricks-datasets." in text        # prose is no path
    assert '"kafka.bootstrap.servers", "127.0.0.1:9092"' in text
    assert "security.protocol" not in text   # the test broker speaks plaintext
    assert "kafka.sasl.jaas.config" in text     # credentials stay: headwater translates them
    assert [e.line for e in edits] == [2, 5, 6, 11, 12]
    # every other line is the original's
    kept = [ln for ln in NOTEBOOK.splitlines() if "dlt" not in ln and "/" not in ln
            and "kafka.bootstrap" not in ln and "security.protocol" not in ln]
    assert all(ln in text.splitlines() for ln in kept)


def test_sql_paths_in_back_quotes_and_strings_are_edited(tmp_path):
    sql = ("-- Databricks notebook source\nCREATE MATERIALIZED VIEW r AS SELECT * FROM "
           "json.`/databricks-datasets/x/y.json`\n-- COMMAND ----------\nSELECT "
           "REPLACE(f, \"dbfs:/tmp/demo/\", \"\")\n")
    text, edits = edit_notebook(sql, tmp_path, None)
    assert f"json.`{tmp_path}/databricks-datasets/x/y.json`" in text
    assert f'"{tmp_path}/tmp/demo/"' in text
    assert [e.line for e in edits] == [2, 4]


def test_a_table_is_compared_with_its_answers_as_a_multiset(tmp_path):
    write_deltalake(str(tmp_path / "t"), pa.table({"k": ["a", "b", "b"], "v": [1.0, 2.5, 2.5]}))
    assert compare.check(tmp_path, TableCheck("t", [{"k": "b", "v": 2.5}, {"k": "a", "v": 1},
                                                    {"k": "b", "v": 2.5}])).ok
    wrong = compare.check(tmp_path, TableCheck("t", [{"k": "a", "v": 1.0}, {"k": "b", "v": 2.5}]))
    assert not wrong.ok and "3 rows, expected 2" in wrong.detail
    as_text = compare.check(tmp_path, TableCheck("t", [{"k": "a", "v": "1"}] * 3))
    assert not as_text.ok                                   # "1" is no number
    assert compare.check(tmp_path, TableCheck("missing", [])).detail == "no such table"
    top = compare.check(tmp_path, TableCheck("t", [{"k": "b", "v": 2.5}, {"k": "b", "v": 2.5},
                                                   {"k": "a", "v": 1.0}, {"k": "c", "v": 0.5}],
                                             limit=(3, "v")))
    assert top.ok, top.detail


def test_the_first_error_of_a_run_and_spark_rounding():
    output = ("WARNING: Using incubator modules\n[ 1.0s] refreshed a: 2 rows\n"
              "error: [HW_PIPELINE_SQL_INVALID] x.sql:3: rejected. Why: because. Fix: fix\n")
    assert project.first_error(output) == "[HW_PIPELINE_SQL_INVALID] x.sql:3: rejected."
    assert project.first_error("Traceback\n  File x\nValueError: bad\n") == "ValueError: bad"
    assert spark_round(2.675, 2) == 2.68 and spark_round(-0.125, 2) == -0.13


def test_every_kind_of_file_gets_a_status(tmp_path):
    (tmp_path / "nb.py").write_text("# Databricks notebook source\nx = 1\n")
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    assert files.classify(tmp_path, "nb.py")[0] == files.UNCLASSIFIED
    assert files.classify(tmp_path, "a.png") == (files.OTHER, "image")
