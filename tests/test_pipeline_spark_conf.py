"""Spark settings of pipelines: DLT code runs with ANSI mode off (Databricks' runtime default
it was written for), and ``spark_conf=`` on a flow applies to that flow's query only.

Real pipeline runs in the shared session: each test also checks that the session's own
settings are what they were before the run."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from headwater.conf.layout import ANSI_CONF
from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.pipeline.dialect import dlt_evidence
from headwater.pipeline.graph import Graph
from headwater.pipeline.run import Runner, load_project, run_project

ANSI_NOTE = "ANSI mode off: DLT's default for pipelines written in its dialect"


def spec_project(tmp_path: Path, files: dict[str, str], configuration: dict[str, str]) -> Path:
    """A spark-pipeline.yml project with these definition files under transformations/."""
    root = tmp_path / "proj"
    (root / "transformations").mkdir(parents=True)
    lines = ["name: p", "storage: storage", "libraries:", "  - glob:",
             "      include: transformations/**", "configuration:"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in configuration.items()]
    (root / "spark-pipeline.yml").write_text("\n".join(lines) + "\n")
    for name, text in files.items():
        (root / "transformations" / name).write_text(textwrap.dedent(text).lstrip())
    return root


def land(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def rows(root: Path, table: str) -> list[dict]:
    data = DeltaTable(str(root / "storage" / table)).to_pyarrow_table().to_pylist()
    return sorted(data, key=lambda r: json.dumps(r, sort_keys=True, default=str))


# --- ANSI mode: DLT's default for DLT code, Spark's for SDP code ------------------------------

DLT_NOTEBOOK = """
# Databricks notebook source
import headwater.dlt as dlt
from pyspark.sql.functions import col

# COMMAND ----------

@dlt.table
def rates():
    return (spark.readStream.format("json").schema("id INT, rate STRING")
            .load(spark.conf.get("t.landing"))
            .select("id", col("rate").cast("float").alias("rate")))
"""

SDP_FILE = """
from pyspark import pipelines as dp
from pyspark.sql.functions import col

@dp.table
def rates():
    return (spark.readStream.format("json").schema("id INT, rate STRING")
            .load(spark.conf.get("t.landing"))
            .select("id", col("rate").cast("float").alias("rate")))
"""

RATES = [{"id": 1, "rate": "11.5"}, {"id": 2, "rate": ""}]  # '' is NULL only without ANSI


def test_dlt_code_runs_with_ansi_off_and_spark_4_code_keeps_ansi(spark, keep_lakehouse,
                                                                   tmp_path):
    landing = tmp_path / "landing"
    land(landing, "r-0.json", RATES)
    before = spark.conf.get(ANSI_CONF, None)

    dlt_root = spec_project(tmp_path / "dlt", {"rates.py": DLT_NOTEBOOK},
                            {"t.landing": str(landing)})
    lines: list[str] = []
    outcome = run_project(dlt_root, echo=lines.append)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert rows(dlt_root, "rates") == [{"id": 1, "rate": 11.5}, {"id": 2, "rate": None}]
    note = [line for line in lines if line.startswith(ANSI_NOTE)]
    assert len(note) == 1 and "rates.py is a Databricks notebook" in note[0]
    assert spark.conf.get(ANSI_CONF, None) == before  # the session's own setting is back

    sdp_root = spec_project(tmp_path / "sdp", {"rates.py": SDP_FILE},
                            {"t.landing": str(landing)})
    lines.clear()
    outcome = run_project(sdp_root, echo=lines.append)
    assert not outcome.ok and "CAST_INVALID_INPUT" in (outcome.failed[0].error or "")
    assert not any(line.startswith("ANSI mode") for line in lines)

    # the configuration decides when it says so, for DLT code too
    chosen = spec_project(tmp_path / "chosen", {"rates.py": DLT_NOTEBOOK},
                          {"t.landing": str(landing), ANSI_CONF: "true"})
    outcome = run_project(chosen, echo=lines.append)
    assert not outcome.ok and "CAST_INVALID_INPUT" in (outcome.failed[0].error or "")
    spark.conf.unset(ANSI_CONF)  # the configuration's value stays on the session, as all do
    if before is not None:
        spark.conf.set(ANSI_CONF, before)


@pytest.mark.parametrize("name,text,found", [
    ("a.py", "import dlt\n", "a.py has `import dlt`"),
    ("a.py", "x = 1\nimport headwater.dlt as dlt\n", "a.py has `import headwater.dlt`"),
    ("a.sql", "CREATE LIVE TABLE t AS SELECT 1", "a.sql says `LIVE TABLE`"),
    ("a.sql", "CREATE STREAMING TABLE t AS SELECT * FROM STREAM(live.x)", "a.sql says `live.x`"),
    ("a.sql", "-- Databricks notebook source\nSELECT 1", "a.sql is a Databricks notebook"),
    ("a.py", "from pyspark import pipelines as dp\n", None),
    ("a.sql", "CREATE MATERIALIZED VIEW live_totals AS SELECT * FROM orders", None),
])
def test_dlt_dialect_is_recognized_from_the_files(tmp_path, name, text, found):
    (tmp_path / name).write_text(text)
    assert dlt_evidence([tmp_path / name]) == found


# --- spark_conf: each flow its own settings, while defined and while it runs ------------------

TZ = "spark.sql.session.timeZone"

PER_FLOW = """
import headwater
from pyspark import pipelines as dp
from pyspark.sql import functions as F

