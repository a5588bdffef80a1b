"""Delta Lake's user documentation examples on headwater (issue 37's done-criterion).

SNAPSHOT is a local copy of github delta-io/delta: a checkout, or the git directory the
``fetch`` tool returns (read with ``git show``, nothing is checked out). The pages are
``docs/src/content/docs/**/*.mdx`` (docs.delta.io's source). Nothing of them is copied into
this repository: the SQL and Python code blocks are read from the snapshot at run time.

Every page runs its SQL blocks in order, then (in another fresh lakehouse folder) its Python
blocks in order: the pages show each example in SQL and Python tabs, alternatives a reader
picks one of. One headwater session serves all pages; a block's ``SET`` values are undone
after it, a page's temporary views and current database after the page. A block is

- ``passed``: every statement ran (a stream it starts is run to the end of its input, then
  stopped);
- ``failed``: with the first statement's HeadwaterError code (or exception class / Spark
  error class) and the first line of its message;
- ``skipped``: with the reason (Scala/Java/shell, a Databricks service, a cloud store, a
  syntax template or a placeholder that cannot be filled sensibly, Python that does not
  parse as printed).

The only edits are the ones a user would make, all listed in EDITS and FIXTURES below and
recorded per block in the results: data paths into the page's folder, placeholders such as
``<table_name>`` filled in, ``display`` defined, and the tables / DataFrames that a page
assumes an earlier example (or the reader) created.

    PYTHONPATH=src .venv/bin/python tools/delta_docs_examples.py SNAPSHOT --json out.json \
        [--markdown out.md] [--only delta-update,delta-batch] [--list]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOCS = "docs/src/content/docs"
RUN_LANGS = ("sql", "python")

# --- the edits ------------------------------------------------------------------------------
# (pages, pattern, replacement, why): a regular expression replaced in a block's text before
# it runs, on the listed pages ("*" = every page). {data} is the page's data folder.
EDITS: list[tuple[str, str, str, str]] = [
    ("*", r"(?<=[`'\"])/(?!databricks-datasets)(?=[\w-])", "{data}/",
     "data path: an absolute path in quotes is put under the page's data folder"),
    ("*", r"(?<=[`'\"])pathToMyDeltaTable(?=[`'\"])", "{data}/pathToMyDeltaTable",
     "data path: a relative path is put under the page's data folder"),
    ("*", r"LOCATION 'table_location'", "LOCATION '{data}/table_location'",
     "data path: a relative LOCATION is put under the page's data folder"),
    ("*", r"<table_name>|<table-name>|<your-table>", "table_name",
     "placeholder: the page's example table (fixture table_name)"),
    ("*", r"<col_name>", "col_name", "placeholder: a column of fixture table_name"),
    ("*", r"<new_type>", "BIGINT", "placeholder: a wider type for col_name INT"),
    ("*", r"<clustering_columns>", "col_name", "placeholder: a column of fixture table_name"),
    ("delta-change-data-feed", r"'\\path'", "'{data}/pathToMyDeltaTable'",
     "placeholder: the path table of the page (fixture pathToMyDeltaTable)"),
    ("delta-clustering", r"clustering_column_name = \"some_value\"", "col_name = 1",
     "placeholder: a column of fixture table_name and a value"),
    ("delta-clustering", r"new_column1, new_column2", "col_name_1, col_name_2",
     "placeholder: columns of fixture table_name"),
    ("delta-type-widening", r" \[TRUNCATE HISTORY\]", "",
     "optional clause shown in brackets: left out"),
    ("delta-column-mapping", r"DROP COLUMNS \(col_name_1, col_name_2, \.\.\.\)",
     "DROP COLUMNS (col_name_1, col_name_2)", "placeholder: '...' left out"),
]

# Things an example assumes exist. name -> (what the block must mention, Python that makes
# it, why). Made before the first block that mentions it, and made again before a later
# block that mentions it once an earlier block may have changed it; dropped instead of made
# when the block creates it itself. {data} is the page's data folder.
PEOPLE_SCHEMA = ("id INT, firstName STRING, middleName STRING, lastName STRING, gender STRING, "
                 "birthDate TIMESTAMP, ssn STRING, salary INT")
PEOPLE_ROWS = ("[(2, 'Ann', 'B', 'Lee', 'F', dt(1950, 1, 2), '111-11-1111', 50000), "
               "(3, 'Bob', 'C', 'Ray', 'M', dt(1960, 3, 4), '222-22-2222', 60000), "
               "(4, 'Cid', 'D', 'Fox', 'M', dt(2017, 1, 5), '333-33-3333', 70000)]")
PEOPLE_DF = f"spark.createDataFrame({PEOPLE_ROWS}, '{PEOPLE_SCHEMA}')"
UPDATES_DF = (f"spark.createDataFrame([(4, 'Cid', 'E', 'Fox', 'M', dt(2017, 1, 5), "
              f"'333-33-3333', 75000), (5, 'Dee', 'F', 'Orr', 'F', dt(1970, 1, 1), "
              f"'444-44-4444', 80000)], '{PEOPLE_SCHEMA}')")
EVENTS_DF = ("spark.createDataFrame([(1, 'a', 'click', dt(2020, 10, 1, 3), 111, 'c1', "
             "dt(2017, 1, 3).date(), dt(2017, 1, 20).date(), dt(2021, 11, 18).date()), (2, 'b', "
             "'view', dt(2020, 10, 2, 4), 222, 'c2', dt(2017, 2, 1).date(), "
             "dt(2017, 2, 3).date(), dt(2024, 1, 1).date())], 'eventId BIGINT, data STRING, "
             "eventType STRING, eventTime TIMESTAMP, userId INT, customerId STRING, "
             "start_date DATE, end_date DATE, date DATE')")


def _table(name: str, df: str, by: str = "") -> str:
    part = f".partitionBy('{by}')" if by else ""
    return f"{df}.write.format('delta'){part}.mode('overwrite').saveAsTable('{name}')"


def _path(rel: str, df: str, by: str = "") -> str:
    part = f".partitionBy('{by}')" if by else ""
    return f"{df}.write.format('delta'){part}.mode('overwrite').save('{{data}}/{rel}')"


FIXTURES: dict[str, tuple[str, str, str]] = {
    "people10m": (r"\bpeople10m\b(?!updates)", _table("default.people10m", PEOPLE_DF),
                  "table default.people10m (delta-batch's first example creates it)"),
    "people10m path": (r"/tmp/delta/people10m\b", _path("tmp/delta/people10m", PEOPLE_DF),
                       "path table /tmp/delta/people10m (delta-batch creates it)"),
    "people-10m path": (r"/tmp/delta/people-10m\b(?!-)",
                        _path("tmp/delta/people-10m", PEOPLE_DF),
                        "path table /tmp/delta/people-10m, the people10m data"),
    "people-10m-updates path": (r"/tmp/delta/people-10m-updates",
                                _path("tmp/delta/people-10m-updates", UPDATES_DF),
                                "path table of updates for the people10m merge"),
    "people10mupdates": (r"\bpeople10mupdates\b",
                         f"{UPDATES_DF}.createOrReplaceTempView('people10mupdates')",
                         "view people10mupdates: the merge example's source"),
    "morePeople": (r"\bmorePeople\b", f"{UPDATES_DF}.createOrReplaceTempView('morePeople')",
                   "view morePeople: rows to insert into people10m"),
    "df": (r"(?<![\w.])df\.", f"df = {PEOPLE_DF}",
           "DataFrame df: the people10m rows the page writes"),
    "events path": (r"/tmp/delta/events\b(?!By|/_)", _path("tmp/delta/events", EVENTS_DF),
                    "path table /tmp/delta/events"),
    "events": (r"(?<![/\w])events\b(?!\.writeStream)", _table("events", EVENTS_DF, "date"),
               "table events, partitioned by date"),
    "replace_data": (r"\breplace_data\b",
                     f"replace_data = {EVENTS_DF}.where('eventId = 1')\n"
                     "replace_data.createOrReplaceTempView('replace_data')",
                     "DataFrame/view replace_data: events rows for January 2017"),
    "source_data": (r"\bsource_data\b", f"source_data = {EVENTS_DF}.where('eventId = 1')",
                    "DataFrame source_data: events rows"),
    "events stream": (r"(?<![\w.])events\.writeStream",
                      "events = spark.readStream.format('delta').load('{data}/src/events')",
                      "streaming DataFrame events (a stream of the events rows)"),
    "events stream source": (r"(?<![\w.])events\.writeStream",
                             _path("src/events", EVENTS_DF), "its source table"),
    "table_name": (r"\btable_name\b",
                   "spark.sql('CREATE TABLE table_name (col_name INT, col_name_1 INT, "
                   "col_name_2 INT, old_col_name INT) USING DELTA')\n"
                   "spark.sql('INSERT INTO table_name VALUES (1, 2, 3, 4)')",
                   "table table_name: the placeholder table of the syntax examples"),
    "myDeltaTable": (r"\bmyDeltaTable\b",
                     "spark.sql(\"CREATE TABLE myDeltaTable (id INT) USING DELTA TBLPROPERTIES "
                     "(delta.enableChangeDataFeed = true)\")\n"
                     "spark.sql('INSERT INTO myDeltaTable VALUES (1), (2)')",
                     "table myDeltaTable with the change data feed"),
    "pathToMyDeltaTable": (r"pathToMyDeltaTable",
                           "spark.sql(\"CREATE TABLE delta.`{data}/pathToMyDeltaTable` (id INT) "
                           "USING DELTA TBLPROPERTIES (delta.enableChangeDataFeed = true)\")",
                           "path table with the change data feed"),
    "target/source": (r"\bMERGE INTO target\b|\btargetDF\b",
                      "spark.sql('CREATE TABLE target (key INT, lastSeen DATE, status STRING) "
                      "USING DELTA')\nspark.sql(\"INSERT INTO target VALUES (1, current_date(),"
                      " 'active'), (2, current_date(), 'active')\")\n"
                      "spark.sql('CREATE OR REPLACE TEMP VIEW source AS SELECT 1 AS key, "
                      "current_date() AS timestamp, current_date() AS lastSeen, "
                      "\\'active\\' AS status')",
                      "table target and view source of the merge examples"),
    "targetDF/sourceDF": (r"\btargetDF\b",
                          "from delta.tables import DeltaTable\n"
                          "targetDF = DeltaTable.forName(spark, 'target').alias('target')\n"
                          "sourceDF = spark.table('source').alias('source')",
                          "DeltaTable targetDF and DataFrame sourceDF of the merge examples"),
    "logs": (r"\blogs\b(?!\.)",
             "spark.sql('CREATE TABLE logs (uniqueId INT, date DATE) USING DELTA')\n"
             "spark.sql('CREATE OR REPLACE TEMP VIEW newDedupedLogs AS SELECT 1 AS uniqueId, "
             "current_date() AS date')",
             "table logs and view newDedupedLogs of the dedup merge"),
    "logs (Python)": (r"newDedupedLogs\.alias",
                      "from delta.tables import DeltaTable\n"
                      "newDedupedLogs = spark.table('newDedupedLogs')\n"
                      "deltaTable = DeltaTable.forName(spark, 'logs')",
                      "DeltaTable deltaTable (logs) and DataFrame newDedupedLogs"),
    "course_old": (r"\bcourse_old\b",
                   "spark.sql('CREATE TABLE course_old (id INT, name STRING) USING DELTA')",
                   "table course_old (CTAS source)"),
    "grade": (r"\bgrade\b",
              "spark.sql('CREATE TABLE grade (id INT, score INT) USING DELTA')", "table grade"),
    "boxes": (r"\bboxes\b",
              "spark.sql('CREATE TABLE boxes (colA STRING, colB STRUCT<field1:STRING, "
              "nested:STRING, field2:STRING>, colC STRING) USING DELTA TBLPROPERTIES "
              "(delta.columnMapping.mode = \\'name\\', delta.minReaderVersion = \\'2\\', "
              "delta.minWriterVersion = \\'5\\')')",
              "table boxes (delta-batch's REPLACE/RENAME COLUMNS examples, column-mapped)"),
    "students": (r"\bstudents\b",
                 "spark.sql('CREATE TABLE students (name STRING, country STRING) USING DELTA')\n"
                 "spark.sql(\"INSERT INTO students VALUES ('ann', 'NL'), ('bob', 'US')\")\n"
                 "new_students = spark.createDataFrame([('cid', 'NL')], 'name STRING, "
                 "country STRING')\n"
                 "people = spark.createDataFrame([('bob', 'CA')], 'name STRING, "
                 "country STRING')",
                 "table students, DataFrames new_students and people (replaceUsing/On)"),
    "tableName": (r"'tableName'",
                  "spark.sql(\"CREATE TABLE tableName (id INT) USING DELTA TBLPROPERTIES "
                  "(delta.enableChangeDataFeed = true)\")\n"
                  "spark.sql('INSERT INTO tableName VALUES (1)')",
                  "table tableName with the change data feed"),
    "dotted.tableName": (r"dotted\.tableName",
                         "spark.sql('CREATE DATABASE IF NOT EXISTS dbName')\n"
                         "spark.sql(\"CREATE TABLE dbName.`dotted.tableName` (id INT) USING "
                         "DELTA TBLPROPERTIES (delta.enableChangeDataFeed = true)\")",
                         "table dbName.`dotted.tableName` with the change data feed"),
    "eventsTable": (r"\beventsTable\b", _table("eventsTable", EVENTS_DF, "date"),
                    "table eventsTable (the events rows, partitioned by date)"),
    "/data/events": (r"/data/events\b", _path("data/events", EVENTS_DF, "date"),
                     "path table /data/events (the events rows, partitioned by date)"),
    "pathToTable": (r"\bpathToTable\b",
                    _path("data/events", EVENTS_DF, "date") + "\n"
                    "pathToTable = '{data}/data/events'\ntableName = 'eventsTable'\n"
                    "eventType = 'eventType'\n" + _table("eventsTable", EVENTS_DF, "date"),
                    "variables pathToTable, tableName (and eventType, the Z-order column) "
                    "naming the events tables"),
    "/path/to/delta/table": (r"/path/to/delta/table",
                             _path("path/to/delta/table", EVENTS_DF, "date"),
                             "path table /path/to/delta/table (events rows)"),
    "delta_table_name": (r"\bdelta_table_name\b",
                         _table("delta_table_name", EVENTS_DF, "date"),
                         "table delta_table_name (events rows, partitioned by date)"),
    "my_prod_table": (r"\bmy_prod_table\b",
                      "spark.sql('CREATE TABLE my_prod_table (user_id INT, invalid BOOLEAN) "
                      "USING DELTA')\nspark.sql('INSERT INTO my_prod_table VALUES (1, false),"
                      " (NULL, false)')", "table my_prod_table (the clone example's source)"),
    "db.source_table": (r"\bdb\.(source|target)_table\b|/data/source\b",
                        "spark.sql('CREATE DATABASE IF NOT EXISTS db')\n"
                        "spark.sql('CREATE TABLE db.source_table (id INT) USING DELTA')\n"
                        "spark.sql('INSERT INTO db.source_table VALUES (1)')\n"
                        "spark.sql('CREATE TABLE db.target_table (id INT) USING DELTA')\n"
                        "spark.sql('INSERT INTO db.target_table VALUES (1)')\n"
                        "spark.sql('INSERT INTO db.target_table VALUES (2)')\n"
                        "spark.sql(\"CREATE TABLE delta.`{data}/data/source` (id INT) USING "
                        "DELTA\")",
                        "database db with source_table and target_table, path table "
                        "/data/source (clone and restore examples)"),
    "entire_dataset": (r"\bentire_dataset\b",
                       "spark.sql('CREATE TABLE entire_dataset (id INT) USING DELTA')\n"
                       "for i in range(16):\n"
                       "    spark.sql(f'INSERT INTO entire_dataset VALUES ({i})')",
                       "table entire_dataset with 16 versions (clone VERSION AS OF 15)"),
    "timestamp_string": (r"\btimestamp_string\b",
                         "timestamp_string = str(spark.sql('DESCRIBE HISTORY "
                         "delta.`{data}/tmp/delta/people10m`').first()['timestamp'])\n"
                         "version = 0",
                         "variables timestamp_string (the latest commit's time) and version "
                         "(0) of the time travel example"),
    "my_table": (r"\bmy_table\b(?!_)",
                 "spark.sql('CREATE TABLE my_table (id INT) USING DELTA')\n"
                 "spark.sql('INSERT INTO my_table VALUES (1), (2)')", "table my_table"),
    "source_table/target_table": (r"\bsource_table\b",
                                  "spark.sql('CREATE TABLE source_table (id INT, extra STRING)"
                                  " USING DELTA')\nspark.sql(\"INSERT INTO source_table VALUES"
                                  " (1, 'x')\")\nspark.sql('CREATE TABLE target_table (id INT)"
                                  " USING DELTA')",
                                  "tables source_table and target_table (schema evolution)"),
    "delta_source_table": (r"\bdelta_source_table\b",
                           "spark.sql('CREATE TABLE delta_source_table (id INT) USING DELTA')\n"
                           "spark.sql('INSERT INTO delta_source_table VALUES (1)')",
                           "table delta_source_table (schema tracking stream)"),
}

# A page whose placeholder table is one its topic makes (row tracking's examples read
# ``_metadata.row_id`` of ``table_name``: a table with row tracking, as the page's reader has;
# type widening's change its column types).
PAGE_FIXTURES: dict[tuple[str, str], tuple[str, str]] = {
    ("delta-row-tracking", "table_name"): (
        "spark.sql('CREATE TABLE table_name (col_name INT, col_name_1 INT, col_name_2 INT, "
        "old_col_name INT) USING DELTA TBLPROPERTIES (delta.enableRowTracking = true)')\n"
        "spark.sql('INSERT INTO table_name VALUES (1, 2, 3, 4)')",
        "table table_name with row tracking: the table the page's reads assume"),
    ("delta-type-widening", "table_name"): (
        "spark.sql('CREATE TABLE table_name (col_name INT, col_name_1 INT, col_name_2 INT, "
        "old_col_name INT) USING DELTA TBLPROPERTIES (delta.enableTypeWidening = true)')\n"
        "spark.sql('INSERT INTO table_name VALUES (1, 2, 3, 4)')",
        "table table_name with type widening enabled: the table the page's ALTERs assume"),
}

# --- skip rules: (pattern, reason), checked on a block's text after the edits ---------------
SKIPS: list[tuple[str, str]] = [
    (r"/databricks-datasets|dbutils\.", "needs a Databricks service (datasets / dbutils)"),
    (r"\b(s3a?|abfss?|wasbs?|gs|adl)://|fs\.azure|spark\.hadoop\.fs\.|LogStore",
     "needs a cloud object store"),
    (r"io\.delta\.sql\.DeltaSparkSessionExtension|spark_catalog\b.*DeltaCatalog",
     "configures delta-spark's session (headwater's session is the edit)"),
    (r"\[[A-Z]+( [A-Z_a-z]+)*\]|\[COLUMN\]|\[FIRST\|AFTER", "syntax template (brackets)"),
    (r"\.\.\.|= \.\.\.|\(\.\.\.\)", "placeholder '...' cannot be filled sensibly"),
    (r"<[\w\- ]+>", "placeholder <...> left unfilled"),
    (r"timestamp_expression|VERSION AS OF version\b", "syntax template"),
    (r"WHEN (NOT )?MATCHED( BY SOURCE)?\s*\n\s*(UPDATE|INSERT|DELETE)",
     "docs error: a MERGE clause without THEN (Spark's grammar requires it)"),
    (r"\bxx://", "placeholder location xx://"),
    (r"(?m)^ *\w+ = \.\.\.", "placeholder '...' cannot be filled sensibly"),
    (r"catalogManaged", "needs a catalog-managed commit coordinator (Unity Catalog)"),
    (r"\bUNIFORM\b|universalFormat|iceberg|hudi", "Delta UniForm (Iceberg/Hudi) is a "
                                                    "delta-spark feature out of scope here"),
]
PAGE_SKIPS = {
    # pages that document other engines or services; their blocks need them
    "delta-sharing": "Delta Sharing needs a sharing server",
    "presto-integration": "Presto/Trino", "redshift-spectrum-integration": "Redshift",
    "snowflake-integration": "Snowflake", "delta-kernel": "Delta Kernel (Java/Rust)",
    "delta-kernel-java": "Delta Kernel (Java)", "delta-standalone": "Delta Standalone (Java)",
    "delta-storage": "cloud object stores", "porting": "Databricks-to-OSS porting (Scala/SQL "
                                                      "with dbutils and clusters)",
    "delta-uniform": "Delta UniForm (Iceberg/Hudi)",
    "delta-catalog-managed-tables": "needs Unity Catalog (catalog-managed commits)",
}
# Run in every page's namespace before its first block: the imports the pages' examples
# assume without showing them (delta-batch's DeltaTable.create examples have no import line).
PRELUDE = ("from delta.tables import *\nfrom pyspark.sql.functions import *\n"
           "from pyspark.sql.types import *\n")

# Pages whose examples build on each other (a table the first example makes, the next ones
# change): a fixture is made once per page. On the other pages the examples are alternatives
# (another way to create, write or merge into people10m), so a fixture an earlier example
# changed is made again before the next example that uses it.
SEQUENCES = {"delta-clustering", "delta-column-mapping", "delta-type-widening",
             "delta-row-tracking", "delta-deletion-vectors", "delta-constraints",
             "delta-default-columns", "quick-start", "delta-streaming"}
STATEMENT_START = re.compile(
    r"^(SELECT|UPDATE|DELETE|INSERT|CREATE|ALTER|DESCRIBE|SHOW|OPTIMIZE|VACUUM|RESTORE|"
    r"MERGE|CONVERT|REORG|SET|DROP|GENERATE|REPLACE|FSCK|USE)\b", re.I)


@dataclass
class Block:
    page: str
    line: int
    lang: str
    text: str
    heading: str
    edits: list[str] = field(default_factory=list)
    status: str = ""
    reason: str = ""
    statements: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"page": self.page, "line": self.line, "lang": self.lang,
                "heading": self.heading, "status": self.status, "reason": self.reason,
                "edits": self.edits, "statements": self.statements,
                "failures": self.failures,
                "seconds": round(self.seconds, 2), "first_line": _first(self.text)}


# --- reading the snapshot --------------------------------------------------------------------

class Snapshot:
    """The docs' source files of a checkout or of a bare git directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checkout = (path / DOCS).is_dir()
        if not self.checkout and not (path / "HEAD").is_file():
            raise SystemExit(f"{path} is neither a checkout of delta-io/delta nor its git dir")

    def commit(self) -> str:
        proc = subprocess.run(["git", "-C", str(self.path), "log", "-1", "--format=%h %cs"],
                              capture_output=True, text=True, check=False)
        return proc.stdout.strip()

    def pages(self) -> list[str]:
        if self.checkout:
            return sorted(str(p.relative_to(self.path)) for p in (self.path / DOCS).rglob("*.md*"))
        proc = subprocess.run(["git", "-C", str(self.path), "ls-tree", "-r", "--name-only",
                               "HEAD", DOCS], capture_output=True, text=True, check=True)
        return sorted(p for p in proc.stdout.split() if p.endswith((".md", ".mdx")))

    def read(self, rel: str) -> str:
        if self.checkout:
            return (self.path / rel).read_text()
        return subprocess.run(["git", "-C", str(self.path), "show", f"HEAD:{rel}"],
                              capture_output=True, text=True, check=True).stdout


