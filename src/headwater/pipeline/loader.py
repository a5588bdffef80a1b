"""Loading a pipeline project's definition files into a registry.

Python files run with the registry active (headwater's decorators and ``pyspark.pipelines``'
both register into it); SQL files go through :meth:`Registry.register_sql` (Spark's parser,
see :mod:`headwater.pipeline.sql_files`). A file in Databricks' notebook source format (see
:mod:`headwater.pipeline.notebook`) runs cell by cell in order: Python cells in one namespace,
SQL cells as pipeline SQL (a cell boundary ends a statement), ``%md`` cells are text;
``%pip`` cells are checked against the installed packages (a missing one is an error naming
it), ``%run`` is an error (headwater loads the files the project lists), and any other magic
(``%sh``, ``%fs``, ``%scala``, ...) is not run, with a warning.

``import dlt`` in a definition file is :mod:`headwater.dlt` while the files load (the module
Databricks' pipelines give that name), and every Python definition file has a ``dbutils``
global (:mod:`headwater.dlt.dbutils`), as Databricks' notebooks do."""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle

from headwater.conf.project_file import Project
from headwater.errors import HeadwaterError
from headwater.lakehouse.database import using_database
from headwater.pipeline import notebook
from headwater.pipeline.fields import LAUNCH_DIR
from headwater.pipeline.registry import Registry, collecting
from headwater.spark import patches
from headwater.spark.jvm import thread_session
from headwater.spark.session import activated

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def load_definitions(project: Project, spark: SparkSession | None = None) -> Registry:
    """Run every definition file; return the filled (finished) registry.

    spark: the pipeline's session (its lakehouse's); default this thread's active session. It is made
    the active one while the files run, so ``SparkSession.active()`` in them returns it (the
    one active before is active again after).
    Python files see it as a global ``spark``, as SDP's CLI injects one; a project read from
    a spark-pipeline.yml also loads with its folder as Python's working directory, as SDP
    does, while the paths Spark resolves (a reader's, a sink's) stay relative to the folder
    the run was launched from, as under SDP (docs/guides/sdp-projects.md).
    The project's ``database`` is the session's current database while they run."""
    registry = Registry(project.database)
    files = list(project.files())
    # modules beside the definitions import as on Databricks (the project's folder and each
    # definition file's own folder on sys.path while they load)
    folders = list(dict.fromkeys([str(project.dir), *(str(f.parent) for f in files)]))
    sys.path[:0] = folders
    by_value = _ByValueFinder(folders, registry.pickled_by_value)
    sys.meta_path.insert(0, by_value)
    spark = spark or thread_session()
    cwd = os.getcwd()
    launched = LAUNCH_DIR.set(cwd)
    try:
        if project.spec is not None:
            os.chdir(project.dir)
        with collecting(registry), patches.scoped(patches.DEFINITIONS), _dlt_module(), \
                activated(spark) if spark is not None else contextlib.nullcontext(), \
                using_database(spark, project.database) if spark is not None \
                else contextlib.nullcontext():
            for file in files:
                if file.suffix not in (".sql", ".py"):
                    raise HeadwaterError(
                        "HW_PROJECT_INVALID", f"{file}: definitions are .py or .sql files.",
                        "headwater reads Python decorators and SQL CREATE statements.",
                        "Rename the file or narrow the glob.")
                text = file.read_text()
                if notebook.notebook_language(text) is not None:
                    _run_notebook(file, text, registry, spark)
                elif file.suffix == ".sql":
                    registry.register_sql(text, file)
                else:
                    _run_python_file(file, {**({"spark": spark} if spark is not None else {}),
                                            "dbutils": _dbutils(spark)},
                                     registry.pickled_by_value)
    finally:
        os.chdir(cwd)
        LAUNCH_DIR.reset(launched)
        for folder in folders:
            sys.path.remove(folder)
        sys.meta_path.remove(by_value)
    return registry.finish()


class _ByValueFinder(importlib.abc.MetaPathFinder):
    """While definitions load: a module found in the project's folders (``config.py``
    beside the definitions) is pickled by value with the UDFs that use it, as soon as it is
    imported (``spark.udf.register`` pickles at once). Spark's Python workers (on a cluster,
    other machines) do not have the project's folders on their path."""

    def __init__(self, folders: list[str], registered: list[ModuleType]) -> None:
        self.folders = folders
        self.registered = registered

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if "." in name:  # a package's submodule: its package decided
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, self.folders)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ByValueLoader(spec.loader, self.registered)
        return spec


class _ByValueLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, registered: list[ModuleType]) -> None:
        self.inner = inner
        self.registered = registered

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        cloudpickle.register_pickle_by_value(module)
        self.registered.append(module)


def _run_python_file(file: Path, init_globals: dict[str, object],
                     registered: list[ModuleType]) -> None:
    """Run a definition file as the module ``headwater_pipeline.<stem>``, whose functions
    (UDFs among them) Spark pickles by value: its workers cannot import that module."""
    name = f"headwater_pipeline.{file.stem}"
    module = ModuleType(name)
    module.__file__ = str(file)
    module.__dict__.update(init_globals)
    sys.modules[name] = module
    cloudpickle.register_pickle_by_value(module)
    registered.append(module)
    try:
        exec(compile(file.read_bytes(), str(file), "exec"), module.__dict__)  # noqa: S102 - the user's definitions, as runpy runs them
    except HeadwaterError:
        raise
    except Exception as exc:
        raise _definition_error(file, exc) from exc
    finally:  # as runpy: the module is gone after (its name stays pickled by value)
        sys.modules.pop(name, None)


