"""The generated parts of the docs' reference: error codes, options, settings and names, SQL.

Each generator reads what the code declares and returns Markdown; the mkdocs hook
(hooks.py) puts it where a page says ``<!-- generated: NAME -->``, and
tests/test_docs_reference.py checks that every declared code, option and statement is in it.
Nothing here is written by hand about a code or an option: what a page says about one comes
from its declaration (codes.py's meaning, the what / why / fix of the places that raise it,
option_catalog.py's rows, layout.py's comments, the SQL router's handler docstrings).

Generated Markdown holds no fenced code blocks (tests/test_docs.py runs every code block of
the hand-written pages; generated text has nothing to run).
"""

from __future__ import annotations

import ast
import html
import inspect
import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import headwater
from headwater.conf import layout, option_catalog
from headwater.conf import storage as storage_conf
from headwater.errors.codes import CODES
from headwater.lakehouse.sql import router
from headwater.lakehouse.sql.statements import DELTA_GRAMMAR
from headwater.pipeline import sql_files

SRC = Path(headwater.__file__).resolve().parent


def _line(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped, and square brackets escaped
    (``[OR REPLACE] [USING DELTA]`` would otherwise read as a reference link)."""
    return _line(text).replace("[", "\\[").replace("]", "\\]")


def code(text: str) -> str:
    """Inline code for a table cell (backticks inside are doubled away)."""
    text = _line(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# --- error codes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RaiseSite:
    """One place in the source that raises (or builds) an error with a code."""

    module: str
    line: int
    what: str
    why: str
    fix: str
    error_class: str | None


def _render(node: ast.expr | None) -> str:
    """A message argument as the user reads it: f-string placeholders become ``<name>``."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                name = ast.unparse(value.value)
                name = name.rsplit(".", 1)[-1].strip("()[]'\"")
                parts.append(f"<{name[:24]}>")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left) + _render(node.right)
    return "…"


def raise_sites() -> dict[str, list[RaiseSite]]:
    """Every call in the package whose first argument is an ``HW_`` code literal."""
    sites: dict[str, list[RaiseSite]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and node.args[0].value in CODES):
                continue
            args: list[ast.expr | None] = [*node.args[1:4], None, None, None]
            keywords = {k.arg: k.value for k in node.keywords}
            error_class = keywords.get("error_class")
            sites[node.args[0].value].append(RaiseSite(
                module=str(path.relative_to(SRC.parent)), line=node.lineno,
                what=_render(keywords.get("what", args[0])),
                why=_render(keywords.get("why", args[1])),
                fix=_render(keywords.get("fix", args[2])),
                error_class=_render(error_class) if error_class is not None else None))
    return sites


def _family(code_name: str) -> str:
    return code_name.split("_")[1]


def error_codes() -> str:
    """Every code of codes.py: its meaning, delta-spark's error class where one is given, and
    what the places raising it say (why, fix)."""
    sites = raise_sites()
    out = [f"{len(CODES)} codes. Each message reads `[CODE] what Why: why Fix: fix`; "
           "`<name>` stands for a value filled in when the error is raised.", ""]
    by_family: dict[str, list[str]] = defaultdict(list)
    for name in sorted(CODES):
        by_family[_family(name)].append(name)
    for family, names in sorted(by_family.items()):
        out += [f"## {family.title()}", ""]
        for name in names:
            found = sites.get(name, [])
            classes = sorted({s.error_class for s in found if s.error_class})
            out += [f"### {name}", "", cell(CODES[name]), ""]
            if classes:
                out += ["delta-spark's error class: " + ", ".join(code(c) for c in classes), ""]
            fixes: list[tuple[str, str]] = []
            for site in found:
                pair = (cell(site.why), cell(site.fix))
                if (pair[0] or pair[1]) and pair not in fixes:
                    fixes.append(pair)
            if fixes:
                out += ["| why | fix |", "|---|---|"]
                out += [f"| {why} | {fix} |" for why, fix in fixes[:4]]
                if len(fixes) > 4:
                    out.append(f"| … and {len(fixes) - 4} more | |")
                out.append("")
            where = sorted({f"{s.module}" for s in found})
            out += [f"Raised in: {', '.join(code(w) for w in where) or 'a helper'} "
                    f"({len(found)} place{'s' if len(found) != 1 else ''}).", ""]
    return "\n".join(out)