def page_name(rel: str) -> str:
    stem = rel[len(DOCS) + 1:].rsplit(".", 1)[0]
    return stem.removesuffix("/index")


FENCE = re.compile(r"^[ \t]*```(?P<lang>\w*)(?P<rest>[^`\n]*)$")
INLINE = re.compile(r"```(?P<lang>\w+) (?P<text>[^`\n]+?) ```")


def blocks_of(page: str, source: str) -> list[Block]:
    """The fenced code blocks of a page (also the one-line ```sql ... ``` form)."""
    lines = source.split("\n")
    out: list[Block] = []
    heading, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        inline = INLINE.search(line)
        if inline:
            out.append(Block(page, i + 1, inline["lang"], inline["text"].strip(), heading))
            i += 1
            continue
        fence = FENCE.match(line)
        if not fence:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not re.match(r"^[ \t]*```\s*$", lines[j]):
            j += 1
        text = textwrap.dedent("\n".join(lines[i + 1:j])).strip("\n")
        if fence["rest"].strip():  # ```sql SELECT ... (the statement on the fence's line)
            text = fence["rest"].strip() + "\n" + text
        out.append(Block(page, i + 1, fence["lang"] or "text", text, heading))
        i = j + 1
    return out


# --- SQL statements --------------------------------------------------------------------------