def _definition_error(file: Path, exc: BaseException, line: int | None = None) -> HeadwaterError:
    """The file's line where ``exc`` was raised (a SyntaxError's own line), else ``line``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve() == file.resolve()]
    at = exc.lineno if isinstance(exc, SyntaxError) and exc.lineno else \
        frames[-1].lineno if frames else line
    where = f"{file}:{at}" if at else str(file)
    return HeadwaterError(
        "HW_PIPELINE_DEFINITION_FAILED",
        f"{where}: loading the definitions failed: {type(exc).__name__}: {exc}",
        "Definition files are run once to register their datasets.",
        "Fix the error at that line.")


# What ``import dlt`` and ``dbutils`` are in definition files. headwater.dlt is a room above
# this one (it is written over pipeline.api): it registers itself here when it is imported
# (register_dlt), and entering the ``definitions`` scope of spark/patches.py imports it (its
# ``dp`` rows are headwater.dlt's), so it is registered before any definition file runs.
_dlt: tuple[ModuleType, Callable[[SparkSession | None], Any]] | None = None


def register_dlt(module: ModuleType, dbutils: Callable[[SparkSession | None], Any]) -> None:
    """Called by headwater.dlt on import: ``module`` is what ``import dlt`` gives while
    definitions load, ``dbutils(spark)`` a definition file's ``dbutils`` global."""
    global _dlt
    _dlt = (module, dbutils)


def _registered_dlt() -> tuple[ModuleType, Callable[[SparkSession | None], Any]]:
    if _dlt is None:  # the definitions scope imports headwater.dlt: never reached
        raise HeadwaterError(
            "HW_PIPELINE_DEFINITION_FAILED", "headwater.dlt is not registered with the loader.",
            "Definition files get `import dlt` and `dbutils` from headwater.dlt.",
            "Import headwater.dlt before loading definitions.")
    return _dlt


@contextlib.contextmanager
def _dlt_module() -> Iterator[None]:
    """``import dlt`` gives headwater.dlt while the definitions load; what was there before
    (nothing, or another package's ``dlt``) comes back afterwards."""
    missing = object()
    before = sys.modules.get("dlt", missing)
    sys.modules["dlt"] = _registered_dlt()[0]
    try:
        yield
    finally:
        if before is missing:
            sys.modules.pop("dlt", None)
        else:
            sys.modules["dlt"] = before  # type: ignore[assignment]


def _dbutils(spark: SparkSession | None) -> Any:
    """A definition file's ``dbutils`` (headwater.dlt's, as registered)."""
    return _registered_dlt()[1](spark)


def _no_display(*args: Any, **kwargs: Any) -> None:
    """A notebook's display()/displayHTML(): shows nothing in a pipeline run (as in DLT)."""


def _run_notebook(file: Path, text: str, registry: Registry, spark: SparkSession | None) -> None:
    """A notebook's cells in order (see the module docstring)."""
    namespace: dict[str, Any] = {
        "__name__": f"headwater_pipeline.{file.stem}", "__file__": str(file),
        "__builtins__": __builtins__, "display": _no_display, "displayHTML": _no_display,
        "dbutils": _dbutils(spark)}
    if spark is not None:
        namespace["spark"] = spark
    for cell in notebook.cells(text):
        where = f"{file}:{cell.line}"
        if cell.language == "python":
            _run_python_cell(file, cell, namespace)
        elif cell.language == "sql":
            registry.register_sql(cell.code, file)
        elif cell.language == "md":
            continue
        elif cell.language == "pip":
            _check_pip(where, cell.body)
            registry.warnings.append(f"{where}: %pip cell not run: its packages are "
                                     "installed already")
        elif cell.language == "run":
            raise HeadwaterError(
                "HW_PROJECT_INVALID", f"{where}: %run {cell.body} is not supported.",
                "%run runs another notebook inside this one; a pipeline loads each file its "
                "spec lists instead (Databricks' pipelines refuse %run too).",
                "List that notebook in the pipeline's libraries (spark-pipeline.yml) or "
                "definitions (headwater.toml), or import its functions as a Python module.")
        else:
            registry.warnings.append(f"{where}: a {cell.magic} cell is not run (a pipeline "
                                     "runs Python and SQL cells only)")


def _run_python_cell(file: Path, cell: notebook.Cell, namespace: dict[str, Any]) -> None:
    try:
        code = compile(cell.code, str(file), "exec")
        exec(code, namespace)  # noqa: S102 - the pipeline's own definition code
    except HeadwaterError:
        raise
    except Exception as exc:
        raise _definition_error(file, exc, cell.line) from exc


_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def _check_pip(where: str, body: str) -> None:
    """%pip install: every package named must be installed already (headwater installs
    nothing while it loads a pipeline)."""
    words = body.split()
    if not words or words[0] != "install":
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{where}: %pip {body} is not run.",
            "A pipeline's %pip cells install packages; headwater runs in an environment "
            "prepared beforehand.", "Run that pip command in headwater's environment and "
            "delete the cell.")
    missing = []
    for arg in words[1:]:
        if arg.startswith("-"):
            continue
        name = Path(arg).name.split("-")[0] if arg.endswith(".whl") else arg
        match = _REQUIREMENT.match(name)
        if match is None:
            continue
        try:
            importlib.metadata.version(match.group(1))
        except importlib.metadata.PackageNotFoundError:
            missing.append(arg)
    if missing:
        raise HeadwaterError(
            "HW_PROJECT_INVALID", f"{where}: %pip install needs {', '.join(missing)}, which "
            "is not installed.", "headwater does not install packages while it loads a "
            "pipeline: %pip cells are checked, not run.",
            f"pip install {' '.join(missing)} in the environment headwater runs in.")
