"""Golden tables written by the JVM Delta implementation (../shared/delta-golden).

Every table delta-rs reads must give the same rows through headwater's batch reader and its
streaming reader (streamed into a headwater Delta sink, then read back with delta-rs: the
sink's round trip is checked on every type on the way). Every table delta-rs cannot read must
give a clear headwater error, never wrong rows. EXPECTED records the outcome per table.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from tests.golden_compare import normalize
from tests.support import GOLDEN

import headwater

SAME = "same"  # delta-rs reads it; headwater's batch and stream readers give the same rows
NO_REFERENCE = "no-reference"  # delta-rs refuses a feature that does not change the rows
COUNT_ONLY = "count-only"  # rows cannot be collected through pyspark's Arrow path

# name -> SAME | NO_REFERENCE | the HW_ code headwater raises (for batch and stream reads)
EXPECTED: dict[str, str] = {
    "basic-with-vacuum-protocol-check-feature": NO_REFERENCE,
    "type-widening": NO_REFERENCE,  # delta-rs refuses typeWidening-preview; headwater widens
    "type-widening-nested": NO_REFERENCE,
    "update-deleted-directory": "HW_DELTA_UNREADABLE",
    "versions-not-contiguous": "HW_DELTA_UNREADABLE",
    # pyspark's own toArrow() cannot convert null variants inside arrays: count rows instead
    "spark-variant-checkpoint": COUNT_ONLY,
    "canonicalized-paths-normal-a": "HW_DELTA_UNREADABLE",
    "canonicalized-paths-normal-b": "HW_DELTA_UNREADABLE",
    "canonicalized-paths-special-a": "HW_DELTA_UNREADABLE",
    "canonicalized-paths-special-b": "HW_DELTA_UNREADABLE",
    "checkpoint": "HW_DELTA_FILE_NOT_FOUND",
    "corrupted-last-checkpoint": "HW_DELTA_UNREADABLE",
    "data-reader-absolute-paths-escaped-chars": "HW_DELTA_UNREADABLE",
    "data-reader-date-types-America": "HW_DELTA_TABLE_NOT_FOUND",
    "data-reader-date-types-Asia": "HW_DELTA_TABLE_NOT_FOUND",
    "data-reader-date-types-Etc": "HW_DELTA_TABLE_NOT_FOUND",
    "delete-re-add-same-file-different-transactions": "HW_DELTA_FILE_NOT_FOUND",
    "deltalog-commit-info": "HW_DELTA_UNREADABLE",
    "deltalog-invalid-protocol-version": "HW_DELTA_UNREADABLE",
    "deltalog-state-reconstruction-from-checkpoint-missing-metadata": "HW_DELTA_UNREADABLE",
    "deltalog-state-reconstruction-from-checkpoint-missing-protocol": "HW_DELTA_UNREADABLE",
    "deltalog-state-reconstruction-without-metadata": "HW_DELTA_UNREADABLE",
    "deltalog-state-reconstruction-without-protocol": "HW_DELTA_UNREADABLE",
    "hive": "HW_DELTA_TABLE_NOT_FOUND",
    "log-replay-special-characters-b": "HW_DELTA_FILE_NOT_FOUND",
    "log-store-listFrom": "HW_DELTA_TABLE_NOT_FOUND",
    "log-store-read": "HW_DELTA_TABLE_NOT_FOUND",
    "no-delta-log-folder": "HW_DELTA_TABLE_NOT_FOUND",
}

BIG = 100_000  # above this many rows, compare column fingerprints instead of every row


def golden_tables() -> list[str]:
    if not GOLDEN.is_dir():
        return []
    return sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def fingerprint(table: pa.Table) -> list:
    """Row count plus, per column, null count and min/max where Arrow can order the type."""
    out: list = [table.num_rows]
    for name in sorted(table.column_names):
        column = table.column(name)
        out.append((name, column.null_count))
        try:
            bounds = pc.min_max(column)
            out.append((str(bounds["min"]), str(bounds["max"])))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    return out


def comparable(table: pa.Table, spark_types: pa.Schema | None = None) -> list:
    if spark_types is not None:  # Spark's Arrow types (e.g. timestamps in microseconds)
        table = table.select(spark_types.names)
        try:
            table = table.cast(spark_types)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # e.g. variant: nested nullability differs; values compare as they are
    return fingerprint(table) if table.num_rows > BIG else normalize(table)


def reference(path: str) -> pa.Table | None:
    try:
        return pa.table(DeltaTable(path).scan().read_all())
    except Exception:  # noqa: BLE001 - delta-rs cannot read it: headwater must error
        return None


def read_batch(spark, path: str) -> pa.Table:
    with headwater.translated():
        return spark.read.format("delta").load(path).toArrow()


def read_stream(spark, path: str, out: str) -> pa.Table:
    # Tables with checkpoints or deletion vectors stream 3 files a batch (a batch boundary
    # inside a checkpointed snapshot, a DV file in a later batch); the others 8 a batch: 3
    # everywhere cost the fast tier ~40 more batches that check nothing new
    per_batch = 3 if any(k in path for k in ("checkpoint", "dv-", "deletion")) else 8
    with headwater.translated():
        (spark.readStream.format("delta").option("maxFilesPerTrigger", per_batch).load(path)
         .writeStream.format("delta").option("checkpointLocation", f"{out}_cp")
         .trigger(availableNow=True).start(out).awaitTermination())
    return pa.table(DeltaTable(out).scan().read_all())


@pytest.mark.skipif(not golden_tables(), reason="../shared/delta-golden is not beside the repo")
@pytest.mark.parametrize("name", golden_tables())
def test_golden_table(spark, tmp, name):
    path = str(GOLDEN / name)
    expected = EXPECTED.get(name, SAME)
    ref = reference(path)
    if expected == SAME:
        assert ref is not None, f"delta-rs cannot read {name}: record its outcome in EXPECTED"
        got = read_batch(spark, path)
        want = comparable(ref, got.schema)
        assert comparable(got) == want, "batch reader rows differ from delta-rs"
        streamed = read_stream(spark, path, str(tmp / "out"))
        assert comparable(streamed, got.schema) == want, "streaming reader rows differ"
    elif expected == COUNT_ONLY:
        assert ref is not None
        assert spark.read.format("delta").load(path).count() == ref.num_rows
        out = str(tmp / "out")
        query = (spark.readStream.format("delta").load(path).writeStream.format("noop")
                 .option("checkpointLocation", f"{out}_cp").trigger(availableNow=True).start())
        query.awaitTermination()
        assert sum(p["numInputRows"] for p in query.recentProgress) == ref.num_rows
    elif expected == NO_REFERENCE:
        assert ref is None
        got = read_batch(spark, path)
        streamed = read_stream(spark, path, str(tmp / "out"))
        assert comparable(streamed, got.schema) == comparable(got)
    else:
        if not expected.startswith("HW_DELTA_UNSUPPORTED"):  # else: delta-rs reads it, we refuse
            assert ref is None, f"delta-rs reads {name} now: compare rows instead"
        for read in (lambda: read_batch(spark, path),
                     lambda: read_stream(spark, path, str(tmp / "out"))):
            with pytest.raises(headwater.HeadwaterError) as err:
                read()
            assert err.value.code == expected, str(err.value)


def test_golden_expectations_name_existing_tables():
    if golden_tables():
        assert set(EXPECTED) <= set(golden_tables()), set(EXPECTED) - set(golden_tables())


@pytest.mark.skipif(not golden_tables(), reason="../shared/delta-golden is not beside the repo")
def test_deletion_vectors_apply_through_a_symlinked_path(spark, tmp):
    """delta-rs resolves symlinks in the URIs it reports; deleted rows must stay deleted."""
    link = tmp / "linked"
    link.symlink_to(GOLDEN / "dv-partitioned-with-checkpoint", target_is_directory=True)
    ref = reference(str(link))
    got = read_batch(spark, str(link))
    assert ref is not None and comparable(got) == comparable(ref, got.schema)
