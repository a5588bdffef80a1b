"""Files written by Spark's parquet writer for a Delta commit: staged, listed, moved, cleaned.

Spark's parquet writer writes a write's rows into a fresh folder under the table
(:func:`stage_files`); their add actions are read from the parquet footers (stats included,
:func:`staged_adds`), the files are moved beside the table's others (the table root, or its
``col=value`` partition folders, where delta-spark keeps them) and the folder removed. A write
that fails before its commit deletes them (:func:`delete_staged`, :func:`unreferenced`); a
driver killed before the commit leaves files no version references (VACUUM removes them).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake.exceptions import TableNotFoundError
from pyspark.sql.types import StructType

from headwater.conf.layout import TIMESTAMP_TYPE_CONF
from headwater.delta.files import file_stats
from headwater.delta.log import add_actions, filesystem_for, open_table
from headwater.delta.schema import arrow_schema
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# writes rows as parquet into a new folder: (folder, partition columns, writer options) ->
# the files written (filesystem paths); only those are committed
Stager = Callable[[str, list[str], dict[str, str]], list[str]]


def unreferenced(uri: str, adds: list[dict]) -> list[dict]:
    """The ``adds`` the table at ``uri`` does not reference: safe to delete after a failed
    commit (one whose answer was lost may have landed). None when the table cannot be read:
    leftover files are harmless (VACUUM removes them), deleted referenced ones are not."""
    try:
        table = open_table(uri)
    except TableNotFoundError:
        return adds
    except Exception:  # noqa: BLE001 - see the docstring
        return []
    referenced = set(add_actions(table, flatten=True).column("path").to_pylist())
    return [a for a in adds if a["path"] not in referenced
            and unquote(a["path"]) not in referenced]


def _stage(df: DataFrame, uri: str, partition_columns: list[str],
           options: dict[str, str] | None = None,
           stage: Stager | None = None) -> tuple[str, list[dict]]:
    """Write ``df`` with Spark's parquet writer into a fresh folder under the table; return the
    folder and the add actions of its files. A failed write leaves no folder behind.
    options (lower-cased): ``compression`` (default snappy) and ``maxrecordsperfile`` reach
    Spark's writer. stage: writes the rows instead of ``df.write`` (same options)."""
    options = options or {}
    staging = f"hw-{int(time.time())}-{uuid.uuid4().hex[:12]}"
    if stage is not None:
        settings = {"compression": str(options.get("compression", "snappy")).lower(),
                    TIMESTAMP_TYPE_CONF: "TIMESTAMP_MICROS"}
        if options.get("maxrecordsperfile") is not None:
            settings["maxRecordsPerFile"] = str(options["maxrecordsperfile"])
        try:
            written = stage(f"{uri}/{staging}", partition_columns, settings)
            return staging, staged_adds(uri, staging, df, partition_columns, set(written))
        except BaseException:
            remove_dir(uri, staging)
            raise
    writer = (df.write.mode("errorifexists").partitionBy(*partition_columns)
              .option("compression", str(options.get("compression", "snappy")).lower())
              # INT64 microseconds (with min/max stats), not Spark's INT96 default; a write
              # option (Spark reads it over the session's), so the session's conf stays
              .option(TIMESTAMP_TYPE_CONF, "TIMESTAMP_MICROS"))
    if options.get("maxrecordsperfile") is not None:
        writer = writer.option("maxRecordsPerFile", str(options["maxrecordsperfile"]))
    if _one_attempt_per_task(df.sparkSession):
        # Hadoop's committer v1 renames every file twice (task, then job commit) and writes a
        # _SUCCESS marker: ~5% of a 3 M-row write here. v2 moves each file once, at task
        # commit. Its known risk is a task attempt that fails mid-commit and is retried,
        # leaving files of both attempts. Here a failed task fails the job (the staging
        # folder is then deleted, never committed); only attempts Spark retries without
        # counting a failure (a killed attempt, a stage retried after a fetch failure) get
        # another try, and they write the same part-file names, which v2 overwrites.
        writer = (writer.option("mapreduce.fileoutputcommitter.algorithm.version", "2")
                  .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"))
    try:
        writer.parquet(f"{uri}/{staging}")
        return staging, staged_adds(uri, staging, df, partition_columns)
    except BaseException:
        remove_dir(uri, staging)
        raise


_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)\])?")  # local[N, F] retries failed tasks


