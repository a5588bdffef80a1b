"""The code blocks of README.md and the docs site run (tests/docs_blocks.py says how).

One test per block, in page order, on the suite's shared SparkSession; a page's blocks share
one namespace and one working folder. A block marked ``<!-- not-run: reason -->`` is a skip
whose message is the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil import Example
from tests.docs_blocks import ROOT, Page, documents, load


def _examples() -> list[Example]:
    return [example for path in documents() for example in load(path).examples()]


EXAMPLES = _examples()


def _id(example: Example) -> str:
    return f"{Path(example.path).relative_to(ROOT)}:{example.line}"


@pytest.fixture(scope="module")
def pages(spark) -> Iterator[dict[str, Page]]:
    """One Page per document, started at its first block; each is closed when the next page
    starts (and the last one at the end), so pages never see each other's state."""
    opened: dict[str, Page] = {}
    yield opened
    for page in opened.values():
        page.close()


@pytest.mark.parametrize("example", EXAMPLES, ids=[_id(e) for e in EXAMPLES])
def test_block(example: Example, pages: dict[str, Page], spark) -> None:
    if example.path not in pages:
        for other in pages.values():
            other.close()
        pages.clear()
        pages[example.path] = Page.start(spark)
    example.namespace["__page__"] = pages[example.path]
    example.evaluate()


def test_every_page_is_checked() -> None:
    """The blocks found are the fences of the pages (a lexer that missed a fence would let a
    block go untested)."""
    for path in documents():
        text = path.read_text()
        opening = sum(1 for line in text.splitlines() if line.lstrip().startswith(("```", "~~~")))
        found = [e for e in EXAMPLES if e.path == str(path) and not e.parsed.hidden]
        assert opening == 2 * len(found), f"{path}: {opening} fence lines, {len(found)} blocks"
