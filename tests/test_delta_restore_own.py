"""Issue 24: RESTORE of tables deltalake refuses to commit to (identity columns, liquid
clustering), committed by headwater as delta-spark's RestoreTableCommand writes it: one
commit removing the current files the version lacks and adding back the version's own add
actions, the version's metadata with the identity high-water mark kept, the protocol never
lowered, the clustering domain restored, history RESTORE with delta-spark's parameters and
metrics."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable
from tests.support import collected, commits
from tests.support import golden as support_golden

from headwater import DeltaTable, HeadwaterError
from headwater.delta.generated import IDENTITY_HIGH_WATER_MARK
from headwater.delta.log import DeltaLog, add_actions
from headwater.delta.restore import restore_table
from headwater.delta.snapshot_adds import file_key, snapshot_adds


def _identity_table(spark) -> str:
    spark.sql("CREATE TABLE t (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING) USING DELTA "
              "TBLPROPERTIES ('team' = 'core')")                           # version 0
    spark.sql("INSERT INTO t (v) VALUES ('a'), ('b')")                     # version 1
    spark.sql("INSERT INTO t (v) VALUES ('c')")                            # version 2
    spark.sql("ALTER TABLE t SET TBLPROPERTIES ('team' = 'ops', 'x' = '1')")  # version 3
    spark.sql("DELETE FROM t WHERE v = 'a'")                               # version 4
    return str(spark.sql("DESCRIBE DETAIL t").first().location)


def _restore_commit(path: str) -> list[dict]:
    return commits(Path(path.removeprefix("file:")))[-1]


def _identity_mark(path: Path) -> int:
    """The id column's high-water mark in the table's current schema (the log's)."""
    schema = json.loads(RsTable(str(path)).schema().to_json())
    field = next(f for f in schema["fields"] if f["name"] == "id")
    return int(field["metadata"][IDENTITY_HIGH_WATER_MARK])


def test_restore_an_identity_table_to_a_version(spark, lake):
    path = _identity_table(spark)
    log = commits(lake.path("t"))
    assert collected(spark.table("t").select("v")) == [("b",), ("c",)]
    mark_before = _identity_mark(lake.path("t"))
    live = set(add_actions(RsTable(str(lake.path("t")))).column("path").to_pylist())
    result = spark.sql("RESTORE TABLE t TO VERSION AS OF 1").first()
    assert collected(spark.table("t")) == [(1, "a"), (2, "b")]
    actions = _restore_commit(path)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "RESTORE"
    assert info["operationParameters"] == {"version": 1, "timestamp": None}
    assert info["readVersion"] == 4 and info["isBlindAppend"] is False
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    # version 1's file the DELETE removed comes back with its own add action (stats too)
    written = [a["add"] for a in log[1] if "add" in a]
    assert len(written) == 2 and len(adds) == 1
    assert adds == [{**a, "dataChange": True} for a in written if a["path"] not in live]
    # what version 1 did not have goes: version 2's file (and any DELETE rewrite)
    assert {r["path"] for r in removes} == live - {a["path"] for a in written}
    assert len(removes) >= 1
    assert all(r["dataChange"] and r["extendedFileMetadata"] for r in removes)
    metrics = {k: int(v) for k, v in info["operationMetrics"].items()}
    assert metrics == {
        "numRestoredFiles": len(adds), "restoredFilesSize": sum(a["size"] for a in adds),
        "numRemovedFiles": len(removes), "removedFilesSize": sum(r["size"] for r in removes),
        "numOfFilesAfterRestore": 2, "tableSizeAfterRestore": sum(a["size"] for a in written)}
    assert (result.num_restored_files, result.num_removed_files,
            result.num_of_files_after_restore) == (1, len(removes), 2)
    # version 1's properties are back; the identity high-water mark is not lowered
    assert spark.sql("DESCRIBE DETAIL t").first().properties == {"team": "core"}
    assert _identity_mark(lake.path("t")) == mark_before == 3
    spark.sql("INSERT INTO t (v) VALUES ('d')")
    assert collected(spark.table("t")) == [(1, "a"), (2, "b"), (4, "d")]  # 3 is never reused
    history = spark.sql("DESCRIBE HISTORY t").collect()
    assert [h.operation for h in history[:2]] == ["WRITE", "RESTORE"]
    assert history[1].operationParameters == {"version": "1", "timestamp": "null"}


def test_restore_an_identity_table_to_a_timestamp_through_the_api(spark, lake):
    _identity_table(spark)
    path = lake.path("t")
    when = DeltaTable.forPath(spark, str(path)).history().collect()[-3].timestamp  # version 2
    text = when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    DeltaTable.forPath(spark, str(path)).restoreToTimestamp(text)
    assert collected(spark.table("t")) == [(1, "a"), (2, "b"), (3, "c")]
    info = next(a["commitInfo"] for a in commits(path)[-1] if "commitInfo" in a)
    assert info["operationParameters"]["version"] is None
    restored = dt.datetime.fromisoformat(info["operationParameters"]["timestamp"])
    assert restored.replace(tzinfo=dt.UTC) == when.astimezone(dt.UTC)


def test_restore_refuses_a_version_whose_files_are_gone(spark, lake):
    _identity_table(spark)
    path = Path(lake.path("t"))
    before = len(commits(path))
    live = set(add_actions(RsTable(str(path))).column("path").to_pylist())
    gone = [a["add"]["path"] for a in commits(path)[1] if "add" in a
            and a["add"]["path"] not in live]  # version 1's file the DELETE removed
    assert len(gone) == 1
    (path / gone[0]).unlink()  # as VACUUM would
    with pytest.raises(HeadwaterError) as err:
        spark.sql("RESTORE TABLE t TO VERSION AS OF 1")
    assert err.value.code == "HW_DELTA_FILE_NOT_FOUND" and gone[0] in str(err.value)
    assert len(commits(path)) == before  # nothing committed
    assert collected(spark.table("t").select("v")) == [("b",), ("c",)]


@pytest.mark.parametrize("checkpoint", [False, True], ids=["log", "after-a-checkpoint"])
def test_restore_a_clustered_table_brings_its_clustering_back(spark, lake, checkpoint):
    (DeltaTable.create(spark).tableName("c").addColumn("a", "INT").addColumn("b", "STRING")
     .clusterBy("a").execute())                                            # version 0
    spark.sql("INSERT INTO c VALUES (1, 'x'), (2, 'y')")                   # version 1
    (DeltaTable.createOrReplace(spark).tableName("c").addColumn("a", "INT")
     .addColumn("b", "STRING").addColumn("n", "DOUBLE").clusterBy("b").execute())  # version 2
    spark.sql("INSERT INTO c VALUES (3, 'z', 1.5)")                        # version 3
    if checkpoint:  # a checkpoint newer than the version restored (delta-spark: every 10)
        RsTable(lake.path("c")).create_checkpoint()
    assert spark.sql("DESCRIBE DETAIL c").first().clusteringColumns == ["b"]
    protocol = [a["protocol"] for v in commits(lake.path("c")) for a in v if "protocol" in a][-1]
    DeltaTable.forName(spark, "c").restoreToVersion(1)
    assert collected(spark.table("c")) == [(1, "x"), (2, "y")]
    detail = spark.sql("DESCRIBE DETAIL c").first()
    assert detail.clusteringColumns == ["a"]
    actions = commits(lake.path("c"))[-1]
    domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    assert domains == [{"domain": "delta.clustering", "removed": False,
                        "configuration": json.dumps({"clusteringColumns": [["a"]]},
                                                    separators=(",", ":"))}]
    assert next(a["protocol"] for a in actions if "protocol" in a) == protocol  # not lowered
    spark.sql("INSERT INTO c VALUES (4, 'w')")  # the restored table takes writes
    assert collected(spark.table("c")) == [(1, "x"), (2, "y"), (4, "w")]


def test_restore_keys_files_by_path_and_deletion_vector_across_a_checkpoint(spark, tmp_path):
    """delta-spark's golden table with deletion vectors and a checkpoint at version 10:
    restoring version 15 to version 5 re-adds version 5's (file, deletion vector) pairs with
    the add actions the log holds (read back from before the checkpoint) and removes the
    current pairs, each remove naming its deletion vector; the rows are version 5's."""
    golden = support_golden("dv-partitioned-with-checkpoint")
    path = tmp_path / "t"
    shutil.copytree(golden, path)
    uri = str(path)
    log = DeltaLog(uri)
    current, target = log.table(), log.table(5)
    assert current.version() == 15
    newest: dict[str, dict] = {}  # the newest add of each path up to version 5, by hand
    for actions in commits(path)[:6]:
        newest.update({a["add"]["path"]: a["add"] for a in actions if "add" in a})
    live5 = set(add_actions(target).column("path").to_pylist())
    adds5 = snapshot_adds(log, target)
    assert {a["path"] for a in adds5} == live5
    assert all(a == newest[a["path"]] for a in adds5)
    assert any(a.get("deletionVector") for a in adds5)
    adds15 = {file_key(a): a for a in snapshot_adds(log, current)}  # most from the checkpoint
    assert any(a.get("deletionVector") for a in adds15.values())
    expected = collected(spark.read.format("delta").option("versionAsOf", 5).load(uri))
    assert collected(spark.read.format("delta").load(uri)) != expected  # a real change
    result = restore_table(uri, current, 5, 5, None)
    assert result["version"] == 16
    actions = commits(path)[-1]
    re_added = [a["add"] for a in actions if "add" in a]
    removed = [a["remove"] for a in actions if "remove" in a]
    assert {file_key(a) for a in re_added} == {file_key(a) for a in adds5} - set(adds15)
    assert {file_key(r) for r in removed} == set(adds15) - {file_key(a) for a in adds5}
    assert any(r.get("deletionVector") for r in removed)
    assert collected(spark.read.format("delta").load(uri)) == expected  # deletion vectors held
