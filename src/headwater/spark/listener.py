"""Streaming query listeners that receive each event as its JSON, in one Py4J call.

PySpark's ``StreamingQueryListener`` converts every event field by field before the listener
sees it (``QueryProgressEvent.fromJObject``: a Py4J round trip per getter and per map entry,
some 60 to 100 for one progress), and listeners are session-wide: every micro-batch of every
query pays that once per listener, in the driver's Python and in the JVM's gateway threads.
headwater's listeners only need the progress as data, which Spark's event renders itself
(``json``, the form Spark Connect sends): one call and ``json.loads``.

Classic sessions only (Py4J); elsewhere PySpark's own listener carries the same callbacks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from headwater.spark.jvm import add_streaming_listener, has_jvm, remove_streaming_listener

log = logging.getLogger(__name__)

EventCallback = Callable[[dict[str, Any]], None]


class _JsonEvents:
    """Implements Spark's ``PythonStreamingQueryListener`` interface over Py4J."""

    def __init__(self, on_progress: EventCallback,
                 on_terminated: EventCallback | None) -> None:
        self.on_progress = on_progress
        self.on_terminated = on_terminated

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        _call(self.on_progress, jevent.progress().json())

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        if self.on_terminated is not None:
            _call(self.on_terminated, jevent.json())

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _call(callback: Callable[[dict[str, Any]], None], text: str) -> None:
    try:
        callback(json.loads(text))
    except Exception:  # noqa: BLE001 - an exception here would be lost in Py4J's callback thread
        log.exception("a headwater streaming listener failed on an event")


def add_json_listener(spark: Any, on_progress: EventCallback,
                      on_terminated: EventCallback | None = None) -> Any:
    """Call ``on_progress(progress_dict)`` for every micro-batch of every query of ``spark``
    (and ``on_terminated(event_dict)`` with ``runId`` and ``exception``); returns the handle
    ``remove_json_listener`` takes."""
    if not has_jvm(spark):  # not a classic session
        return _add_pyspark_listener(spark, on_progress, on_terminated)
    return add_streaming_listener(spark, _JsonEvents(on_progress, on_terminated))


def remove_json_listener(spark: Any, handle: Any) -> None:
    if not has_jvm(spark):
        spark.streams.removeListener(handle)
    else:
        remove_streaming_listener(spark, handle)


def _add_pyspark_listener(spark: Any, on_progress: EventCallback,
                          on_terminated: EventCallback | None) -> Any:
    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            _call(on_progress, event.progress.json)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            if on_terminated is not None:
                _call(on_terminated, json.dumps({
                    "id": str(event.id), "runId": str(event.runId),
                    "exception": event.exception,
                    "errorClassOnException": event.errorClassOnException}))

    listener = Listener()
    spark.streams.addListener(listener)
    return listener
