"""Databricks' ``event_log(...)`` table-valued function over headwater's event log, in the
lakehouse's SQL: ``SELECT * FROM event_log('<pipeline name>')``, ``event_log(TABLE(name))``
(the pipelines that wrote that table), ``event_log('<lakehouse folder>')`` (every pipeline of
that lakehouse).

The call is replaced, at its text span, by a subquery over the ``_event_log`` table that
reshapes headwater's rows into DLT's columns (Databricks' "pipeline event log schema"):
``id``, ``sequence`` (struct), ``origin`` (struct: pipeline_id and pipeline_name = the
pipeline's name, update_id and cluster_id = the run id (one Spark application per run),
flow_name, dataset_name, batch_id; cloud, region, org_id, maintenance_id ... NULL),
``timestamp``, ``message``, ``level``, ``maturity_level``, ``error`` (struct: fatal,
exceptions), ``details`` (a JSON string) and ``event_type``:

- a run's start: ``create_update``, ``update_progress`` (RUNNING) and one ``flow_definition``
  per dataset (output_dataset, input_datasets, flow_type); its end: ``update_progress``
  (COMPLETED, FAILED, CANCELED);
- a flow's status: ``flow_progress`` (QUEUED, RUNNING, COMPLETED, FAILED, SKIPPED, STOPPED,
  STARTING for a restart), COMPLETED with ``metrics.num_output_rows`` (and AUTO CDC's
  ``num_upserted_rows`` / ``num_deleted_rows``; a materialized view's ``data_quality``);
- each micro-batch: ``flow_progress`` RUNNING at level METRICS with ``metrics`` and
  ``data_quality`` (``dropped_records``, ``expectations``: name, dataset, passed_records,
  failed_records; a view's rules under the view's name). Counts are per event, so summing
  ``data_quality`` over an update's flow_progress events gives its totals, as in
  Databricks' example queries.

A subquery, not a snapshot: a view over it (``CREATE VIEW event_log_raw AS SELECT * FROM
event_log(...)``, as Databricks' docs do) reads the log as it is when queried. ``details`` is
a string; ``details:flow_progress.metrics.num_output_rows`` works on it as on Databricks (see
:func:`headwater.lakehouse.sql.router.run_sql`).

This module knows the columns of ``_event_log`` (``headwater.monitor.events.SCHEMA``, a room
above, which the tests compare with :data:`USED_COLUMNS`).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from headwater.conf.layout import DELTA_LOG, EVENT_LOG, EXPECTATIONS_METRICS
from headwater.conf.location import location
from headwater.delta.log import arrow_dataset, open_table
from headwater.errors import HeadwaterError
from headwater.lakehouse.database import using_database
from headwater.lakehouse.names import parse_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from headwater.lakehouse.sql.statements import SqlLakehouse


USED_COLUMNS = ("ts", "pipeline", "run_id", "event", "flow", "table_name", "status",
                "query_id", "batch_id", "input_rows", "observed", "message", "details")

ERROR_TYPE = "STRUCT<fatal: BOOLEAN, exceptions: ARRAY<STRUCT<class_name: STRING, " \
             "message: STRING>>>"
EVENT_TYPE = (
    "STRUCT<id: STRING, sequence: STRUCT<control_plane_seq_no: BIGINT, data_plane_id: "
    "STRUCT<instance: STRING, seq_no: BIGINT>>, origin: STRUCT<cloud: STRING, region: STRING, "
    "org_id: BIGINT, pipeline_id: STRING, pipeline_type: STRING, pipeline_name: STRING, "
    "cluster_id: STRING, update_id: STRING, maintenance_id: STRING, table_id: STRING, "
    "table_name: STRING, dataset_name: STRING, flow_id: STRING, flow_name: STRING, "
    "batch_id: BIGINT, request_id: STRING>, timestamp: TIMESTAMP, message: STRING, "
    f"level: STRING, maturity_level: STRING, error: {ERROR_TYPE}, details: STRING, "
    "event_type: STRING>")
_EXPECTATIONS = EXPECTATIONS_METRICS
# the lakehouse's event log in Spark's catalog, whatever the session's current database
LOG_TABLE = f"`default`.`{EVENT_LOG}`"


def _event(kind: str, index: str, level: str, maturity: str, message: str, details: str,
           error: str = f"CAST(NULL AS {ERROR_TYPE})", flow: str = "flow",
           dataset: str = "table_name", batch: str = "batch_id") -> str:
    """One DLT event (a struct of EVENT_TYPE) from SQL expressions over an event-log row."""
    key = (f"concat_ws('|', CAST(ts AS STRING), run_id, event, coalesce({flow}, ''), "
           f"coalesce(query_id, ''), coalesce(CAST({batch} AS STRING), ''), "
           f"coalesce(status, ''), '{kind}', CAST({index} AS STRING))")
    seq = f"unix_micros(ts) * 1000 + {index}"  # below 2^63 until the year 2262
    return (
        f"CAST(named_struct("
        f"'id', regexp_replace(md5({key}), '^(.{{8}})(.{{4}})(.{{4}})(.{{4}})(.{{12}})$', "
        f"'$1-$2-$3-$4-$5'), "
        f"'sequence', named_struct('control_plane_seq_no', {seq}, 'data_plane_id', "
        f"named_struct('instance', run_id, 'seq_no', {seq})), "
        f"'origin', named_struct('cloud', NULL, 'region', NULL, 'org_id', NULL, "
        f"'pipeline_id', pipeline, 'pipeline_type', 'headwater', 'pipeline_name', pipeline, "
        f"'cluster_id', run_id, 'update_id', run_id, 'maintenance_id', NULL, 'table_id', NULL, "
        f"'table_name', {dataset}, 'dataset_name', {dataset}, 'flow_id', NULL, "
        f"'flow_name', {flow}, 'batch_id', {batch}, 'request_id', NULL), "
        f"'timestamp', ts, 'message', {message}, 'level', {level}, "
        f"'maturity_level', {maturity}, 'error', {error}, 'details', {details}, "
        f"'event_type', '{kind}') AS {EVENT_TYPE})")


def _rules(metrics: str) -> str:
    """The expectations array of DLT's data_quality from a map of observed metrics
    (``expectations:<dataset>`` -> {<rule>_failed, rows, dropped})."""
    prefix = len(_EXPECTATIONS)
    return (f"flatten(transform(map_entries(map_filter({metrics}, (k, v) -> "
            f"startswith(k, '{_EXPECTATIONS}'))), e -> transform(filter(map_keys(e.value), "
            f"m -> endswith(m, '_failed')), m -> named_struct('name', "
            f"substring(m, 1, length(m) - 7), 'dataset', substring(e.key, {prefix + 1}), "
            f"'passed_records', e.value['rows'] - e.value[m], 'failed_records', "
            f"e.value[m]))))")


def _quality(metrics: str) -> str:
    """DLT's data_quality struct (NULL when the metrics hold no expectation)."""
    dropped = (f"aggregate(map_values(map_filter({metrics}, (k, v) -> startswith(k, "
               f"'{_EXPECTATIONS}'))), 0L, (acc, v) -> acc + coalesce(v['dropped'], 0L))")
    return (f"(CASE WHEN size(map_filter({metrics}, (k, v) -> startswith(k, "
            f"'{_EXPECTATIONS}'))) > 0 THEN named_struct('dropped_records', {dropped}, "
            f"'expectations', {_rules(metrics)}) END)")


