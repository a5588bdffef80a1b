"""Table maintenance commands: history, optimize, vacuum and restore of one lakehouse
table (delta-rs on its folder; Spark only for an OPTIMIZE predicate)."""

from __future__ import annotations

import click

from headwater.cli.app import fail, main, names, root_options
from headwater.conf.layout import DELTA_LOG
from headwater.delta import maintenance
from headwater.errors import HeadwaterError
from headwater.lakehouse import list_tables, parse_name
from headwater.monitor.commands import history_lines, resolve_root
from headwater.spark.session import build_session


@main.command()
@click.argument("table")
@root_options
@click.option("--limit", default=20, show_default=True, help="Commits to show, newest first.")
def history(table: str, project_dir: str | None, root: str | None,
        state_dir: str | None, limit: int) -> None:
    """The Delta commit history of TABLE: versions, operations, rows added, writers."""
    try:
        for line in history_lines(resolve_root(project_dir, root), table, limit):
            click.echo(line)
    except HeadwaterError as exc:
        fail(exc)


def _table_folder(project_dir: str | None, root: str | None, table: str) -> str:
    """The folder of lakehouse table ``table`` (HW_TABLE_NOT_FOUND when it has no Delta log)."""
    lake = resolve_root(project_dir, root)
    path = lake / parse_name(table).relative_path
    if not (path / DELTA_LOG).is_dir():
        raise HeadwaterError("HW_TABLE_NOT_FOUND", f"Table {table!r} does not exist in {lake}.",
                             "Maintenance commands act on a lakehouse table's Delta log.",
                             f"Tables here: {', '.join(list_tables(lake)) or 'none'}.")
    return str(path)


@main.command()
@click.argument("table")
@root_options
@click.option("--where", default=None,
              help="Partition predicate limiting what is compacted, e.g. \"day = '2024-01-01'\" "
                   "(starts Spark to read it).")
@click.option("--zorder-by", default=None, help="Columns to Z-order by, comma separated.")
def optimize(table: str, project_dir: str | None, root: str | None,
        state_dir: str | None, where: str | None,
             zorder_by: str | None) -> None:
    """Compact TABLE's small files (dataChange=false: streams reading it see nothing new)."""
    try:
        path = _table_folder(project_dir, root, table)
        if where:  # the predicate is read by Spark's parser, as in SQL
            build_session("local[1]", app_name="headwater-optimize",
                          conf={"spark.ui.enabled": "false"})
        metrics = maintenance.optimize(path, where, names(zorder_by) or None)
    except HeadwaterError as exc:
        fail(exc)
    click.echo(f"optimized {table}: {metrics['numFilesRemoved']} files -> "
               f"{metrics['numFilesAdded']} ({metrics['partitionsOptimized']} partitions)")


@main.command()
@click.argument("table")
@root_options
@click.option("--retain-hours", type=float, default=None,
              help="Keep files a version of the last N hours needs (default 168, the minimum).")
@click.option("--dry-run", is_flag=True, help="Only list the files that would be deleted.")
def vacuum(table: str, project_dir: str | None, root: str | None,
        state_dir: str | None, retain_hours: float | None,
           dry_run: bool) -> None:
    """Delete TABLE's data files no version within the retention references."""
    try:
        files = maintenance.vacuum(_table_folder(project_dir, root, table), retain_hours,
                                   dry_run=dry_run)
    except HeadwaterError as exc:
        fail(exc)
    for name in files:
        click.echo(name)
    click.echo(f"{'would delete' if dry_run else 'deleted'} {len(files)} files of {table}")


@main.command()
@click.argument("table")
@root_options
@click.option("--version", "version", type=int, default=None, help="Version to go back to.")
@click.option("--timestamp", default=None, help="Time to go back to (ISO, UTC if no zone).")
def restore(table: str, project_dir: str | None, root: str | None,
        state_dir: str | None, version: int | None,
            timestamp: str | None) -> None:
    """Restore TABLE to an older version, as a new commit (history is kept)."""
    try:
        metrics = maintenance.restore(_table_folder(project_dir, root, table), version=version,
                                      timestamp=timestamp)
    except HeadwaterError as exc:
        fail(exc)
    click.echo(f"restored {table} to {version if version is not None else timestamp}: "
               f"version {metrics['version']}, {metrics['num_of_files_after_restore']} files "
               f"({metrics['num_restored_files']} restored, {metrics['num_removed_files']} "
               "removed)")
