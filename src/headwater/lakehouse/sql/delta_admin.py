"""Delta's own statements in SQL (handlers of the SQL router): OPTIMIZE, VACUUM, RESTORE,
REORG TABLE ... APPLY (PURGE), ALTER TABLE ... DROP FEATURE, DESCRIBE HISTORY / DETAIL,
CONVERT TO DELTA, GENERATE symlink_format_manifest, and SHOW TBLPROPERTIES of a Delta table.

Spark's parser does not know Delta's grammar, so :func:`words` splits the statement into its
top-level words (quotes, backticks and parentheses kept whole, with their positions) and each
handler checks them against the statement's fixed shape; the parts in between are given to
Spark's own parser (table names with ``parseMultipartIdentifier``, predicates, timestamps and
column lists as expressions). A word the shape does not expect is a clear
``HW_SQL_UNSUPPORTED`` naming it. The work is ``DeltaTable``'s and :mod:`headwater.delta`'s
(maintenance, manifest, convert); results have delta-spark's columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from pyspark.sql.types import StructType

from headwater.delta import maintenance, manifest
from headwater.delta.convert import convert_parquet
from headwater.delta.drop_feature import drop_feature as run_drop_feature
from headwater.delta.log import DeltaLog
from headwater.delta.optimize import optimize as run_optimize
from headwater.delta.optimize import purge
from headwater.errors import HeadwaterError
from headwater.lakehouse.delta_spark.delta_table import DeltaTable, optimize_frame
from headwater.lakehouse.sql.ddl import done
from headwater.lakehouse.sql.dml import table_path, unsupported
from headwater.lakehouse.sql.statements import (
    Statement,
    evaluate_timestamp,
    option,
    seq,
    target,
)
from headwater.spark.active import data_frame
from headwater.spark.jvm import sql_parser

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse.sql.statements import SqlLakehouse


Word = tuple[str, int, int]  # text, start, end (exclusive) in the statement
_CLOSING = {"`": "`", "'": "'", '"': '"', "(": ")"}


def words(text: str) -> list[Word]:
    """Top-level words of ``text``: quoted names/strings and parenthesised groups stay whole."""
    out: list[Word] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start, depth, quote = i, 0, None
        while i < n and (quote or depth or not text[i].isspace()):
            ch = text[i]
            if quote:
                quote = None if ch == _CLOSING[quote] else quote
            elif ch in "`'\"":
                quote = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            i += 1
        out.append((text[start:i], start, i))
    return out


class Shape:
    """A cursor over a statement's words: ``take`` keywords, read the rest."""

    def __init__(self, st: Statement, skip: int) -> None:
        self.st, self.items, self.pos = st, words(st.text)[skip:], 0

    def at(self, *keywords: str) -> bool:
        got = [w[0].upper() for w in self.items[self.pos:self.pos + len(keywords)]]
        return got == list(keywords)

    def take(self, *keywords: str) -> bool:
        if self.at(*keywords):
            self.pos += len(keywords)
            return True
        return False

    def word(self, what: str) -> str:
        if self.pos >= len(self.items):
            raise unsupported(f"a missing {what}", self.st)
        self.pos += 1
        return self.items[self.pos - 1][0]

    def until(self, *stops: str) -> str:
        """The text from here up to the first keyword in ``stops`` (or the end)."""
        first = self.pos
        while self.pos < len(self.items) and self.items[self.pos][0].upper() not in stops:
            self.pos += 1
        if first == self.pos:
            raise unsupported("an empty clause", self.st)
        return self.st.text[self.items[first][1]:self.items[self.pos - 1][2]]

    def end(self) -> None:
        if self.pos < len(self.items):
            raise unsupported(f"{self.st.text[self.items[self.pos][1]:][:40]!r}", self.st)


def _parser(st: Statement) -> Any:
    return sql_parser(st.session)


def _table(lake: SqlLakehouse, st: Statement, word: str) -> str:
    """The Delta table a word names: a lakehouse table, ``delta.`path``` or a quoted path."""
    if word[:1] in "'\"":
        parts = ["delta", word[1:-1]]
    else:
        try:
            parts = [str(p) for p in seq(_parser(st).parseMultipartIdentifier(word))]
        except Exception as exc:  # noqa: BLE001 - Spark's ParseException, said in our words
            raise unsupported(f"the table name {word!r}", st) from exc
    path = table_path(lake, parts)
    if path is None:
        raise HeadwaterError(
            "HW_TABLE_NOT_FOUND", f"{'.'.join(parts)} is not a Delta table of the lakehouse at "
            f"{lake.root} (near {st.text[:60]!r}).",
            "Delta statements run on lakehouse tables by name or on delta.`/path`.",
            "Check the name (lake.tables() lists them) or write delta.`/path/to/table`.")
    return path


