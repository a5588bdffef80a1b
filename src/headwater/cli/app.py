"""The ``headwater`` command group and what its commands share: failing with a
HeadwaterError, comma lists, the --project/--root/--state-dir options."""

from __future__ import annotations

import sys
from typing import Any

import click

from headwater.errors import HeadwaterError


def fail(exc: HeadwaterError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


def names(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@click.group()
@click.version_option(package_name="headwater")
def main() -> None:
    """Incremental pipelines on Spark Structured Streaming over Delta Lake."""



ROOT_OPTIONS = [
    click.option("--project", "project_dir", default=None,
                 help="Project folder (headwater.toml or spark-pipeline.yml); default: here."),
    click.option("--root", default=None, type=click.Path(file_okay=False),
                 help="The lakehouse folder or object-store URI (s3://bucket/lake) instead of "
                      "a project's (the demo: ./headwater-demo)."),
    click.option("--state-dir", default=None, type=click.Path(file_okay=False),
                 help="The lakehouse's local state folder (run files, checkpoints) when --root "
                      "is on an object store."),
]


def root_options(command: Any) -> Any:
    for option in reversed(ROOT_OPTIONS):
        command = option(command)
    return command