def split_sql(text: str) -> list[str]:
    """Statements of a SQL block: split at ``;`` outside quotes and comments, and where a
    statement keyword starts a line after a finished statement (the docs often show several
    statements without ``;``; a user running them adds it)."""
    pieces, buf, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
            buf.append(ch)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            buf.append(text[i:end])
            i = end
            continue
        elif ch == ";":
            pieces.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    pieces.append("".join(buf))
    out = []
    for piece in pieces:
        current: list[str] = []
        for line in piece.split("\n"):
            code = [ln for ln in current if ln.strip() and not ln.strip().startswith("--")]
            done = code and not re.search(r"(\bAS|\(|,)\s*$", code[-1], re.I) and \
                _depth("\n".join(code)) == 0
            start = STATEMENT_START.match(line)
            first = STATEMENT_START.match(code[0].strip()) if code else None
            if start and start[1].upper() == "SELECT" and not (
                    first and first[1].upper() == "SELECT"):
                start = None  # INSERT ... / CREATE ... AS on one line, its SELECT on the next
            if done and start:
                out.append("\n".join(current))
                current = []
            current.append(line)
        out.append("\n".join(current))
    return [s.strip() for s in out if _code(s)]


def _code(sql: str) -> str:
    return "\n".join(ln for ln in sql.split("\n") if ln.strip() and
                     not ln.strip().startswith("--")).strip()