# --- options --------------------------------------------------------------------------------


def _option_rows(group: option_catalog.OptionGroup) -> Iterator[str]:
    with_applies = any(o.applies for o in group.options)
    head = "| option | default | kind | " + ("applies to | " if with_applies else "") + \
        "meaning |"
    yield head
    yield "|" + "---|" * (5 if with_applies else 4)
    for o in group.options:
        name = code(o.name) + "".join(f" (also {code(a)})" for a in o.aliases)
        applies = f"{cell(o.applies)} | " if with_applies else ""
        yield (f"| {name} | {cell(o.default) or '—'} | {cell(o.kind)} | {applies}"
               f"{cell(o.meaning)} |")


def options() -> str:
    """One table per reader / writer from conf/option_catalog.py, plus storage options."""
    out: list[str] = []
    for group in option_catalog.GROUPS:
        out += [f"## {group.title}", "", f"Example: {code(group.usage)}", ""]
        if group.note:
            out += [group.note, ""]
        out += [*_option_rows(group), ""]
        modules = ", ".join(code(f"headwater/{m}") for m in group.modules)
        out += [f"Read in {modules}.", ""]
    out += ["## Object-store credentials (any Delta or file path)", "",
            "delta-rs' `storage_options` keys, any case, as reader / writer options, in "
            "`[storage]` of headwater.toml or `spark_session(storage_options=...)`: names "
            "starting with " + ", ".join(code(p.upper() + "*")
                                         for p in storage_conf.STORAGE_PREFIXES) + ". "
            "delta-spark's Hadoop names are translated:", "",
            "| Hadoop option | delta-rs key |", "|---|---|"]
    out += [f"| {code(k)} | {code(v.upper())} |" for k, v in storage_conf.S3A_KEYS.items()]
    out += ["", "`fs.s3a.connection.ssl.enabled` is inverted into `AWS_ALLOW_HTTP`. Any other "
            "`fs.s3a.*` option is refused (`HW_STORAGE_OPTION_UNKNOWN`). The same names as "
            "session settings (`spark.hadoop.fs.s3a.access.key`, ...) count for every path.",
            ""]
    return "\n".join(out)


def settings() -> str:
    """Session settings and table properties (option_catalog.SETTINGS)."""
    titles = {"session": "Spark session settings (`spark.conf.set`, `[spark]` in headwater.toml)",
              "table": "Table properties (`TBLPROPERTIES`, `ALTER TABLE ... SET TBLPROPERTIES`)",
              "keyword": "Databricks names taken as keywords"}
    out: list[str] = []
    for where, title in titles.items():
        rows = [s for s in option_catalog.SETTINGS if s.where == where]
        out += [f"## {title}", "", "| name | default | meaning |", "|---|---|---|"]
        out += [f"| {code(s.name)} | {cell(s.default)} | {cell(s.meaning)} |" for s in rows]
        out.append("")
    return "\n".join(out)


