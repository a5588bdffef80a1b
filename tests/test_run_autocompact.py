"""Auto-compaction in ``headwater run``: on by default for every table a pipeline writes, off
per pipeline (``auto_compact = false``) or per table (``delta.autoOptimize.autoCompact``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from tests.pipelines import project
from tests.support import write

from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.pipeline.run import run_project

# minNumFiles 4: compaction is due at 4 small files, so a dozen micro-batches show it (the
# default is 50)
PIPELINE = """
SMALL = {"headwater.autoCompact.minNumFiles": "4"}

@headwater.table(table_properties=SMALL)
def bronze():
    return headwater.read_stream("src", maxFilesPerTrigger=1)

@headwater.table(table_properties={**SMALL, "delta.autoOptimize.autoCompact": "false"})
def kept():
    return headwater.read_stream("src", maxFilesPerTrigger=2)

@headwater.table
def silver():
    return headwater.read_stream("bronze")
"""


def land(root: Path, start: int, commits: int) -> None:
    for i in range(start, start + commits):  # one file per commit: one micro-batch each
        write(root / "src", {"id": [i]})


def files(root: Path, name: str) -> int:
    return len(DeltaTable(str(root / name)).file_uris())


def operations(root: Path, name: str) -> list[str]:
    return [h["operation"] for h in DeltaTable(str(root / name)).history()]


def ids(root: Path, name: str) -> list[int]:
    table = DeltaTable(str(root / name)).to_pyarrow_dataset().to_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def test_run_compacts_pipeline_tables_and_downstream_reads_every_row_once(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    root = proj / "lake"
    assert Project.load(proj).auto_compact is True  # the default, unset in headwater.toml
    land(root, 0, 8)
    outcome = run_project(proj, echo=lambda _: None, event_log=False)
    assert all(r.ok for r in outcome.results), outcome.results
    land(root, 8, 4)  # a second run: silver resumes after compactions it has not read
    outcome = run_project(proj, echo=lambda _: None, event_log=False)
    assert all(r.ok for r in outcome.results), outcome.results

    assert files(root, "bronze") < 4  # bounded by minNumFiles, 12 micro-batches written
    assert operations(root, "bronze").count("OPTIMIZE") >= 3
    assert ids(root, "bronze") == list(range(12))
    # the table property wins over the pipeline's setting: every file stays (6 micro-batches
    # of 2 source files, read natively: one output file per source file)
    assert files(root, "kept") == 12 and "OPTIMIZE" not in operations(root, "kept")
    # compactions commit dataChange=false: the downstream stream reads each row exactly once
    assert ids(root, "silver") == list(range(12))


def test_auto_compact_false_in_headwater_toml_keeps_every_file(spark, tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    config = proj / "headwater.toml"
    config.write_text(config.read_text() + "auto_compact = false\n")
    root = proj / "lake"
    land(root, 0, 8)
    outcome = run_project(proj, select=["bronze"], echo=lambda _: None, event_log=False)
    assert all(r.ok for r in outcome.results), outcome.results
    assert files(root, "bronze") == 8 and "OPTIMIZE" not in operations(root, "bronze")
    assert ids(root, "bronze") == list(range(8))


def test_auto_compact_must_be_a_boolean(tmp_path):
    proj = project(tmp_path, {"p.py": PIPELINE})
    config = proj / "headwater.toml"
    config.write_text(config.read_text() + 'auto_compact = "yes"\n')
    with pytest.raises(HeadwaterError) as err:
        Project.load(proj)
    assert err.value.code == "HW_PROJECT_INVALID" and "auto_compact" in str(err.value)


CDC_PIPELINE = """
@headwater.temporary_view  # read by the CDC flow itself: one source commit per micro-batch
def changes():
    return headwater.read_stream("src", maxFilesPerTrigger=1)

headwater.create_streaming_table(
    "current", table_properties={"headwater.autoCompact.minNumFiles": "3"})
headwater.create_auto_cdc_flow(target="current", source="changes", keys=["k"],
                               sequence_by="id", apply_as_deletes="op = 'D'")
"""


def test_an_auto_cdc_target_and_its_state_are_compacted(spark, tmp_path):
    """AUTO CDC commits into its target and into its state table every micro-batch: each
    batch here upserts a key and deletes another (a tombstone appended to the state)."""
    from headwater.conf.layout import CDC_STATE

    proj = project(tmp_path, {"p.py": CDC_PIPELINE})
    root = proj / "lake"
    for i in range(6):  # one micro-batch each
        write(root / "src", {"id": [i, i], "k": [i, 100 + i], "op": ["I", "D"]})
    outcome = run_project(proj, echo=lambda _: None, event_log=False)
    assert all(r.ok for r in outcome.results), outcome.results
    assert files(root, "current") < 3
    assert ids(root, "current") == list(range(6))
    # the state table follows the target's settings: 6 tombstone appends, compacted at 3
    state = DeltaTable(str(root / "current" / CDC_STATE))
    assert "OPTIMIZE" in [h["operation"] for h in state.history()], state.history()
    assert len(state.file_uris()) < 3
