"""Databricks-only SQL functions in a pipeline (issue 38 item 6) are named as such at
``headwater validate`` (a dry graph build), never left as Spark's UNRESOLVED_ROUTINE."""

from __future__ import annotations

import pytest

from headwater import HeadwaterError
from pipelines import build, project


@pytest.mark.parametrize(("sql", "function"), [
    ("SELECT ai_classify(k, array('a', 'b')) AS c FROM range_src", "ai_classify"),
    ("SELECT ai_query('endpoint', k) AS c FROM range_src", "ai_query"),
    ("SELECT h3_longlatash3(1.0, 2.0, 5) AS c FROM range_src", "h3_longlatash3"),
])
def test_databricks_only_functions_are_named_at_validate(spark, tmp_path, sql, function):
    root = project(tmp_path, globs=("defs/*.sql",), files={"defs.sql": f"""
        CREATE OR REFRESH MATERIALIZED VIEW range_src AS SELECT 'x' AS k;
        CREATE OR REFRESH MATERIALIZED VIEW labelled AS {sql};
        """})
    with pytest.raises(HeadwaterError) as caught:
        build(spark, root, dry=True)
    assert caught.value.code == "HW_PIPELINE_UNSUPPORTED"
    assert f"{function}()" in str(caught.value) and "Databricks-only" in str(caught.value)
