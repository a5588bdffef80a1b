"""Spark Declarative Pipelines' project file, ``spark-pipeline.yml``, read as a headwater
:class:`~headwater.conf.project_file.Project`.

```yaml
name: orders
storage: file:///data/orders-storage      # or a path, relative to this file: the lakehouse
libraries:
  - glob:
      include: transformations/**         # a folder/** or a plain file path (SDP's rule)
configuration:                            # Spark settings, strings only (SDP's rule)
  spark.sql.shuffle.partitions: "4"
catalog: main                             # optional: the catalog of the pipeline's tables
database: sales                           # optional (or `schema`): unqualified names
                                          # (defined or read) are main.sales.<name>
headwater:                                # optional: headwater's own keys
  trigger: available-now
  event_log: true
  auto_compact: true                      # compact the small files of written tables
  master: local[2]
```

The keys and checks follow pyspark's own ``pyspark/pipelines/cli.py`` (unknown key, missing
name/storage, both .yml and .yaml, glob shapes, string-only configuration), each as a
``HW_PROJECT_INVALID`` naming the key. headwater's keys may instead live in a
``headwater.toml`` beside the spec, holding only ``[pipeline]`` trigger/master/event_log/auto_compact and
``[spark]``.
"""

from __future__ import annotations

import glob as globlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import yaml

from headwater.conf.database import check_catalog, check_database, spark_database
from headwater.errors import HeadwaterError

SPEC_FILES = ("spark-pipeline.yml", "spark-pipeline.yaml")
SPEC_KEYS = {"name", "storage", "catalog", "database", "schema", "configuration", "libraries",
             "headwater"}
REQUIRED_KEYS = ("name", "storage")
HEADWATER_KEYS = {"trigger", "master", "event_log", "auto_compact"}


def find_spec(folder: Path) -> Path | None:
    """The spec file in ``folder`` (not its parents), None when there is none."""
    found = [folder / n for n in SPEC_FILES if (folder / n).is_file()]
    if len(found) > 1:
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{folder} holds both spark-pipeline.yml and "
            "spark-pipeline.yaml.", "A pipeline has one spec file (SDP refuses this too: "
            "MULTIPLE_PIPELINE_SPEC_FILES_FOUND).", "Delete or rename one of them.")
    return found[0] if found else None


@dataclass(frozen=True)
class SpecSettings:
    """What a spark-pipeline.yml (and a headwater.toml beside it) sets: the fields of a
    :class:`~headwater.conf.project_file.Project` read from it."""

    dir: Path
    name: str
    root: Path
    definitions: list[str]
    trigger: str | None
    master: str | None
    event_log: bool
    auto_compact: bool
    spark_conf: dict[str, str] = field(repr=False)  # may hold secrets
    spec: Path
    database: str | None


def load_spec(spec: Path) -> SpecSettings:
    """Read ``spec`` (and a headwater.toml beside it)."""
    data = _read_yaml(spec)
    unknown = sorted(str(k) for k in data if k not in SPEC_KEYS)
    if unknown:
        raise _invalid(spec, f"unknown key(s) {unknown}",
                       f"Keys are {sorted(SPEC_KEYS)}; headwater's own go under `headwater:`.")
    for key in REQUIRED_KEYS:
        if key not in data:
            raise _invalid(spec, f"the required key {key!r} is missing",
                           "Add `name: <pipeline>` and `storage: <folder or file:// URI>`.")
    if "libraries" not in data:
        raise _invalid(spec, "`libraries` is missing, so the pipeline has no definitions",
                       "Add `libraries: [{glob: {include: transformations/**}}]`.")
    if "database" in data and "schema" in data:
        raise _invalid(spec, "both `database` and `schema` are set",
                       "They are the same setting: keep one.")
    database = _database(spec, data.get("catalog"), data.get("database", data.get("schema")))
    extra = _headwater_keys(spec, data.get("headwater") or {})
    spark_conf = {**_string_map(spec, data.get("configuration") or {}, "configuration")}
    beside = spec.parent / "headwater.toml"
    if beside.is_file():
        toml_keys, toml_conf = _headwater_toml(beside)
        extra = {**toml_keys, **extra}
        spark_conf = {**toml_conf, **spark_conf}
    return SpecSettings(
        dir=spec.parent, name=str(data["name"]), root=_storage(spec, data["storage"]),
        definitions=_libraries(spec, data["libraries"]), trigger=extra.get("trigger"),
        master=extra.get("master"), event_log=extra.get("event_log", True),
        auto_compact=extra.get("auto_compact", True),
        spark_conf=spark_conf, spec=spec, database=database)


def _read_yaml(spec: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{spec} is not valid YAML: {' '.join(str(exc).split())}.",
            "spark-pipeline.yml is read with PyYAML's safe loader.",
            "Fix the syntax at the line given.") from exc
    if not isinstance(data, dict):
        raise _invalid(spec, "it is not a mapping of keys", "Write `name:`, `storage:` and "
                       "`libraries:` at the top level.")
    return data


