"""The few SQL statements a lakehouse runs itself; everything else goes to ``spark.sql``.

Spark would create a table at its own default location with a provider that has no path, so
``CREATE TABLE`` and ``DROP TABLE`` go through the lakehouse. ``delta.`/path``` (which Spark
refuses for Python sources) becomes a temporary view over a batch read of that path.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Iterator

from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from headwater.lakehouse import Lakehouse

_NAME = r"((?:`[^`]+`|[\w]+)(?:\.(?:`[^`]+`|[\w]+)){0,2})"
_CREATE = re.compile(
    r"^\s*CREATE\s+(OR\s+REPLACE\s+)?TABLE\s+(IF\s+NOT\s+EXISTS\s+)?" + _NAME + r"\s*(.*)$",
    re.IGNORECASE | re.DOTALL)
_DROP = re.compile(r"^\s*DROP\s+TABLE\s+(IF\s+EXISTS\s+)?" + _NAME + r"\s*;?\s*$",
                   re.IGNORECASE | re.DOTALL)
_DELTA_PATH = re.compile(r"\bdelta\.`([^`]+)`", re.IGNORECASE)
_USING = re.compile(r"^USING\s+(\w+)\s*", re.IGNORECASE)
_PARTITIONED = re.compile(r"^PARTITIONED\s+BY\s*", re.IGNORECASE)
_COMMENT = re.compile(r"^COMMENT\s+'((?:[^'\\]|\\.)*)'\s*", re.IGNORECASE)
_TBLPROPERTIES = re.compile(r"^TBLPROPERTIES\s*", re.IGNORECASE)
_AS = re.compile(r"^AS\s+(.*)$", re.IGNORECASE | re.DOTALL)


def run_sql(lakehouse: "Lakehouse", query: str) -> "DataFrame":
    spark = lakehouse.spark
    text = query.strip().rstrip(";")
    drop = _DROP.match(text)
    if drop:
        name = drop.group(2)
        if not lakehouse.exists(name) and not drop.group(1):
            raise HeadwaterError(
                "HW_TABLE_NOT_FOUND", f"DROP TABLE {name}: no such table in {lakehouse.root}.",
                "Only existing tables can be dropped.", "Use DROP TABLE IF EXISTS.")
        lakehouse.drop(name)
        return spark.createDataFrame([], "result string")
    create = _CREATE.match(text)
    if create:
        return _create(lakehouse, create)
    return spark.sql(_with_delta_paths(lakehouse, text))


def _with_delta_paths(lakehouse: "Lakehouse", text: str) -> str:
    def view_for(match: re.Match) -> str:
        path = match.group(1)
        view = "hw_path_" + hashlib.sha1(path.encode()).hexdigest()[:12]
        lakehouse.spark.read.format("delta").load(path).createOrReplaceTempView(view)
        return f"`{view}`"

    return _DELTA_PATH.sub(view_for, text)


def unquoted(text: str) -> Iterator[tuple[int, str, int]]:
    """(index, char, parenthesis depth) of every character outside quoted text; a backslash
    inside quotes escapes the next character, as in Spark SQL string literals."""
    depth, quote, i = 0, None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'`\"":
            quote = ch
        else:
            if ch == "(":
                depth += 1
            yield i, ch, depth
            if ch == ")":
                depth -= 1
        i += 1


def balanced(text: str) -> tuple[str, str]:
    """('a, (b)', rest) for text starting with '('."""
    for i, ch, depth in unquoted(text):
        if ch == ")" and depth == 1:
            return text[1:i], text[i + 1:].lstrip()
    raise _unsupported(text, "unbalanced parentheses")


def _unsupported(statement: str, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_SQL_UNSUPPORTED", f"CREATE TABLE could not be run: {why} (near {statement[:60]!r}).",
        "Lakehouse tables are Delta tables that headwater creates under the lakehouse root.",
        "Write CREATE TABLE name (col TYPE, ...) [USING DELTA] [PARTITIONED BY (col)] "
        "[COMMENT '...'] [TBLPROPERTIES ('k'='v')], or CREATE TABLE name AS SELECT ...")


def _create(lakehouse: "Lakehouse", match: re.Match) -> "DataFrame":
    from pyspark.sql.types import StructType

    spark = lakehouse.spark
    replace, if_not_exists, name, rest = match.groups()
    columns = None
    if rest.startswith("("):
        columns, rest = balanced(rest)
    partition_by: list[str] = []
    comment = None
    properties: dict[str, str] = {}
    select = None
    while rest:
        if m := _USING.match(rest):
            if m.group(1).lower() != "delta":
                raise _unsupported(rest, f"USING {m.group(1)}: lakehouse tables are Delta")
            rest = rest[m.end():]
        elif m := _PARTITIONED.match(rest):
            inner, rest = balanced(rest[m.end():])
            partition_by = [c.strip().strip("`") for c in inner.split(",") if c.strip()]
        elif m := _COMMENT.match(rest):
            comment, rest = m.group(1), rest[m.end():]
        elif m := _TBLPROPERTIES.match(rest):
            inner, rest = balanced(rest[m.end():])
            for item in re.findall(r"'([^']*)'\s*=\s*'([^']*)'", inner):
                properties[item[0]] = item[1]
        elif m := _AS.match(rest):
            select, rest = m.group(1), ""
        else:
            raise _unsupported(rest, "unexpected clause")
    exists = lakehouse.exists(name)
    if exists and not (if_not_exists or replace):
        raise HeadwaterError(
            "HW_TABLE_EXISTS", f"Table {name} already exists in {lakehouse.root}.",
            "CREATE TABLE does not replace a table.",
            "Use CREATE TABLE IF NOT EXISTS, CREATE OR REPLACE TABLE, or another name.")
    if exists and if_not_exists:
        lakehouse.register(name)
        return spark.createDataFrame([], "result string")
    if exists and replace:
        lakehouse.drop(name)
    if select is not None:
        df = spark.sql(_with_delta_paths(lakehouse, select))
        lakehouse.create_table(name, df.schema, partition_by, comment, properties)
        lakehouse.write(df, name)
    elif columns is not None:
        ddl = spark._jvm.org.apache.spark.sql.types.StructType.fromDDL(columns).json()
        schema = StructType.fromJson(json.loads(ddl))
        lakehouse.create_table(name, schema, partition_by, comment, properties)
    else:
        raise _unsupported(rest or name, "no column list and no AS SELECT")
    return spark.createDataFrame([], "result string")
