"""delta-spark's ``delta`` package on headwater (see this distribution's README)."""

from delta.pip_utils import configure_spark_with_delta_pip
from delta.tables import DeltaTable

__version__ = "4.0.0"  # the delta-spark Python API this package follows
__all__ = ["DeltaTable", "configure_spark_with_delta_pip"]
