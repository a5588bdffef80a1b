"""``event_log(...)`` in the lakehouse's SQL: headwater's event log in Databricks' event-log
columns, after two incremental runs of a real pipeline (streaming tables, a view with
expectations, a materialized view, a snapshot flow); the queries of Databricks' docs and of the
published "DLT Event Log Queries" notebook (``details:...`` JSON paths on the string column,
``from_json`` with a schema, LIKE on details, lineage by origin.cluster_id) run as written
there, with ``event_log(...)`` for the table's path."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.functions import from_json, schema_of_json
from tests.pipelines import build, project
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.conf.triggers import trigger_kwargs
from headwater.lakehouse.sql.event_log import USED_COLUMNS
from headwater.monitor.events import SCHEMA
from headwater.pipeline.run import Runner

PIPELINE = """
import headwater.dlt as dlt

@dlt.table
def bronze():
    return dlt.read_stream("orders_in")

@dlt.view
@dlt.expect_or_drop("positive", "amount > 0")
@dlt.expect("has_country", "country IS NOT NULL")
def checked():
    return dlt.read_stream("bronze")

@dlt.table
@dlt.expect("small", "amount < 30")
def silver():
    return dlt.read_stream("checked")

@dlt.table
@dlt.expect_or_drop("not_fr", "country != 'fr'")
def by_country():
    return dlt.read("silver").groupBy("country").count()

