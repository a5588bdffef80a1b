"""``headwater sql`` with a script: --file PATH, --file - / QUERY - (standard input), and a
script whose first line is a comment (which click would read as an option if passed as
QUERY)."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from tests.support import CALL_TIMEOUT, HEADWATER, cli, cli_env, show

from headwater.cli import main

SCRIPT = """-- nightly rebuild of the scores table
/* two statements set it up,
   the last one is printed */
CREATE TABLE scores (id INT, score INT) USING delta;  -- a trailing note
INSERT INTO scores VALUES (1, 10), (2, 20), (3, 30);
-- a comment between statements; a ';' inside a comment; is no separator
DELETE FROM scores WHERE id = 2;  /* DELETE keeps 1 and 3 */
OPTIMIZE scores;  -- Delta's own grammar after a comment
SELECT id, score * 2 AS doubled FROM scores ORDER BY id;
"""


def _printed(stdout: str) -> list[list[str]]:
    lines = stdout.strip().splitlines()
    return [line.split() for line in lines[2:-1]]  # header, rule, rows..., (n rows)


@pytest.mark.procs  # starts a JVM of its own (twice)
def test_a_commented_script_runs_from_a_file_and_from_standard_input(tmp_path):
    lake = tmp_path / "lake"
    lake.mkdir()
    script = tmp_path / "nightly.sql"
    script.write_text(SCRIPT)
    ran = cli("sql", "--file", str(script), "--root", str(lake), cwd=tmp_path)
    assert ran.returncode == 0, show(ran)
    assert _printed(ran.stdout) == [["1", "20"], ["3", "60"]], show(ran)
    # what the script wrote, read back by delta-rs: the table and its log
    table = DeltaTable(str(lake / "scores"))
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "score": 10}, {"id": 3, "score": 30}]
    operations = [h["operation"] for h in reversed(table.history())]
    assert operations[:2] == ["CREATE TABLE", "WRITE"] and "DELETE" in operations

    # standard input: --file - (and QUERY -), a script starting with a comment
    piped = subprocess.run(
        HEADWATER + ["sql", "-", "--root", str(lake)], cwd=tmp_path, capture_output=True,
        text=True, timeout=CALL_TIMEOUT, env=cli_env(), start_new_session=True,
        input="-- how many are left\nSELECT count(*) AS n FROM scores; -- done\n")
    assert piped.returncode == 0, show(piped)
    assert _printed(piped.stdout) == [["2"]], show(piped)


def test_query_and_file_together_or_neither_are_refused(tmp_path):
    (tmp_path / "lake").mkdir()
    script = tmp_path / "q.sql"
    script.write_text("SELECT 1")
    runner = CliRunner()
    both = runner.invoke(main, ["sql", "SELECT 2", "--file", str(script),
                                "--root", str(tmp_path / "lake")])
    assert both.exit_code == 1 and "HW_OPTION_INVALID" in both.output
    assert "Both QUERY and --file" in both.output
    neither = runner.invoke(main, ["sql", "--root", str(tmp_path / "lake")])
    assert neither.exit_code == 1 and "No SQL to run" in neither.output
    # a script starting with `--` passed as QUERY is an option to click: `--` first works
    parsed = runner.invoke(main, ["sql", "--root", str(tmp_path / "nope"), "--",
                                  "-- c\nSELECT 1"])
    assert parsed.exit_code == 1 and "HW_LAKEHOUSE_MISSING" in parsed.output