def _storage(spec: Path, value: Any) -> Path:
    """SDP's storage (a file:// URI or a path relative to the spec) as the lakehouse root."""
    if not isinstance(value, str) or not value.strip():
        raise _invalid(spec, "`storage` must be a folder path or a file:// URI",
                       "e.g. `storage: pipeline-storage` or `storage: file:///data/p`.")
    url = urlparse(value)
    if url.scheme == "file":
        return Path(unquote(url.path)).resolve()
    if url.scheme and len(url.scheme) > 1:  # one letter: a Windows drive
        raise _invalid(spec, f"storage {value!r} is a {url.scheme}:// location",
                       "headwater's lakehouse (tables and checkpoints) is a local or mounted "
                       "folder; use a path or a file:// URI.")
    return (spec.parent / value).resolve()


def _libraries(spec: Path, value: Any) -> list[str]:
    """``libraries: [{glob: {include: ...}}]`` as globs relative to the spec's folder."""
    if not isinstance(value, list) or not value:
        raise _invalid(spec, "`libraries` must list at least one `- glob: {include: ...}`",
                       "e.g. libraries: [{glob: {include: transformations/**}}].")
    globs: list[str] = []
    for entry in value:
        include = entry.get("glob", {}).get("include") if isinstance(entry, dict) \
            and isinstance(entry.get("glob"), dict) else None
        if not isinstance(include, str) or not include.strip():
            raise _invalid(spec, f"libraries entry {entry!r} is not `glob: {{include: ...}}`",
                           "Each entry is `- glob:` with an `include:` pattern.")
        globs.append(_checked_glob(spec, include.strip()))
    return globs


def _checked_glob(spec: Path, pattern: str) -> str:
    """SDP's rule: a plain file path, or a folder ending in ``/**`` (every file under it)."""
    if not globlib.has_magic(pattern):
        return pattern
    if pattern.endswith("/**") and not globlib.has_magic(pattern[:-3]):
        return pattern + "/*"
    raise _invalid(spec, f"libraries pattern {pattern!r} is not a file path or a folder/**",
                   "SDP accepts only these two shapes (PIPELINE_SPEC_INVALID_GLOB_PATTERN); "
                   "write e.g. `transformations/**`.")


def _string_map(spec: Path, value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _invalid(spec, f"`{key}` must be a mapping, not a {type(value).__name__}",
                       f"Write `{key}:` followed by indented `name: \"value\"` lines.")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise _invalid(spec, f"`{key}` entry {k!r}: {v!r} is not a string to a string",
                           'Quote the value (e.g. "8", "true"), as SDP requires.')
    return dict(value)


def _database(spec: Path, catalog: Any, database: Any) -> str | None:
    """SDP's (and Databricks') default catalog and schema: the database unqualified names of
    the pipeline live in, as Spark names it (``sales``; ``main__sales`` for schema ``sales``
    of catalog ``main``); None for ``spark_catalog.default``."""
    catalog_name = None if catalog is None else check_catalog(catalog, f"{spec}: catalog")
    if database is None:
        return None if catalog_name is None else spark_database(catalog_name, None)
    return check_database(database, f"{spec}: database", catalog_name)


def _headwater_keys(spec: Path, section: Any) -> dict[str, Any]:
    if not isinstance(section, dict):
        raise _invalid(spec, "`headwater:` must be a mapping",
                       "e.g. headwater: {trigger: available-now, event_log: true}.")
    unknown = sorted(str(k) for k in section if k not in HEADWATER_KEYS)
    if unknown:
        raise _invalid(spec, f"unknown headwater key(s) {unknown}",
                       f"headwater: takes {sorted(HEADWATER_KEYS)}.")
    for key in ("event_log", "auto_compact"):
        if not isinstance(section.get(key, True), bool):
            raise _invalid(spec, f"headwater.{key} must be true or false", "Write true/false.")
    for key in ("trigger", "master"):
        if key in section and not isinstance(section[key], str):
            raise _invalid(spec, f"headwater.{key} must be a string", 'Quote it.')
    return dict(section)


def _headwater_toml(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """headwater's keys from a headwater.toml beside the spec (which names no definitions)."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise HeadwaterError("HW_PROJECT_INVALID", f"{path} is not valid TOML: {exc}.",
                             "headwater.toml is read with Python's TOML parser.",
                             "Fix the syntax at the position given.") from exc
    section = data.get("pipeline", {})
    if not isinstance(section, dict):
        raise _invalid(path, "[pipeline] must be a table", "Write [pipeline] trigger = \"...\".")
    clash = sorted(set(section) - HEADWATER_KEYS)
    if clash:
        raise _invalid(path, f"[pipeline] {clash} beside a spark-pipeline spec",
                       "The spec names the pipeline, storage and libraries; a headwater.toml "
                       f"beside it holds only {sorted(HEADWATER_KEYS)} and [spark].")
    keys = _headwater_keys(path, section)
    conf = data.get("spark", {})
    if not isinstance(conf, dict):
        raise _invalid(path, "[spark] must be a table of Spark settings", "Fix [spark].")
    return keys, {str(k): str(v) for k, v in conf.items()}


def _invalid(spec: Path, why: str, fix: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_PROJECT_INVALID", f"{spec}: {why}.",
        "spark-pipeline.yml follows Spark Declarative Pipelines' spec: name, storage, "
        "libraries, configuration, catalog/database, plus an optional headwater: section.",
        fix)
