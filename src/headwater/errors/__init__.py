"""Errors headwater raises: what happened, why, and how to fix it.

- ``codes.py``: the one catalog of ``HW_...`` codes and their meanings;
- ``base.py``: ``HeadwaterError``, ``find_code``, ``unwrap`` (imports only ``codes``);
- ``spark.py``: Spark's errors in headwater's words, and ``translated()`` (imports ``base``).

The dependency goes one way (codes <- base <- spark <- this package's re-exports).
"""

from headwater.errors.base import HeadwaterError, find_code, unwrap
from headwater.errors.codes import CODES
from headwater.errors.spark import translated

__all__ = ["CODES", "HeadwaterError", "find_code", "translated", "unwrap"]
