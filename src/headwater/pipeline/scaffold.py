"""``headwater init``: a small pipeline that runs as soon as it is created, as a headwater.toml
project or (``--format sdp``) a Spark Declarative Pipelines project (spark-pipeline.yml and
``from pyspark import pipelines as dp``)."""

from __future__ import annotations

import json
from pathlib import Path

from headwater.errors import HeadwaterError

TOML = '''[pipeline]
name = {name}
root = "lakehouse"                 # tables and checkpoints live here
definitions = ["transformations/*.py", "transformations/*.sql"]
trigger = "available-now"          # `headwater run --trigger "30 seconds"` runs continuously

[spark]
"spark.sql.shuffle.partitions" = "4"
'''

PIPELINE_PY = '''"""{name}: JSON files landing in data/landing -> bronze -> silver -> gold."""

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import headwater

spark = SparkSession.active()
LANDING = str(Path(__file__).resolve().parents[1] / "data" / "landing")


@headwater.table(comment="Raw readings, as they landed.")
def bronze():
    return (spark.readStream.format("json")
            .schema("device_id INT, reading DOUBLE, ts TIMESTAMP")
            .load(LANDING))


@headwater.table(comment="Readings that passed the quality rules.")
@headwater.expect("has_time", "ts IS NOT NULL")
@headwater.expect_or_drop("valid_reading", "reading BETWEEN -50 AND 150")
def silver():
    return headwater.read_stream("bronze").withColumn("day", F.to_date("ts"))


@headwater.table(output_mode="append", keep_late_rows=True,
                 comment="Readings per device and minute; late rows go to readings_per_minute__late.")
def readings_per_minute():
    return (headwater.read_stream("silver")
            .withWatermark("ts", "1 minute")
            .groupBy(F.window("ts", "1 minute"), "device_id")
            .agg(F.count("*").alias("readings"), F.avg("reading").alias("avg_reading")))
'''

GOLD_SQL = '''-- Materialized views are recomputed from the tables they read.
CREATE MATERIALIZED VIEW device_summary
COMMENT 'One row per device'
AS SELECT device_id, count(*) AS readings, round(avg(reading), 2) AS avg_reading
FROM silver GROUP BY device_id;
'''


SDP_SPEC = '''# A Spark Declarative Pipelines spec, run by `headwater run`.
name: {name}
storage: lakehouse                 # headwater: the Delta tables and checkpoints live here
libraries:
  - glob:
      include: transformations/**
configuration:
  spark.sql.shuffle.partitions: "4"
# headwater's own keys go in a `headwater:` section (spark-pipelines refuses unknown keys):
# headwater:
#   trigger: "30 seconds"          # continuous; default available-now
'''

SDP_PY = '''"""{name}: JSON files landing in data/landing -> bronze -> silver (SQL: device_summary)."""

from pathlib import Path

from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

LANDING = str(Path(__file__).resolve().parents[1] / "data" / "landing")


@dp.table(comment="Raw readings, as they landed.")
def bronze() -> DataFrame:
    return (spark.readStream.format("json")  # noqa: F821 - `spark` is given to definition files
            .schema("device_id INT, reading DOUBLE, ts TIMESTAMP")
            .load(LANDING))


@dp.table(comment="Readings in range, with their day.")
def silver() -> DataFrame:
    return (spark.readStream.table("bronze")  # noqa: F821
            .where("reading BETWEEN -50 AND 150")
            .withColumn("day", F.to_date("ts")))
'''


def sample_rows(start: int, count: int) -> list[dict]:
    rows = []
    for i in range(start, start + count):
        reading = 999.0 if i % 10 == 7 else round(20 + (i % 13) * 0.5, 1)  # some out of range
        rows.append({"device_id": i % 4, "reading": reading,
                     "ts": f"2026-01-01T10:{(i // 6) % 60:02d}:{(i * 7) % 60:02d}Z"})
    return rows


FORMATS = ("headwater", "sdp")


def scaffold(path: Path, name: str, format: str = "headwater") -> Path:
    """Create the project NAME in ``path`` (which must be new or empty).

    format: "headwater" (default: headwater.toml, headwater's decorators, expectations) or
        "sdp" (spark-pipeline.yml, ``from pyspark import pipelines as dp`` and a SQL file)."""
    path = Path(path).resolve()
    if format not in FORMATS:
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"init --format {format!r}.", "init writes a headwater.toml "
            "project or a Spark Declarative Pipelines one.", "Use --format headwater or sdp.")
    if path.exists() and any(path.iterdir()):
        raise HeadwaterError(
            "HW_PROJECT_EXISTS", f"{path} already exists and is not empty.",
            "init never overwrites files.", "Pick another name or remove the folder.")
    (path / "transformations").mkdir(parents=True)
    landing = path / "data" / "landing"
    landing.mkdir(parents=True)
    _landing_files(landing)
    (path / ".gitignore").write_text("lakehouse/\n")
    docstring_name = name.replace("\\", "\\\\").replace('"', '\\"')
    if format == "sdp":
        # A JSON string is a valid YAML double-quoted scalar.
        (path / "spark-pipeline.yml").write_text(
            SDP_SPEC.format(name=json.dumps(name, ensure_ascii=False)))
        (path / "transformations" / "pipeline.py").write_text(
            SDP_PY.format(name=docstring_name))
        (path / "transformations" / "device_summary.sql").write_text(GOLD_SQL)
        return path
    # The name goes into a TOML string and a Python docstring: quote/escape it for both
    # (a JSON string is a valid TOML basic string).
    (path / "headwater.toml").write_text(TOML.format(name=json.dumps(name, ensure_ascii=False)))
    (path / "transformations" / "pipeline.py").write_text(PIPELINE_PY.format(name=docstring_name))
    (path / "transformations" / "gold.sql").write_text(GOLD_SQL)
    return path


def _landing_files(landing: Path) -> None:
    for n in range(2):
        lines = [json.dumps(r) for r in sample_rows(n * 30, 30)]
        (landing / f"readings-{n:03d}.json").write_text("\n".join(lines) + "\n")
