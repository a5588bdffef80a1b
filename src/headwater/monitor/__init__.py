"""Watching pipelines: the event log, live terminal progress, status and the dashboard."""

from headwater.monitor.events import EVENT_LOG, read_events

__all__ = ["EVENT_LOG", "read_events"]
