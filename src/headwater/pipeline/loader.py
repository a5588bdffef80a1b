"""Loading a pipeline project's definition files into a registry.

Python files run with the registry active (headwater's decorators and ``pyspark.pipelines``'
both register into it); SQL files go through :meth:`Registry.register_sql` (Spark's parser,
see :mod:`headwater.pipeline.sql_files`)."""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark import pipelines as sdp_api

from headwater.conf.project import Project
from headwater.errors import HeadwaterError
from headwater.lakehouse.database import using_database
from headwater.pipeline import api
from headwater.pipeline.registry import Registry, collecting
from headwater.spark.session import activate, thread_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def load_definitions(project: Project, spark: SparkSession | None = None) -> Registry:
    """Run every definition file; return the filled (finished) registry.

    spark: the pipeline's session (its lakehouse's); default this thread's active session. It is made
    the active one while the files run, so ``SparkSession.active()`` in them returns it.
    Python files see it as a global ``spark``, as SDP's CLI injects one; a project read from
    a spark-pipeline.yml also loads with its folder as the working directory, as SDP does.
    The project's ``database`` is the session's current database while they run."""
    registry = Registry(project.database)
    sys.path.insert(0, str(project.dir))
    spark = spark or thread_session()
    if spark is not None:
        activate(spark)
    cwd = os.getcwd()
    try:
        if project.spec is not None:
            os.chdir(project.dir)
        with collecting(registry), _sdp_snapshot_flow(), using_database(
                spark, project.database) if spark is not None else contextlib.nullcontext():
            for file in project.files():
                if file.suffix == ".sql":
                    registry.register_sql(file.read_text(), file)
                elif file.suffix == ".py":
                    _run_python_file(file, {"spark": spark} if spark is not None else {})
                else:
                    raise HeadwaterError(
                        "HW_PROJECT_INVALID", f"{file}: definitions are .py or .sql files.",
                        "headwater reads Python decorators and SQL CREATE statements.",
                        "Rename the file or narrow the glob.")
    finally:
        os.chdir(cwd)
        sys.path.remove(str(project.dir))
    return registry.finish()


@contextlib.contextmanager
def _sdp_snapshot_flow() -> Iterator[None]:
    """``dp.create_auto_cdc_from_snapshot_flow`` while definitions load: Databricks' SDP has
    it, pyspark 4.3's ``pyspark.pipelines`` does not; headwater's own is lent to the module
    (and taken back after) unless pyspark has one."""
    name = "create_auto_cdc_from_snapshot_flow"
    if hasattr(sdp_api, name):
        yield
        return
    setattr(sdp_api, name, api.create_auto_cdc_from_snapshot_flow)
    try:
        yield
    finally:
        delattr(sdp_api, name)


def _run_python_file(file: Path, init_globals: dict[str, object]) -> None:
    try:
        runpy.run_path(str(file), init_globals=init_globals,
                       run_name=f"headwater_pipeline.{file.stem}")
    except HeadwaterError:
        raise
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if Path(f.filename).resolve() == file.resolve()]
        where = f"{file}:{frames[-1].lineno}" if frames else str(file)
        raise HeadwaterError(
            "HW_PIPELINE_DEFINITION_FAILED",
            f"{where}: loading the definitions failed: {type(exc).__name__}: {exc}",
            "Definition files are run once to register their datasets.",
            "Fix the error at that line.") from exc
