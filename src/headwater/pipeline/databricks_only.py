"""What only Databricks has, named when a pipeline uses it.

A pipeline written for Databricks may call functions that exist only there: the AI functions
(``ai_query``, ``ai_classify``, ...), H3 geospatial functions, ``vector_search``, Unity
Catalog's ``secret`` or ``is_account_group_member``. Spark fails such a query with
UNRESOLVED_ROUTINE, which reads like a typo; headwater names the function as Databricks-only
and says what to do instead, at ``headwater validate`` as at run time. The name comes from
Spark's error parameters (``routineName``), never from its message text.
"""

from __future__ import annotations

from headwater.errors import HeadwaterError
from headwater.errors.base import causes
from headwater.pipeline.model import Location

# Databricks SQL functions that open-source Spark does not have (Databricks' SQL reference,
# "Alphabetical list of built-in functions", the ones marked Databricks SQL / Runtime only).
FUNCTIONS = frozenset({
    "ai_analyze_sentiment", "ai_classify", "ai_extract", "ai_fix_grammar", "ai_forecast",
    "ai_gen", "ai_mask", "ai_parse_document", "ai_query", "ai_similarity", "ai_summarize",
    "ai_translate", "vector_search", "secret", "is_account_group_member", "is_member",
    "current_metastore", "current_recipient", "http_request", "remote_query", "read_kinesis",
    "read_pubsub", "read_pulsar", "read_statestore", "read_state_metadata", "cloud_files_state",
    "list_secrets", "session_user_is_member",
})
PREFIXES = ("ai_", "h3_", "st_geom", "st_geog")


def is_databricks_only(name: str) -> bool:
    """True for a function name (any case, back-quoted or qualified) only Databricks has."""
    bare = name.strip().strip("`").split(".")[-1].strip("`").lower()
    return bare in FUNCTIONS or bare.startswith(PREFIXES)


def unresolved_function(exc: BaseException) -> str | None:
    """The function Spark could not resolve (UNRESOLVED_ROUTINE), from the error's
    parameters, in ``exc`` or its causes; None for any other error."""
    for current in causes(exc):
        condition = getattr(current, "getCondition", None)
        if callable(condition):
            try:
                if condition() == "UNRESOLVED_ROUTINE":
                    params = current.getMessageParameters() or {}  # type: ignore[attr-defined]
                    return str(params.get("routineName", "")).strip("`") or None
            except Exception:  # noqa: BLE001 - a Py4J error without Spark's fields
                return None
    return None


def databricks_only_error(function: str, dataset: str, where: Location) -> HeadwaterError:
    return HeadwaterError(
        "HW_PIPELINE_UNSUPPORTED",
        f"{where}: {dataset!r} calls {function}(), a Databricks-only SQL function.",
        "Open-source Spark (and so headwater) does not have Databricks' AI, H3, vector "
        "search or Unity Catalog functions; Spark reports it as an unknown routine.",
        f"Replace {function}() by code that runs anywhere (a Python UDF, a join with a "
        "lookup table, or a call to your model's endpoint in a UDF), or run this dataset "
        "on Databricks.")