def _depth(sql: str) -> int:
    return sql.count("(") - sql.count(")")


# --- running ---------------------------------------------------------------------------------

def apply_edits(block: Block, data: Path) -> str:
    text = block.text
    for pages, pattern, replacement, why in EDITS:
        if pages != "*" and block.page not in pages.split(","):
            continue
        new = re.sub(pattern, replacement.replace("{data}", str(data)), text)
        if new != text:
            block.edits.append(why)
            text = new
    return text


def skip_reason(block: Block, text: str) -> str:
    if block.lang not in RUN_LANGS:
        return f"{block.lang or 'text'} block (only SQL and Python run)"
    if block.page in PAGE_SKIPS:
        return PAGE_SKIPS[block.page]
    if not text.strip():
        return "empty block"
    if block.lang == "sql" and re.match(r"\s*(spark\.|<)", text):
        return "docs error: not SQL (Python or page markup in a SQL block)"
    if block.lang == "sql" and not re.search(r"\b(SELECT|CREATE|ALTER|INSERT|UPDATE|DELETE|"
                                             r"MERGE|SET|DESCRIBE|SHOW|OPTIMIZE|VACUUM|"
                                             r"RESTORE|CONVERT|REORG|GENERATE|DROP)\b",
                                             text, re.I):
        return "a SQL fragment, not a statement"
    for pattern, reason in SKIPS:
        if re.search(pattern, text, re.M):
            return reason
    if block.lang == "python":
        try:
            compile(text, f"{block.page}:{block.line}", "exec")
        except SyntaxError as exc:
            return f"docs error: the Python does not parse as printed ({exc.msg}, line " \
                   f"{exc.lineno})"
    return ""