def _failure(message: str) -> str:
    return (f"named_struct('fatal', true, 'exceptions', array(named_struct('class_name', "
            f"'HeadwaterError', 'message', {message})))")


_OBSERVED = "from_json(observed, 'map<string, map<string, bigint>>')"
_REFRESHED = "from_json(get_json_object(details, '$.expectations'), " \
             "'map<string, map<string, bigint>>')"
_FLOW_STATUS = ("CASE status WHEN 'restarting' THEN 'STARTING' WHEN 'pending' THEN 'QUEUED' "
                "ELSE upper(status) END")
_UPDATE_STATE = ("CASE status WHEN 'completed' THEN 'COMPLETED' WHEN 'stopped' THEN "
                 "'CANCELED' WHEN 'running' THEN 'RUNNING' ELSE 'FAILED' END")


def _events_sql() -> str:
    """The array of DLT events one ``_event_log`` row becomes."""
    progress_rows = (
        "coalesce(CAST(get_json_object(details, '$.output_rows') AS BIGINT), "
        "CAST(get_json_object(details, '$.cdc.upserted') AS BIGINT) + "
        "CAST(get_json_object(details, '$.cdc.deleted') AS BIGINT), "
        f"input_rows - coalesce({_quality(_OBSERVED)}.dropped_records, 0L))")
    progress = _event(
        "flow_progress", "0", "'METRICS'", "'STABLE'",
        "concat('Flow ''', flow, ''' processed micro-batch ', batch_id, '.')",
        "to_json(named_struct('flow_progress', named_struct('status', 'RUNNING', 'metrics', "
        f"named_struct('num_output_rows', {progress_rows}, 'num_upserted_rows', "
        "CAST(get_json_object(details, '$.cdc.upserted') AS BIGINT), 'num_deleted_rows', "
        "CAST(get_json_object(details, '$.cdc.deleted') AS BIGINT)), "
        f"'data_quality', {_quality(_OBSERVED)})))")
    status = _event(
        "flow_progress", "0", "CASE status WHEN 'failed' THEN 'ERROR' ELSE 'INFO' END",
        "'STABLE'",
        f"concat('Flow ''', flow, ''' is ', {_FLOW_STATUS}, '.', "
        "coalesce(concat(' ', message), ''))",
        f"to_json(named_struct('flow_progress', named_struct('status', {_FLOW_STATUS}, "
        "'metrics', CASE WHEN status = 'completed' THEN named_struct('num_output_rows', "
        "CAST(get_json_object(details, '$.rows_written') AS BIGINT), 'num_upserted_rows', "
        "CAST(get_json_object(details, '$.cdc.upserted') AS BIGINT), 'num_deleted_rows', "
        "CAST(get_json_object(details, '$.cdc.deleted') AS BIGINT)) END, "
        f"'data_quality', {_quality(_REFRESHED)})))",
        error=f"CASE WHEN status = 'failed' THEN {_failure('message')} END")
    create = _event(
        "create_update", "0", "'INFO'", "'STABLE'",
        "concat('Update ', run_id, ' started by headwater (', "
        "coalesce(get_json_object(details, '$.mode'), 'triggered'), ').')",
        "to_json(named_struct('create_update', named_struct('cause', 'USER_ACTION', "
        "'full_refresh', false, 'config', named_struct('name', pipeline, 'continuous', "
        "startswith(coalesce(get_json_object(details, '$.mode'), ''), 'continuous')))))",
        flow="CAST(NULL AS STRING)", dataset="CAST(NULL AS STRING)",
        batch="CAST(NULL AS BIGINT)")
    running = _event(
        "update_progress", "1", "'INFO'", "'STABLE'",
        "concat('Update ', run_id, ' is RUNNING.')",
        "to_json(named_struct('update_progress', named_struct('state', 'RUNNING')))",
        flow="CAST(NULL AS STRING)", dataset="CAST(NULL AS STRING)",
        batch="CAST(NULL AS BIGINT)")
    definition = _event(
        "flow_definition", "(i + 2)", "'INFO'", "'EVOLVING'",
        "concat('Flow ''', g.key, ''' is defined as a ', replace(g.value.kind, '_', ' '), '.')",
        "to_json(named_struct('flow_definition', named_struct('output_dataset', g.key, "
        "'input_datasets', g.value.upstream, 'flow_type', upper(g.value.kind))))",
        flow="g.key", dataset="g.key", batch="CAST(NULL AS BIGINT)")
    graph = ("from_json(get_json_object(details, '$.graph'), "
             "'map<string, struct<kind: string, upstream: array<string>>>')")
    ended = _event(
        "update_progress", "0",
        "CASE WHEN status IN ('failed', 'killed') THEN 'ERROR' ELSE 'INFO' END", "'STABLE'",
        f"concat('Update ', run_id, ' is ', {_UPDATE_STATE}, '.', "
        "coalesce(concat(' ', message), ''))",
        f"to_json(named_struct('update_progress', named_struct('state', {_UPDATE_STATE})))",
        error=f"CASE WHEN status IN ('failed', 'killed') THEN {_failure('message')} END",
        flow="CAST(NULL AS STRING)", dataset="CAST(NULL AS STRING)",
        batch="CAST(NULL AS BIGINT)")
    return (f"CASE event WHEN 'progress' THEN array({progress}) "
            f"WHEN 'flow_status' THEN array({status}) "
            f"WHEN 'run_started' THEN concat(array({create}, {running}), "
            f"transform(coalesce(map_entries({graph}), array()), (g, i) -> {definition})) "
            f"WHEN 'run_ended' THEN array({ended}) ELSE array() END")


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _unknown(what: str, known: list[str]) -> HeadwaterError:
    return HeadwaterError(
        "HW_EVENT_LOG_UNKNOWN", f"event_log({what}): no pipeline of this lakehouse "
        f"{'wrote that table' if what.startswith('TABLE') else 'has that name'}; its event "
        f"log knows {', '.join(known) or 'no pipeline yet'}.",
        "event_log reads the runs headwater logged in the lakehouse's _event_log table, by "
        "pipeline name (the [pipeline] name of headwater.toml, or spark-pipeline.yml's name).",
        "Pass a pipeline's name, TABLE(one of its tables) or a lakehouse folder; run the "
        "pipeline first if it never ran here.")


