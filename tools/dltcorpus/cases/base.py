"""What a corpus case is: one pipeline of the repository (its notebooks, in the order its
settings list them), the configuration a user puts in the pipeline settings, the input data it
reads (written by the runner, seeded, in two rounds: a first run, then more data for an
incremental second run) and the tables it must hold after each round, computed in plain
Python from the generated records (never through Spark or headwater)."""

from __future__ import annotations

import json
import random
import struct
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

Row = dict[str, Any]


@dataclass
class Env:
    """Where a case runs.

    data: the local folder standing for DBFS, /databricks-datasets, volumes and buckets
        (``/databricks-datasets/x`` in a notebook becomes ``<data>/databricks-datasets/x``).
    storage: the pipeline's storage (headwater's lakehouse root).
    kafka: bootstrap servers of the test broker, None when there is none.
    broker: the broker object (tests/kafka_broker.Broker) to create topics and produce with.
    """

    data: Path
    storage: Path
    kafka: str | None = None
    broker: Any = None


@dataclass
class TableCheck:
    """The rows a table must hold (compared as a multiset on ``columns``).

    columns: the columns compared; default the keys of the first expected row (the table may
        have more columns).
    limit: (n, column) for ``ORDER BY column DESC LIMIT n``: ``rows`` are all candidates and
        rows tied with the n-th on ``column`` are interchangeable.
    json_columns: columns holding JSON text, compared as parsed values.
    """

    table: str
    rows: list[Row]
    columns: tuple[str, ...] | None = None
    limit: tuple[int, str] | None = None
    json_columns: tuple[str, ...] = ()


@dataclass
class Case:
    """One pipeline of the corpus. Subclasses write the data and compute the answers."""

    name: str                        # short id: "wikipedia-python"
    notebooks: tuple[str, ...]       # repository paths, the pipeline's libraries
    database: str | None = None      # the pipeline's target schema
    needs_kafka: bool = False
    rounds: int = 2                  # a first run, then incremental ones with more data
    notes: tuple[str, ...] = ()      # what a reader of the results should know
    seed: int = 25
    extra_configuration: dict[str, str] = field(default_factory=dict)  # --conf
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.name}:{self.seed}")

    def configuration(self, env: Env) -> dict[str, str]:
        """The pipeline settings' configuration (strings)."""
        return {}

    def settings(self, env: Env) -> dict[str, str]:
        """The configuration plus what the command line added."""
        return {**self.configuration(env), **self.extra_configuration}

    def write(self, env: Env, round_: int) -> None:
        """Write the input data of round 1 (first run), or what round n adds before run n."""
        raise NotImplementedError

    def expected(self, env: Env, round_: int) -> list[TableCheck]:
        """The tables after the run that follows round ``round_``."""
        raise NotImplementedError

    def table(self, name: str) -> str:
        return f"{self.database}.{name}" if self.database else name


# --- small helpers the cases share -----------------------------------------------------------


def f32(value: float | None) -> float | None:
    """``CAST(x AS FLOAT)``: the nearest float32."""
    if value is None:
        return None
    return float(struct.unpack("f", struct.pack("f", value))[0])


def spark_round(value: float | None, scale: int) -> float | None:
    """Spark's ``round(double, scale)``: HALF_UP on the shortest decimal form of the double."""
    if value is None:
        return None
    return float(Decimal(repr(value)).quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP))


def write_json_lines(path: Path, records: list[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def sample_stddev(values: list[float]) -> float | None:
    """``stddev`` (sample) as Spark computes it; None for fewer than 2 values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