def creates(text: str, name: str) -> bool:
    """Whether a block creates ``name`` itself (then an existing one is dropped first)."""
    bare = name.split(".")[-1]
    qual = rf"(default\.)?{re.escape(bare)}\b"
    if re.search(rf"CREATE (EXTERNAL )?TABLE (?!IF NOT EXISTS){qual}", text, re.I):
        return True
    if re.search(rf"\.tableName\(\"{qual}\"\)", text) and re.search(r"DeltaTable\.create\(",
                                                                       text):
        return True
    # saveAsTable in the default mode (errorifexists): the page shows it as another way to
    # create the table, which the reader runs instead of the one before
    return any(re.search(rf"\.saveAsTable\(\"{qual}\"\)", part) and ".mode(" not in part
               for part in _python_statements(text))


def _python_statements(text: str) -> list[str]:
    """The top-level statements of a Python block (the block itself when it is SQL)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [text]
    return [ast.get_source_segment(text, node) or "" for node in tree.body]


def error_of(exc: BaseException) -> str:
    """``CODE: first line``: the HeadwaterError's code (also one Spark carried back from a
    Python data source or a task), else the exception class and Spark's error class."""
    from headwater import unwrap  # noqa: PLC0415 - imported after PYTHONPATH is known

    exc = unwrap(exc)
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        label = code
    else:
        cls = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
        try:
            cond = cls() if cls else None
        except Exception:  # noqa: BLE001 - best effort: the class name is enough
            cond = None
        label = f"{type(exc).__name__}" + (f" [{cond}]" if cond else "")
    return f"{label}: {_first(str(exc))}"


