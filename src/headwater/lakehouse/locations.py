"""A table name's existing location compared with the one a statement gives.

``CREATE OR REPLACE TABLE t ... LOCATION '/x'`` and the table builder's
``createOrReplace().tableName("t").location("/x")`` must not write a table at ``/x`` while
``t`` names a table elsewhere (delta-spark: DELTA_TABLE_LOCATION_MISMATCH, before any write).
One home for the check, so the SQL handler and the builder agree.
"""

from __future__ import annotations

from headwater.delta.log import normalize_uri
from headwater.errors.delta import DeltaAnalysisError
from headwater.lakehouse.names import TableLocations, parse_name


def check_location(lake: TableLocations, name: str, given: str) -> None:
    """Raise DELTA_TABLE_LOCATION_MISMATCH when ``name`` is an existing table of ``lake``
    whose location is not ``given``."""
    if not lake.exists(name):
        return
    existing, wanted = normalize_uri(lake.path(name)), normalize_uri(given)
    if existing == wanted:
        return
    tname = parse_name(name)
    quoted = f"`spark_catalog`.`{tname.schema or 'default'}`.`{tname.table}`"
    raise DeltaAnalysisError(
        "HW_TABLE_LOCATION_MISMATCH",
        f"The location of the existing table {quoted} is `{existing}`. It doesn't match the "
        f"specified location `{wanted}`.",
        "A name refers to one table; replacing it at another location would leave the name "
        "on the old table (or silently move it).",
        f"Leave the LOCATION out to replace the table at `{existing}`, DROP TABLE "
        f"{tname.qualified} first, or use another name.",
        error_class="DELTA_TABLE_LOCATION_MISMATCH")
