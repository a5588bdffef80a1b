"""The selective overwrite of a native write: :class:`Replacement`, resolved on the driver.

:func:`plan` says what an overwrite replaces (:mod:`headwater.delta.write.selective` has the
rules); :meth:`Replacement.checked` makes Spark check the written rows against a replaceWhere
while it writes them, and :meth:`Replacement.resolve` gives the commit its partition filters
or remove actions, rewriting the other rows of files a data-column predicate touches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from headwater.delta import physical_names
from headwater.delta.dml.rewrite import Written, data_only, remove_action, write_files
from headwater.delta.dml.skipping import file_test
from headwater.delta.dml.target import FILE_COL, load_snapshot, scan
from headwater.delta.schema import spark_schema
from headwater.delta.write.request import WriteRequest
from headwater.delta.write.selective import mismatch_error, partition_filters, partition_removes, satisfies
from headwater.errors import HeadwaterError
from headwater.errors.delta import ConcurrentWriteException

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType


def checked_rows(df: DataFrame, predicate: str, path: str) -> DataFrame:
    """``df`` with every row checked against ``predicate`` while Spark writes it: a row that
    does not satisfy it (false or NULL) fails the write with DELTA_REPLACE_WHERE_MISMATCH
    and its values (delta-spark's constraint check of replaceWhere)."""
    condition = F.coalesce(F.expr(predicate), F.lit(False))
    # resolved alone first: an unknown column is Spark's own analysis error, naming the
    # predicate only (the guard below would quote its message, headwater's code included,
    # and the error would read as a mismatch)
    df.select(condition)
    error = mismatch_error(path, predicate, "a row with ")
    what, _, rest = str(error).partition("a row with ")
    values = F.concat_ws(", ", *[F.concat(F.lit(f"{c} = "), F.coalesce(
        F.col(f"`{c}`").cast("string"), F.lit("NULL"))) for c in df.columns])
    message = F.concat(F.lit(what + "a row with "), values, F.lit(rest))
    first = df.columns[0]
    guarded: Column = F.when(condition, F.col(f"`{first}`")).otherwise(
        F.raise_error(message)).alias(first)
    return df.select(guarded, *[F.col(f"`{c}`") for c in df.columns[1:]])


@dataclass
class Replacement:
    """What one selective overwrite replaces, resolved against the table it read.

    kind: ``partitions`` (a replaceWhere of partition filters: deltalake removes them),
    ``rows`` (a replaceWhere on any columns: matching rows removed, copy-on-write) or
    ``dynamic`` (the partitions the new files fall in)."""

    request: WriteRequest
    table: Any
    kind: str
    filters: list[tuple[str, str, Any]] | None = None
    _cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def checks_rows(self) -> bool:
        """The written rows are checked against the predicate by Spark (:meth:`checked`)."""
        return self.kind == "rows"

    def checked(self, df: DataFrame) -> DataFrame:
        """``df`` with the replaceWhere check applied to its rows (data-column predicates;
        partition filters are checked on the files' partition values)."""
        if self.kind == "rows" and self.request.replace_where is not None:
            return checked_rows(df, self.request.replace_where, self.request.path)
        return df

    def resolve(self, adds: list[dict[str, Any]]
                ) -> tuple[list[tuple[str, str, Any]] | None, list[dict[str, Any]] | None,
                           list[dict[str, Any]]]:
        """(partition filters, remove actions, adds of rows kept) of the commit that writes
        ``adds``."""
        schema = _table_schema(self.table)
        schema_types = {f.name: f.dataType for f in schema.fields}
        # each new file's partition values by logical name (the adds key them by physical
        # name under column mapping)
        values = [physical_names.logical_keys(a["partitionValues"], schema)
                  if physical_names.is_mapped(self.table) else a["partitionValues"]
                  for a in adds]
        if self.kind == "partitions":
            assert self.filters is not None
            outside = [v for v in values if not satisfies(v, self.filters, schema_types)]
            if outside:
                raise mismatch_error(self.request.path, str(self.request.replace_where),
                                     f"e.g. partition {outside[0]}")
            return self.filters, None, []
        if self.kind == "dynamic":
            return None, partition_removes(self.table, [{"partitionValues": v} for v in values],
                                           schema_types), []
        removes, kept = self._rewrite()
        return None, removes, kept

    def _rewrite(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The removes of the files holding rows that match the predicate, and the adds of
        their other rows written again (one Spark job counts matches per file, one writes)."""
        request = self.request
        snapshot = load_snapshot(request.path, "replaceWhere")
        if snapshot.version != self.table.version():
            raise ConcurrentWriteException(
                f"replaceWhere into {request.path}: the table changed while the write ran "
                f"(version {self.table.version()} -> {snapshot.version}). Nothing was "
                "committed.", "The rows to replace are computed from one version.",
                "Run the write again.", code="HW_DELTA_COMMIT_CONFLICT")
        if snapshot.cdf_enabled:
            raise HeadwaterError(
                "HW_REPLACE_WHERE_UNSUPPORTED", f"replaceWhere {request.replace_where!r} on "
                f"data columns into {request.path}, which has the change data feed on.",
                "headwater does not write the change data of a row-level replaceWhere yet; "
                "a commit without it would report kept rows as deleted and inserted.",
                "Use a replaceWhere on partition columns, or DELETE then append.")
        spark = SparkSession.getActiveSession()
        assert spark is not None
        condition = F.expr(str(request.replace_where))
        test = file_test(snapshot, condition)
        candidates = [f for f in snapshot.files if test is None or test(f)]
        if any(f.has_dv for f in candidates):
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE", f"replaceWhere into {request.path}: files it "
                "would rewrite have deletion vectors.", "headwater rewrites whole files and "
                "does not carry deletion vectors over yet.", "Purge them first (REORG TABLE "
                "... APPLY (PURGE)), or DELETE the rows then append.")
        if not candidates:
            return [], []
        by_key = {f.spark_key: f for f in candidates}
        counts = scan(spark, snapshot, candidates).where(condition) \
            .groupBy(FILE_COL).count().collect()
        touched = [by_key[row[0]] for row in counts]
        if not touched:
            return [], []
        written = Written(snapshot.uri)
        self._cleanups.append(written.cleanup)
        hit = F.coalesce(condition, F.lit(False))
        write_files(data_only(scan(spark, snapshot, touched).where(~hit), snapshot),
                    snapshot, written)
        now = int(time.time() * 1000)
        return [remove_action(f, now) for f in touched], list(written.adds)

    @property
    def read_version(self) -> int:
        """The version the replaced files were chosen from: the commit checks every commit
        after it for conflicts."""
        return int(self.table.version())

    def cleanup(self) -> None:
        for clean in self._cleanups:
            clean()


def _table_schema(table: Any) -> StructType:
    return spark_schema(table.schema().to_json())


def plan(df: DataFrame, request: WriteRequest, table: Any) -> Replacement | None:
    """The :class:`Replacement` of an overwrite of ``table`` (None: not selective, the whole
    table is replaced). ``request.partition_by`` holds the table's partition columns."""
    if not request.overwrite:
        return None
    partitions = list(request.partition_by)
    if request.replace_where is not None:
        types = {f.name: f.dataType for f in _table_schema(table).fields}
        filters = partition_filters(request.replace_where, partitions, types) \
            if partitions else None
        if filters is not None:
            return Replacement(request, table, "partitions", filters)
        return Replacement(request, table, "rows")
    if request.dynamic_partitions and partitions:
        return Replacement(request, table, "dynamic")
    return None