def zones(source):
    # the zone seen where the query is defined, and the one its micro-batches run in
    return (source.select("id")
            .withColumn("defined", F.lit(spark.conf.get("spark.sql.session.timeZone")))
            .withColumn("ran", F.expr("current_timezone()")))

def landing():
    return spark.readStream.format("json").schema("id INT").load(spark.conf.get("t.landing"))

@dp.table(spark_conf={"spark.sql.session.timeZone": "Asia/Tokyo"})
def tokyo():
    return zones(landing())

@dp.table(spark_conf={"spark.sql.session.timeZone": "America/New_York"})
def new_york():
    return zones(landing())

@dp.table
def plain():
    return zones(landing())

@dp.materialized_view(spark_conf={"spark.sql.session.timeZone": "Europe/Paris"})
def paris():
    return zones(spark.read.table("plain"))

dp.create_streaming_table("merged")

@dp.append_flow(target="merged", spark_conf={"spark.sql.session.timeZone": "Asia/Kolkata"})
def kolkata():
    return zones(landing())

# reads a dataset defined further down: that one is defined while this one's definition runs,
# and must not see this one's settings; this flow runs natively (a plain Delta input)
@dp.table(spark_conf={"spark.sql.session.timeZone": "Asia/Seoul"})
def early_reader():
    return zones(headwater.read_stream("late_source"))

@dp.table
def late_source():
    return zones(landing())
"""


def test_each_flow_defines_and_runs_with_its_own_spark_conf(spark, keep_lakehouse, tmp_path):
    landing = tmp_path / "landing"
    land(landing, "ids.json", [{"id": 1}])
    zone = spark.conf.get(TZ)
    root = spec_project(tmp_path, {"zones.py": PER_FLOW}, {"t.landing": str(landing)})
    outcome = run_project(root, echo=lambda _: None)
    assert outcome.ok, [(r.key, r.error) for r in outcome.failed]
    assert {r.key: r.kind for r in outcome.results}["early_reader"] == \
        "streaming table, native read"
    for table, expected in (("tokyo", "Asia/Tokyo"), ("new_york", "America/New_York"),
                            ("plain", zone), ("paris", "Europe/Paris"),
                            ("merged", "Asia/Kolkata"), ("early_reader", "Asia/Seoul"),
                            ("late_source", zone)):
        assert rows(root, table) == [{"id": 1, "defined": expected, "ran": expected}], table
    assert spark.conf.get(TZ) == zone  # nothing leaked into the session


DLT_SPARK_CONF = """
import headwater.dlt as dlt
from pyspark.sql import functions as F

dlt.create_streaming_table("events", spark_conf={"spark.sql.session.timeZone": "Asia/Tokyo"})

@dlt.append_flow(target="events")
def from_landing():
    return (spark.readStream.format("json").schema("id INT").load(spark.conf.get("t.landing"))
            .withColumn("ran", F.expr("current_timezone()")))

@dlt.table(spark_conf={"spark.sql.ansi.enabled": "true"})
def strict():
    return (spark.readStream.format("json").schema("id INT").load(spark.conf.get("t.landing"))
            .select(F.lit("x").cast("int").alias("bad")))

