"""Every STREAM form of a pipeline SQL file reads a stream (issue 38 item 3): ``STREAM name``,
``STREAM(name)``, ``STREAM delta.`path``` and ``STREAM(delta.`path`)``; run twice with new
rows landing between the runs, each run appending only the new ones."""

from __future__ import annotations

from pipelines import project, run


def test_stream_forms_of_sql_files_read_streams(spark, tmp_path):
    external = tmp_path / "external_events"
    spark.range(0, 3).write.format("delta").save(str(external))
    root = project(tmp_path, globs=("defs/*.sql",), files={"defs.sql": f"""
        CREATE OR REFRESH STREAMING TABLE by_path
        AS SELECT id FROM STREAM delta.`{external}`;
        CREATE OR REFRESH STREAMING TABLE by_path_parens
        AS SELECT id * 10 AS id FROM STREAM(delta.`{external}`);
        CREATE OR REFRESH STREAMING TABLE by_name
        AS SELECT id FROM STREAM by_path;
        CREATE OR REFRESH STREAMING TABLE by_name_parens
        AS SELECT id FROM STREAM(by_path_parens);
        """})
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    spark.range(3, 5).write.format("delta").mode("append").save(str(external))
    lake, results = run(spark, root)
    assert all(r.status == "completed" for r in results.values()), results
    ids = {name: sorted(r.id for r in lake.read(name).collect())
           for name in ("by_path", "by_path_parens", "by_name", "by_name_parens")}
    assert ids["by_path"] == ids["by_name"] == [0, 1, 2, 3, 4]
    assert ids["by_path_parens"] == ids["by_name_parens"] == [0, 10, 20, 30, 40]
    assert results["by_path"].rows_written == 2  # the second run: the new rows only


def test_stream_and_batch_reads_of_a_path_keep_their_with_options(spark, lake, tmp_path):
    path = tmp_path / "versions"
    spark.range(3).write.format("delta").save(str(path))
    spark.range(3, 5).write.format("delta").mode("append").save(str(path))
    stream = spark.sql(f"SELECT * FROM STREAM delta.`{path}` WITH ('startingVersion' = '1')")
    query = (stream.writeStream.format("memory").queryName("from_v1")
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert sorted(r.id for r in spark.table("from_v1").collect()) == [3, 4]
    batch = spark.sql(f"SELECT * FROM delta.`{path}` WITH ('versionAsOf' = '0')")
    assert sorted(r.id for r in batch.collect()) == [0, 1, 2]
