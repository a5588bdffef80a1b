"""``format("delta")``: the Python data source Spark calls for Delta reads and writes."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from headwater.conf import storage
from headwater.conf.options import parse_int
from headwater.delta.batch import DeltaBatchReader, DeltaBatchWriter
from headwater.delta.cdf import (
    ChangeFeedBatchReader,
    ChangeFeedStreamReader,
    change_feed_schema,
    reads_change_feed,
)
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import spark_schema, strip_field_metadata
from headwater.delta.sink import DeltaStreamWriter
from headwater.delta.source import MACHINE_PARALLELISM, DeltaStreamReader
from headwater.errors import HeadwaterError


def _path(options: dict[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise HeadwaterError(
            "HW_SOURCE_NO_PATH",
            "A delta read arrived without a table path.",
            "headwater never guesses a default location.",
            "Pass a path: spark.read.format('delta').load('/data/table'), or use a Lakehouse "
            "table name.",
        )
    return normalize_uri(path)


def version_spec(options: dict[str, str]) -> int | str | None:
    version = options.get("versionasof")
    timestamp = options.get("timestampasof")
    if version is not None and timestamp is not None:
        raise HeadwaterError(
            "HW_OPTION_CONFLICT", "versionAsOf and timestampAsOf were both given.",
            "Time travel reads one version of the table.", "Keep only one of the two options.",
        )
    if version is not None:
        return parse_int("versionAsOf", version, None, minimum=0)
    if timestamp is not None:
        text = timestamp.strip()
        return text if "T" in text or " " in text else text + "T00:00:00Z"
    return None


class DeltaDataSource(DataSource):
    """Delta Lake tables by path, through delta-rs: batch and streaming, read and write."""

    #: partitions a scan aims for; a session registers a subclass with its own value
    parallelism: int = MACHINE_PARALLELISM

    def __init__(self, options: dict[str, str]) -> None:
        credentials, rest = storage.split_options(options)
        super().__init__(rest)  # storage options stay out of every other option dict
        self.opts: dict[str, Any] = {k.lower(): v for k, v in rest.items()}
        self.credentials: storage.Credentials | None = None
        if self.opts.get("path"):
            uri = normalize_uri(self.opts["path"])
            storage.register(uri, credentials)
            # Spark pickles the data source between its planning workers: carry them along
            self.credentials = storage.Credentials.for_uri(uri)

    def _carry(self, worker_side: Any) -> Any:
        """Attach the path's storage credentials, so the processes that unpickle the reader /
        writer (Spark's Python workers) register them too."""
        if self.opts.get("path"):
            worker_side.credentials = storage.Credentials.for_uri(_path(self.opts))
        return worker_side

    @classmethod
    def name(cls) -> str:
        return "delta"

    def _table(self, version=None):
        return DeltaLog(_path(self.opts)).table(version)

    def schema(self) -> StructType:
        if reads_change_feed(self.opts):  # the table as it is now, plus the change columns
            return change_feed_schema(strip_field_metadata(spark_schema(
                self._table().schema().to_json())))
        table = self._table(version_spec(self.opts))
        return strip_field_metadata(spark_schema(table.schema().to_json()))

    def reader(self, schema: StructType) -> DataSourceReader:
        if reads_change_feed(self.opts):
            table = self._table()
            return self._carry(ChangeFeedBatchReader(
                _path(self.opts), self.opts, schema, spark_schema(table.schema().to_json()),
                list(table.metadata().partition_columns), table.metadata().id,
                self.parallelism))
        version = version_spec(self.opts)
        table = self._table(version)
        return self._carry(DeltaBatchReader(
            _path(self.opts), schema, spark_schema(table.schema().to_json()),
            list(table.metadata().partition_columns), version, self.parallelism))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        table = self._table()
        reader = ChangeFeedStreamReader if reads_change_feed(self.opts) else DeltaStreamReader
        return self._carry(reader(
            _path(self.opts), self.opts, schema, spark_schema(table.schema().to_json()),
            list(table.metadata().partition_columns), table.metadata().id, self.parallelism,
        ))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return self._carry(DeltaBatchWriter(self.opts, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return self._carry(DeltaStreamWriter(self.opts, schema, overwrite))
