"""Auto Loader's schema location, picked when a read does not name one.

A file stream keeps its schema versions and the list of files it ingested in a folder (Auto
Loader's ``cloudFiles.schemaLocation``). Databricks' pipelines choose it for every Auto Loader
read in a pipeline, so pipeline code never names one. headwater does the same for
``headwater.read_files`` and for ``spark.readStream.format("cloudFiles")`` alike: inside a
pipeline, in the storage of the dataset being defined (``<its checkpoint>/_ingest/<id>``,
whichever kind it is: table, view, append flow, sink flow); outside one, under the attached
lakehouse (``<lakehouse>/_ingest/<id>``). The id names the folder, the format and the glob filter,
so two reads of different folders never share a file list. With neither, the read keeps its
error asking for the option.

For ``format("cloudFiles")`` the stream reader's ``format``, ``option``, ``options``,
``schema`` and ``load`` are wrapped (class-level, the ``ingest`` rows of
:mod:`headwater.spark.patches`; a reader of any other format is untouched) to remember what
was set, because Spark keeps it on the JVM side only. The wrapped ``load`` is
also where the session's Auto Loader settings become options (``session_options.py``) and
where the stream's ``_metadata`` column is hidden (``file_metadata.py``).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import StructType, _parse_datatype_string

from headwater.conf.context import (
    current_definition,
    lakehouse_state_dir,
    record_path_read,
    stream_read_options,
)
from headwater.conf.layout import INGEST
from headwater.errors import translated
from headwater.ingest import landing
from headwater.ingest.file_metadata import METADATA_COLUMN, METADATA_FIELD, hide_metadata
from headwater.ingest.session_options import from_session
from headwater.ingest.source import source_id
from headwater.spark import patches

SOURCE = "cloudfiles"
_FORMAT = "\0format"  # the reader's format() among its options (no option has this name)
_LOCATION_KEYS = ("cloudfiles.schemalocation", "schemalocation")

_settings: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
# the schema a reader was given (.schema(...))
_schemas: weakref.WeakKeyDictionary[Any, StructType | str] = weakref.WeakKeyDictionary()


def folder(path: str | os.PathLike[str]) -> str:
    """A landing folder's URI as given (``s3://...``), or a local folder resolved."""
    if landing.is_remote(str(path)):
        return landing.normalize(str(path))
    return str(Path(path).expanduser().resolve())


def default_location(source: str, fmt: str, glob: str | None,
                     spark: SparkSession) -> str | None:
    """Where the file stream over ``source`` keeps its state when no location is given:
    inside the storage of the pipeline dataset being defined, else under the lakehouse
    attached to ``spark``; None when neither."""
    sid = source_id(source, fmt, glob)
    definition = current_definition()
    if definition is not None:
        return str(Path(definition.ingest_root) / sid)
    root = lakehouse_state_dir(spark)
    if root is not None:
        return str(Path(root) / INGEST / sid)
    return None


def install() -> None:
    """Wrap DataStreamReader's format/option/options/load/schema (idempotent)."""
    patches.install(patches.INGEST)


def _remember(reader: Any, **values: Any) -> None:
    settings = _settings.setdefault(reader, {})
    for key, value in values.items():
        settings[key.lower()] = str(value)


def _format(original: Callable[..., Any]) -> Callable[..., Any]:
    def format(self: Any, source: str) -> Any:  # noqa: A001 (Spark's name)
        _remember(self, **{_FORMAT: source})
        return original(self, source)

    format.__doc__ = original.__doc__
    return format


def _option(original: Callable[..., Any]) -> Callable[..., Any]:
    def option(self: Any, key: str, value: Any) -> Any:
        _remember(self, **{str(key): value})
        return original(self, key, value)

    option.__doc__ = original.__doc__
    return option


def _options(original: Callable[..., Any]) -> Callable[..., Any]:
    def options(self: Any, **values: Any) -> Any:
        _remember(self, **values)
        return original(self, **values)

    options.__doc__ = original.__doc__
    return options


def _schema(original: Callable[..., Any]) -> Callable[..., Any]:
    def schema(self: Any, schema: StructType | str) -> Any:
        _schemas[self] = schema
        return original(self, schema)

    schema.__doc__ = original.__doc__
    return schema


def _with_metadata(reader: Any, schema: StructType | str) -> None:
    """A file stream given a schema: the source's ``_metadata`` column added to it (Spark
    never asks the source its schema then, so the column would be missing)."""
    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    if isinstance(struct, StructType) and METADATA_COLUMN not in struct.fieldNames():
        spark_schema = patches.original(DataStreamReader, "schema")
        spark_schema(reader, StructType(list(struct.fields)).add(METADATA_FIELD))


def _load(original: Callable[..., Any]) -> Callable[..., Any]:
    def load(self: Any, path: str | None = None, format: str | None = None,  # noqa: A002
             schema: Any = None, **options: Any) -> Any:
        if format is not None:
            _remember(self, **{_FORMAT: format})
        _remember(self, **options)
        settings = _settings.get(self, {})
        path_given = path if path is not None else settings.get("path")
        if path_given and settings.get(_FORMAT, "").lower() == "delta":
            record_path_read(path_given)
        files = settings.get(_FORMAT, "").lower() == SOURCE
        if files and path_given and not any(k in settings for k in _LOCATION_KEYS):
            source = folder(path_given)
            fmt = settings.get("cloudfiles.format", settings.get("format", "json"))
            glob = settings.get("pathglobfilter", settings.get("cloudfiles.pathglobfilter"))
            location = default_location(source, fmt, glob, self._spark)
            if location is not None:
                self.option("cloudFiles.schemaLocation", location)
        if files:
            for key, value in from_session(self._spark, set(settings)).items():
                self.option(key, value)
            if path_given and not landing.is_remote(str(path_given)):
                # a continuous run's wait for new files (run/hops.py); an object store's
                # stream keeps polling on its trigger: a listing per look costs a request
                for key, value in stream_read_options().items():
                    self.option(key, value)
            given = schema if schema is not None else _schemas.get(self)
            if given is not None:
                _with_metadata(self, given)
                schema = None
        if not files:
            return original(self, path, format, schema, **options)
        # an error the source raised in Spark's Python worker (HW_INGEST_NO_FILES, say)
        # reaches the user as headwater's error first, Spark's traceback as its cause
        with translated():
            df = original(self, path, format, schema, **options)
        return hide_metadata(df)

    load.__doc__ = original.__doc__
    return load
