"""mkdocs hooks: the generated parts of the docs site, made at build time.

- ``<!-- generated: NAME -->`` in a page is replaced by ``reference.GENERATORS[NAME]()``
  (error codes, options, settings, project files, names, SQL) or, for ``benchmarks``, by the
  results in benchmarks/results/*.json; an unknown NAME fails the build.
- the benchmark charts (SVG, matplotlib) are added as files of the site; a results file that
  does not match benchmarks/results.py's schema fails the build.
- after the pages are read, every error code, option and setting the code declares must be in
  the built reference, and every public name of ``headwater`` in the API reference; anything
  missing fails the build (tests/test_docs_reference.py checks the same without mkdocs).
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchmarks  # noqa: E402 - this folder on sys.path first (mkdocs loads hooks by path)
import reference  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->")
_cache: dict[str, str] = {}


def generated(name: str, page_uri: str) -> str:
    if name == "benchmarks":
        prefix = posixpath.relpath(".", posixpath.dirname(page_uri) or ".") + "/"
        try:
            return benchmarks.page("" if prefix == "./" else prefix)
        except ValueError as exc:  # a results file that does not match benchmarks/results.py
            raise PluginError(str(exc)) from exc
    if name not in reference.GENERATORS:
        raise PluginError(f"{page_uri}: unknown generated section {name!r}; known: "
                          f"{sorted(reference.GENERATORS)} and 'benchmarks'")
    if name not in _cache:
        _cache[name] = reference.GENERATORS[name]()
    return _cache[name]


def on_files(files: Files, config: Any) -> Files:
    try:
        charts = benchmarks.charts()
    except ValueError as exc:  # a results file that does not match benchmarks/results.py
        raise PluginError(str(exc)) from exc
    for chart in charts:
        files.append(File.generated(config, chart.path, content=chart.svg))
    return files


# "[HW_X] [DELTA_Y] message" in pages written by other generators (the delta-spark
# compatibility run quotes error messages) reads as a Markdown reference link
ERROR_PAIR = re.compile(r"(?<!\\)\[([A-Z][A-Z0-9_.]*)\](?=\s*\[)")
QUOTES_ERRORS = {"delta-spark-compatibility.md", "dlt-notebooks-compatibility.md"}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    uri = page.file.src_uri
    if uri in QUOTES_ERRORS:
        markdown = ERROR_PAIR.sub(r"\\[\1\\]", markdown)
    return MARKER.sub(lambda m: generated(m.group(1), uri), markdown)


def on_env(env: Any, config: Any, files: Files) -> Any:
    """All pages are read by now: what the code declares must be in the reference."""
    pages = {f.src_uri: f.page.markdown or "" for f in files.documentation_pages()
             if f.page is not None}
    missing = reference.missing_from(pages)
    if missing:
        raise PluginError("the reference lacks what the code declares: " + "; ".join(missing))
    return env
