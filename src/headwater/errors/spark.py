"""Spark's errors in headwater's words: the one place that reads Spark's error messages.

- :func:`translated`: re-raises a Spark-wrapped headwater error, or Spark's unsupported-
  operation error on a stream, as ``HeadwaterError`` (the public ``headwater.translated``);
- :func:`spark_message` / :func:`fix_for`: Spark's one-line reason and the fix for it, used by
  ``headwater validate`` (which runs Spark's own streaming checker on each flow);
- :func:`error_line`: the line of a wrapped Spark/Python error that says what went wrong
  (``headwater sql``, expectation checks, failed flows);
- :func:`translate_flow_failure`: a pipeline flow's failure in one line.

It builds on ``errors.base`` only; ``errors/__init__`` re-exports from here, never the reverse.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from headwater.errors.base import HeadwaterError, unwrap

# First match wins: "Stream-stream ... join between two streaming ..." must hit the join rule
# before the output-mode one. Matched on Spark's message in lower case.
FIXES: tuple[tuple[str, str], ...] = (
    ("sorting is not supported",
     "Remove ORDER BY from this streaming table; sort when you read it (a batch query) or in a "
     "materialized view built from it."),
    ("not supported for no streaming aggregations",
     "Use output mode 'append': complete mode rewrites an aggregated result, and this query "
     "has no aggregation."),
    ("streaming aggregations without watermark",
     "Add .withWatermark('<event-time column>', '<delay>') before the aggregation and group by "
     "that column or a window() over it, or write this table in 'complete' or 'update' mode."),
    ("stream-stream",
     "Add .withWatermark(...) on both inputs and a time-range join condition, e.g. "
     "b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR."),
    ("join between two streaming",
     "Write this table in 'append' mode: Spark runs stream-stream outer joins only there."),
    ("limits are not supported",
     "Remove LIMIT, or write this table in 'append' or 'complete' mode."),
    ("distinct aggregations",
     "Use approx_count_distinct() instead of COUNT(DISTINCT ...), or count exactly in a "
     "materialized view."),
    ("global watermark",
     "Split the chain: write the first aggregation or join to its own table and stream from it, "
     "or use 'append' mode with watermarks on every stateful step."),
    ("window function is not supported",
     "Replace the OVER (...) window with a time window, e.g. groupBy(window('ts', '10 minutes')), "
     "or compute it in a materialized view."),
    ("dropduplicateswithinwatermark",
     "Add .withWatermark('<event-time column>', '<delay>') before dropDuplicatesWithinWatermark."),
    ("event-time timeout",
     "Add .withWatermark('<event-time column>', '<delay>') before the *GroupsWithState call."),
    ("union between streaming and batch",
     "Read both sides of the UNION as streams, or join the batch table instead."),
    ("static dataframe/dataset",
     "Keep the stream on the preserved side of the outer join (stream LEFT JOIN static), or "
     "read both sides as streams with watermarks."),
)
DEFAULT_FIX = ("Rewrite the step Spark names so it runs on a stream (Structured Streaming guide, "
               "'Unsupported Operations'), or build this table as a materialized view.")
_KEYS = tuple(key for key, _ in FIXES)


def spark_message(exc: Any) -> str:
    """Spark's one-line reason, without the plan dump, error class or SQLSTATE."""
    params = exc.getMessageParameters() or {}
    text = params.get("msg") if exc.getCondition() == "_LEGACY_ERROR_TEMP_3102" else None
    if not text:
        text = str(exc).split("\n\nJVM stacktrace", 1)[0].split(";\n", 1)[0]
        text = re.sub(r"^\[[A-Z0-9_.]+\]\s*", "", text)
        text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", text)
    return " ".join(text.split()).rstrip(";")


def fix_for(message: str) -> str:
    lowered = message.lower()
    return next((fix for key, fix in FIXES if key in lowered), DEFAULT_FIX)


def error_line(exc_or_text: BaseException | str) -> str:
    """The line of a wrapped Spark/Python error that says what went wrong: the last
    ``SomeError: ...`` line or line with an ``[ERROR_CLASS]``, else the first line."""
    text = str(exc_or_text)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception)\b.*:", line) or re.search(r"\[[A-Z_.]+\]", line):
            return re.sub(r"^[\w.]*(Error|Exception):\s*", "", line)
    if lines:
        return lines[0]
    return type(exc_or_text).__name__ if isinstance(exc_or_text, BaseException) else ""


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first line of an error's message (Spark's headline), or its type name."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if limit is None else line[:limit]


# Spark's JVM waits a fixed 10 s (not configurable) for a new Python worker to connect back.
# On a saturated machine the worker can miss it; nothing was read or committed by then, so a
# query that failed this way may simply be started again from its checkpoint.
_WORKER_START_TIMEOUT = ("Python worker failed to connect back",
                         "Timed out while waiting for the Python worker to connect back")