def project_files() -> str:
    """headwater.toml's and spark-pipeline.yml's keys (option_catalog)."""
    out = ["## headwater.toml", "", "`[pipeline]`:", "",
           "| key | default | kind | meaning |", "|---|---|---|---|"]
    out += [f"| {code(o.name)} | {cell(o.default)} | {cell(o.kind)} | {cell(o.meaning)} |"
            for o in option_catalog.PROJECT_KEYS.values()]
    out += ["", "| table | meaning |", "|---|---|"]
    out += [f"| {code(k)} | {cell(v)} |" for k, v in option_catalog.PROJECT_TABLES.items()]
    out += ["", "Any other `[pipeline]` key is an error (`HW_PROJECT_INVALID`).", "",
            "## spark-pipeline.yml", "", "| key | meaning |", "|---|---|"]
    out += [f"| {code(k)} | {cell(v)} |" for k, v in option_catalog.SPEC_KEYS.items()]
    out += ["", "`headwater:` keys:", "", "| key | meaning |", "|---|---|"]
    out += [f"| {code(k)} | {cell(v)} |" for k, v in option_catalog.SPEC_HEADWATER_KEYS.items()]
    out.append("")
    return "\n".join(out)


# --- names: conf/layout.py --------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    constant: str
    value: str
    comment: str
    section: str


def layout_names() -> list[Name]:
    """layout.py's string constants with the comment above or beside each, by section."""
    source = Path(inspect.getfile(layout)).read_text()
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    names: list[Name] = []
    section = ""
    constants = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            constants[node.lineno] = (node.targets[0].id, node.value.value)
    pending: list[str] = []
    for number, line in enumerate(lines, start=1):
        text = comments.get(number)
        if line.lstrip().startswith("#") and text is not None:
            heading = re.match(r"-+ (.*?) -+$", text)
            if heading:
                section, pending = heading.group(1), []
            else:
                pending.append(text)
            continue
        if number in constants:
            constant, value = constants[number]
            beside = comments.get(number, "")
            names.append(Name(constant, value, " ".join([*pending, beside]).strip(), section))
            if beside or pending:
                pending = []
        elif not line.strip():
            pending = []
    return names


def names() -> str:
    """Reserved names, configuration keys and test-hook environment variables (layout.py)."""
    by_section: dict[str, list[Name]] = defaultdict(list)
    for name in layout_names():
        by_section[name.section].append(name)
    doc = inspect.getdoc(layout) or ""
    tree = doc.split("::", 1)[1].split("\n\n", 2)[1] if "::" in doc else ""
    out = ["The layout of a lakehouse root, from `headwater/conf/layout.py`:", "",
           '<pre class="hw-layout">' + tree.replace("<", "&lt;").replace(">", "&gt;") + "</pre>",
           ""]
    for section, rows in by_section.items():
        out += [f"## {section[0].upper() + section[1:]}", "", "| name | constant | meaning |",
                "|---|---|---|"]
        out += [f"| {code(n.value)} | {code(n.constant)} | {cell(n.comment) or '—'} |"
                for n in rows]
        out.append("")
    return "\n".join(out)


# --- SQL --------------------------------------------------------------------------------------


_RST_LITERAL = re.compile(r"``(.+?)``(?!`)")


def _html_literal(text: str) -> str:
    """A literal inside ``<code>``: Markdown still reads ``[IN c] [LIKE 'p']`` there as a
    reference link, so brackets and pipes become character references."""
    return (html.escape(text).replace("|", "&#124;").replace("[", "&#91;")
            .replace("]", "&#93;"))


def _doc_line(function: Callable[..., object]) -> str:
    """The first paragraph of a docstring, for a table cell (RST ``literals`` as code)."""
    doc = inspect.getdoc(function) or ""
    text = re.sub(r":\w+:`", "`", " ".join(doc.split("\n\n")[0].split()))  # :func:`x`
    parts = _RST_LITERAL.split(text)  # even: prose, odd: a literal
    return "".join(f"<code>{_html_literal(p)}</code>" if i % 2 else cell(p)
                   for i, p in enumerate(parts))


