"""``format("delta")``: the Python data source Spark calls for Delta reads and writes.

Spark unpickles this data source in every process that plans or runs a Delta read or write
(for a stream: a fresh planner process at each query start, and the workers that read). So
this module imports only what choosing a role needs; each role's stack (the batch reader and
writer, the stream sink, the change feed: with pyarrow.parquet and pyarrow.compute, ~80 ms of
imports in all) is imported by the method that makes it. A stream's planner then imports the
stream reader alone (~35 ms).
"""

from __future__ import annotations

from dataclasses import dataclass
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
from headwater.conf.options import parse_bool, parse_int
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.schema import spark_schema, strip_field_metadata
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


def reads_change_feed(options: dict[str, Any]) -> bool:
    """``readChangeFeed`` (also delta-spark's alias ``readChangeData``), default false."""
    value = options.get("readchangefeed", options.get("readchangedata"))
    return parse_bool("readChangeFeed", value, False)


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


@dataclass(frozen=True)
class _Latest:
    schema_json: str
    partition_columns: list[str]
    table_id: str
    version: int
    commit_mtime: int | None  # None (its commit cleaned up): never trusted again


class DeltaDataSource(DataSource):
    """Delta Lake tables by path, through delta-rs: batch and streaming, read and write."""

    #: partitions a scan aims for; a session registers a subclass with its own value
    parallelism: int = MACHINE_PARALLELISM

    def __init__(self, options: dict[str, str]) -> None:
        credentials, rest = storage.split_options(options)
        super().__init__(rest)  # storage options stay out of every other option dict
        self.opts: dict[str, Any] = {k.lower(): v for k, v in rest.items()}
        self.credentials: storage.Credentials | None = None
        self.latest: _Latest | None = None
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

    def _latest(self) -> _Latest:
        """The latest version's schema, partition columns and id: as schema() found them when
        Spark made the DataFrame (it pickles this instance after asking, and again at every
        query started from that DataFrame), read again once the table has a newer commit
        or was recreated (its commit file is not the one seen)."""
        log = DeltaLog(_path(self.opts))
        seen = self.latest
        if seen is not None and seen.commit_mtime is not None \
                and log.latest_version() == seen.version \
                and log.commit_mtime(seen.version) == seen.commit_mtime:
            return seen
        table = log.table()
        version = table.version()
        self.latest = _Latest(table.schema().to_json(), list(table.metadata().partition_columns),
                              table.metadata().id, version, log.commit_mtime(version))
        return self.latest

    def schema(self) -> StructType:
        if reads_change_feed(self.opts):  # the table as it is now, plus the change columns
            from headwater.delta.cdf import change_feed_schema  # noqa: PLC0415 - worker: the change feed's stack only where it is read
            return change_feed_schema(strip_field_metadata(spark_schema(
                self._latest().schema_json)))
        version = version_spec(self.opts)
        if version is None:
            return strip_field_metadata(spark_schema(self._latest().schema_json))
        return strip_field_metadata(spark_schema(self._table(version).schema().to_json()))

    def reader(self, schema: StructType) -> DataSourceReader:
        if reads_change_feed(self.opts):
            from headwater.delta.cdf import ChangeFeedBatchReader  # noqa: PLC0415 - worker: the change feed's stack only where it is read
            table = self._table()
            return self._carry(ChangeFeedBatchReader(
                _path(self.opts), self.opts, schema, spark_schema(table.schema().to_json()),
                list(table.metadata().partition_columns), table.metadata().id,
                self.parallelism))
        from headwater.delta.batch import DeltaBatchReader  # noqa: PLC0415 - worker: the batch stack only where a batch read is planned
        version = version_spec(self.opts)
        table = self._table(version)
        return self._carry(DeltaBatchReader(
            _path(self.opts), schema, spark_schema(table.schema().to_json()),
            list(table.metadata().partition_columns), version, self.parallelism))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # The table as the DataFrame was made (delta-spark also fixes a stream's schema then):
        # the planner process Spark starts for each query opens no snapshot to learn it.
        latest = self._latest()
        reader: type[DeltaStreamReader] = DeltaStreamReader
        if reads_change_feed(self.opts):
            from headwater.delta.cdf import ChangeFeedStreamReader  # noqa: PLC0415 - worker: the change feed's stack only where it is read
            reader = ChangeFeedStreamReader
        return self._carry(reader(
            _path(self.opts), self.opts, schema, spark_schema(latest.schema_json),
            list(latest.partition_columns), latest.table_id, self.parallelism,
        ))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from headwater.delta.batch import DeltaBatchWriter  # noqa: PLC0415 - worker: the batch stack only where a batch write is planned
        return self._carry(DeltaBatchWriter(self.opts, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from headwater.delta.sink import DeltaStreamWriter  # noqa: PLC0415 - worker: the sink's stack only where a stream write is planned
        return self._carry(DeltaStreamWriter(self.opts, schema, overwrite))
