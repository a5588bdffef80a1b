"""The streaming Delta sink through Spark's Python Data Source API, exactly once.

Executors write parquet files and return add actions; the driver commits them in one
transaction that carries a ``txn`` action (appId, version): the one commit of every write
(:func:`headwater.delta.write.commit.commit_files`). delta-rs does not skip a repeated
(appId, version) by itself, so the commit checks the table's transaction version first: a
batch that is already committed is skipped and the files of the repeated attempt deleted.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from headwater.conf.layout import FAULT_ENV  # a test hook: crash tests kill the driver here
from headwater.delta.constraints import Constraints, refuse_checks_on_python_writer
from headwater.delta.files import collect_adds, write_task
from headwater.delta.log import DeltaLog, filesystem_for, normalize_uri
from headwater.delta.schema import spark_schema
from headwater.delta.write.checks import (
    check_partitioning,
    check_schema,
    prepared_batches,
    refuse_driver_only,
    table_spelling,
)
from headwater.delta.write.commit import commit_files, delete_files, delete_unreferenced
from headwater.delta.write.request import StreamUpdate, WriteRequest
from headwater.errors import HeadwaterError


def inject_fault(point: str) -> None:
    """Crash tests: SIGKILL the driver (its JVM and the Python process that started it).

    Commits run in a Python worker forked by the driver JVM, so the driver is found among
    this process's ancestors: the JVM runs SparkSubmit, its parent is the Python driver.
    """
    if os.environ.get(FAULT_ENV) != point:
        return
    pid = os.getpid()
    while pid > 1:
        parent = _parent_pid(pid)
        if "SparkSubmit" in _cmdline(pid):
            for victim in (parent, pid):
                if victim > 1:
                    os.kill(victim, signal.SIGKILL)
            break
        pid = parent
    os.kill(os.getpid(), signal.SIGKILL)


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().decode("utf-8", "replace")


# --- the streaming sink ----------------------------------------------------------------


def checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The query id Spark keeps in ``<checkpoint>/metadata``: stable across restarts."""
    if not checkpoint:
        return None
    try:
        fs, root = filesystem_for(normalize_uri(checkpoint))
        with fs.open_input_stream(f"{root}/metadata") as stream:
            first = stream.read().decode("utf-8").splitlines()[0]
        return json.loads(first)["id"]
    except (OSError, IndexError, KeyError, ValueError):
        return None


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """append: one transaction per micro-batch; complete: one overwrite per micro-batch."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.request = WriteRequest.for_stream(options, complete=overwrite)
        self.schema = schema
        self.complete = overwrite
        self.checkpoint = options.get("checkpointlocation")
        self.fallback_query_id = str(uuid.uuid4())
        self.fallback_app_id = f"headwater-{self.fallback_query_id}"
        self.constraints = Constraints()
        self.names: list[str] | None = None
        # Resolved once on the driver and pickled to the tasks: no log replay per task.
        self.partition_columns = self._check_existing_table()

    def _check_existing_table(self) -> list[str]:
        path = self.request.path
        log = DeltaLog(path)
        if not log.exists():
            return list(self.request.partition_by)
        table = log.table()
        refuse_driver_only(path, table)
        refuse_checks_on_python_writer(table, path, "the Python stream sink")
        self.constraints = Constraints.of_table(table)
        existing = list(table.metadata().partition_columns)
        check_partitioning(path, existing, list(self.request.partition_by))
        table_schema = spark_schema(table.schema().to_json())
        check_schema(path, table_schema, self.schema, self.request.merge_schema)
        self.names = table_spelling(table_schema, self.schema.fieldNames())
        return existing

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(self.request.path, self.partition_columns, self.request.file_bytes,
                          self.request.codec,
                          prepared_batches(iterator, self.request.path, self.names, self.constraints))

    def app_id(self) -> str:
        query_id = checkpoint_query_id(self.checkpoint)
        return f"headwater-stream-{query_id}" if query_id else self.fallback_app_id

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        adds = collect_adds(messages)
        stream = StreamUpdate("Complete" if self.complete else "Append",
                              checkpoint_query_id(self.checkpoint) or self.fallback_query_id,
                              batchId)
        if self.constraints != self._current_constraints():
            delete_files(self.request.path, adds)
            raise HeadwaterError(
                "HW_CONSTRAINT_VIOLATED", f"The constraints of {self.request.path} changed "
                f"while this stream ran (micro-batch {batchId} was checked against the old "
                "ones); nothing of it was committed.", "Every committed row must satisfy "
                "the table's constraints as they are when it is committed.",
                "Restart the stream: it checks the new constraints from its next batch on.")
        inject_fault("sink_before_commit")
        commit_files(self.request.but(partition_by=tuple(self.partition_columns),
                                      txn=(self.app_id(), batchId), stream=stream),
                     adds, self.schema)
        inject_fault("sink_after_commit")

    def _current_constraints(self) -> Constraints:
        log = DeltaLog(self.request.path)
        return Constraints.of_table(log.table()) if log.exists() else Constraints()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        delete_unreferenced(self.request.path, collect_adds(messages))
