"""SQL definition files: only the CONSTRAINT ... EXPECT clauses are stripped, Spark's parser
reads the rest; malformed constraints and leftover text are errors with file:line, and
TBLPROPERTIES, COMMENT, PARTITIONED BY and column lists reach the Delta table."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support import write

from headwater import HeadwaterError, Lakehouse
from headwater.conf.project_file import Project
from headwater.pipeline.expectations import Expectation
from headwater.pipeline.graph import Graph
from headwater.pipeline.loader import load_definitions


def project(tmp_path: Path, sql: str) -> Path:
    root = tmp_path / "proj"
    (root / "defs").mkdir(parents=True, exist_ok=True)
    (root / "headwater.toml").write_text(
        '[pipeline]\nname = "t"\nroot = "lake"\ndefinitions = ["defs/*.sql"]\n')
    (root / "defs" / "p.sql").write_text(sql)
    return root


def load(tmp_path: Path, sql: str):
    return load_definitions(Project.load(project(tmp_path, sql)))


def failure(tmp_path: Path, sql: str) -> HeadwaterError:
    with pytest.raises(HeadwaterError) as info:
        load(tmp_path, sql)
    return info.value


def test_constraints_become_expectations_one_each(spark, tmp_path):
    registry = load(tmp_path, """-- two constraints, one without an action
CREATE OR REFRESH STREAMING TABLE clean (
  CONSTRAINT positive EXPECT (amount > 0 AND note <> 'a, (b)') ON VIOLATION DROP ROW,
  CONSTRAINT has_id EXPECT (id IS NOT NULL),
  CONSTRAINT `small` EXPECT (amount < 100) ON VIOLATION FAIL UPDATE
) AS SELECT * FROM STREAM(src);
""")
    assert registry.datasets["clean"].expectations == (
        Expectation("positive", "amount > 0 AND note <> 'a, (b)'", "drop"),
        Expectation("has_id", "id IS NOT NULL", "warn"),
        Expectation("small", "amount < 100", "fail"))
    assert registry.flows_of("clean")[0].sql == "SELECT * FROM STREAM(src)"


@pytest.mark.parametrize("clause, line, words", [
    ("CONSTRAINT ok EXPECT (a > 0),\n  CONSTRAINT typo EXPECTS (a > 1)", 4, "EXPECTS"),
    ("CONSTRAINT a EXPECT (a > 0) ON VIOLATION DROP,\n  CONSTRAINT b EXPECT (a < 9)", 3,
     "ON VIOLATION DROP"),
    ("CONSTRAINT a EXPECT () ON VIOLATION DROP ROW", 3, "empty"),
    ("CONSTRAINT a EXPECT (a > 0) ON VIOLATION IGNORE", 3, "ON VIOLATION IGNORE"),
])
def test_malformed_constraints_are_errors_at_their_line(spark, tmp_path, clause, line, words):
    error = failure(tmp_path, f"\nCREATE STREAMING TABLE t (\n  {clause}\n) AS SELECT * FROM "
                              "STREAM(src);\n")
    assert error.code == "HW_PIPELINE_SQL_INVALID"
    assert f"p.sql:{line}:" in str(error) and words in str(error), str(error)


@pytest.mark.parametrize("sql, line", [
    ("CREATE STREAMING TABLE t AS SELECT * FROM STREAM(src) trailing words here;", 1),
    ("CREATE MATERIALIZED VIEW ok AS SELECT 1 AS one;\n\n/* a comment\n spanning */\n"
     "CREATE MATERIALIZED VIEW bad\nCOMENT 'typo' AS SELECT 1;", 6),
    ("INSERT INTO t VALUES (1);", 1),
    ("CREATE STREAMING TABLE t PARTITIONED BY (bucket(4, id)) AS SELECT * FROM STREAM(src);", 1),
    ("CREATE STREAMING TABLE t USING parquet AS SELECT * FROM STREAM(src);", 1),
])
def test_text_spark_does_not_parse_is_an_error_with_file_and_line(spark, tmp_path, sql, line):
    error = failure(tmp_path, sql)
    assert error.code in ("HW_PIPELINE_SQL_INVALID", "HW_PIPELINE_UNSUPPORTED"), str(error)
    assert f"p.sql:{line}:" in str(error), str(error)


def test_properties_comment_partitioning_and_columns_reach_the_delta_table(spark, tmp_path):
    root = project(tmp_path, """
CREATE STREAMING TABLE sales.orders (
  id BIGINT COMMENT 'order id',
  day STRING,
  amount DOUBLE,
  CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW
)
COMMENT 'orders as they came'
PARTITIONED BY (day)
TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.logRetentionDuration' = 'interval 9 days')
AS SELECT id, day, CAST(amount AS DOUBLE) AS amount FROM STREAM(src);

CREATE TEMPORARY VIEW big AS SELECT * FROM STREAM(sales.orders) WHERE amount > 10;

CREATE STREAMING TABLE big_orders;
CREATE FLOW copy_big AS INSERT INTO big_orders BY NAME SELECT id, amount FROM STREAM(big);
""")
    write(root / "lake" / "src", {"id": [1], "day": ["d"], "amount": [5]})
    proj = Project.load(root)
    registry = load_definitions(proj)
    orders = registry.datasets["sales.orders"]
    assert orders.comment == "orders as they came" and orders.partition_by == ("day",)
    assert dict(orders.properties) == {"delta.appendOnly": "true",
                                       "delta.logRetentionDuration": "interval 9 days"}
    assert orders.schema.simpleString() == "struct<id:bigint,day:string,amount:double>"
    assert orders.schema["id"].metadata == {"comment": "order id"}
    assert [f.name for f in registry.flows_of("big_orders")] == ["copy_big"]

    lake = Lakehouse(proj.root, spark)
    graph = Graph(registry, lake).build()
    assert graph.upstream("big_orders") == {"big", "sales.orders"}
    assert not lake.exists("sales.orders")  # building creates nothing
    graph.ensure_table("sales.orders")
    from deltalake import DeltaTable

    table = DeltaTable(lake.path("sales.orders"))
    assert table.metadata().description == "orders as they came"
    assert table.metadata().partition_columns == ["day"]
    assert table.metadata().configuration == {"delta.appendOnly": "true",
                                              "delta.logRetentionDuration": "interval 9 days"}
    assert [f.name for f in table.schema().fields] == ["id", "day", "amount"]
    graph.close()
