"""A flow resolved by the graph: its DataFrame, what it reads and the output mode it writes in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.pipeline.edges import Read
    from headwater.pipeline.model import Dataset, Flow, OutputMode


@dataclass
class ResolvedFlow:
    """A flow with its DataFrame, what it reads, and the output mode it writes in (the
    table's declared one, or the one its query needs: see :mod:`headwater.pipeline.output_mode`).
    """

    flow: Flow
    dataset: Dataset
    df: DataFrame
    reads: list[Read] = field(default_factory=list)
    output_mode: OutputMode = "append"

    @property
    def key(self) -> str:
        return self.dataset.name if self.flow.name == self.dataset.name else \
            f"{self.dataset.name}/{self.flow.name}"