@dlt.view(spark_conf={"pipelines.trigger.interval": "7 seconds"})
def slow():
    return dlt.read_stream("events")

@dlt.table(spark_conf={"pipelines.trigger.interval": "3 seconds"})
def fast():
    return dlt.read_stream("events")
"""


def test_dlt_spark_conf_is_accepted_and_scoped(spark, keep_lakehouse, tmp_path):
    landing = tmp_path / "landing"
    land(landing, "ids.json", [{"id": 1}])
    root = spec_project(tmp_path, {"events.py": DLT_SPARK_CONF}, {"t.landing": str(landing)})
    outcome = run_project(root, echo=lambda _: None)
    # the table's settings reach its append flow; one flow's ANSI mode is its own: the
    # pipeline's default (off, DLT code) holds for the others
    assert rows(root, "events") == [{"id": 1, "ran": "Asia/Tokyo"}]
    assert [r.key for r in outcome.failed] == ["strict"]
    assert "CAST_INVALID_INPUT" in (outcome.failed[0].error or "")

    # pipelines.trigger.interval: the flow's interval in a continuous run (Databricks'
    # per-table setting); a triggered run has none
    loaded = load_project(root)
    with loaded.session_scope():
        graph = Graph(loaded.registry, loaded.lakehouse).build()
        try:
            continuous = Runner(graph, {"processingTime": "1 seconds"}, True,
                                echo=lambda _: None, event_log=False)
            assert continuous._trigger_of(graph.flows["fast"]) == {"processingTime": "3 seconds"}
            assert continuous._trigger_of(graph.flows["events/from_landing"]) == \
                {"processingTime": "1 seconds"}
            triggered = Runner(graph, {"availableNow": True}, False, echo=lambda _: None,
                               event_log=False)
            assert triggered._trigger_of(graph.flows["fast"]) == {"availableNow": True}
        finally:
            graph.close()


AUTO_MERGE = """
from pyspark import pipelines as dp
from pyspark.sql import functions as F

def wider():
    return (spark.readStream.format("json").schema("id LONG").load(spark.conf.get("t.landing"))
            .withColumn("extra", F.lit("new")))

dp.create_sink("evolving", "delta", {{"path": {evolving!r}}})
dp.create_sink("fixed", "delta", {{"path": {fixed!r}}})

@dp.append_flow(target="evolving",
                spark_conf={{"spark.databricks.delta.schema.autoMerge.enabled": "true"}})
def into_evolving():
    return wider()

@dp.append_flow(target="fixed")
def into_fixed():
    return wider()
"""


def test_auto_merge_in_a_flows_spark_conf_evolves_its_delta_sink_only(spark, keep_lakehouse,
                                                                      tmp_path):
    import pyarrow as pa

    landing, evolving, fixed = tmp_path / "landing", tmp_path / "evolving", tmp_path / "fixed"
    land(landing, "ids.json", [{"id": 2}])
    for path in (evolving, fixed):
        write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int64())}))
    root = spec_project(tmp_path, {"sinks.py": AUTO_MERGE.format(
        evolving=str(evolving), fixed=str(fixed))}, {"t.landing": str(landing)})
    outcome = run_project(root, echo=lambda _: None)
    assert [r.key for r in outcome.failed] == ["fixed/into_fixed"]
    assert "extra" in (outcome.failed[0].error or "")
    table = DeltaTable(str(evolving)).to_pyarrow_table().to_pylist()
    assert sorted(table, key=lambda r: r["id"]) == [{"id": 1, "extra": None},
                                                    {"id": 2, "extra": "new"}]
    assert DeltaTable(str(fixed)).schema().fields[-1].name == "id"


def test_a_setting_spark_cannot_change_per_query_is_named(spark, keep_lakehouse, tmp_path):
    root = spec_project(tmp_path, {"bad.py": """
        from pyspark import pipelines as dp

        @dp.materialized_view(spark_conf={"spark.sql.warehouse.dir": "/elsewhere"})
        def bad():
            return spark.range(1)
        """}, {})
    proj = Project.load(root)
    loaded = load_project(proj)
    with pytest.raises(HeadwaterError) as info:
        Graph(loaded.registry, loaded.lakehouse).build()
    assert info.value.code == "HW_OPTION_INVALID"
    assert "spark.sql.warehouse.dir" in str(info.value) and "bad.py" in str(info.value)