def _one_attempt_per_task(spark: SparkSession) -> bool:
    """True when a task runs once: Spark's local master without retries (``local``,
    ``local[N]``, ``local[*]``); a failed task then fails the job. (Spark never speculates
    in local mode: TaskSchedulerImpl starts speculation only when not local.)"""
    return _LOCAL_MASTER.fullmatch(spark.sparkContext.master or "") is not None


def stage_files(df: DataFrame, uri: str, partition_columns: list[str],
                 options: dict[str, str], stage: Stager | None = None) -> list[dict]:
    """:func:`_stage`, then the files moved beside the table's others (``part-*.parquet`` at
    the root, or under their ``col=value`` folders) and the staging folder removed; returns
    their add actions. Spark names each file with its job's UUID: no clash with other files.
    A failure deletes whatever was staged or moved."""
    staging, adds = _stage(df, uri, partition_columns, options, stage)
    fs, root = filesystem_for(uri)
    moved: list[dict] = []
    made: set[str] = set()
    try:
        for add in adds:
            relative = add["path"][len(staging) + 1:]
            parent = relative.rpartition("/")[0]
            if parent and parent not in made:
                fs.create_dir(f"{root}/{parent}", recursive=True)
                made.add(parent)
            fs.move(f"{root}/{add['path']}", f"{root}/{relative}")
            moved.append({**add, "path": relative})
    except BaseException:
        delete_staged(uri, moved)
        remove_dir(uri, staging)
        raise
    remove_dir(uri, staging)
    return moved


def delete_staged(uri: str, adds: list[dict]) -> None:
    """Delete files of ``adds`` (paths as on disk, relative to the table: not URL-encoded)."""
    fs, root = filesystem_for(uri)
    for add in adds:
        try:
            fs.delete_file(f"{root}/{add['path']}")
        except OSError:
            pass


def staged_adds(uri: str, staging: str, df: DataFrame, partition_columns: list[str],
          written: set[str] | None = None) -> list[dict]:
    """The add actions of the parquet files under ``staging`` (all, or those in
    ``written``: filesystem paths; the others are deleted with the folder)."""
    fs, root = filesystem_for(uri)
    data_fields = [f for f in df.schema.fields if f.name not in partition_columns]
    schema = arrow_schema(StructType(data_fields))
    spelled = {c.lower(): c for c in partition_columns}  # the table's spelling of each column
    adds = []
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/{staging}", recursive=True))
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if info.type != pafs.FileType.File or not name.endswith(".parquet") \
                or name.startswith((".", "_")):
            continue
        if written is not None and info.path not in written:
            continue
        with fs.open_input_file(info.path) as handle:
            meta = pq.read_metadata(handle)
        relative = info.path[len(root) + 1:]
        if meta.num_rows == 0:
            fs.delete_file(info.path)
            continue
        values: dict[str, str | None] = {}
        for part in info.path[len(root) + len(staging) + 2:].split("/")[:-1]:
            key, _, raw = part.partition("=")
            value = unquote(raw)
            values[spelled.get(unquote(key).lower(), unquote(key))] = \
                None if value == HIVE_NULL else value
        adds.append({
            "path": relative, "size": info.size, "partitionValues": values,
            "modificationTime": int(info.mtime_ns // 1_000_000) if info.mtime_ns else
            int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps(file_stats(meta, schema), separators=(",", ":")),
        })
    listed = {info.path for info in infos}
    if written is not None and not written <= listed:  # never commit less than was written
        raise HeadwaterError(
            "HW_DELTA_FILE_NOT_FOUND",
            f"Spark's parquet sink listed files that are not in the staging folder {staging} "
            f"of {uri}: {sorted(written - listed)[:3]}.",
            "Committing the files found would drop the rows of the others.",
            "Retry the stream; if it happens again, report it with the table's path layout.")
    return adds


def remove_dir(uri: str, staging: str) -> None:
    fs, root = filesystem_for(uri)
    try:
        fs.delete_dir(f"{root}/{staging}")
    except OSError:
        pass
