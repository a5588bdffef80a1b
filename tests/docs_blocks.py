"""Every fenced code block of README.md and docs/ runs, and the output it shows is checked.

Sybil (pinned in the test extra) lexes the Markdown; this module says what each block is:

- ``python``: executed, in one namespace per page that starts with ``spark`` (the suite's
  shared session). What it prints is kept for an output block after it.
- ``bash`` / ``console``: each command runs. ``headwater ...`` runs in-process through click
  (same session, no new JVM), ``cd DIR`` moves the page's working folder; anything else
  cannot run here and the block must say so (below).
- ``sql``: each statement runs with ``spark.sql``; the last result is shown for an output block.
- ``toml`` / ``yaml`` / ``json``: parsed (a syntax error fails).
- a block with ``title="path/to/file"`` (Material's file-name bar) is written to that path
  under the page's folder instead: project files that a later block runs.
- ``/tmp/headwater`` in a block stands for the page's folder (so the examples' absolute paths
  are copy-paste runnable, and each page's test writes into a fresh folder of its own).
- ``title="Output"``: compared with what the block before it printed (doctest's rules:
  whitespace normalized, ``...`` matches anything).
- ``<!-- not-run: reason -->`` on the line before a block: not run, reported as a skip with
  the reason (a cluster URL, real credentials, a command that runs for minutes).
- ``<!-- invisible-code-block: python ... -->``: Python run but not shown (test data).

Each page runs in a fresh temporary folder (its working directory while a block runs); after
the page, streams it started are stopped, the lakehouse it attached is detached and the
session's SQL settings are put back, so the next test file sees the session as it was.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import json
import os
import re
import shlex
import signal
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]
INFO = re.compile(r"(?P<info>[^\n]*)$\n", re.M)
NOT_RUN = re.compile(r"^[ \t]*<!--\s*not-run:\s*(?P<reason>.+?)\s*-->[ \t]*\n", re.M)
HIDDEN = re.compile(r"^[ \t]*<!--\s*invisible-code-block:\s*python[ \t]*\n(?P<source>.*?)^[ \t]*-->",
                    re.M | re.S)
TITLE = re.compile(r'title="([^"]*)"')
# Absolute paths in the examples start here; each page's blocks run with it mapped to the
# page's own folder (Spark's JVM and Python workers keep the test process's working directory,
# so relative paths would not land in the page's folder).
DOCS_ROOT = "/tmp/headwater"
SHELL = {"bash", "console", "shell", "sh"}
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass(frozen=True)
class Block:
    language: str
    title: str | None
    source: str
    not_run: str | None = None   # the reason
    hidden: bool = False

    def placed(self, folder: Path) -> Block:
        """The block with DOCS_ROOT standing for ``folder`` (outputs keep DOCS_ROOT)."""
        if self.is_output:
            return self
        return Block(self.language, self.title, self.source.replace(DOCS_ROOT, str(folder)),
                     self.not_run, self.hidden)

    @property
    def is_output(self) -> bool:
        return self.title == "Output"

    @property
    def is_file(self) -> bool:
        return bool(self.title) and not self.is_output


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse(document: Document) -> Iterator[Region]:
    """One region per fenced block (with the not-run reason before it) and per hidden block."""
    text = document.text
    hidden_spans = []
    for match in HIDDEN.finditer(text):
        hidden_spans.append((match.start(), match.end()))
        yield Region(match.start(), match.end(),
                     Block("python", None, match.group("source"), hidden=True), evaluate)
    reasons = {m.end(): m.group("reason") for m in NOT_RUN.finditer(text)}
    used: set[int] = set()
    lexer = RawFencedCodeBlockLexer(info_pattern=INFO, mapping={"info": "info",
                                                                 "source": "source"})
    for region in lexer(document):
        if any(a <= region.start < b for a, b in hidden_spans):
            continue
        info = region.lexemes["info"].strip()
        language = info.split()[0] if info else ""
        title = TITLE.search(info)
        line_start = text.rfind("\n", 0, region.start) + 1
        reason = reasons.get(line_start)
        if reason is not None:
            used.add(line_start)
        yield Region(region.start, region.end,
                     Block(language, title.group(1) if title else None,
                           str(region.lexemes["source"]), reason), evaluate)
    stray = set(reasons) - used
    if stray:
        line = text.count("\n", 0, min(stray)) + 1
        raise ValueError(f"{document.path}:{line}: a not-run marker with no code block under it")


def load(path: Path) -> Document:
    return Document.parse(str(path), parse)


# --- running a page ----------------------------------------------------------------------------


@dataclass
class Page:
    """A page's state while its blocks run."""

    spark: Any
    folder: Path
    cwd: Path
    output: str | None = None
    previous_not_run: bool = False
    streams_before: set[str] = field(default_factory=set)
    conf_before: dict[str, str] = field(default_factory=dict)
    lakehouse_before: Any = None

    @classmethod
    def start(cls, spark: Any) -> Page:
        from headwater import Lakehouse

        folder = Path(tempfile.mkdtemp(prefix="hw-docs-"))
        return cls(spark=spark, folder=folder, cwd=folder,
                   streams_before={q.id for q in spark.streams.active},
                   conf_before=dict(spark.conf.getAll),
                   lakehouse_before=Lakehouse.of(spark))

    def close(self) -> None:
        import shutil

        from headwater import Lakehouse
        from headwater.conf import storage

        for query in self.spark.streams.active:
            if query.id not in self.streams_before:
                query.stop()
        attached = Lakehouse.of(self.spark)
        if attached is not None and attached is not self.lakehouse_before:
            attached.detach()
            if self.lakehouse_before is not None and self.lakehouse_before.root.is_dir():
                self.lakehouse_before.attach()
        storage.set_defaults({})
        now = dict(self.spark.conf.getAll)
        for key, value in self.conf_before.items():
            if now.get(key) != value:
                with contextlib.suppress(Exception):
                    self.spark.conf.set(key, value)
        for key in set(now) - set(self.conf_before):
            with contextlib.suppress(Exception):
                self.spark.conf.unset(key)
        shutil.rmtree(self.folder, ignore_errors=True)

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        before = Path.cwd()
        os.chdir(self.cwd)
        try:
            yield
        finally:
            os.chdir(before)