def event_log_sql(lake: SqlLakehouse, spark: SparkSession, args: list[Any]) -> str:
    """The subquery replacing ``event_log(args)``: args are the call's parsed arguments (a
    string Literal, or a ``TABLE(name)`` argument's plan)."""
    relation, root = LOG_TABLE, location(lake.root)
    if len(args) != 1:
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"event_log takes one argument, got {len(args)}.",
            "It names the pipeline whose events to read.",
            "Write event_log('<pipeline name>') or event_log(TABLE(<table>)).")
    arg = args[0]
    kind = arg.getClass().getSimpleName()
    if kind == "FunctionTableSubqueryArgumentExpression":
        plan = arg.plan()
        parts = [str(plan.multipartIdentifier().apply(i))
                 for i in range(plan.multipartIdentifier().size())] \
            if plan.getClass().getSimpleName() == "UnresolvedRelation" else []
        if not parts:
            raise HeadwaterError("HW_OPTION_INVALID", "event_log(TABLE(...)) takes a table "
                                 "name.", "It reads the events of the pipeline writing it.",
                                 "Write event_log(TABLE(orders)).")
        name = parse_name(".".join(parts)).qualified
        pipelines = _pipelines(root, table=name)
        if not pipelines:
            raise _unknown(f"TABLE({'.'.join(parts)})", _pipelines(root))
    elif kind == "Literal" and arg.value() is not None:
        text = str(arg.value().toString() if hasattr(arg.value(), "toString") else arg.value())
        folder = location(text) if ("/" in text or "://" in text) else None
        if folder is not None and (folder / EVENT_LOG / DELTA_LOG).is_dir():
            if folder != root:  # another lakehouse's log: read by path
                view = "hw_event_log_" + hashlib.sha1(str(folder).encode()).hexdigest()[:12]
                spark.read.format("delta").load(str(folder / EVENT_LOG)) \
                    .createOrReplaceTempView(view)
                relation = f"`{view}`"
            pipelines = None
        else:
            pipelines = [text] if text in _pipelines(root) else []
            if not pipelines:
                raise _unknown(_literal(text), _pipelines(root))
    else:
        raise HeadwaterError("HW_OPTION_INVALID", "event_log takes a literal pipeline name, "
                             "a lakehouse folder or TABLE(name).",
                             "The argument is read when the query is planned.",
                             "Write event_log('<pipeline name>').")
    if relation == LOG_TABLE and not spark.catalog.tableExists(f"default.{EVENT_LOG}"):
        with using_database(spark, "default"):  # where the lakehouse's top level is
            lake.register(EVENT_LOG)  # written by a run in another process since the attach
    where = "" if pipelines is None else \
        f" WHERE pipeline IN ({', '.join(_literal(p) for p in pipelines)})"
    return f"(SELECT inline({_events_sql()}) FROM {relation}{where})"


def _pipelines(root: Any, table: str | None = None) -> list[str]:
    """The pipeline names in the lakehouse's event log (that wrote ``table``)."""
    path = root / EVENT_LOG
    if not (path / DELTA_LOG).is_dir():
        return []
    data = arrow_dataset(open_table(str(path))).to_table(columns=["pipeline", "table_name"])
    if table is not None:
        data = data.filter(pc.equal(data.column("table_name"), table))
    return sorted(p for p in pc.unique(data.column("pipeline")).to_pylist() if p)
