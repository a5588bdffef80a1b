"""Databricks' ``dp`` (issue 38 item 2): a pipeline written as Databricks' current Python
reference writes it (``from pyspark import pipelines as dp``, ``@dp.expect_or_drop``,
``private=True``, ``create_auto_cdc_flow(..., ignore_null_updates=True)``) runs twice with new
files landing between the runs; pyspark.pipelines is unchanged outside the loading."""

from __future__ import annotations

import json

import pyspark.pipelines

from pipelines import project, run

PIPELINE = """
from pyspark import pipelines as dp

@dp.table(private=True, comment="raw change events")
@dp.expect_or_drop("has_id", "id IS NOT NULL")
def events():
    return spark.readStream.schema("id long, name string, seq long").json({landing!r})

@dp.materialized_view
@dp.expect("named", "name IS NOT NULL")
def names():
    return spark.read.table("events").groupBy("name").count()

dp.create_streaming_table("people", comment="latest row per id")
dp.create_auto_cdc_flow(target="people", source="events", keys=["id"], sequence_by="seq",
                        ignore_null_updates=True)
"""


def _land(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_a_pipeline_in_databricks_dp_spelling_runs_twice(spark, tmp_path):
    landing = tmp_path / "landing"
    _land(landing, "a.json", [{"id": 1, "name": "ann", "seq": 1},
                              {"id": 2, "name": "bob", "seq": 1},
                              {"id": None, "name": "nobody", "seq": 1}])
    root = project(tmp_path, globs=("defs/*.py",),
                   files={"defs.py": PIPELINE.format(landing=str(landing))})
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    _land(landing, "b.json", [{"id": 1, "name": None, "seq": 2},   # NULL kept: ignore_null_updates
                              {"id": 3, "name": "cy", "seq": 1}])
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    people = sorted((r.id, r.name) for r in lake.read("people").collect())
    assert people == [(1, "ann"), (2, "bob"), (3, "cy")]
    assert "events" not in lake.tables()  # private: not published in the lakehouse
    # the second run's names view counts every event row kept (the NULL id dropped)
    counts = {r.name: r["count"] for r in lake.read("names").collect()}
    assert counts == {"ann": 1, "bob": 1, "cy": 1, None: 1}
    # outside the loading, pyspark's module is its own again
    assert not hasattr(pyspark.pipelines, "expect_or_drop")


def test_databricks_arguments_without_an_equivalent_are_refused_by_name(spark, tmp_path):
    import pytest  # noqa: PLC0415 - only this test raises

    from headwater import HeadwaterError  # noqa: PLC0415 - only this test raises

    root = project(tmp_path, globs=("defs/*.py",), files={"defs.py": """
        from pyspark import pipelines as dp

        @dp.materialized_view(private=True)
        def hidden():
            return spark.range(3)

        @dp.table(cluster_by_auto=True)
        def auto():
            return spark.readStream.format("rate").load()
        """})
    with pytest.raises(HeadwaterError) as caught:
        run(spark, root)
    assert caught.value.code == "HW_PIPELINE_UNSUPPORTED"
    assert "cluster_by_auto" in str(caught.value) and "defs.py" in str(caught.value)