def evaluate(example: Example) -> str | None:
    page: Page = example.namespace["__page__"]
    block = example.parsed.placed(page.folder)
    if block.not_run:
        page.previous_not_run, page.output = True, None
        pytest.skip(f"not run: {block.not_run}")
    if block.is_output:
        if page.previous_not_run:
            pytest.skip("the output of a block that is not run")
        return check_output(block.source, page.output)  # (page folder already mapped back)
    page.previous_not_run = False
    launched = Path.cwd()  # the JVM's and the Python workers' working directory
    before = set(os.listdir(launched))
    with page.inside():
        if block.is_file:
            write_file(page, block)
            page.output = None
            return None
        runner = RUNNERS.get(block.language)
        if runner is None:
            return (f"a {block.language or 'plain'} block cannot run: give it a runnable "
                    "language, title=\"Output\", or mark it <!-- not-run: reason -->")
        printed = runner(example, page, block)
        page.output = printed.replace(str(page.folder), DOCS_ROOT)
    strays = [n for n in set(os.listdir(launched)) - before if n in block.source]
    if strays:
        return (f"the block wrote {strays} into {launched}: a relative path reached Spark, "
                f"which resolves it from where the tests started; write {DOCS_ROOT}/...")
    return None


def check_output(expected: str, got: str | None) -> str | None:
    if got is None:
        return "an Output block follows a block that printed nothing"
    if CHECKER.check_output(expected, got, FLAGS):
        return None
    return "the output differs from the page:\n" + CHECKER.output_difference(
        doctest.Example("", expected), got, FLAGS)


def write_file(page: Page, block: Block) -> None:
    assert block.title is not None
    target = (page.folder / block.title).resolve()  # titles are paths under DOCS_ROOT
    if page.folder not in target.parents:
        raise AssertionError(f"title {block.title!r} points outside the page's folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.source)


def run_python(example: Example, page: Page, block: Block) -> str:
    namespace = example.namespace
    namespace.setdefault("spark", page.spark)
    code = compile(block.source, f"{example.path}:{example.line}", "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, namespace)  # noqa: S102 - the docs' own code, run as users run it
    return out.getvalue()


def commands(source: str) -> Iterator[list[str]]:
    """Shell commands of a block: comments dropped, continuations and quoted newlines kept."""
    pending = ""
    for line in source.splitlines():
        pending += line + "\n"
        if pending.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1] + " "
            continue
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        pending = ""
        while "&&" in words:
            cut = words.index("&&")
            if words[:cut]:
                yield words[:cut]
            words = words[cut + 1:]
        if words:
            yield words
    if pending.strip():
        raise AssertionError(f"unfinished command: {pending!r}")


def run_shell(example: Example, page: Page, block: Block) -> str:
    from click.testing import CliRunner

    from headwater.cli import main

    printed = []
    for words in commands(block.source):
        if words[0] == "cd" and len(words) == 2:
            page.cwd = (page.cwd / words[1]).resolve()
            os.chdir(page.cwd)
            continue
        if words[0] != "headwater":
            raise AssertionError(f"`{' '.join(words)}` cannot run in the docs' tests: run it "
                                 "here with headwater's CLI, or mark the block "
                                 "<!-- not-run: reason -->")
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            result = CliRunner().invoke(main, words[1:], catch_exceptions=False)
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        printed.append(result.output)
        if result.exit_code != 0:
            raise AssertionError(f"`{' '.join(words)}` exited {result.exit_code}:\n"
                                 f"{result.output}")
    return "".join(printed)


def sql_statements(source: str) -> list[str]:
    """Statements separated by ``;`` at the end of a line (comments kept for Spark)."""
    parts = re.split(r";[ \t]*(?:--[^\n]*)?\n", source.strip().rstrip(";") + "\n")
    return [p.strip() for p in parts if p.strip() and not all(
        line.strip().startswith("--") or not line.strip() for line in p.splitlines())]


def run_sql(example: Example, page: Page, block: Block) -> str:
    spark = example.namespace.get("spark", page.spark)
    result = None
    for statement in sql_statements(block.source):
        result = spark.sql(statement)
    if result is None or not result.columns:
        return ""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result.show(truncate=False)
    return out.getvalue()


def run_parsed(loader: Any) -> Any:
    def run(example: Example, page: Page, block: Block) -> str:
        loader(block.source)
        return ""
    return run


RUNNERS = {
    "python": run_python, "py": run_python, "pycon": run_python,
    "bash": run_shell, "console": run_shell, "shell": run_shell, "sh": run_shell,
    "sql": run_sql,
    "toml": run_parsed(tomllib.loads), "yaml": run_parsed(yaml.safe_load),
    "json": run_parsed(json.loads),
}
