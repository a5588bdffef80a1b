"""SQL text as users write it (issue 37 item 1): comments anywhere in and around every
statement the lakehouse routes, Delta's own grammar included; hints and quoted text kept."""

from __future__ import annotations

import pytest

from headwater.spark.sql_text import statements, without_comments


def test_comments_are_blanked_in_place_and_hints_and_strings_kept():
    text = "SELECT /*+ BROADCAST(t) */ '--x', \"/*y*/\" -- note\nFROM t /* a /* nested */ b */ ;"
    clean = without_comments(text)
    assert len(clean) == len(text) and clean.count("\n") == 1  # offsets and lines kept
    assert "/*+ BROADCAST(t) */" in clean and "'--x'" in clean and '"/*y*/"' in clean
    assert "note" not in clean and "nested" not in clean and " b " not in clean
    script = "-- setup\nCREATE TABLE a (x INT); /* two */ INSERT INTO a VALUES (1);\n-- end"
    assert [(s.split()[0], line) for s, line in statements(script)] == [("CREATE", 2),
                                                                       ("INSERT", 2)]


@pytest.mark.parametrize("statement", [
    "VACUUM events -- This runs VACUUM with the default retention",
    "-- compact the small files\nOPTIMIZE events",
    "/* nightly */ OPTIMIZE events ZORDER BY (id) -- by id",
    "-- what happened\nDESCRIBE HISTORY events",
    "DESCRIBE DETAIL events /* size */",
    "-- add one\nINSERT INTO events /* new */ VALUES (3, 'c') -- done",
    "UPDATE events SET name = 'x' -- rename\nWHERE id = 1",
    "/* multi\n   line */\nDELETE FROM events WHERE id = 2;  -- gone",
    "SELECT * FROM events -- all rows",
])
def test_commented_statements_run(spark, lake, statement):
    spark.sql("CREATE TABLE events (id INT, name STRING) USING delta")
    spark.sql("INSERT INTO events VALUES (1, 'a'), (2, 'b')")
    spark.sql(statement).collect()


def test_convert_to_delta_after_a_comment(spark, lake, tmp):
    folder = tmp / "parquet"
    spark.createDataFrame([(1,)], "id int").write.parquet(str(folder))
    spark.sql(f"-- make it a Delta table\nCONVERT TO DELTA parquet.`{folder}` -- in place")
    assert (folder / "_delta_log").is_dir()
    assert spark.read.format("delta").load(str(folder)).count() == 1