def sql_statements() -> str:
    """The statements the lakehouse's SQL router runs itself (lakehouse/sql/router.py HANDLERS),
    Delta's own grammar it recognises, and the statements of pipeline SQL files."""
    delta_kinds = {kind: " ".join(words) for words, kind in DELTA_GRAMMAR.items()}
    out = ["## On lakehouse tables: `spark.sql` and `Lakehouse.sql`", "",
           "Spark's parser classifies each statement; the statement kinds below (Spark's "
           "parsed plan class, or Delta's grammar recognised by its leading keywords) are run "
           "by headwater on the Delta table. Every other statement goes to Spark unchanged, "
           "after a guard that refuses what Spark would apply to its catalog copy alone.", "",
           "| statement kind | keywords | what headwater does | handler |", "|---|---|---|---|"]
    by_handler: dict[Callable[..., object], list[str]] = {}
    for kind, handler in router.HANDLERS.items():
        by_handler.setdefault(handler, []).append(kind)
    for handler, kinds in by_handler.items():
        keywords = sorted({delta_kinds[k] for k in kinds if k in delta_kinds})
        out.append(f"| {', '.join(code(k) for k in kinds)} | "
                   f"{', '.join(code(k) for k in keywords) or 'Spark grammar'} | "
                   f"{_doc_line(handler) or '—'} | "
                   f"{code(handler.__module__.rsplit('.', 1)[-1] + '.' + handler.__name__)} |")
    unhandled = sorted(k for k in set(delta_kinds.values()) if k not in router.HANDLERS)
    if unhandled:
        out += ["", "Recognised but not run yet (`HW_SQL_NOT_SUPPORTED_YET`): "
                + ", ".join(code(k) for k in unhandled) + "."]
    out += ["", "## In pipeline SQL files", "", cell(_doc_line_text(sql_files.__doc__ or "")),
            "", "| statement | |", "|---|---|"]
    for words in sql_files._KINDS:
        out.append(f"| {code('CREATE ' + ' '.join(words))} | a dataset of the pipeline |")
    out += [f"| {code('CREATE FLOW name AS INSERT INTO target BY NAME query')} | "
            "an append flow |",
            f"| {code('CREATE FLOW name AS AUTO CDC INTO target ...')} | an AUTO CDC flow |",
            f"| {code('APPLY CHANGES INTO target ...')} | the same, DLT's older spelling |", ""]
    return "\n".join(out)


def _doc_line_text(doc: str) -> str:
    return doc.split("\n\n")[0]


GENERATORS: dict[str, Callable[[], str]] = {
    "error-codes": error_codes,
    "options": options,
    "settings": settings,
    "project-files": project_files,
    "names": names,
    "sql": sql_statements,
}


# --- completeness ---------------------------------------------------------------------------

API_DIRECTIVE = re.compile(r"^::: (headwater(?:\.\w+)*)\s*$", re.M)


def declared() -> dict[str, set[str]]:
    """What the code declares and the reference must show, by kind."""
    return {
        "error code": set(CODES),
        "option": {o.name for g in option_catalog.GROUPS for o in g.options},
        "setting": {s.name for s in option_catalog.SETTINGS},
        "headwater.toml key": set(option_catalog.PROJECT_KEYS),
        "spark-pipeline.yml key": set(option_catalog.SPEC_KEYS),
        "reserved name": {n.value for n in layout_names()},
        "storage option": set(storage_conf.S3A_KEYS),
        "public name": set(headwater.__all__),
    }


def missing_from(pages: dict[str, str]) -> list[str]:
    """What the code declares but the pages (src_uri -> Markdown, markers expanded) lack.

    Codes must have their own heading; options, settings, keys and names must appear as
    inline code; each public name of ``headwater`` needs its own API directive."""
    text = "\n".join(pages.values())
    found_api = {m.group(1).rsplit(".", 1)[-1] for m in API_DIRECTIVE.finditer(text)}
    missing: list[str] = []
    for kind, names in declared().items():
        for name in sorted(names):
            if kind == "error code":
                ok = re.search(rf"^### {re.escape(name)}$", text, re.M) is not None
            elif kind == "public name":
                ok = name in found_api
            else:
                ok = f"`{name}`" in text or f"`` {name} ``" in text
            if not ok:
                missing.append(f"{kind} {name}")
    return missing
