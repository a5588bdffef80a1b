"""Databricks' ``dp`` (``from pyspark import pipelines as dp``) while a pipeline's definitions
load: the names and arguments of Databricks' Python reference for Lakeflow pipelines that
open-source ``pyspark.pipelines`` lacks.

These are the wrapper factories of the ``definitions`` rows of :mod:`headwater.spark.patches`:
lent to ``pyspark.pipelines`` while the definition files run and taken back after, so other
code in the process sees pyspark's module unchanged.

- Names pyspark lacks (the six ``expect*`` decorators, ``create_auto_cdc_from_snapshot_flow``)
  are headwater's own (:mod:`headwater.dlt`).
- Names pyspark has with fewer arguments (``table``, ``materialized_view``,
  ``create_streaming_table``, ``temporary_view``, ``append_flow``, ``create_sink``,
  ``create_auto_cdc_flow``) call pyspark's when the call fits its signature, and headwater's
  :mod:`headwater.dlt` function when it uses one of Databricks' arguments (``private=``,
  ``ignore_null_updates=``, ``once=``, ``expect_all=``, ``row_filter=``, ``path=``...). Those
  the DLT module does not honour it refuses by name, as it does for ``import dlt``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from headwater import dlt
from headwater.errors import HeadwaterError
from headwater.pipeline.api import caller_location

# Databricks' newer spelling -> the DLT module's
_RENAMED = {"private": "temporary"}


def _widened(original: Callable[..., Any], databricks: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)
    accepted = set(signature.parameters)
    known = set(inspect.signature(databricks).parameters)

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if set(kwargs) <= accepted:
            return original(*args, **kwargs)
        # by name, as pyspark's signature names them (positions differ between the two)
        named = {**signature.bind_partial(*args).arguments, **kwargs}
        if str(named.get("format") or "delta").lower() == "delta":
            named.pop("format", None)
        named = {_RENAMED.get(k, k): v for k, v in named.items()}
        unknown = sorted(set(named) - known)
        if unknown:
            raise HeadwaterError(
                "HW_PIPELINE_UNSUPPORTED", f"{caller_location()}: dp.{original.__name__}("
                f"{', '.join(f'{k}=...' for k in unknown)}) is not supported by headwater.",
                "headwater implements Databricks' arguments of dp through its DLT module, "
                "which has no equivalent for these (with them, the call cannot be pyspark's "
                "either).", f"Remove {', '.join(unknown)}.")
        return databricks(**named)

    return call


def _routed(databricks: Callable[..., Any]) -> Callable[[Any], Any]:
    """The factory of a row wrapping pyspark's function: routed to ``databricks``."""
    return lambda original: _widened(original, databricks)


def _lent(own: Callable[..., Any]) -> Callable[[Any], Any]:
    """The factory of a row adding a name pyspark lacks: headwater's own function."""
    return lambda original: own


# the factories the ``definitions`` rows of headwater.spark.patches name
table = _routed(dlt.table)
materialized_view = _routed(dlt.materialized_view)
create_streaming_table = _routed(dlt.create_streaming_table)
temporary_view = _routed(dlt.view)
append_flow = _routed(dlt.append_flow)
create_sink = _routed(dlt.create_sink)
create_auto_cdc_flow = _routed(dlt.create_auto_cdc_flow)
create_auto_cdc_from_snapshot_flow = _lent(dlt.create_auto_cdc_from_snapshot_flow)
expect = _lent(dlt.expect)
expect_or_drop = _lent(dlt.expect_or_drop)
expect_or_fail = _lent(dlt.expect_or_fail)
expect_all = _lent(dlt.expect_all)
expect_all_or_drop = _lent(dlt.expect_all_or_drop)
expect_all_or_fail = _lent(dlt.expect_all_or_fail)
