"""A Delta stream of file names: offsets, limits and checkpoints of the Delta source, no data.

Pipelines use it to run stateless Delta-to-Delta flows at Spark's native speed: each
micro-batch names the files the Delta source would have read, ``foreachBatch`` reads them with
Spark's parquet reader and re-applies the flow's definition to that static DataFrame. Only
tables Spark's reader can read as they are qualify (see :func:`native.natively_readable`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import spark_schema
from headwater.delta.source import DeltaInputPartition, DeltaStreamReader, Offset

FILES_SCHEMA = "path string, size long, has_dv boolean"


class DeltaFileListReader(DeltaStreamReader):
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        entries = self.planner.files_between(Offset.from_dict(start), Offset.from_dict(end))
        return [DeltaInputPartition(entries)] if entries else []

    def read(self, partition: InputPartition) -> Iterator:
        for entry in partition.entries:
            yield entry.path, entry.size, entry.has_dv


class DeltaFileListSource(DataSource):
    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = {k.lower(): v for k, v in options.items()}

    @classmethod
    def name(cls) -> str:
        return "hw_delta_files"

    def schema(self) -> str:
        return FILES_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        path = normalize_uri(self.opts["path"])
        table = DeltaLog(path).table()
        table_schema = spark_schema(table.schema().to_json())
        return DeltaFileListReader(path, self.opts, table_schema, table_schema,
                                   list(table.metadata().partition_columns), table.metadata().id)