def _first(text: str) -> str:
    for line in str(text).strip().splitlines():
        if line.strip():
            return line.strip()[:240]
    return ""


class PageRun:
    def __init__(self, spark: Any, page: str, folder: Path) -> None:
        from datetime import datetime  # noqa: PLC0415 - the examples' namespace only

        import headwater  # noqa: PLC0415 - imported after PYTHONPATH is known

        self.spark, self.page, self.folder = spark, page, folder
        self.data = folder / "data"
        self.data.mkdir(parents=True)
        self.lake = headwater.Lakehouse(folder / "lake", spark)
        self.conf_before = {r[0]: r[1] for r in spark.sql("SET").collect()}
        self.views_before = {t.name for t in spark.catalog.listTables() if t.isTemporary}
        self.made: dict[str, bool] = {}  # fixture -> clean (not yet touched by a block)
        self.recreated: list[str] = []  # fixtures the running block creates itself
        self.ns: dict[str, Any] = {"spark": spark, "dt": datetime,
                                   "display": lambda df, *a, **k: df.show()}
        exec(PRELUDE, self.ns)  # noqa: S102 - the imports the pages assume

    def fixture(self, block: Block, text: str) -> None:
        for name, (mention, code, why) in FIXTURES.items():
            if not re.search(mention, text):
                continue
            code, why = PAGE_FIXTURES.get((self.page, name), (code, why))
            targets = [a or b for a, b in re.findall(
                r"saveAsTable\('([\w.]+)'\)|CREATE TABLE (\w+)\b(?!\.)", code)]
            paths = [a or b for a, b in re.findall(  # the folders it writes (not reads)
                r"save\('\{data\}/([\w/.-]+)'\)|CREATE TABLE delta\.`\{data\}/([\w/.-]+)`", code)]
            mine = [t for t in targets if creates(text, t)]
            if mine:  # another way to create it: the reader runs this one instead
                self._drop(targets, paths)
                block.edits.append(f"dropped {', '.join(mine)}: the example creates it again")
                self.made[name] = False
                self.recreated.append(name)
                continue
            if self.made.get(name) is True or (name in self.made and self.page in SEQUENCES):
                continue
            self._drop(targets, paths)
            self.made[name] = True
            try:
                exec(code.replace("{data}", str(self.data)), self.ns)  # noqa: S102
            except Exception as exc:  # noqa: BLE001 - the block then fails where it needs it
                block.edits.append(f"fixture failed: {why}: {error_of(exc)}")
                continue
            block.edits.append(f"fixture: {why}")

    def _drop(self, tables: list[str], paths: list[str]) -> None:
        for table in tables:
            self.spark.sql(f"DROP TABLE IF EXISTS {table}")
        for path in paths:
            shutil.rmtree(self.data / path, ignore_errors=True)

    def touched(self, text: str) -> None:
        for name, (mention, _, _) in FIXTURES.items():
            if name in self.made and re.search(mention, text):
                self.made[name] = False

    def run(self, block: Block) -> None:
        text = apply_edits(block, self.data)
        reason = skip_reason(block, text)
        if reason:
            block.status, block.reason = "skipped", reason
            return
        started = time.monotonic()
        self.recreated = []
        try:
            try:
                self.fixture(block, text)
            except Exception as exc:  # noqa: BLE001 - reported, the page goes on
                block.status, block.reason = "failed", f"fixture: {error_of(exc)}"
                return
            try:
                if block.lang == "sql":
                    statements = split_sql(text)
                    block.statements = len(statements)
                    failures = []
                    for n, statement in enumerate(statements, 1):
                        try:
                            self.spark.sql(statement).collect()
                        except Exception as exc:  # noqa: BLE001 - the block's result
                            failures.append(f"statement {n} of {len(statements)} "
                                            f"`{_first(_code(statement))[:80]}`: "
                                            f"{error_of(exc)}")
                    block.failures = failures
                    if failures:
                        block.status, block.reason = "failed", failures[0]
                        if len(failures) > 1:
                            block.reason += f" (and {len(failures) - 1} more)"
                        return
                else:
                    block.statements = 1
                    exec(compile(text, f"{block.page}:{block.line}", "exec"), self.ns)  # noqa: S102
                    self.finish_streams()
                block.status = "passed"
            except Exception as exc:  # noqa: BLE001 - the block's result
                block.status, block.reason = "failed", error_of(exc)
                block.edits.append("traceback: " + traceback.format_exc(limit=-2)
                                   .strip().splitlines()[-3][:200])
        finally:
            if block.status == "failed":  # it did not make what it replaces: made again
                for name in self.recreated:
                    self.made.pop(name, None)
            self.touched(text)
            block.seconds = time.monotonic() - started
            self.stop_streams()
            self.restore_conf()

    def finish_streams(self, timeout: float = 60) -> None:
        """Let every stream the block started run its first micro-batch (an endless source
        such as ``rate`` never runs out of input), then stop it; its error is the block's."""
        for query in self.spark.streams.active:
            deadline = time.monotonic() + timeout
            while query.isActive and not query.recentProgress and \
                    time.monotonic() < deadline:
                time.sleep(0.5)
            error = query.exception()
            query.stop()
            if error is not None:
                raise error
            if not query.recentProgress:
                raise TimeoutError(f"stream {query.name or query.id} ran no batch in "
                                   f"{timeout:.0f} s")

    def stop_streams(self) -> None:
        for query in self.spark.streams.active:
            try:
                query.stop()
            except Exception:  # noqa: BLE001, S110 - stopping at the page's end
                pass

    def restore_conf(self) -> None:
        """Undo the session settings a block made: each example on a page is its own (a
        ``SET ...defaults.appendOnly`` example must not make the next examples' tables
        append-only)."""
        for key, value in {r[0]: r[1] for r in self.spark.sql("SET").collect()}.items():
            if key not in self.conf_before:
                self.spark.conf.unset(key)
            elif self.conf_before[key] != value:
                self.spark.conf.set(key, self.conf_before[key])

    def close(self) -> None:
        self.stop_streams()
        self.lake.detach()
        for t in self.spark.catalog.listTables():
            if t.isTemporary and t.name not in self.views_before:
                self.spark.catalog.dropTempView(t.name)
        self.restore_conf()
        self.spark.sql("USE default")


