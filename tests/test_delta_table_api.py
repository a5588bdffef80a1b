"""headwater.DeltaTable with delta-spark's method names, and the maintenance functions."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F
from tests.support import write

from headwater import DeltaTable
from headwater.delta import maintenance
from headwater.errors import HeadwaterError


def rs_ids(path) -> list[int]:
    return sorted(pa.table(RsTable(str(path)).to_pyarrow_dataset().to_table())
                  .column("id").to_pylist())


def test_delta_spark_style_api_and_maintenance(spark, tmp):
    path = str(tmp / "t")
    for i in range(4):  # four small files in two partitions
        write(path, {"id": [i * 2, i * 2 + 1], "v": ["x", "y"], "p": ["a", "b"]},
              partition_by=["p"])
    assert DeltaTable.isDeltaTable(spark, path) and not DeltaTable.isDeltaTable(spark, str(tmp))
    table = DeltaTable.forPath(spark, path)
    table.alias("t").delete("t.id = 0")
    table.update(F.col("id") == 1, {"v": F.lit("updated")})
    result = (table.alias("t").merge(
        spark.createDataFrame([(2, "m", "a"), (50, "n", "b")], "id long, v string, p string")
        .alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    assert [tuple(r) for r in result.collect()] == [(2, 1, 0, 1)]
    assert rs_ids(path) == [1, 2, 3, 4, 5, 6, 7, 50]
    assert sorted(r["v"] for r in table.toDF().where("id in (1, 2)").collect()) == ["m", "updated"]

    history = table.history(3)
    assert history.columns[:5] == ["version", "timestamp", "userId", "userName", "operation"]
    assert [r["operation"] for r in history.collect()] == ["MERGE", "UPDATE", "DELETE"]
    detail = table.detail().first()
    assert detail["format"] == "delta" and detail["partitionColumns"] == ["p"]
    files_before = detail["numFiles"]

    metrics = maintenance.optimize(path, where="p = 'a'")
    assert metrics["numFilesRemoved"] > 1 and metrics["numFilesAdded"] == 1
    assert table.detail().first()["numFiles"] < files_before
    assert rs_ids(path) == [1, 2, 3, 4, 5, 6, 7, 50]
    with pytest.raises(HeadwaterError) as err:
        maintenance.optimize(path, where="id = 3")
    assert err.value.code == "HW_OPTIMIZE_WHERE_NOT_PARTITION"

    with pytest.raises(HeadwaterError) as err:
        table.vacuum(1)
    assert err.value.code == "HW_VACUUM_RETENTION_TOO_SHORT"
    # a reader still at version 3 needs the files removed since: VACUUM names it and refuses
    with pytest.raises(HeadwaterError) as err:
        maintenance.vacuum(path, 0, enforce_retention=False,
                           oldest_version_needed={"stream 'bronze_to_silver'": 3})
    assert err.value.code == "HW_VACUUM_READER_NEEDS_FILES"
    assert "bronze_to_silver" in str(err.value)
    doomed = maintenance.vacuum(path, 0, enforce_retention=False, dry_run=True)
    assert doomed  # nothing was deleted by the refused run

    restored = table.restoreToVersion(3).first()
    assert restored["num_of_files_after_restore"] > 0
    assert rs_ids(path) == [0, 1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(HeadwaterError) as err:
        DeltaTable.forPath(spark, str(tmp / "missing"))
    assert err.value.code == "HW_DELTA_TABLE_NOT_FOUND"
