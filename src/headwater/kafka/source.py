"""Kafka as a Spark data source: stream and batch reads with Spark's options and row schema,
and the sink (see :mod:`headwater.kafka.sink`).

Registered as ``headwater.kafka``: Spark 4.3 answers ``format("kafka")`` with
KAFKA_DATA_SOURCE_NOT_ENABLED before it looks at Python data sources (DataSource
.lookupDataSource checks the name "kafka" first), and ``spark.dataSource.register`` refuses the
name with DATA_SOURCE_ALREADY_EXISTS for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from headwater.conf.options import parse_bool
from headwater.kafka.client import TP, KafkaBroker
from headwater.kafka.offsets import (
    OffsetRange,
    rate_limit,
    reconcile,
    split_ranges,
    to_json,
    to_map,
)
from headwater.kafka.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SinkOptions,
    SourceOptions,
)
from headwater.kafka.read import kafka_schema, read_range
from headwater.kafka.sink import (
    KafkaBatchWriter,
    KafkaStreamWriter,
    save_mode_refused,
)

FORMAT_NAME = "headwater.kafka"


class KafkaDataSource(DataSource):
    """``spark.readStream.format("headwater.kafka")`` / ``read`` / ``writeStream`` / ``write``.

    Options: see :mod:`headwater.kafka.options` (Spark's Kafka option names).
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        include = parse_bool("includeHeaders", self.options.get("includeheaders"), False)
        return kafka_schema(include)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(SourceOptions.parse(dict(self.options), streaming=True))

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(SourceOptions.parse(dict(self.options), streaming=False))

    def writer(self, schema: StructType, overwrite: bool):
        if overwrite:
            raise save_mode_refused("overwrite")
        return KafkaBatchWriter(SinkOptions.parse(dict(self.options)), schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        # overwrite is the complete output mode: every batch's rows are produced, as Spark's
        # Kafka sink does in that mode.
        return KafkaStreamWriter(SinkOptions.parse(dict(self.options)), schema)


class _KafkaReading:
    """What the stream and batch readers share: the broker, resolving specs, reading ranges."""

    def __init__(self, options: SourceOptions) -> None:
        self.o = options
        self.broker = KafkaBroker(options.config, options.request_timeout_ms, options.retries,
                                  options.retry_interval_ms)

    def resolve(self, spec: OffsetSpec, tps: list[TP]) -> dict[TP, int]:
        """Concrete offsets of ``spec`` for ``tps`` (JSON: -2 earliest, -1 latest; partitions
        it leaves out start at earliest, as new partitions do)."""
        if spec.keyword:
            return self.broker.offsets(tps, spec.keyword)
        if spec.timestamp is not None or spec.timestamps:
            stamps = {tp: spec.timestamps.get(tp, spec.timestamp if spec.timestamp is not None
                                              else 0) for tp in tps}
            return self.broker.offsets(tps, stamps)
        earliest = self.broker.offsets(tps, "earliest")
        wanted = {tp: spec.offsets.get(tp, EARLIEST) for tp in tps}
        wanted.update({tp: off for tp, off in spec.offsets.items() if tp not in wanted})
        latest = self.broker.offsets([tp for tp, off in wanted.items() if off == LATEST],
                                     "latest")
        return {tp: earliest.get(tp, 0) if off == EARLIEST else latest[tp] if off == LATEST
                else off for tp, off in wanted.items()}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            return  # Spark plans one empty InputPartition(None) when a batch read has no data
        yield from read_range(self.o.config, partition, self.o.include_headers,
                              self.o.fail_on_data_loss, self.o.poll_timeout_ms,
                              self.o.group_prefix)


class KafkaStreamReader(_KafkaReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"topic": {"partition": next offset}}``; one task per partition range."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._initial: dict | None = None
        self._target: dict[TP, int] | None = None

    def initialOffset(self) -> dict:
        # Decided once per reader: "latest" means the end when the query first started.
        if self._initial is None:
            tps = self.broker.partitions(self.o.subscription)
            self._initial = to_json(self.resolve(self.o.starting, tps))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.o.max_offsets is not None:
            return ReadMaxRows(self.o.max_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.broker.partitions(self.o.subscription)
        self._target = self.broker.offsets(tps, "latest")

    def _begin(self, start: dict[TP, int]) -> tuple[dict[TP, int], dict[TP, int]]:
        """(where each partition really starts, its latest offset)."""
        tps = self.broker.partitions(self.o.subscription)
        earliest = self.broker.offsets(tps, "earliest")
        latest = self.broker.offsets(tps, "latest")
        begin = reconcile(start, tps, earliest, latest, self.o.fail_on_data_loss)
        return begin, latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin, latest = self._begin(to_map(start))
        if self._target is not None:  # availableNow: nothing that arrived after the start
            latest = {tp: min(off, self._target.get(tp, begin[tp])) for tp, off in
                      latest.items()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return to_json(rate_limit(begin, latest, max_rows))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        start_map, end_map = to_map(start), to_map(end)
        moved = [tp for tp, off in end_map.items()
                 if tp not in start_map or off < start_map[tp]]
        earliest = self.broker.offsets(moved, "earliest") if moved else {}
        begin = {tp: earliest.get(tp, start_map.get(tp, 0)) for tp in end_map}
        return split_ranges(begin, end_map, self.o.min_partitions)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in the checkpoint, never in a consumer group."""


class KafkaBatchReader(_KafkaReading, DataSourceReader):
    """startingOffsets (default earliest) .. endingOffsets (default latest), resolved once."""

    def partitions(self) -> Sequence[InputPartition]:
        tps = self.broker.partitions(self.o.subscription)
        begin = self.resolve(self.o.starting, tps)
        end = self.resolve(self.o.ending, list(begin))
        begin = {tp: min(off, end[tp]) for tp, off in begin.items()}
        return split_ranges(begin, end, self.o.min_partitions)
