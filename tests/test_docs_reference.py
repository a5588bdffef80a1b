"""The docs' generated reference lists everything the code declares (no Spark, no mkdocs build).

The pages are expanded exactly as the mkdocs hook does at build time (``<!-- generated: NAME
-->`` markers replaced by tools/docs_site/reference.py), then checked with the hook's own
completeness check: every error code of codes.py has its heading, every option of the option
catalog, every session setting and table property, every project-file key, every reserved
name and every public name of ``headwater`` is there. The same check fails ``bash dev.sh
docs``.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "docs_site"))

import benchmarks  # noqa: E402 - tools/docs_site on sys.path first
import reference  # noqa: E402

from headwater.conf import option_catalog  # noqa: E402
from headwater.errors.codes import CODES  # noqa: E402

MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->")


def built_pages() -> dict[str, str]:
    """Every page of docs/ with its generated sections filled in."""
    pages = {}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        uri = path.relative_to(ROOT / "docs").as_posix()
        text = path.read_text()
        pages[uri] = MARKER.sub(
            lambda m: benchmarks.page() if m.group(1) == "benchmarks"
            else reference.GENERATORS[m.group(1)](), text)
    return pages


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return built_pages()


def test_every_marker_names_a_generator() -> None:
    for path in (ROOT / "docs").rglob("*.md"):
        for name in MARKER.findall(path.read_text()):
            assert name == "benchmarks" or name in reference.GENERATORS, f"{path}: {name}"


def test_the_reference_lists_everything_the_code_declares(pages: dict[str, str]) -> None:
    assert reference.missing_from(pages) == []
    errors = pages["reference/errors.md"]
    assert all(f"### {code}" in errors for code in CODES)
    options = pages["reference/options.md"]
    assert all(f"`{o.name}`" in options for g in option_catalog.GROUPS for o in g.options)


def test_a_missing_code_or_option_is_found(pages: dict[str, str]) -> None:
    """The check can fail: take one code's heading and one option out of the pages."""
    some_code = sorted(CODES)[0]
    some_option = option_catalog.KAFKA_SOURCE.options[-1].name
    cut = {uri: text.replace(f"### {some_code}\n", "").replace(f"`{some_option}`", "")
           for uri, text in pages.items()}
    missing = reference.missing_from(cut)
    assert f"error code {some_code}" in missing
    assert f"option {some_option}" in missing


def test_a_public_name_without_its_api_entry_is_found(pages: dict[str, str]) -> None:
    cut = {uri: text.replace("::: headwater.read_files\n", "") for uri, text in pages.items()}
    assert "public name read_files" in reference.missing_from(cut)


def test_generated_sections_hold_no_code_blocks() -> None:
    """tests/test_docs.py runs the blocks of the pages' own text; generated text has none."""
    fence = re.compile(r"^\s*(```|~~~)", re.M)
    for name, generate in reference.GENERATORS.items():
        assert not fence.search(generate()), name
    assert not fence.search(benchmarks.page())


def test_error_codes_show_the_fixes_written_where_they_are_raised(pages: dict[str, str]) -> None:
    errors = pages["reference/errors.md"]
    section = errors.split("### HW_SINK_NO_PATH\n", 1)[1].split("###", 1)[0]
    assert "never guesses a default location" in section  # the why of write/request.py's raise
    assert "delta/write/request.py" in section


def test_every_benchmark_result_has_a_chart_with_its_command() -> None:
    results = benchmarks.load()
    assert len(results) >= 8
    charts = benchmarks.charts()
    assert len(charts) >= len(results)
    for chart in charts:
        svg = ET.fromstring(chart.svg)
        text = "".join(svg.itertext())
        assert "reproduce:" in text, chart.path
    page = benchmarks.page()
    for name, result in results:
        assert f"`{result['command']}`" in page, name
        assert f"benchmarks/charts/{name}-0.svg" in page or not any(
            "chart" in t for t in result["tables"])


# --- the README: one screen that points into the docs ---------------------------------------

README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_fits_one_screen() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) < 150, f"README.md has {len(lines)} lines: move the new part into docs/"
    # .ci/run runs the README's test command; the demo command is the first thing to try
    assert "bash dev.sh test     # the test suite (what CI runs)" in lines
    assert "bash dev.sh demo     # the main job: data lands, bronze -> silver -> gold streams, " \
           "results checked" in lines
    assert lines.index("bash dev.sh test     # the test suite (what CI runs)") < 40


def test_readme_and_docs_links_lead_to_files() -> None:
    """Relative links of the README and the pages lead to files (mkdocs --strict checks the
    pages' links too; this catches the README's, which mkdocs does not build)."""
    for page in [README, *(ROOT / "docs").rglob("*.md")]:
        for target in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (page.parent / target).exists(), f"{page}: {target}"