def summarize(blocks: list[Block]) -> dict[str, dict[str, int]]:
    pages: dict[str, dict[str, int]] = {}
    for b in blocks:
        row = pages.setdefault(b.page, {"blocks": 0, "run": 0, "passed": 0, "failed": 0,
                                        "skipped": 0})
        row["blocks"] += 1
        row[b.status or "skipped"] += 1
        row["run"] += b.status in ("passed", "failed")
    return pages


def markdown(data: dict[str, Any]) -> str:
    out = [f"# Delta docs examples on headwater\n\nSnapshot: delta-io/delta {data['snapshot']}; "
           f"headwater {data['headwater']}; {data['seconds']:.0f} s.\n",
           "| page | blocks | run | passed | failed | skipped |", "|---|---|---|---|---|---|"]
    total = dict.fromkeys(("blocks", "run", "passed", "failed", "skipped"), 0)
    for page, row in data["pages"].items():
        out.append(f"| {page} | " + " | ".join(str(row[k]) for k in total) + " |")
        for k in total:
            total[k] += row[k]
    out.append("| **all** | " + " | ".join(str(total[k]) for k in total) + " |")
    for status in ("failed", "skipped"):
        out.append(f"\n## {status.capitalize()}\n")
        for b in data["blocks"]:
            if b["status"] == status:
                out.append(f"- {b['page']}:{b['line']} ({b['lang']}) `{b['first_line'][:70]}`"
                           f" — {b['reason']}")
    out.append("\n## Edits\n")
    out += [f"- {pages}: `{pattern}` → `{repl}` ({why})" for pages, pattern, repl, why in EDITS]
    out += [f"- fixture {name}: {why}" for name, (_, _, why) in FIXTURES.items()]
    return "\n".join(out) + "\n"


