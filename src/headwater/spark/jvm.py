"""Reading JVM state from the driver in few py4j calls.

Each py4j call is a socket round trip, and a JVM exception crossing it costs ~15 ms (pyspark
converts it, looking up its class through more calls). Iterating a Scala map through py4j
takes two calls per entry; a private field looked up by walking superclasses raises one
NoSuchFieldException per class it is not declared in. These helpers read a map in three
calls and look each field up once per JVM (the Field object is kept), so every
``df.write.format("delta")`` and micro-batch does not pay them again.
"""

from __future__ import annotations

import threading
from typing import Any

from py4j.java_gateway import GatewayClient, JavaClass
from pyspark.sql import SparkSession

_SEP = "\u0001"  # between the keys (and the values) of a map read in one call
_fields: dict[tuple[int, str, str], Any] = {}  # (gateway, class, field) -> java.lang.reflect.Field
_fields_lock = threading.Lock()


def java_class(gateway_client: GatewayClient, name: str) -> JavaClass:
    """The JVM class ``name`` (fully qualified), in no py4j call: ``spark._jvm.a.b.C`` makes
    one call per dotted part to tell packages from classes. Calling it constructs an
    instance in one call; a static method costs two (its lookup, then the call), as through
    ``spark._jvm``."""
    return JavaClass(name, gateway_client)


def java_map(spark: SparkSession, scala_map: Any) -> dict[str, str]:
    """A Scala Map[String, String] as a dict, in three py4j calls (iterating it through py4j
    costs two calls per entry and an exception at its end, ~0.1 s on a loaded machine)."""
    if scala_map.isEmpty():
        return {}
    keys = str(scala_map.keys().mkString(_SEP)).split(_SEP)
    values = str(scala_map.values().mkString(_SEP)).split(_SEP)
    if len(keys) == len(values) == scala_map.size():
        return dict(zip(keys, values))
    # a key or value holding the separator: the slow, exact way
    converted = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_map)
    return {str(k): str(v) for k, v in dict(converted).items()}


def conf_with_prefix(spark: SparkSession, prefix: str) -> dict[str, str]:
    """The session's SQL settings whose key starts with ``prefix`` (``spark.conf.getAll``
    walks every setting through py4j: ~20 ms per call)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # a Spark Connect session: no JVM here
        return {k: v for k, v in spark.conf.getAll.items() if k.startswith(prefix)}
    settings = java_map(spark, jsession.conf().getAll())
    return {k: v for k, v in settings.items() if k.startswith(prefix)}


def declared_field(obj: Any, name: str) -> Any:
    """The JVM field ``name`` of ``obj``, made accessible: DataStreamWriter keeps its settings
    in private fields (DataFrameWriter has accessors), and the field may live in a superclass
    (the readers' extraOptions, Spark 4's classic writers). Looked up once per class."""
    cls = obj.getClass()
    key = (id(obj._gateway_client), str(cls.getName()), name)
    field = _fields.get(key)
    if field is not None:
        return field
    while True:
        try:
            field = cls.getDeclaredField(name)
            break
        except Exception:  # noqa: BLE001 - py4j's wrapped NoSuchFieldException
            cls = cls.getSuperclass()
            if cls is None:
                raise
    field.setAccessible(True)
    with _fields_lock:
        _fields[key] = field
    return field


def private_field(obj: Any, name: str) -> Any:
    """The value of ``obj``'s (private) JVM field ``name``."""
    return declared_field(obj, name).get(obj)


def set_private_field(obj: Any, name: str, value: Any) -> None:
    """Set ``obj``'s (private) JVM field ``name`` to ``value``."""
    declared_field(obj, name).set(obj, value)
