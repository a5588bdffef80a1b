"""Type widening (issue 37, item 3) as docs.delta.io's "Type widening" page shows it:
``delta.enableTypeWidening = true`` in CREATE TABLE or SET TBLPROPERTIES adds the
typeWidening reader-writer feature; ``ALTER TABLE t ALTER COLUMN c TYPE wider`` is one
metadata commit recording ``delta.typeChanges`` on the field, no data file touched; older
files are read widened (headwater's readers, Spark's parquet reader in DML); narrowing and
other changes keep delta-spark's DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP. delta-rs
(deltalake 1.6.6) refuses the table by the feature's name."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.support import commits, logged_fields

from headwater import HeadwaterError


def protocol(path) -> dict:
    return [a["protocol"] for actions in commits(path) for a in actions if "protocol" in a][-1]


def data_files(path) -> set[str]:
    return {p.name for p in Path(path).rglob("*.parquet")}


def rows(spark, name) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(name).collect())


def test_widen_columns_as_the_docs_show_it(spark, lake):
    spark.sql("CREATE TABLE widen (b TINYINT, i INT, f FLOAT, d DATE, dec DECIMAL(10,2), "
              "s STRUCT<x: SMALLINT>) USING DELTA "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    path = lake.path("widen")
    assert protocol(path) == {"minReaderVersion": 3, "minWriterVersion": 7,
                              "readerFeatures": ["typeWidening"],
                              "writerFeatures": ["appendOnly", "invariants", "typeWidening"]}
    spark.sql("INSERT INTO widen VALUES (1, 2, 1.5, DATE'2024-01-02', 3.25, named_struct('x', 4))")
    files = data_files(path)
    for statement in ("ALTER TABLE widen ALTER COLUMN b TYPE SMALLINT",
                      "ALTER TABLE widen ALTER COLUMN b TYPE INT",
                      "ALTER TABLE widen ALTER COLUMN b TYPE BIGINT",
                      "ALTER TABLE widen ALTER COLUMN i TYPE DECIMAL(12,1)",
                      "ALTER TABLE widen ALTER COLUMN f TYPE DOUBLE",
                      "ALTER TABLE widen ALTER COLUMN d TYPE TIMESTAMP_NTZ",
                      "ALTER TABLE widen ALTER COLUMN dec TYPE DECIMAL(14,4)",
                      "ALTER TABLE widen ALTER COLUMN s.x TYPE INT"):
        spark.sql(statement)
        ntz = "TIMESTAMP_NTZ" in statement  # the type's feature joins in the same commit
        assert {k for a in commits(path)[-1] for k in a} == \
            {"commitInfo", "metaData", *(["protocol"] if ntz else [])}
    assert protocol(path)["readerFeatures"] == ["timestampNtz", "typeWidening"]
    assert data_files(path) == files  # no data file rewritten
    fields = logged_fields(path)
    assert fields["b"]["type"] == "long"
    assert fields["b"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "byte", "toType": "short"}, {"fromType": "short", "toType": "integer"},
        {"fromType": "integer", "toType": "long"}]
    assert fields["i"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "integer", "toType": "decimal(12,1)"}]
    assert fields["d"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "date", "toType": "timestamp_ntz"}]
    nested = fields["s"]["type"]["fields"][0]
    assert nested["type"] == "integer"
    assert nested["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "integer"}]
    # old files read widened; new rows use the range of the new types
    spark.sql("INSERT INTO widen VALUES (5000000000, 123456789.5, 1e300, "
              "TIMESTAMP_NTZ'2024-05-06 07:08:09', 12345678.1234, named_struct('x', 70000))")
    old = (1, Decimal("2.0"), 1.5, dt.datetime(2024, 1, 2), Decimal("3.2500"), (4,))
    new = (5000000000, Decimal("123456789.5"), 1e300, dt.datetime(2024, 5, 6, 7, 8, 9),
           Decimal("12345678.1234"), (70000,))
    assert rows(spark, "widen") == [old, new]
    # DML reads the old files with Spark's parquet reader, widened
    spark.sql("UPDATE widen SET b = b + 10000000000 WHERE b = 1")
    spark.sql("DELETE FROM widen WHERE f > 1e299")
    assert rows(spark, "widen") == [(10000000001, *old[1:])]
    with pytest.raises(Exception, match="typeWidening"):  # delta-rs refuses, by name
        DeltaTable(str(path)).to_pyarrow_table()


@pytest.mark.parametrize("statement", [
    "ALTER TABLE narrow ALTER COLUMN l TYPE INT",         # narrowing
    "ALTER TABLE narrow ALTER COLUMN i TYPE SMALLINT",
    "ALTER TABLE narrow ALTER COLUMN i TYPE DECIMAL(9,0)",  # fewer integer digits than int's
    "ALTER TABLE narrow ALTER COLUMN dec TYPE DECIMAL(12,1)",  # a smaller scale
    "ALTER TABLE narrow ALTER COLUMN i TYPE STRING",
    "ALTER TABLE narrow ALTER COLUMN l TYPE DOUBLE",       # long -> double loses digits
])
def test_what_type_widening_does_not_allow_is_refused(spark, lake, statement):
    spark.sql("CREATE TABLE narrow (l BIGINT, i INT, dec DECIMAL(10,2)) USING DELTA "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    version = len(commits(lake.path("narrow")))
    with pytest.raises(HeadwaterError) as err:
        spark.sql(statement)
    assert err.value.error_class == "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"
    assert len(commits(lake.path("narrow"))) == version  # unchanged


def test_enable_type_widening_later_then_widen(spark, lake):
    spark.sql("CREATE TABLE later (id INT) USING DELTA")
    spark.sql("INSERT INTO later VALUES (1)")
    with pytest.raises(HeadwaterError, match="typeWidening") as err:
        spark.sql("ALTER TABLE later ALTER COLUMN id TYPE BIGINT")
    assert err.value.error_class == "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"
    spark.sql("ALTER TABLE later SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    last = commits(lake.path("later"))[-1]
    assert {k for a in last for k in a} == {"commitInfo", "protocol", "metaData"}
    assert protocol(lake.path("later"))["readerFeatures"] == ["typeWidening"]
    spark.sql("ALTER TABLE later ALTER COLUMN id TYPE BIGINT")
    spark.sql("INSERT INTO later VALUES (9000000000)")
    assert rows(spark, "later") == [(1,), (9000000000,)]
    df = spark.createDataFrame([(7,)], "id LONG")  # a DataFrame append: headwater's commit
    df.write.format("delta").mode("append").saveAsTable("later")
    assert rows(spark, "later") == [(1,), (7,), (9000000000,)]
