"""A pipeline project: ``headwater.toml`` (or Spark Declarative Pipelines'
``spark-pipeline.yml``, see :mod:`headwater.conf.sdp_spec`) plus the definition files it names.

```toml
[pipeline]
name = "orders"
root = "lakehouse"                          # the lakehouse: tables and checkpoints
# root = "s3://bucket/lake"                 # ...or on an object store, with a local
# state_dir = "state"                       # state folder: checkpoints, run files, _ingest
definitions = ["transformations/*.py", "transformations/*.sql"]
catalog = "main"                            # optional: the catalog of the pipeline's tables
database = "sales"                          # optional (or schema): unqualified names live in
                                            # main.sales (sales without a catalog)
trigger = "available-now"                   # default of `headwater run`
master = "local[*]"                         # optional
event_log = true                            # every batch's progress in _event_log
auto_compact = true                         # compact the small files of written tables

[spark]
"spark.sql.shuffle.partitions" = "8"

[storage]                                   # object-store credentials (conf/storage.py)
AWS_ENDPOINT_URL = "http://127.0.0.1:9000"  # delta-rs keys; never printed or logged
AWS_ALLOW_HTTP = "true"
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from headwater.conf.database import check_catalog, check_database, spark_database
from headwater.conf.location import AnyPath, is_remote, location, state_folder
from headwater.conf.sdp_spec import SPEC_FILES, find_spec, load_spec
from headwater.errors import HeadwaterError

CONFIG = "headwater.toml"


@dataclass
class Project:
    dir: Path
    name: str
    root: AnyPath        # a local folder, or an object-store folder (s3://bucket/lake)
    definitions: list[str]
    trigger: str | None = None
    master: str | None = None
    event_log: bool = True
    # Compact small files after each commit of a pipeline table (delta-rs OPTIMIZE,
    # dataChange=false); a table's delta.autoOptimize.autoCompact property wins.
    auto_compact: bool = True
    # no repr: [spark] may hold spark.hadoop.fs.s3a.secret.key (the README shows it)
    spark_conf: dict[str, str] = field(default_factory=dict, repr=False)
    spec: Path | None = None  # the spark-pipeline.yml it was read from, if any
    # The schema unqualified dataset names resolve in (SDP's `database:`); None: the
    # lakehouse's top level (Spark's `default`).
    database: str | None = None
    storage: dict[str, str] = field(default_factory=dict, repr=False)  # secrets: no repr
    # The lakehouse's local state folder (checkpoints, run files, read_files state): the
    # root when None, which a root on an object store refuses (HW_LAKEHOUSE_STATE_DIR_MISSING).
    state_dir: Path | None = None

    @classmethod
    def load(cls, project_dir: str | Path = ".") -> Project:
        """Read the project in ``project_dir`` (a folder, or its headwater.toml /
        spark-pipeline.yml): a spark-pipeline spec wins, and a headwater.toml beside it then
        only adds headwater's keys."""
        path = Path(project_dir).resolve()
        spec = find_spec(path) if path.is_dir() else (path if path.name in SPEC_FILES else None)
        if spec is not None:
            settings = load_spec(spec)
            return cls(**{f.name: getattr(settings, f.name) for f in fields(settings)})
        config = path / CONFIG if path.is_dir() else path
        if not config.is_file():
            raise HeadwaterError(
                "HW_PROJECT_NOT_FOUND", f"No {CONFIG} or spark-pipeline.yml in {path}.",
                "A pipeline project is a folder with a headwater.toml (or Spark Declarative "
                "Pipelines' spark-pipeline.yml) naming its definitions.",
                "Run the command in the project folder, pass --project DIR, or create one with "
                "`headwater init NAME`.")
        try:
            data = tomllib.loads(config.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise HeadwaterError(
                "HW_PROJECT_INVALID", f"{config} is not valid TOML: {exc}.",
                "headwater.toml is read with Python's TOML parser.",
                "Fix the syntax at the position given.") from exc
        section = data.get("pipeline")
        if not isinstance(section, dict):
            raise _invalid(config, "it has no [pipeline] table")
        unknown = set(section) - {"name", "root", "definitions", "trigger", "master",
                                 "event_log", "database", "schema", "catalog", "auto_compact",
                                 "state_dir"}
        if unknown:
            raise _invalid(config, f"unknown [pipeline] keys {sorted(unknown)}")
        definitions = section.get("definitions")
        if isinstance(definitions, str):
            definitions = [definitions]
        if not definitions or not all(isinstance(d, str) for d in definitions):
            raise _invalid(config, "[pipeline] definitions must list file globs")
        for key in ("event_log", "auto_compact"):
            if not isinstance(section.get(key, True), bool):
                raise _invalid(config, f"[pipeline] {key} must be true or false")
        spark_conf = data.get("spark", {})
        if not isinstance(spark_conf, dict):
            raise _invalid(config, "[spark] must be a table of Spark settings")
        storage = data.get("storage", {})
        if not isinstance(storage, dict) or not all(
                isinstance(v, str | bool) for v in storage.values()):
            raise HeadwaterError(
                "HW_STORAGE_INVALID", f"{config}: [storage] must be a table of string values.",
                "[storage] holds delta-rs storage options (AWS_REGION = \"...\").",
                'Write one key = "value" line per option under [storage].')
        return cls(
            dir=config.parent,
            name=str(section.get("name") or config.parent.name),
            root=_root(config.parent, str(section.get("root", "lakehouse"))),
            definitions=list(definitions),
            trigger=section.get("trigger"),
            master=section.get("master"),
            event_log=section.get("event_log", True),
            auto_compact=section.get("auto_compact", True),
            spark_conf={str(k): str(v) for k, v in spark_conf.items()},
            database=_database(config, section),
            storage={str(k): str(v).lower() if isinstance(v, bool) else str(v)
                     for k, v in storage.items()},
            state_dir=_state_dir(config, section),
        )

    def files(self) -> list[Path]:
        found: list[Path] = []
        for pattern in self.definitions:
            matches = sorted(p for p in self.dir.glob(pattern)
                             if p.is_file() and "__pycache__" not in p.parts)
            if not matches:
                raise HeadwaterError(
                    "HW_PROJECT_INVALID", f"definitions pattern {pattern!r} matches no file in "
                    f"{self.dir}.", "Every pattern in [pipeline] definitions should find files.",
                    f"Fix the glob (relative to {(self.spec or Path(CONFIG)).name}) or remove "
                    "it.")
            found.extend(m for m in matches if m not in found)
        return found


def _root(folder: Path, root: str) -> AnyPath:
    """An object-store URI as it is; a local root relative to the project folder."""
    return location(root) if is_remote(root) else (folder / root).resolve()


def _state_dir(config: Path, section: dict) -> Path | None:
    """``state_dir`` relative to the project folder; checked as ``Lakehouse`` checks it."""
    if "state_dir" not in section:
        return None
    value = section["state_dir"]
    if not isinstance(value, str) or not value.strip():
        raise _invalid(config, "[pipeline] state_dir must be a folder (a string)")
    root = _root(config.parent, str(section.get("root", "lakehouse")))
    return state_folder(root, (config.parent / value).resolve() if not is_remote(value)
                        else value)


def _database(config: Path, section: dict) -> str | None:
    """The [pipeline] catalog and database (or schema) as Spark names the database
    (``main__sales``; ``sales`` without a catalog); None for spark_catalog's default."""
    if "database" in section and "schema" in section:
        raise _invalid(config, "[pipeline] sets both database and schema (the same setting)")
    catalog = check_catalog(section["catalog"], f"{config}: [pipeline] catalog") \
        if "catalog" in section else None
    database = section.get("database", section.get("schema"))
    if database is None:
        return None if catalog is None else spark_database(catalog, None)
    return check_database(database, f"{config}: [pipeline] database", catalog)


def _invalid(config: Path, why: str) -> HeadwaterError:
    return HeadwaterError(
        "HW_PROJECT_INVALID", f"{config}: {why}.",
        "headwater.toml names the pipeline, its lakehouse root and its definition files.",
        'Minimal form: [pipeline] name = "p", root = "lakehouse", definitions = ["*.py"].')
