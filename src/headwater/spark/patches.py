"""Every change headwater makes to pyspark's classes, in one table, each one reversible.

headwater is a library imported into other people's Spark applications; where Spark gives a
Python data source no hook (``saveAsTable`` into a lakehouse, ``format("kafka")`` without the
connector, delta-spark's save modes on ``format("delta")``), it wraps a pyspark method. Those
wrappers are the rows of :data:`PATCHES`: the owner (a class, or pyspark.pipelines' module),
the attribute, the wrapper factory (Spark's attribute in, headwater's out), the scope that
installs it and why. No other module of headwater assigns to a pyspark class; importing
headwater changes nothing: a scope's rows are installed by the code that needs them:

- ``ingest``: the file sources registered on a session (``register_sources``);
- ``kafka``: the Kafka source registered on a session (``register_message_sources``);
- ``session``: a session headwater starts (``spark_session``, ``start_session``);
- ``lakehouse``: while at least one lakehouse is attached (``Lakehouse.attach`` / ``detach``);
- ``live``: while a pipeline's definitions run (``live_schema()``, a block);
- ``definitions``: while a project's definition files load (``load_definitions``, a block).

How layers come off. :func:`install` puts a *shell* over each row's attribute and returns a
handle; the shell calls the row's wrapper while its layer is enabled, and the attribute it
replaced once disabled. Restoring a handle disables every layer and puts the replaced
attribute back only where the current one is still headwater's shell (an identity check).
Where something else was put over it since (a user's own wrapper, which holds on to
headwater's shell and calls it), headwater's shell stays, disabled: a pass-through, so the
user's chain keeps working and reaches Spark's method. A disabled shell that comes back on top
(that user's wrapper removed) is taken off at the next install or restore of any scope. So
wrappers layer in any order, and :func:`uninstall` (``headwater.uninstall()``) leaves every
class exactly as it was before headwater installed anything, but for disabled shells still
held by wrappers installed after headwater's.

A wrapper factory is named by its module and function (``"headwater.lakehouse.hooks:_sql"``)
and imported when its scope installs: the rows live here, in the low ``spark`` room, while the
wrappers live in the rooms whose behaviour they add (as ``headwater/__init__`` names its
exports).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

INGEST = "ingest"
KAFKA = "kafka"
SESSION = "session"
LAKEHOUSE = "lakehouse"
LIVE = "live"
DEFINITIONS = "definitions"

_SPARK_SESSION = "pyspark.sql:SparkSession"
_READER = "pyspark.sql.readwriter:DataFrameReader"
_WRITER = "pyspark.sql.readwriter:DataFrameWriter"
_STREAM_READER = "pyspark.sql.streaming.readwriter:DataStreamReader"
_STREAM_WRITER = "pyspark.sql.streaming.readwriter:DataStreamWriter"
_CATALOG = "pyspark.sql.catalog:Catalog"
_HOOKS = "headwater.lakehouse.hooks"
_CATALOGS = "headwater.lakehouse.sql.catalogs"
_SCHEMA_LOCATION = "headwater.ingest.schema_location"
_KAFKA_ALIAS = "headwater.kafka.alias"
_LIVE_SCHEMA = "headwater.pipeline.live_schema"
_DATABRICKS_DP = "headwater.dlt.databricks_dp"


@dataclass(frozen=True)
class Patch:
    """One row: ``owner.attribute`` becomes ``wrapper(<the attribute there before>)`` while
    ``scope`` is installed.

    owner: ``"module:Class"``, or ``"module"`` for a module's own attribute.
    wrapper: ``"module:function"``, a factory taking the attribute it wraps (None for an
        ``added`` one) and returning the new one.
    added: headwater adds the attribute only where pyspark lacks it (skipped otherwise).
    """

    owner: str
    attribute: str
    wrapper: str
    scope: str
    why: str
    added: bool = False

    @property
    def name(self) -> str:
        """``Class.attribute`` (``module.attribute`` for a module)."""
        return f"{self.owner.rpartition(':')[2] or self.owner}.{self.attribute}"


PATCHES: tuple[Patch, ...] = (
    # ingest: file streams (schema_location.py). Spark keeps a reader's settings in the JVM.
    *(Patch(_STREAM_READER, attr, f"{_SCHEMA_LOCATION}:_{attr}", INGEST,
            "remember what a stream reader was given, for format('cloudFiles')")
      for attr in ("format", "option", "options")),
    Patch(_STREAM_READER, "load", f"{_SCHEMA_LOCATION}:_load", INGEST,
          "format('cloudFiles'): a default schemaLocation, the session's Auto Loader "
          "settings as options, the hidden _metadata column"),
    Patch(_STREAM_READER, "schema", f"{_SCHEMA_LOCATION}:_schema", INGEST,
          "remember a cloudFiles stream's given schema (its _metadata column is added)"),
    # kafka (kafka/alias.py): Spark 4 refuses to register a Python source named "kafka".
    *(Patch(owner, "format", f"{_KAFKA_ALIAS}:_format", KAFKA,
            "format('kafka') is headwater.kafka without Spark's Kafka connector")
      for owner in (_STREAM_READER, _READER, _STREAM_WRITER, _WRITER)),
    Patch(_WRITER, "save", f"{_KAFKA_ALIAS}:_save", KAFKA,
          "a batch write to Kafka: Spark's Kafka sink's save modes"),
    # session (hooks.py): delta-spark's behaviours Spark refuses a Python data source.
    Patch(_WRITER, "save", f"{_HOOKS}:_save", SESSION,
          "format('delta').save: delta-spark's save modes, partitionBy, overwriteSchema, "
          "the native write path"),
    Patch(_STREAM_WRITER, "start", f"{_HOOKS}:_start", SESSION,
          "writeStream.format('delta').start(path): the native Delta sink"),
    Patch(_READER, "load", f"{_HOOKS}:_load", SESSION,
          "read.format('delta').load: Spark's parquet reader where the table allows it"),
    Patch(_STREAM_READER, "load", f"{_HOOKS}:_stream_load", SESSION,
          "readStream.format('delta').load: the native Delta stream source where the "
          "table allows it"),
    Patch(_STREAM_WRITER, "__init__", f"{_HOOKS}:_stream_writer_init", SESSION,
          "df.writeStream: each query gets its own native Delta stream sources"),
    Patch(_SPARK_SESSION, "newSession", f"{_HOOKS}:_new_session", SESSION,
          "a new session gets headwater's sources and its parent's lakehouse"),
    # lakehouse (hooks.py): names reach the lakehouse attached to the session.
    Patch(_SPARK_SESSION, "sql", f"{_HOOKS}:_sql", LAKEHOUSE,
          "SQL routed to the lakehouse (DDL, DML, Delta's statements)"),
    Patch(_WRITER, "format", f"{_HOOKS}:_format", LAKEHOUSE,
          "remember an explicit format (Spark's default looks the same)"),
    Patch(_WRITER, "saveAsTable", f"{_HOOKS}:_save_as_table", LAKEHOUSE,
          "saveAsTable writes a lakehouse table"),
    Patch(_WRITER, "insertInto", f"{_HOOKS}:_insert_into", LAKEHOUSE,
          "insertInto a lakehouse table"),
    Patch(_STREAM_WRITER, "format", f"{_HOOKS}:_format", LAKEHOUSE,
          "remember an explicit format (Spark's default looks the same)"),
    Patch(_STREAM_WRITER, "toTable", f"{_HOOKS}:_to_table", LAKEHOUSE,
          "toTable streams into a lakehouse table"),
    Patch(_READER, "table", f"{_HOOKS}:_read_table", LAKEHOUSE,
          "read.table: native reads, time travel and change feed of lakehouse tables"),
    Patch(_STREAM_READER, "table", f"{_HOOKS}:_read_table", LAKEHOUSE,
          "readStream.table: the change feed of lakehouse tables"),
    Patch(_STREAM_WRITER, "__init__", f"{_HOOKS}:_stream_writer_init", LAKEHOUSE,
          "df.writeStream: each query gets its own native Delta stream sources (tables "
          "read by name)"),
    Patch(_SPARK_SESSION, "table", f"{_HOOKS}:_session_table", LAKEHOUSE,
          "spark.table: native reads of lakehouse tables"),
    Patch(_STREAM_WRITER, "table", f"{_HOOKS}:_stream_table", LAKEHOUSE,
          "Databricks' writeStream...table(name), an alias of toTable", added=True),
    # lakehouse (catalogs.py): the lakehouse's catalogs, which Spark's catalog cannot list.
    Patch(_CATALOG, "currentCatalog", f"{_CATALOGS}:_current_catalog", LAKEHOUSE,
          "the current catalog after USE CATALOG (Spark's current database main__sales)"),
    Patch(_CATALOG, "setCurrentCatalog", f"{_CATALOGS}:_set_current_catalog", LAKEHOUSE,
          "USE CATALOG from Python"),
    Patch(_CATALOG, "currentDatabase", f"{_CATALOGS}:_current_database", LAKEHOUSE,
          "a catalog's schema by its own name (sales, not main__sales)"),
    Patch(_CATALOG, "setCurrentDatabase", f"{_CATALOGS}:_set_current_database", LAKEHOUSE,
          "a schema of the current catalog"),
    Patch(_CATALOG, "listCatalogs", f"{_CATALOGS}:_list_catalogs", LAKEHOUSE,
          "the lakehouse's catalogs besides spark_catalog"),
    Patch(_CATALOG, "tableExists", f"{_CATALOGS}:_table_exists", LAKEHOUSE,
          "three-part names, and two-part ones in the current catalog"),
    Patch(_CATALOG, "getTable", f"{_CATALOGS}:_get_table", LAKEHOUSE,
          "three-part names, and two-part ones in the current catalog"),
    Patch(_CATALOG, "listTables", f"{_CATALOGS}:_list_tables", LAKEHOUSE,
          "a catalog's schema (main.sales) as its Spark database"),
    # live (live_schema.py): DLT's LIVE virtual schema in Python definitions.
    *(Patch(owner, "table", f"{_LIVE_SCHEMA}:_table", LIVE,
            "LIVE.x is the pipeline's dataset x while its definitions run")
      for owner in (_SPARK_SESSION, _READER, _STREAM_READER)),
    Patch(_SPARK_SESSION, "sql", f"{_LIVE_SCHEMA}:_sql", LIVE,
          "LIVE.x in SQL is the pipeline's dataset x while its definitions run"),
    # definitions (loader.py): Databricks' dp, wider than pyspark 4.3's pyspark.pipelines
    *(Patch("pyspark.pipelines", name, f"{_DATABRICKS_DP}:{name}", DEFINITIONS,
            f"Databricks' dp.{name} in definition files (pyspark.pipelines lacks it)",
            added=True)
      for name in ("create_auto_cdc_from_snapshot_flow", "expect", "expect_or_drop",
                   "expect_or_fail", "expect_all", "expect_all_or_drop", "expect_all_or_fail")),
    *(Patch("pyspark.pipelines", name, f"{_DATABRICKS_DP}:{name}", DEFINITIONS,
            f"Databricks' arguments of dp.{name} (private=, once=, ignore_null_updates=, ...) "
            "in definition files; calls that fit pyspark's signature stay pyspark's")
      for name in ("table", "materialized_view", "create_streaming_table", "temporary_view",
                   "append_flow", "create_sink", "create_auto_cdc_flow")),
)

SCOPES = (INGEST, KAFKA, SESSION, LAKEHOUSE, LIVE, DEFINITIONS)

_ABSENT: Any = object()  # an attribute the owner did not have (delattr puts it back)
_lock = threading.RLock()


class _Layer:
    """One row installed: the shell put on ``owner``, what was there before (``below``), and
    what the wrapper wraps (``target``: ``below``, or the inherited attribute)."""

    __slots__ = ("below", "enabled", "owner", "patch", "shell", "target")

    def __init__(self, patch: Patch, owner: Any, below: Any, target: Any) -> None:
        self.patch = patch
        self.owner = owner
        self.below = below
        self.target = target
        self.enabled = True
        self.shell: Callable[..., Any] | None = None

    @property
    def key(self) -> tuple[Any, str]:
        return self.owner, self.patch.attribute


class Installed:
    """The handle of one install of a scope (:func:`install`); :meth:`restore` takes it off."""

    def __init__(self, scope: str, layers: list[_Layer]) -> None:
        self.scope = scope
        self._layers = layers

    @property
    def active(self) -> bool:
        return _installed.get(self.scope) is self

    @property
    def patches(self) -> list[Patch]:
        """The rows this install changed (``added`` rows pyspark has are not among them)."""
        return [layer.patch for layer in self._layers]

    def restore(self) -> None:
        """Disable every layer of this install; put back the attribute each replaced where
        headwater's shell is still the owner's attribute (see the module docstring)."""
        with _lock:
            for layer in reversed(self._layers):
                _take_off(layer)
            if _installed.get(self.scope) is self:
                del _installed[self.scope]
            _sweep()


_installed: dict[str, Installed] = {}  # scope -> its install, in install order
_layers: dict[tuple[Any, str], list[_Layer]] = {}  # (owner, attribute) -> layers, oldest first
_depth: dict[str, int] = {}  # scope -> blocks of scoped() entered


def install(scope: str) -> Installed:
    """Install ``scope``'s rows over the owners' current attributes, in table order
    (idempotent: an installed scope's handle is returned)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown patch scope {scope!r}")
    with _lock:
        current = _installed.get(scope)
        if current is not None:
            return current
        _sweep()
        layers: list[_Layer] = []
        try:
            for patch in PATCHES:
                if patch.scope == scope and (layer := _put_on(patch)) is not None:
                    layers.append(layer)
        except BaseException:  # a wrapper that failed to build: none of the scope's rows
            for layer in reversed(layers):
                _take_off(layer)
            raise
        handle = _installed[scope] = Installed(scope, layers)
        return handle


def installed(scope: str) -> bool:
    return scope in _installed


def installed_scopes() -> list[str]:
    """The scopes installed now, in the order they were installed."""
    return list(_installed)


def restore(scope: str) -> None:
    """Take ``scope``'s install off, if any (:meth:`Installed.restore`)."""
    with _lock:
        handle = _installed.get(scope)
        if handle is not None:
            handle.restore()


@contextlib.contextmanager
def scoped(scope: str) -> Iterator[Installed]:
    """``scope`` installed while the block runs: the outermost block (of any thread) installs
    it, the last one to end restores it."""
    with _lock:
        handle = install(scope)
        _depth[scope] = _depth.get(scope, 0) + 1
    try:
        yield handle
    finally:
        with _lock:
            _depth[scope] -= 1
            if _depth[scope] == 0:
                del _depth[scope]
                restore(scope)


def uninstall() -> None:
    """Put pyspark back as it was before headwater changed anything.

    Every method headwater wrapped (see :data:`headwater.spark.patches.PATCHES`) is Spark's
    own again, and attributes headwater added are gone. Sessions keep what was registered on
    them (``format("delta")`` stays a Python data source; an attached lakehouse's tables stay
    in Spark's catalog, though ``spark.sql`` no longer routes to the lakehouse).
    ``headwater.spark_session()`` or attaching a lakehouse installs headwater's wrappers
    again. A wrapper of your own put over one of headwater's after it was installed is left
    in place, and keeps working: headwater's underneath becomes a pass-through.
    """
    with _lock:
        for scope in reversed(list(_installed)):
            _installed[scope].restore()
        _sweep()


def original(owner: Any, attribute: str) -> Any:
    """``owner.attribute`` as it was before headwater's wrappers: what the oldest of them
    wraps (the attribute itself when none is installed)."""
    layers = _layers.get((owner, attribute))
    if layers:
        return layers[0].target
    return getattr(owner, attribute)


def is_patch(value: Any) -> bool:
    """True for a shell headwater put on a pyspark class and not taken off yet (enabled or
    not)."""
    return any(layer.shell is value for layers in _layers.values() for layer in layers)


def resolve(dotted: str) -> Any:
    """``"module:name"`` -> the object; ``"module"`` -> the module."""
    module, _, name = dotted.partition(":")
    value: Any = importlib.import_module(module)
    for part in filter(None, name.split(".")):
        value = getattr(value, part)
    return value


# --- putting layers on and taking them off ----------------------------------------------------

def _put_on(patch: Patch) -> _Layer | None:
    owner = resolve(patch.owner)
    below = owner.__dict__.get(patch.attribute, _ABSENT)
    target = below if below is not _ABSENT else inspect.getattr_static(
        owner, patch.attribute, _ABSENT)
    if patch.added and target is not _ABSENT:
        return None  # pyspark has it: nothing to add
    if not patch.added and target is _ABSENT:
        return None  # this pyspark lacks the method: nothing to wrap
    inner = resolve(patch.wrapper)(None if target is _ABSENT else target)
    layer = _Layer(patch, owner, below, target)
    layer.shell = _shell(layer, inner)
    setattr(owner, patch.attribute, layer.shell)
    _layers.setdefault(layer.key, []).append(layer)
    return layer


def _shell(layer: _Layer, inner: Callable[..., Any]) -> Callable[..., Any]:
    """What goes on the owner: ``inner`` while the layer is enabled, else what it wrapped."""
    target = layer.target
    missing = f"{layer.patch.name} is not there (headwater's was uninstalled)"

    def patched(*args: Any, **kwargs: Any) -> Any:
        if layer.enabled:
            return inner(*args, **kwargs)
        if target is _ABSENT:
            raise AttributeError(missing)
        return target(*args, **kwargs)

    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        if hasattr(inner, name):
            setattr(patched, name, getattr(inner, name))
    patched.__wrapped__ = inner  # type: ignore[attr-defined]  # inspect.signature follows it
    return patched


def _take_off(layer: _Layer) -> None:
    """Disable ``layer``; put back what it replaced if its shell is still on top."""
    layer.enabled = False
    owner, attribute = layer.key
    if owner.__dict__.get(attribute, _ABSENT) is layer.shell:
        _put_back(layer)


def _put_back(layer: _Layer) -> None:
    owner, attribute = layer.key
    if layer.below is _ABSENT:
        delattr(owner, attribute)
    else:
        setattr(owner, attribute, layer.below)
    layers = _layers[layer.key]
    layers.remove(layer)
    if not layers:
        del _layers[layer.key]


def _sweep() -> None:
    """Take off disabled shells that are on top again (the wrapper over them was removed)."""
    for key in list(_layers):
        owner, attribute = key
        while key in _layers:
            current = owner.__dict__.get(attribute, _ABSENT)
            top = next((layer for layer in _layers[key] if layer.shell is current), None)
            if top is None or top.enabled:  # identity: a wrapper copying a shell's __dict__
                break                         # (functools.wraps) is not headwater's
            _put_back(top)
