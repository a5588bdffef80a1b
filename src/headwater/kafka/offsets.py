"""Offsets as Spark's Kafka source writes them, and the planning of micro-batches.

An offset is ``{"topic": {"0": 23, "1": 7}}``: for each partition, the next offset to read
(the same JSON as Spark's KafkaSourceOffset, so offset logs read the same). Plain functions
over dicts, so the rules (data loss, rate limit, splitting) are tested without a broker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from headwater.errors import HeadwaterError

TP = tuple[str, int]


def to_map(offsets: dict | None) -> dict[TP, int]:
    return {(topic, int(part)): int(off)
            for topic, parts in (offsets or {}).items() for part, off in parts.items()}


def to_json(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        result.setdefault(topic, {})[str(part)] = int(off)
    return result


def data_loss(problems: list[str]) -> HeadwaterError:
    return HeadwaterError(
        "HW_KAFKA_DATA_LOSS",
        "Some Kafka records this query has not read yet are gone: " + "; ".join(problems) + ".",
        "Retention deleted them, the topic was deleted or recreated, or the partition was "
        "truncated while the query was stopped or behind.",
        "To skip what is gone and continue, restart with .option('failOnDataLoss', 'false'); "
        "to avoid it, keep retention longer than the query can lag.")


def reconcile(start: dict[TP, int], current: list[TP], earliest: dict[TP, int],
              latest: dict[TP, int], fail_on_data_loss: bool) -> dict[TP, int]:
    """Where each current partition really starts: new partitions at their earliest offset;
    lost ranges (gone, truncated, offsets reset) fail or are skipped per failOnDataLoss."""
    problems, begin = [], {}
    for tp in sorted(set(start) - set(current)):
        problems.append(f"{tp[0]}-{tp[1]} no longer exists (was at offset {start[tp]})")
    for tp in current:
        if tp not in start:
            begin[tp] = earliest[tp]  # a new partition: from its first record, as Spark
        elif latest[tp] < start[tp]:
            problems.append(f"{tp[0]}-{tp[1]} offsets went back from {start[tp]} to "
                            f"{latest[tp]} (topic recreated?)")
            begin[tp] = earliest[tp]  # read the new log from its start: nothing new is lost
        elif earliest[tp] > start[tp]:
            problems.append(f"{tp[0]}-{tp[1]} offsets {start[tp]}..{earliest[tp] - 1} "
                            f"were deleted")
            begin[tp] = earliest[tp]
        else:
            begin[tp] = start[tp]
    if problems and fail_on_data_loss:
        raise data_loss(problems)
    return begin


def rate_limit(begin: dict[TP, int], latest: dict[TP, int], max_rows: int | None
               ) -> dict[TP, int]:
    """End offsets reading at most ``max_rows`` records, spread by partition size as Spark."""
    sizes = {tp: max(0, latest[tp] - begin[tp]) for tp in begin}
    total = sum(sizes.values())
    if max_rows is None or total <= max_rows:
        return {tp: max(begin[tp], latest[tp]) for tp in begin}
    ends = {}
    for tp, size in sizes.items():
        share = max_rows * size / total
        take = math.ceil(share) if share < 1 else math.floor(share)
        ends[tp] = begin[tp] + min(size, take)
    return ends


@dataclass
class OffsetRange(InputPartition):
    """Records [start, end) of one partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


def split_ranges(begin: dict[TP, int], end: dict[TP, int], min_partitions: int | None
                 ) -> list[OffsetRange]:
    """One range per partition with data; large ones cut so there are >= min_partitions."""
    ranges = [OffsetRange(t, p, begin[(t, p)], end[(t, p)])
              for t, p in sorted(end) if (t, p) in begin and end[(t, p)] > begin[(t, p)]]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.end - r.start for r in ranges)
    result = []
    for r in ranges:
        pieces = max(1, round(min_partitions * (r.end - r.start) / total))
        step = math.ceil((r.end - r.start) / pieces)
        result.extend(OffsetRange(r.topic, r.partition, s, min(r.end, s + step))
                      for s in range(r.start, r.end, step))
    return result
