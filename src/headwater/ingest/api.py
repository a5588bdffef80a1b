"""``headwater.read_files``: a streaming DataFrame of the files landing in a folder."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from headwater.conf import storage
from headwater.conf.layout import RESCUED_DATA, ingest_metrics
from headwater.errors import HeadwaterError, translated
from headwater.ingest.registration import register_sources
from headwater.ingest.schema_hints import parse_ddl
from headwater.ingest.schema_location import default_location, folder
from headwater.ingest.source import source_id

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def read_files(
    path: str | os.PathLike[str],
    format: str = "json",
    *,
    schema: StructType | str | None = None,
    schema_location: str | os.PathLike[str] | None = None,
    schema_hints: str | None = None,
    schema_evolution_mode: str | None = None,
    rescued_data_column: str | None = RESCUED_DATA,
    multi_line: bool = False,
    header: bool = True,
    sep: str = ",",
    max_files_per_trigger: int | None = 1000,
    max_bytes_per_trigger: int | str | None = None,
    include_existing_files: bool = True,
    path_glob_filter: str | None = None,
    clean_source: str = "off",
    archive_dir: str | os.PathLike[str] | None = None,
    ignore_missing_files: bool = False,
    storage_options: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
) -> DataFrame:
    """Stream the files that land in ``path`` (and its subfolders), each file once.

    format: "json" (one object per line; ``multi_line=True`` for one document per file,
        an object or an array of objects, where files of JSON lines are still read as lines),
        "csv" (``header``, ``sep``) or "parquet".
    schema: a StructType or DDL string. Default None: inferred from the first files (up to
        1000) and kept as version 0 in ``schema_location``; a restart never infers again.
    schema_location: where schema versions and the list of ingested files live. Default:
        inside the pipeline's storage in a pipeline, ``<lakehouse>/_ingest/<id>`` with a
        lakehouse attached; otherwise it is required.
    schema_hints: DDL fixing chosen columns' types, e.g. ``"amount decimal(10,2), ts timestamp"``.
    schema_evolution_mode: "addNewColumns" (default without ``schema``: new columns are saved
        as a new schema version and the stream stops to restart with them; ``headwater run``
        restarts by itself), "rescue" (the schema never changes; unknown fields go to the
        rescued column), "failOnNewColumns" (stop with the new columns listed), or "none"
        (default with ``schema``; unknown fields are rescued, never added).
    rescued_data_column: default "_rescued_data". Every field that did not fit (wrong type,
        unknown or case-mismatched name) is kept there as JSON with ``_file_path``; a malformed
        record (broken JSON, wrong CSV field count, bad UTF-8) becomes a row whose rescued data
        holds ``_corrupt_record``, ``_error``, ``_file_path`` and ``_line``. None turns it off:
        a record that does not fit then stops the stream.
    max_files_per_trigger: files per micro-batch, default 1000 (None: no limit).
    max_bytes_per_trigger: a soft byte limit per micro-batch ("256m" works), default None.
    include_existing_files: default True; False starts with files landing from now on.
    path_glob_filter: only file names matching this glob, e.g. "*.json". Files and folders
        starting with "." or "_" are always skipped.
    clean_source: "off" (default), "archive" (move to ``archive_dir``, keeping relative
        paths) or "delete", once the batch that read the file is committed.
    ignore_missing_files: default False: a file that vanished before it was read stops the
        stream; True skips it.
    storage_options: credentials for a landing folder (or archive_dir) on an object store
        (``s3://bucket/prefix``), with delta-rs' names (``AWS_ACCESS_KEY_ID``, ...). Default
        None: ``[storage]`` in headwater.toml / ``spark_session(storage_options=...)``, then
        the environment. On an object store each trigger lists the whole prefix, and
        ``clean_source="archive"`` is a copy then a delete (not atomic; a crash in between
        leaves the file in both places, and the next clean finishes it without ingesting it
        again). ``schema_location`` stays a local path or mount.
    """
    spark = spark or SparkSession.active()
    register_sources(spark)
    source = folder(path)
    location = schema_location or default_location(source, format, path_glob_filter, spark)
    options: dict[str, Any] = {
        "format": format, "rescuedDataColumn": rescued_data_column or "none",
        "multiLine": multi_line, "header": header, "sep": sep,
        "includeExistingFiles": include_existing_files, "cleanSource": clean_source,
        "ignoreMissingFiles": ignore_missing_files,
    }
    if location is not None:
        options["schemaLocation"] = folder(location)  # an s3:// one is refused by the source
    if schema is not None:
        options["schema"] = _schema_json(schema)
    if schema_hints:
        options["schemaHints"] = schema_hints
    if schema_evolution_mode:
        options["schemaEvolutionMode"] = schema_evolution_mode
    options["maxFilesPerTrigger"] = "none" if max_files_per_trigger is None \
        else max_files_per_trigger
    if max_bytes_per_trigger is not None:
        options["maxBytesPerTrigger"] = max_bytes_per_trigger
    if path_glob_filter:
        options["pathGlobFilter"] = path_glob_filter
    if archive_dir is not None:
        options["sourceArchiveDir"] = folder(archive_dir)
    credentials = storage.normalize(storage_options or {})
    for uri in (source, options.get("sourceArchiveDir")):
        storage.register(uri or "", credentials)  # headwater run's cleaning too
    options.update(credentials)
    reader = spark.readStream.format("cloudFiles")
    for key, value in options.items():
        reader = reader.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    with translated():
        df = reader.load(source)
    if not rescued_data_column:
        return df
    rescued = F.col(f"`{rescued_data_column}`")
    return df.observe(
        ingest_metrics(source_id(source, format, path_glob_filter)),
        F.count(F.lit(1)).alias("rows"),
        F.count(rescued).alias("rescued_rows"),
        F.count(F.when(rescued.startswith('{"_corrupt_record"'), 1)).alias("malformed_rows"))


def _schema_json(schema: Any) -> str:
    if isinstance(schema, StructType):
        return schema.json()
    if isinstance(schema, str):
        return parse_ddl(schema, "schema").json()
    raise HeadwaterError("HW_OPTION_INVALID",
                         f"schema must be a StructType or a DDL string, not {type(schema).__name__}.",
                         "read_files needs the columns and their types.",
                         "Pass e.g. schema=\"id bigint, name string\".")