def is_worker_start_timeout(exc: BaseException | None) -> bool:
    """True when ``exc`` is Spark's timeout waiting for a Python worker to start."""
    text = str(exc) if exc is not None else ""
    return any(marker in text for marker in _WORKER_START_TIMEOUT)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise Spark-wrapped headwater errors, and Spark's unsupported-operation errors on
    streams, as ``HeadwaterError`` (cause kept); anything else passes unchanged."""
    try:
        yield
    except HeadwaterError:
        raise
    except Exception as exc:  # noqa: BLE001 - we only re-raise, never swallow
        plain = unwrap(exc)
        if plain is exc:
            # ORDER BY on a stream, say: the same words as validate
            translated_error = as_headwater(exc)
            if translated_error is None:
                raise
            plain = translated_error
        raise plain from exc


def as_headwater(exc: BaseException) -> HeadwaterError | None:
    """HW_STREAM_UNSUPPORTED for Spark's unsupported-operation error,
    HW_HADOOP_FILESYSTEM_MISSING for a path Hadoop cannot open, else None."""
    scheme = re.search(r'No FileSystem for scheme "?([\w+.-]+)"?', str(exc))
    if scheme:
        return HeadwaterError(
            "HW_HADOOP_FILESYSTEM_MISSING",
            f"Spark has no Hadoop filesystem for {scheme.group(1)}:// paths.",
            "Checkpoints (and Spark's own file sources) go through Hadoop; pyspark brings the "
            "local filesystem and HDFS, not s3a / abfs / gcs.",
            "Keep checkpointLocation on a local path, a shared mount or HDFS, or run where "
            "the cluster provides hadoop-aws and use s3a://. Delta tables may stay on s3://.")
    if type(exc).__name__ != "AnalysisException":
        return None
    message = spark_message(exc)
    lowered = message.lower()
    if not any(key in lowered for key in _KEYS) and "streaming dataframes" not in lowered:
        return None
    return HeadwaterError("HW_STREAM_UNSUPPORTED", "Spark cannot run this query as a stream.",
                          message, fix_for(message))


# --- a streaming flow's failure ------------------------------------------------------------


def translate_flow_failure(key: str, exc: BaseException) -> HeadwaterError:
    """A flow's Spark/Python failure as one line: HW_CHECKPOINT_INCOMPATIBLE when the state
    store no longer matches the definition, else HW_FLOW_FAILED with the error's own line."""
    text = str(exc)
    first = error_line(text) or type(exc).__name__
    if "STATE_STORE" in text or "state schema" in text.lower() or "STATEFUL_OPERATOR" in text:
        return HeadwaterError(
            "HW_CHECKPOINT_INCOMPATIBLE", f"Flow {key} cannot resume from its checkpoint: "
            f"{first[:400]}", "The query's state no longer matches its definition.",
            f"Run `headwater run --full-refresh {key.split('/')[0]}`.")
    return HeadwaterError("HW_FLOW_FAILED", f"Flow {key} failed: {first[:600]}",
                          "Spark stopped the query with an error.",
                          "Read the error above; fix the definition or the input and run again.")



# --- a pipeline sink that cannot start --------------------------------------------------------

# Formats Spark names but cannot write as a stream here, and what to use instead.
_SINK_INSTEAD = {"kafka": "format 'headwater.kafka' (Kafka without the Spark Kafka jar)",
                 "avro": "format 'parquet' or 'json' (the Avro jar is not installed)"}


def translate_sink_start(sink: str, fmt: str, exc: BaseException) -> HeadwaterError | None:
    """HW_PIPELINE_SINK_FORMAT when Spark refused ``fmt`` as a streaming destination (no
    such data source, or one without streamed writing); None for any other failure."""
    text = str(exc)
    unknown = "DATA_SOURCE_NOT_FOUND" in text or "DATA_SOURCE_NOT_ENABLED" in text
    if not unknown and "does not support streamed writing" not in text:
        return None
    why = (f"Spark finds no data source named {fmt!r} on this machine." if unknown else
           f"Spark's {fmt!r} data source has no streaming writer.")
    instead = _SINK_INSTEAD.get(fmt.lower(), "'delta' (headwater's Delta writer, exactly once), "
                                "a file format ('parquet', 'json', 'csv', 'orc', 'text'; "
                                "exactly once through Spark's file sink log) or "
                                "'headwater.kafka' (at least once)")
    return HeadwaterError("HW_PIPELINE_SINK_FORMAT",
                          f"Sink {sink!r} cannot be written in format {fmt!r}.", why,
                          f"Use {instead} in create_sink.")
