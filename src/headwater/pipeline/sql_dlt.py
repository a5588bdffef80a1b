"""The SQL that DLT pipelines were written in over the years, read at the token level before
Spark's parser sees a statement (quotes respected, line breaks kept so its line numbers still
point into the file):

- ``${key}``: the pipeline configuration's value (the spec's ``configuration:``, headwater.toml's
  ``[spark]``, or an earlier ``SET key = value``); an unknown key is an error naming it.
- ``SET key = value`` sets ``key`` on the pipeline's session: later statements' ``${key}``,
  ``spark.conf.get`` in Python definitions and the running flows see it (the whole pipeline,
  where DLT scopes it to the definitions after it). A bare ``SET key`` only shows a value in a
  notebook: nothing to do.
- ``LIVE.x`` (the pipeline's dataset x, DLT's virtual schema) is ``x``.
- ``CREATE [OR REFRESH] LIVE TABLE`` is a materialized view; ``STREAMING LIVE TABLE`` and
  ``INCREMENTAL LIVE TABLE`` a streaming table; ``[TEMPORARY] LIVE VIEW`` a temporary view.
  ``TEMPORARY`` (or ``PRIVATE``) on a table or materialized view: stored, but not published to
  the lakehouse catalog (see :class:`~headwater.pipeline.model.StreamingTable`).
- ``cloud_files(path, format [, map(key, value, ...)])`` and ``STREAM read_files(path,
  key => value, ...)`` (also inside ``STREAM(...)``): an Auto Loader stream,
  ``spark.readStream.format("cloudFiles")`` with those options, given a name the query reads.
  Its arguments are evaluated by Spark (literals, ``map(...)``, ``concat(...)``). A query
  naming ``_metadata`` (the stream's hidden file metadata column) is analyzed with the
  streams put in its plan (:func:`query_reading_files`): a temporary view would hide it.
- ``read_kafka(bootstrapServers => ..., subscribe => ..., ...)`` (Databricks' table-valued
  function, https://docs.databricks.com/sql/language-manual/functions/read_kafka.html), with
  ``STREAM`` a stream, without it a batch read: ``format("kafka")`` (headwater's Kafka source
  without Spark's connector) with ``bootstrapServers`` as ``kafka.bootstrap.servers`` and every
  other option (``subscribe``, ``startingOffsets``, `` `kafka.security.protocol` ``, ...) as
  named; named the same way as the Auto Loader reads.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from headwater.errors import HeadwaterError
from headwater.lakehouse.catalog import lakehouse_of
from headwater.lakehouse.native_reads import with_native_reads
from headwater.pipeline.model import Location
from headwater.spark.hidden_columns import sql_with_relations

_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_CREATE_WORDS = {"TEMPORARY", "TEMP", "PRIVATE", "STREAMING", "INCREMENTAL", "LIVE"}
_FILE_FUNCTIONS = ("CLOUD_FILES", "READ_FILES", "READ_KAFKA")
_METADATA = re.compile(r"(?<![\w$])`?_metadata\b", re.IGNORECASE)


# --- ${key} and SET ---------------------------------------------------------------------------


def substitute(text: str, first_line: int, file: Path, spark: SparkSession) -> str:
    """``text`` with every ``${key}`` replaced by the configuration's value."""
    def value(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        found = conf_value(spark, key)
        if found is None:
            line = first_line + text.count("\n", 0, match.start())
            raise HeadwaterError(
                "HW_PIPELINE_CONF_MISSING", f"{Location(str(file), line)}: ${{{key}}} names no "
                "setting of the pipeline's configuration.",
                "DLT pipeline SQL takes ${key} from the pipeline's configuration; headwater "
                "substitutes it before Spark parses the statement.",
                f"Set {key} under `configuration:` in spark-pipeline.yml (or [spark] in "
                f"headwater.toml), or with `SET {key} = value;` before this statement.")
        return found

    return _VARIABLE.sub(value, text)


def conf_value(spark: SparkSession, key: str) -> str | None:
    try:
        found = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - an invalid key is as good as an unset one
        return None
    return None if found is None else str(found)


def apply_set(spark: SparkSession, plan: Any, where: Location) -> None:
    """A parsed ``SET`` statement (Spark's SetCommand): ``SET key = value`` sets it on the
    session; ``SET key`` and ``SET`` / ``SET -v`` (which only show values) do nothing."""
    pair = plan.kv()
    if not pair.isDefined() or not pair.get()._2().isDefined():
        return
    key, value = str(pair.get()._1()), str(pair.get()._2().get())
    try:
        spark.conf.set(key, value)
    except Exception as exc:  # noqa: BLE001 - Spark's CANNOT_MODIFY_CONFIG and the like
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HeadwaterError(
            "HW_PIPELINE_SQL_INVALID", f"{where}: SET {key} failed: {first[:300]}.",
            "SET changes a setting of the running session; Spark fixes some settings when it "
            "starts.", f"Put {key} under `configuration:` in spark-pipeline.yml (or [spark] in "
            "headwater.toml) instead.") from exc


# --- LIVE. and the CREATE spellings -----------------------------------------------------------


def drop_live(text: str, toks: Sequence[Any]) -> str:
    """``LIVE.x`` -> ``x`` (an unquoted LIVE followed by a dot, not itself after a dot)."""
    cuts = [(toks[i].start, toks[i + 1].end) for i in range(len(toks) - 2)
            if toks[i].upper == "LIVE" and toks[i + 1].text == "."
            and (i == 0 or toks[i - 1].text != ".")]
    for start, end in reversed(cuts):
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def legacy_create(text: str, toks: Sequence[Any]) -> tuple[str, bool]:
    """DLT's CREATE spellings as Spark's (see the module docstring); and whether the dataset
    is TEMPORARY (a stored one kept out of the lakehouse catalog)."""
    if not toks or toks[0].upper != "CREATE":
        return text, False
    first = i = 3 if [t.upper for t in toks[1:3]] in (["OR", "REFRESH"], ["OR", "REPLACE"]) \
        else 1
    words: set[str] = set()
    while i < len(toks) and toks[i].upper in _CREATE_WORDS:
        words.add(toks[i].upper)
        i += 1
    if i >= len(toks):
        return text, False
    kind = toks[i].upper
    if kind == "MATERIALIZED" and i + 1 < len(toks) and toks[i + 1].upper == "VIEW":
        kind, i = "MATERIALIZED VIEW", i + 1
    temporary = bool(words & {"TEMPORARY", "TEMP", "PRIVATE"})
    if kind == "VIEW":
        if not words & {"LIVE", "PRIVATE"}:
            return text, False  # Spark's own CREATE [TEMPORARY] VIEW
        head = "TEMPORARY VIEW"
        temporary = False  # a view is never stored
    elif kind in ("TABLE", "MATERIALIZED VIEW"):
        if not words:
            return text, False
        streaming = bool(words & {"STREAMING", "INCREMENTAL"})
        if streaming and kind != "TABLE":
            return text, False  # left to Spark's parser to reject
        head = "STREAMING TABLE" if streaming else "MATERIALIZED VIEW"
    else:
        return text, False
    start = toks[first].start
    old = text[start:toks[i].end]
    return text[:start] + head + "\n" * old.count("\n") + text[toks[i].end:], temporary


# --- cloud_files(...) / STREAM read_files(...) / read_kafka(...) -------------------------------


@dataclass(frozen=True)
class FileRead:
    """An Auto Loader (or Kafka) read a SQL query names as ``view``: created when the flow
    runs."""

    view: str
    path: str | None
    options: dict[str, str] = field(default_factory=dict)
    format: str = "cloudFiles"
    streaming: bool = True

    def dataframe(self, spark: SparkSession) -> DataFrame:
        reader: Any = (spark.readStream if self.streaming else spark.read).format(self.format)
        for key, value in self.options.items():
            reader = reader.option(key, value)
        return reader.load(self.path) if self.path is not None else reader.load()

    def register(self, spark: SparkSession) -> DataFrame:
        df = self.dataframe(spark)
        df.createOrReplaceTempView(self.view)
        return df


def query_reading_files(spark: SparkSession, query: str,
                        streams: dict[str, DataFrame]) -> DataFrame:
    """``query``'s DataFrame, its file reads (``streams``, by view name) registered already.

    When the query names ``_metadata``, the streams go into the parsed plan where their
    names are read (:func:`~headwater.spark.hidden_columns.sql_with_relations`) and the
    lakehouse's batch reads are made native as its ``spark.sql`` does; the lakehouse's SQL
    additions (time travel, table functions, ``:`` on JSON text) then do not apply to this
    query. Otherwise it is plain ``spark.sql``."""
    if not _METADATA.search(query):
        return spark.sql(query)
    df = sql_with_relations(spark, query, streams)
    lake = lakehouse_of(spark)
    return with_native_reads(lake, df) if lake is not None else df


def file_reads(text: str, toks: Sequence[Any], file: Path,
               spark: SparkSession) -> tuple[str, list[FileRead]]:
    """The statement with each Auto Loader call replaced by a view's name, and the reads."""
    reads: list[FileRead] = []
    cuts: list[tuple[int, int, str]] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.upper not in _FILE_FUNCTIONS or i + 1 >= len(toks) or toks[i + 1].text != "(" \
                or (i > 0 and toks[i - 1].text == "."):
            i += 1
            continue
        close = _closing(toks, i + 1)
        where = Location(str(file), tok.line)
        if close is None:
            raise _invalid(where, f"{tok.text}( is never closed")
        start, end = tok.start, toks[close].end
        streaming = tok.upper == "CLOUD_FILES"
        kafka = tok.upper == "READ_KAFKA"
        if i > 0 and toks[i - 1].upper == "STREAM":
            start, streaming = toks[i - 1].start, True
        elif i > 1 and toks[i - 1].text == "(" and toks[i - 2].upper == "STREAM" \
                and close + 1 < len(toks) and toks[close + 1].text == ")":
            start, end, streaming = toks[i - 2].start, toks[close + 1].end, True
        if not streaming and not kafka:
            raise HeadwaterError(
                "HW_PIPELINE_UNSUPPORTED", f"{where}: read_files(...) without STREAM (a batch "
                "read of the files) is not supported.", "headwater reads files as Auto Loader "
                "does: a stream that ingests each file once.",
                "Write STREAM read_files(...) in a streaming table.")
        args = _arguments(text, toks, i + 1, close)
        digest = hashlib.sha1(f"{file}:{tok.start}:{text}".encode()).hexdigest()[:12]
        view = f"__hw_{'kafka' if kafka else 'files'}_{digest}"
        reads.append(_kafka_read(view, args, streaming, spark, where) if kafka
                     else _file_read(view, tok.upper, args, spark, where))
        cuts.append((start, end, reads[-1].view))
        i = close + 1
    for start, end, name in reversed(cuts):
        old = text[start:end]
        text = text[:start] + name + "\n" * old.count("\n") + text[end:]
    return text, reads


def _closing(toks: Sequence[Any], open_at: int) -> int | None:
    depth = 0
    for k in range(open_at, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[k].text, 0)
        if depth == 0:
            return k
    return None


def _arguments(text: str, toks: Sequence[Any], open_at: int,
               close: int) -> list[tuple[str | None, str]]:
    """(name or None, expression text) for each top-level argument."""
    args: list[list[Any]] = [[]]
    depth = 0
    for k in range(open_at + 1, close):
        t = toks[k]
        depth += {"(": 1, ")": -1}.get(t.text, 0)
        if t.text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(t)
    found: list[tuple[str | None, str]] = []
    for arg in args:
        if not arg:
            continue
        if len(arg) > 3 and arg[1].text == "=" and arg[2].text == ">":
            found.append((arg[0].text.strip("`"), text[arg[3].start:arg[-1].end]))
        else:
            found.append((None, text[arg[0].start:arg[-1].end]))
    return found


def _file_read(view: str, function: str, args: list[tuple[str | None, str]],
               spark: SparkSession, where: Location) -> FileRead:
    positional = [expr for name, expr in args if name is None]
    named = {name: expr for name, expr in args if name is not None}
    options: dict[str, str] = {}
    if function == "CLOUD_FILES":
        if named or not 2 <= len(positional) <= 3:
            raise _invalid(where, "cloud_files takes (path, format [, map(key, value, ...)])")
        path = _value(spark, positional[0], where)
        options["cloudFiles.format"] = _value(spark, positional[1], where)
        if len(positional) == 3:
            found = _evaluate(spark, positional[2], where)
            if not isinstance(found, dict):
                raise _invalid(where, "cloud_files' third argument is map(key, value, ...)")
            options.update({str(k): _text(v) for k, v in found.items()})
    else:
        if len(positional) != 1:
            raise _invalid(where, "read_files takes the path, then name => value options")
        path = _value(spark, positional[0], where)
        for name, expr in named.items():
            key = "cloudFiles.format" if name.lower() == "format" else name
            options[key] = _value(spark, expr, where)
    return FileRead(view, path, options)


def _kafka_read(view: str, args: list[tuple[str | None, str]], streaming: bool,
                spark: SparkSession, where: Location) -> FileRead:
    if any(name is None for name, _ in args):
        raise HeadwaterError(
            "HW_PIPELINE_SQL_INVALID", f"{where}: read_kafka takes named options only.",
            "Databricks' read_kafka is called with option => value pairs.",
            "e.g. STREAM read_kafka(bootstrapServers => 'host:9092', subscribe => 'events'); "
            "options with dots in back quotes: `kafka.security.protocol` => 'SSL'.")
    options: dict[str, str] = {}
    for name, expr in args:
        assert name is not None
        key = "kafka.bootstrap.servers" if name.lower() == "bootstrapservers" else name
        options[key] = _value(spark, expr, where)
    return FileRead(view, None, options, format="kafka", streaming=streaming)


def _evaluate(spark: SparkSession, expr: str, where: Location) -> Any:
    try:
        return spark.sql(f"SELECT {expr}").first()[0]
    except Exception as exc:  # noqa: BLE001 - Spark's parser or analyzer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _invalid(where, f"the argument {expr.strip()!r} is not a constant Spark can "
                       f"evaluate: {first[:200]}") from exc


def _value(spark: SparkSession, expr: str, where: Location) -> str:
    return _text(_evaluate(spark, expr, where))


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _invalid(where: Location, what: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_PIPELINE_SQL_INVALID", f"{where}: {what}.",
        "cloud_files(path, format, map(...)) and STREAM read_files(path, option => value) are "
        "Auto Loader streams over a folder of files.",
        "e.g. FROM cloud_files('/data/in', 'json', map('cloudFiles.inferColumnTypes', 'true')) "
        "or FROM STREAM read_files('/data/in', format => 'json').")
