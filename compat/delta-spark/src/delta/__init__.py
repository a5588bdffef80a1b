"""delta-spark's ``delta`` package on headwater (see this distribution's README)."""

from delta.pip_utils import configure_spark_with_delta_pip
from delta.tables import DeltaTable
from delta.version import __version__

__all__ = ["DeltaTable", "__version__", "configure_spark_with_delta_pip"]
