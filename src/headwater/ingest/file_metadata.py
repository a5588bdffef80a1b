"""The ``_metadata`` column of a file stream: which file each row came from.

Spark's file sources and Databricks' Auto Loader expose a hidden ``_metadata`` struct
(https://docs.databricks.com/en/ingestion/file-metadata-column.html): ``file_path``,
``file_name``, ``file_size``, ``file_block_start``, ``file_block_length`` and
``file_modification_time``, with Spark's names, types and nullability. headwater's file
source reads each file whole, so a row's block is its whole file (start 0, length its size).
The column is hidden from ``SELECT *`` by :mod:`headwater.spark.hidden_columns`.

Paths are written as Spark writes them: a URI with reserved characters percent-encoded
(``file:/data/in/a%20b.json``), and the file name is that URI's last part.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from urllib.parse import quote

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from headwater.delta.schema import arrow_schema
from headwater.ingest import landing
from headwater.ingest.formats.common import FileEntry
from headwater.spark.hidden_columns import hide

METADATA_COLUMN = "_metadata"

METADATA_TYPE = StructType([
    StructField("file_path", StringType(), False),
    StructField("file_name", StringType(), False),
    StructField("file_size", LongType(), False),
    StructField("file_block_start", LongType(), False),
    StructField("file_block_length", LongType(), False),
    StructField("file_modification_time", TimestampType(), False),
])

METADATA_FIELD = StructField(METADATA_COLUMN, METADATA_TYPE, False)

_ARROW_TYPE = arrow_schema(StructType([METADATA_FIELD])).field(0).type
# the characters java.net.URI leaves as they are in a path (Hadoop's Path.toUri)
_SAFE = "/!$&'()*+,;=:@-._~"


def _quoted(path: str) -> str:
    # java.net.URI quotes ASCII outside its safe set and keeps other printable characters
    return "".join(c if ord(c) > 127 and c.isprintable() and not c.isspace()
                   else quote(c, safe=_SAFE) for c in path)


def file_uri(path: str) -> str:
    """``path`` as Spark's ``_metadata.file_path`` writes it."""
    if landing.is_remote(path):
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{_quoted(rest)}"
    return "file:" + _quoted(os.path.abspath(path))


def metadata_array(files: Sequence[FileEntry], rows: Sequence[int]) -> pa.StructArray:
    """The ``_metadata`` values of rows from ``files``: ``rows[i]`` rows from ``files[i]``,
    in that order."""
    uris = [file_uri(f.path) for f in files]
    distinct = pa.StructArray.from_arrays([
        pa.array(uris, pa.string()),
        pa.array([u.rsplit("/", 1)[-1] for u in uris], pa.string()),
        pa.array([f.size for f in files], pa.int64()),
        pa.array([0] * len(files), pa.int64()),
        pa.array([f.size for f in files], pa.int64()),
        # milliseconds, as Spark keeps them (modificationTime * 1000 microseconds)
        pa.array([f.mtime_ns // 1_000_000 * 1000 for f in files],
                 pa.int64()).cast(_ARROW_TYPE[5].type),
    ], fields=list(_ARROW_TYPE))
    # each file's index repeated for its rows: vectorised (this runs for every ingested row)
    which = pa.array(np.repeat(np.arange(len(rows), dtype=np.int32), rows))
    return distinct.take(which)


def hide_metadata(df: DataFrame) -> DataFrame:
    """A file stream's DataFrame with its ``_metadata`` column hidden (see
    :mod:`headwater.spark.hidden_columns`), when the column is the source's: the last one, of
    the metadata type (a data column of that name is left as it is)."""
    fields = df.schema.fields
    if not fields or fields[-1].name != METADATA_COLUMN or \
            fields[-1].dataType != METADATA_TYPE:
        return df
    return hide(df, [METADATA_COLUMN])