dlt.create_streaming_table("countries")
dlt.apply_changes_from_snapshot(target="countries", source="by_country", keys=["country"])
"""
DLT_COLUMNS = ["id", "sequence", "origin", "timestamp", "message", "level", "maturity_level",
               "error", "details", "event_type"]
# the notebook's schema for details, as it writes it
NOTEBOOK_SCHEMA = """
  {"flow_progress":{
    "status":"COMPLETED",
    "metrics":{"num_output_rows":91939},
    "data_quality":{"dropped_records":32,
    "expectations":[
      {"name":"non zero passenger count",
       "dataset":"silver_GreenCab",
       "passed_records":91939,
       "failed_records":32}
     ]}}
  }"""


def orders(root: Path, ids: range) -> None:
    write(root / "lake" / "orders_in", {
        "id": list(ids), "country": [None if i % 5 == 0 else "fr" if i % 2 else "de" for i in ids],
        "amount": [-1.0 if i % 4 == 0 else float(i) for i in ids]})


def run(spark, root: Path) -> dict:
    graph = build(spark, root)
    results = Runner(graph, trigger_kwargs("available-now"), False, echo=lambda _: None,
                     pipeline="orders").run()
    graph.close()
    return {r.key: r for r in results}


def rows(spark, query: str) -> list:
    return spark.sql(query).collect()


def test_event_log_table_function_in_databricks_columns(spark, keep_lakehouse, tmp_path):
    assert set(USED_COLUMNS) <= set(SCHEMA.names)  # the columns it reads are the log's
    root = project(tmp_path, {"orders.py": PIPELINE})
    orders(root, range(1, 41))
    first = run(spark, root)
    assert all(r.ok for r in first.values()), first
    # Databricks' docs: a view over the event log, queried later (here: after a second run)
    spark.sql("CREATE OR REPLACE VIEW event_log_raw AS SELECT * FROM event_log('orders')")
    orders(root, range(41, 61))
    second = run(spark, root)
    assert all(r.ok for r in second.values()), second

    log = spark.sql("SELECT * FROM event_log('orders')")
    assert log.columns == DLT_COLUMNS
    origin = log.schema["origin"].dataType.fieldNames()
    assert {"pipeline_id", "pipeline_name", "update_id", "flow_name", "dataset_name",
            "batch_id", "cluster_id", "maintenance_id"} <= set(origin)
    assert log.schema["sequence"].dataType.fieldNames() == ["control_plane_seq_no",
                                                            "data_plane_id"]
    assert log.schema["details"].dataType.simpleString() == "string"

    # the view reads the log as it is now: both runs, each an update that completed
    updates = rows(spark, "SELECT origin.update_id, details:update_progress.state AS state "
                          "FROM event_log_raw WHERE event_type = 'update_progress' "
                          "ORDER BY timestamp")
    assert [r.state for r in updates] == ["RUNNING", "COMPLETED", "RUNNING", "COMPLETED"]
    assert len({r.update_id for r in updates}) == 2
    assert len({r.id for r in log.collect()}) == log.count()  # ids are unique

    # Databricks' data-quality query: the sums match what the runs counted
    quality = {(r.dataset, r.expectation): (r.passing_records, r.failing_records)
               for r in rows(spark, """
        SELECT row_expectations.dataset as dataset, row_expectations.name as expectation,
               SUM(row_expectations.passed_records) as passing_records,
               SUM(row_expectations.failed_records) as failing_records
        FROM (SELECT explode(from_json(details:flow_progress:data_quality:expectations,
                "array<struct<name: string, dataset: string, passed_records: int,
                              failed_records: int>>")) row_expectations
              FROM event_log_raw WHERE event_type = 'flow_progress')
        GROUP BY row_expectations.dataset, row_expectations.name""")}
    counted = {k: first["silver"].expectations.get(k, 0) + second["silver"].expectations.get(k, 0)
               for k in ("checked.positive_failed", "checked.has_country_failed",
                         "checked.rows", "small_failed", "rows")}
    assert quality[("checked", "positive")] == (
        counted["checked.rows"] - counted["checked.positive_failed"],
        counted["checked.positive_failed"]) == (45, 15)
    assert quality[("checked", "has_country")][1] == counted["checked.has_country_failed"] == 12
    assert quality[("silver", "small")] == (counted["rows"] - counted["small_failed"],
                                            counted["small_failed"])
    # the materialized view's rule, counted in its refreshes: of 3 countries (de, fr, NULL)
    # only de passes (a NULL condition fails)
    assert quality[("by_country", "not_fr")] == (2, 4)

    # rows written per flow: the micro-batches' num_output_rows add up to the table
    written = {r.flow: r.n for r in rows(spark, """
        SELECT origin.flow_name AS flow,
               sum(details:flow_progress.metrics.num_output_rows::bigint) AS n
        FROM event_log('orders')
        WHERE event_type = 'flow_progress' AND level = 'METRICS' GROUP BY 1""")}
    lake = Lakehouse.of(spark)
    assert lake is not None
    assert written["bronze"] == lake.read("bronze").count() == 60
    assert written["silver"] == lake.read("silver").count() == 45
    # a completed flow's event says what its run wrote; the snapshot flow's its CDC counts
    done = {(r.flow, r.run): (r.rows, r.upserted, r.deleted) for r in rows(spark, """
        SELECT origin.flow_name AS flow, origin.update_id AS run,
               details:flow_progress.metrics.num_output_rows::int AS rows,
               details:flow_progress.metrics.num_upserted_rows::int AS upserted,
               details:flow_progress.metrics.num_deleted_rows::int AS deleted
        FROM event_log(TABLE(countries))
        WHERE event_type = 'flow_progress' AND details:flow_progress.status = 'COMPLETED'""")}
    runs = [r.update_id for r in updates[::2]]
    assert done[("silver", runs[1])][0] == 15
    assert done[("countries", runs[0])] == (1, 1, 0)  # de (fr and NULL dropped)
    assert done[("countries", runs[1])][2] == 0
    # lineage: flow definitions name each dataset's inputs
    inputs = {r.output: list(r.inputs) for r in rows(spark, """
        SELECT details:flow_definition.output_dataset AS output,
               from_json(details:flow_definition.input_datasets, 'array<string>') AS inputs
        FROM event_log('orders') WHERE event_type = 'flow_definition'
          AND origin.update_id = (SELECT max_by(origin.update_id, timestamp)
                                  FROM event_log('orders'))""")}
    assert inputs["silver"] == ["bronze", "checked"] and inputs["countries"] == ["by_country"]

    # the published notebook, with event_log(...) for the pipeline's storage path
    df = spark.sql("""SELECT id, origin, timestamp, details FROM event_log('orders')
                      WHERE details LIKE '%flow_progress%COMPLETED%data_quality%expectations%'
                      order by timestamp desc""")
    df_expectations = df.withColumn("details_json",
                                    from_json(df.details, schema_of_json(NOTEBOOK_SCHEMA)))
    df_expectations.createOrReplaceTempView("df_expectations")
    latest = spark.sql("SELECT id, timestamp, details_json.flow_progress.data_quality, origin, "
                       "details_json FROM df_expectations ORDER BY timestamp DESC LIMIT 20"
                       ).collect()
    assert latest and latest[0].origin.flow_name == "by_country"
    assert latest[0].data_quality.dropped_records == 2  # fr and NULL
    assert [e.name for e in latest[0].data_quality.expectations] == ["not_fr"]
    lineage = spark.sql("""SELECT id, origin, sequence, timestamp, message, event_type, details
        FROM event_log('orders')
        WHERE origin.cluster_id = (
          SELECT origin.cluster_id FROM event_log('orders')
           WHERE origin.pipeline_name = 'orders'
             AND origin.maintenance_id IS NULL ORDER BY timestamp DESC LIMIT 1)""")
    df_lineage = lineage.withColumn("details_json",
                                    from_json(lineage.details, schema_of_json(NOTEBOOK_SCHEMA)))
    df_lineage.createOrReplaceTempView("df_lineage")
    last_run = spark.sql("SELECT id, timestamp, sequence.data_plane_id.seq_no, message, "
                         "event_type, details_json FROM df_lineage").collect()
    assert {r.event_type for r in last_run} == {"create_update", "update_progress",
                                                "flow_definition", "flow_progress"}
    assert all(r.seq_no > 0 for r in last_run)

    # by path: the lakehouse folder; mistakes are named
    assert spark.sql(f"SELECT count(*) AS n FROM event_log('{root / 'lake'}')").first().n == \
        log.count()
    for bad, code in (("event_log('nope')", "HW_EVENT_LOG_UNKNOWN"),
                      ("event_log(TABLE(orders_in))", "HW_EVENT_LOG_UNKNOWN"),
                      ("event_log('orders', 1)", "HW_OPTION_INVALID")):
        with pytest.raises(HeadwaterError) as info:
            spark.sql(f"SELECT * FROM {bad}")
        assert info.value.code == code, bad
    assert "orders" in str(pytest.raises(HeadwaterError, spark.sql,
                                         "SELECT * FROM event_log('nope')").value)
