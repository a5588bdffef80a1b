"""The ``headwater`` command (``headwater.cli:main``): each module adds its commands to
the one click group of :mod:`.app`."""

from headwater.cli import maintenance, project_commands, watch  # noqa: F401  (they register the commands)
from headwater.cli.app import main

__all__ = ["main"]
