"""The option catalog (headwater/conf/option_catalog.py) and the code stay in step.

The docs' options reference is generated from the catalog, so an option the code reads but the
catalog lacks would be missing from the docs: each group's modules are parsed (ast) for the
option names they read (``options.get("x")``, ``opts["x"]``, ``"x" in options``,
``parse_bool("x", ...)``), and each one must be declared in its group. The other way round,
every declared option must still be read (its name appears in the code of the group's modules,
docstrings left out). Session settings and table properties are declared in the code as
``*_CONF`` / ``*_PROPERTY`` constants: each must be in the catalog's SETTINGS. The keys of
headwater.toml's [pipeline] and of spark-pipeline.yml are the sets the loaders accept.
No Spark here: the source is only parsed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import headwater
from headwater.conf import option_catalog as catalog
from headwater.conf.project_file import Project
from headwater.conf.sdp_spec import HEADWATER_KEYS, SPEC_KEYS

SRC = Path(headwater.__file__).parent
PARSERS = {"parse_bool", "parse_size", "parse_int", "parse_choice", "parse_columns",
           "parse_positive"}
OPTION_MAPS = re.compile(r"(^|\.)(options|opts)$")


def norm(name: str) -> str:
    """Spark lower-cases option names; ingest accepts a ``cloudFiles.`` prefix; read_files'
    messages name options in snake_case. One spelling for all three."""
    low = name.lower()
    if low.startswith("cloudfiles."):
        low = low[len("cloudfiles."):]
    return low.replace("_", "")


def _is_map(node: ast.AST) -> bool:
    return bool(OPTION_MAPS.search(ast.unparse(node)))


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def read_options(module: Path) -> set[str]:
    """Option names a module reads, as literal strings."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call) and node.args:
            first = _text(node.args[0])
            func = node.func
            if first is None:
                continue
            getter = isinstance(func, ast.Attribute) and func.attr == "get" \
                and _is_map(func.value)
            parser = isinstance(func, ast.Name) and func.id in PARSERS
            if getter or parser:
                found.add(first)
        elif isinstance(node, ast.Subscript) and _is_map(node.value):
            key = _text(node.slice)
            if key is not None:
                found.add(key)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In) \
                and _is_map(node.comparators[0]):
            key = _text(node.left)
            if key is not None:
                found.add(key)
    return found


def code_text(module: Path) -> str:
    """The module's string literals and names, docstrings left out, normalized."""
    tree = ast.parse(module.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and _text(n.body[0].value) is not None}
    parts = [n.value for n in ast.walk(tree) if _text(n) is not None and id(n) not in docstrings]
    return norm(" ".join(parts + built_names(tree)))


def built_names(tree: ast.Module) -> list[str]:
    """Names a function builds from a parameter, ``f"{prefix}offsets"``, completed with the
    constants the module's calls pass for it (``_offset_spec(options, "starting", ...)``)."""
    names: list[str] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    for function in functions:
        params = [a.arg for a in function.args.args]
        for node in ast.walk(function):
            if not (isinstance(node, ast.JoinedStr) and len(node.values) == 2
                    and isinstance(node.values[0], ast.FormattedValue)
                    and isinstance(node.values[0].value, ast.Name)
                    and node.values[0].value.id in params
                    and _text(node.values[1]) is not None):
                continue
            index = params.index(node.values[0].value.id)
            for call in ast.walk(tree):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) \
                        and call.func.id == function.name and len(call.args) > index:
                    prefix = _text(call.args[index])
                    if prefix is not None:
                        names.append(prefix + str(_text(node.values[1])))
    return names


def declared(group: catalog.OptionGroup) -> set[str]:
    names = {norm(n) for o in group.options if not o.pattern for n in (o.name, *o.aliases)}
    return names | {norm(n) for n in group.internal}


@pytest.mark.parametrize("group", catalog.GROUPS, ids=lambda g: g.key)
def test_every_option_read_is_declared(group: catalog.OptionGroup) -> None:
    missing = set()
    for module in group.modules:
        # a module serving several groups (Kafka's reader and writer) may read any of theirs
        known = set().union(*(declared(g) for g in catalog.GROUPS if module in g.modules))
        missing |= {f"{module}: {name}" for name in read_options(SRC / module)
                    if norm(name) not in known}
    assert not missing, (f"options read but not declared in conf/option_catalog.py "
                         f"({group.key}), so missing from the docs: {sorted(missing)}")


@pytest.mark.parametrize("group", catalog.GROUPS, ids=lambda g: g.key)
def test_every_declared_option_is_read(group: catalog.OptionGroup) -> None:
    code = " ".join(code_text(SRC / m) for m in group.modules)
    dead = [o.name for o in group.options if not o.pattern
            and not any(norm(n) in code for n in (o.name, *o.aliases))]
    assert not dead, f"declared in {group.key} but read nowhere in {group.modules}: {dead}"


def test_a_group_names_each_option_once() -> None:
    for group in catalog.GROUPS:
        names = [norm(o.name) for o in group.options]
        assert len(names) == len(set(names)), group.key


def declared_settings() -> dict[str, str]:
    """Every ``NAME_CONF = "..."`` / ``NAME_PROPERTY = "..."`` constant of the package."""
    found: dict[str, str] = {}
    for module in SRC.rglob("*.py"):
        for node in ast.parse(module.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else \
                node.target if isinstance(node, ast.AnnAssign) else None
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and re.search(r"_(CONF|PROPERTY)$", target.id) \
                    and value is not None and _text(value) is not None:
                found[str(_text(value))] = f"{module.relative_to(SRC)}:{target.id}"
    return found


def test_every_setting_constant_is_in_the_catalog() -> None:
    settings = declared_settings()
    assert len(settings) >= 10  # the scan finds the constants (layout.py alone has eight)
    names = {s.name for s in catalog.SETTINGS}
    missing = {where: name for name, where in settings.items() if name not in names}
    assert not missing, f"settings declared in the code, missing from SETTINGS: {missing}"
    dead = names - set(settings)
    assert not dead, f"SETTINGS lists names no *_CONF / *_PROPERTY constant declares: {dead}"


def _pipeline_keys() -> set[str]:
    """The [pipeline] keys Project.load accepts: the set it subtracts from the given keys."""
    source = Path(SRC / "conf" / "project_file.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) \
                and isinstance(node.right, ast.Set):
            return {str(_text(e)) for e in node.right.elts}
    raise AssertionError("Project.load's set of [pipeline] keys was not found")


def test_project_keys_are_in_the_catalog() -> None:
    assert set(catalog.PROJECT_KEYS) == _pipeline_keys()
    assert {k for k in catalog.SPEC_KEYS} == SPEC_KEYS
    assert {k for k in catalog.SPEC_HEADWATER_KEYS} == HEADWATER_KEYS
    assert Project.__dataclass_fields__  # the loader the keys belong to


def test_the_scan_finds_what_it_should() -> None:
    """A scan that found nothing would make the tests above pass vacuously."""
    delta = read_options(SRC / "delta" / "source.py")
    assert {"maxfilespertrigger", "ignoredeletes", "failondataloss"} <= delta
    assert "maxOffsetsPerTrigger" in read_options(SRC / "kafka" / "options.py")
