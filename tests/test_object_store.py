"""Delta tables on S3 (moto's server on 127.0.0.1): streaming source and sink, batch reads and
writes, concurrent writers, restarts, credentials given as options and never written down."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from tests.object_store import MotoServer

import headwater


def _opts(moto: MotoServer) -> dict[str, str]:
    return moto.options()


def test_batch_write_and_read_on_s3_with_options(spark, moto):
    table = f"{moto.bucket()}/people"
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string")
    with headwater.translated():
        df.write.format("delta").mode("append").options(**_opts(moto)).option("partitionBy", "name").save(table)
        df.limit(1).write.format("delta").mode("append").options(**_opts(moto)).save(table)
        back = spark.read.format("delta").options(**_opts(moto)).load(table)
        assert sorted(back.collect()) == sorted([(1, "a"), (2, "b"), (3, "c"), (1, "a")])
    keys = moto.keys(table)
    assert any(k.endswith("_delta_log/00000000000000000001.json") for k in keys)
    assert any("/name=a/" in k for k in keys)
    assert DeltaTable(table, storage_options=_opts(moto)).version() == 1