def _number(st: Statement, word: str, what: str) -> float:
    try:
        value = float(word)
    except ValueError:
        raise unsupported(f"{what} {word!r} (a number is expected)", st) from None
    if value < 0:
        raise unsupported(f"{what} {word!r} (it cannot be negative)", st)
    return value


def _columns(st: Statement, group: str) -> list[str]:
    if not (group.startswith("(") and group.endswith(")")):
        raise unsupported(f"the column list {group!r} (write it in parentheses)", st)
    parser = _parser(st)
    names = []
    for item in group[1:-1].split(","):
        parts = [str(p) for p in seq(parser.parseMultipartIdentifier(item.strip()))]
        names.append(".".join(parts))
    return names


def optimize(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """OPTIMIZE t [FULL] [WHERE partition predicate] [ZORDER BY (cols)]: DeltaTable.optimize()'s
    (a clustered table is clustered; FULL: every file, delta-spark 3.3's OPTIMIZE FULL)."""
    shape = Shape(st, 1)
    path = _table(lake, st, shape.word("table name"))
    full = shape.take("FULL")
    where = [shape.until("ZORDER")] if shape.take("WHERE") else []
    zorder = _columns(st, shape.word("ZORDER BY columns")) if shape.take("ZORDER", "BY") \
        else None
    shape.end()
    if full:  # delta-spark's Python builder has no FULL
        return optimize_frame(st.session, path,
                              run_optimize(st.session, path, where, zorder or [], full=True))
    builder = DeltaTable(st.session, path).optimize()
    for predicate in where:
        builder = builder.where(predicate)
    return builder.executeZOrderBy(zorder) if zorder else builder.executeCompaction()


def reorg(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """REORG TABLE t [WHERE partition predicate] APPLY (PURGE): the files with deletion
    vectors rewritten without them (OPTIMIZE's result columns, as delta-spark returns).
    APPLY (UPGRADE UNIFORM (...)) needs Iceberg metadata headwater does not write."""
    shape = Shape(st, 1)
    if not shape.take("TABLE"):
        raise unsupported("REORG without TABLE", st)
    path = _table(lake, st, shape.word("table name"))
    where = [shape.until("APPLY")] if shape.take("WHERE") else []
    if not shape.take("APPLY"):
        raise unsupported("REORG TABLE without APPLY (PURGE)", st)
    group = "".join(shape.word("APPLY clause").upper().split())
    shape.end()
    if group.startswith("(UPGRADE"):
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"REORG TABLE ... APPLY {group} is not supported "
            f"(near {st.text[:60]!r}).",
            "UniForm's upgrade rewrites the table for Iceberg compatibility (icebergCompatV2, "
            "column mapping and Iceberg metadata), which headwater does not write.",
            "Run it with delta-spark; REORG TABLE t APPLY (PURGE) works here.")
    if group != "(PURGE)":
        raise unsupported(f"APPLY {group}", st)
    return optimize_frame(st.session, path, purge(st.session, path, where))


def drop_feature(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """ALTER TABLE t DROP FEATURE f [TRUNCATE HISTORY] (headwater.delta.drop_feature)."""
    shape = Shape(st, 2)
    path = _table(lake, st, shape.word("table name"))
    if not shape.take("DROP", "FEATURE"):
        raise unsupported("ALTER TABLE without DROP FEATURE", st)
    name = shape.word("feature name")
    if name[:1] in "`'\"":
        name = name[1:-1]
    truncate = shape.take("TRUNCATE", "HISTORY")
    shape.end()
    run_drop_feature(st.session, path, name, truncate)
    return done(st.session)


def vacuum(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """VACUUM t [LITE | FULL] [RETAIN n HOURS] [DRY RUN] (the modifiers in any order, as
    delta-spark's grammar): the table's path, or (DRY RUN) the files to delete, as delta-spark
    prints them (``file:/...``); the session's
    spark.databricks.delta.retentionDurationCheck.enabled decides the retention check. LITE:
    only files the log removed (no listing of the folder); FULL (the default): also files the
    log never named."""
    shape = Shape(st, 1)
    path = _table(lake, st, shape.word("table name"))
    hours, dry_run, mode = None, False, None
    while shape.pos < len(shape.items):
        if shape.take("RETAIN") and hours is None:
            hours = _number(st, shape.word("number of hours"), "RETAIN")
            if not shape.take("HOURS"):
                raise unsupported("RETAIN without HOURS", st)
        elif shape.take("DRY", "RUN") and not dry_run:
            dry_run = True
        elif mode is None and (shape.at("LITE") or shape.at("FULL")):
            mode = shape.word("vacuum type").upper()
        else:
            shape.end()
    files = maintenance.vacuum(path, hours, dry_run=dry_run,
                               enforce_retention=maintenance.retention_check_enabled(st.session),
                               lite=mode == "LITE")
    base = maintenance.qualified(path)
    rows = [(f"{base}/{unquote(f)}",) for f in files] if dry_run else [(base,)]
    return data_frame(st.session, rows, "path string")


def restore(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """RESTORE [TABLE] t [TO] VERSION AS OF n | TIMESTAMP AS OF ts."""
    shape = Shape(st, 1)
    shape.take("TABLE")
    table = DeltaTable(st.session, _table(lake, st, shape.word("table name")))
    shape.take("TO")
    if shape.take("VERSION", "AS", "OF"):
        version = _number(st, shape.word("version"), "VERSION AS OF")
        shape.end()
        return table.restoreToVersion(int(version))
    if shape.take("TIMESTAMP", "AS", "OF"):
        return table.restoreToTimestamp(evaluate_timestamp(st, shape.until()))
    raise unsupported("RESTORE without VERSION AS OF n or TIMESTAMP AS OF ts", st)


def describe_history(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """DESCRIBE HISTORY t [LIMIT n]: newest first, delta-spark's columns."""
    shape = Shape(st, 2)
    table = DeltaTable(st.session, _table(lake, st, shape.word("table name")))
    limit = int(_number(st, shape.word("limit"), "LIMIT")) if shape.take("LIMIT") else None
    shape.end()
    return table.history(limit)


def describe_detail(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """DESCRIBE DETAIL t: one row, delta-spark's columns."""
    shape = Shape(st, 2)
    table = DeltaTable(st.session, _table(lake, st, shape.word("table name")))
    shape.end()
    return table.detail()


def convert(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """CONVERT TO DELTA parquet.`path` [NO STATISTICS] [PARTITIONED BY (col type, ...)]."""
    shape = Shape(st, 3)
    parts = [str(p) for p in seq(_parser(st).parseMultipartIdentifier(shape.word("table")))]
    if len(parts) != 2 or parts[0].lower() != "parquet":
        raise unsupported(f"converting {'.'.join(parts)} (only parquet.`/path` can be "
                          "converted)", st)
    stats = not shape.take("NO", "STATISTICS")
    partition_schema = None
    if shape.take("PARTITIONED", "BY"):
        partition_schema = StructType.fromDDL(shape.word("partition columns").strip()[1:-1])
    shape.end()
    convert_parquet(parts[1], partition_schema, collect_stats=stats)
    return done(st.session)


def generate(lake: SqlLakehouse, st: Statement) -> DataFrame:
    """GENERATE symlink_format_manifest FOR TABLE t: manifests for Presto / Athena readers."""
    shape = Shape(st, 1)
    mode = shape.word("mode")
    if not shape.take("FOR", "TABLE"):
        raise unsupported("GENERATE without FOR TABLE", st)
    path = _table(lake, st, shape.word("table name"))
    shape.end()
    manifest.generate(st.session, path, mode)
    return done(st.session)


def show_properties(lake: SqlLakehouse, st: Statement) -> DataFrame | None:
    """SHOW TBLPROPERTIES t [(key)] of a Delta table: its properties from the Delta log."""
    found = target(st.plan)
    path = None if found is None else table_path(lake, found[0])
    if found is None or path is None:
        return None  # another provider's table or a view: Spark's
    table = DeltaLog(path).table()
    protocol = table.protocol()
    properties = dict(table.metadata().configuration or {})
    properties.setdefault("delta.minReaderVersion", str(protocol.min_reader_version))
    properties.setdefault("delta.minWriterVersion", str(protocol.min_writer_version))
    for feature in sorted(set(protocol.reader_features or [])
                          | set(protocol.writer_features or [])):
        properties.setdefault(f"delta.feature.{feature}", "supported")
    key = option(st.plan.propertyKey())
    if key is not None:
        key = str(key)
        value = properties.get(key, f"Table {'.'.join(found[0])} does not have property: "
                                    f"{key}")  # Spark's own answer for a missing key
        return data_frame(st.session, [(key, value)], "key string, value string")
    return data_frame(st.session, sorted(properties.items()), "key string, value string")