def headwater_commit() -> str:
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("snapshot", type=Path, help="delta-io/delta: a checkout or its git dir")
    parser.add_argument("--json", type=Path, help="write every block's result here")
    parser.add_argument("--markdown", type=Path, help="write the per-page summary here")
    parser.add_argument("--only", help="comma-separated page names (e.g. delta-update)")
    parser.add_argument("--list", action="store_true", help="classify only, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    snap = Snapshot(args.snapshot.resolve())
    wanted = set(args.only.split(",")) if args.only else None
    blocks: list[Block] = []
    per_page: dict[str, list[Block]] = {}
    for rel in snap.pages():
        name = page_name(rel)
        if wanted and name not in wanted:
            continue
        found = blocks_of(name, snap.read(rel))
        if found:
            per_page[name] = found
            blocks += found
    work = Path(tempfile.mkdtemp(prefix="hw-delta-docs-"))
    started = time.monotonic()
    spark = None
    try:
        if not args.list:
            import headwater  # noqa: PLC0415 - only when running

            spark = headwater.spark_session("local[2]", app_name="delta-docs-examples",
                                            conf={"spark.sql.shuffle.partitions": "2",
                                                  "spark.ui.enabled": "false"})
            spark.sparkContext.setLogLevel("OFF")  # failing examples' task errors: in the JSON
        for name, page_blocks in per_page.items():
            print(f"{name}: {len(page_blocks)} blocks", flush=True)
            if args.list:
                for b in page_blocks:
                    reason = skip_reason(b, apply_edits(b, work / name))
                    b.status, b.reason = ("skipped", reason) if reason else ("", "")
                    print(f"  {b.line:5} {b.lang:7} {'skip: ' + reason if reason else 'run'}")
                continue
            for b in page_blocks:
                if b.lang not in RUN_LANGS:
                    b.status, b.reason = "skipped", skip_reason(b, b.text)
            for track in RUN_LANGS:  # a page's SQL and Python tabs are alternatives
                run = PageRun(spark, name, work / name / track)
                try:
                    for b in page_blocks:
                        if b.lang != track:
                            continue
                        run.run(b)
                        mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}[b.status]
                        print(f"  {mark} {b.line:5} {b.lang:6} {b.reason[:150]}", flush=True)
                finally:
                    run.close()
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    data = {"snapshot": snap.commit(), "headwater": headwater_commit(),
            "seconds": time.monotonic() - started, "pages": summarize(blocks),
            "blocks": [b.as_dict() for b in blocks],
            "edits": [list(e) for e in EDITS],
            "fixtures": {k: {"mention": v[0], "code": v[1], "why": v[2]}
                         for k, v in FIXTURES.items()}}
    print()
    for page, row in data["pages"].items():
        print(f"{page:32} run {row['run']:3}  passed {row['passed']:3}  failed "
              f"{row['failed']:3}  skipped {row['skipped']:3}")
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
