"""The delta-spark Python API version this package follows (delta-io/delta at the commit the
conformance material was copied from)."""

__version__ = "4.4.0"
