"""Issue 13: the delta-rs DML engine gives the same rows and the same change data as Spark's
copy-on-write path, ``auto`` picks it only for statements it runs exactly like Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from tests.support import write

from headwater import HeadwaterError
from headwater.delta import dml

ROWS = {"id": [1, 2, 3, 4, 5, None], "name": ["a", "b", "c", "d", None, "f"],
        "n": [10, 20, 30, 40, 50, 60]}


def fresh(tmp_path, engine: str) -> str:
    path = tmp_path / engine
    write(path, ROWS, configuration={"delta.enableChangeDataFeed": "true"})
    return str(path)


def state(path: str) -> tuple[list, list]:
    """(rows, change data of the last version), both sorted, for comparing engines."""
    table = DeltaTable(path)
    rows = pa.table(table.to_pyarrow_table()).to_pylist()
    version = table.version()
    cdf = pa.table(table.load_cdf(starting_version=version, ending_version=version)
                   .read_all()).to_pylist()
    key = repr
    return (sorted(rows, key=key),
            sorted(({k: v for k, v in r.items() if k not in ("_commit_timestamp",)}
                    for r in cdf), key=key))


def both(spark, tmp_path, action):
    """Run ``action(path, engine)`` on identical tables with each engine; results and states."""
    out = {}
    for engine in ("spark", "delta-rs"):
        path = fresh(tmp_path, engine)
        result = action(path, engine)
        assert result.engine == engine
        out[engine] = (result.as_row(), state(path))
    return out


@pytest.mark.parametrize("condition", [
    "id > 3 OR name IS NULL", "name IN ('a', 'c') AND NOT (n = 10)", "id * 10 - n = 0",
    "t.id >= 5"])
def test_delete_is_the_same_on_both_engines(spark, tmp_path, condition):
    out = both(spark, tmp_path, lambda p, e: dml.delete(spark, p, condition, engine=e,
                                                        target_alias="t"))
    assert out["spark"] == out["delta-rs"]
    assert out["spark"][0]["num_affected_rows"] > 0


def test_update_is_the_same_on_both_engines(spark, tmp_path):
    out = both(spark, tmp_path, lambda p, e: dml.update(
        spark, p, {"name": "'x'", "t.n": "n + id * 2"}, "id <= 2 OR name IS NULL",
        engine=e, target_alias="t"))
    assert out["spark"] == out["delta-rs"]
    assert out["spark"][0] == {"num_affected_rows": 3}


def test_merge_every_clause_kind_is_the_same_on_both_engines(spark, tmp_path):
    source = spark.createDataFrame([(2, "B", 0), (3, "C", 1), (7, "g", 70), (8, "h", 80)],
                                   "id long, name string, n long").alias("s")

    def run(path, engine):
        spec = dml.MergeSpec(path=path, source=source, condition="t.id = s.id",
                             target_alias="t")
        for clause in [dml.MergeClause("matched", "delete", "s.n = 1"),
                       dml.MergeClause("matched", "update", None, None),
                       dml.MergeClause("not_matched", "insert", "s.id = 7", None),
                       dml.MergeClause("not_matched", "insert", None,
                                       {"id": "s.id", "name": "'other'", "n": "s.n + 1"}),
                       dml.MergeClause("not_matched_by_source", "update", "t.id = 1",
                                       {"n": "t.n * 2"}),
                       dml.MergeClause("not_matched_by_source", "delete", "t.n > 45")]:
            spec.clauses.append(clause)
        return dml.merge(spark, spec, engine=engine)

    out = both(spark, tmp_path, run)
    assert out["spark"] == out["delta-rs"]
    assert out["spark"][0] == {"num_affected_rows": 7, "num_updated_rows": 2,
                               "num_deleted_rows": 3, "num_inserted_rows": 2}


def test_auto_picks_delta_rs_only_where_it_matches_spark(spark, tmp_path):
    path = fresh(tmp_path, "auto")
    assert dml.delete(spark, path, "id = 1").engine == "delta-rs"
    # a Column, a function delta-rs evaluates differently: Spark
    assert dml.delete(spark, path, F.col("id") == 2).engine == "spark"
    assert dml.update(spark, path, {"name": "concat(name, '!')"}, "id = 3").engine == "spark"
    # Spark's "d" is a string, DataFusion's a column: printed again as 'd', delta-rs runs it
    assert dml.delete(spark, path, 'name = "d" OR id % 5 = 0').engine == "delta-rs"
    assert sorted(r["id"] or 0 for r in state(path)[0]) == [0, 3]
    # duplicate source keys: Spark's path, which enforces Delta's multiple-match rule
    dupes = spark.createDataFrame([(3, "x", 1), (3, "y", 2)], "id long, name string, n long")
    spec = dml.MergeSpec(path=path, source=dupes.alias("s"), condition="t.id = s.id",
                         target_alias="t")
    spec.clauses.append(dml.MergeClause("matched", "update", None, None))
    with pytest.raises(HeadwaterError) as err:
        dml.merge(spark, spec)
    assert err.value.code == "HW_MERGE_MULTIPLE_SOURCE_ROWS"
    with pytest.raises(HeadwaterError) as err:
        dml.update(spark, path, {"name": "upper(name)"}, engine="delta-rs")
    assert err.value.code == "HW_DML_ENGINE_UNSUPPORTED" and "UnresolvedFunction" in str(err.value)


def test_dml_benchmark_smoke_three_paths_delete_the_same_rows(spark, tmp_path):
    """benchmarks/dml.py at its smallest: the three paths run the same DELETE on fresh copies
    of one table and each removes exactly 1% (the harness checks every run's counts)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from dml import PATHS, bench, report
    finally:
        sys.path.pop(0)
    results = bench(spark, rows=20_000, changes=200, rows_per_file=5_000, runs=1, warm_up=0,
                    base=tmp_path, statements=("DELETE 1%",))
    assert [r["path"] for r in results] == list(PATHS)
    assert all(r["deleted"] == 200 and r["files_rewritten"] == 4 for r in results), results
    assert "| DELETE 1% | spark |" in report(results)
