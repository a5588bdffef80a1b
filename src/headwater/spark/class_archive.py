"""A class-data-sharing (CDS) archive of the driver JVM's classes, written once per machine.

A Spark driver loads and verifies ~15,000 classes before its first query: on 2 cores a
session took 4.7 s to start and its first statements 3.0 s more. The JDK can map classes it
archived from an earlier run instead (``-XX:SharedArchiveFile``, JDK 13+): measured here 2.8 s
and 1.8 s. So the first session that finds no archive asks its JVM to write one when it exits
(``-XX:ArchiveClassesAtExit``, about 150 MB), and every later session uses it.

An archive cut short (a JVM killed while writing it) makes the next JVM crash when it maps the
file, so none is used before it is known whole: the JVM writes a temporary file, and
:func:`finish` (at the Python process's exit, after ``spark.stop()``) closes the gateway, waits
for the JVM to exit, and publishes the file only when the JVM exited 0: flushed to disk, then
hard-linked to its final name, which never replaces a file another JVM may have mapped. One
process writes at a time: it holds an ``flock`` on the key's lock file until then (the kernel
lets go if the process dies). A JDK that writes nothing (no base archive, ``-Xshare:off``) is
remembered, so no later process asks again. An archive made by another JDK, pyspark, class
path or driver options is named by a different key and never used. The JVM's own CDS
messages are off. A SIGTERM exit does not wait: the archive is dropped.

``HEADWATER_CLASS_ARCHIVE=0`` turns this off; ``HEADWATER_CLASS_ARCHIVE=<folder>`` keeps the
archives there (default: ``$XDG_CACHE_HOME/headwater`` or ``~/.cache/headwater``).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from headwater.conf.layout import CLASS_ARCHIVE_ENV

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # no JVM warnings on the user's console
MIN_JAVA = 13  # -XX:ArchiveClassesAtExit
WAIT_SECONDS = 60  # longest wait at exit for the JVM to write its archive
# what else shapes the JVM's class path and flags (an archive is tied to both)
JVM_ENV = ("SPARK_HOME", "SPARK_CONF_DIR", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS",
           "_JAVA_OPTIONS", "PYSPARK_SUBMIT_ARGS")
JVM_SETTINGS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath",
                "spark.driver.extraJavaOptions", "spark.driver.memory")


@dataclass
class _Pending:
    temporary: Path
    final: Path
    unsupported: Path
    lock: int  # the open lock file, flock-ed


_pending: _Pending | None = None


def folder() -> Path | None:
    """Where archives live; None when turned off."""
    setting = os.environ.get(CLASS_ARCHIVE_ENV, "").strip()
    if setting.lower() in ("0", "false", "off", "no"):
        return None
    if setting and setting not in ("1", "true", "on", "yes"):
        return Path(setting)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "headwater"


def _key(java_version: str, settings: dict[str, str]) -> str:
    """What the archive depends on: the JDK, pyspark's jars, the driver's class path and
    options (the user's part of them: headwater's own are added after)."""
    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    parts = [java_version, importlib.metadata.version("pyspark"),
             *(os.environ.get(name, "") for name in JVM_ENV), *jars,
             *(f"{k}={settings.get(k, '')}" for k in JVM_SETTINGS)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def jvm_options(java_major: int, java_version: str, settings: dict[str, str]) -> str:
    """The driver JVM's options: map the archive if there is one, else (if no other process
    is writing it) write one at exit. Empty when turned off, when the JDK cannot, and on
    anything unexpected: the session then starts as it would without."""
    global _pending
    try:
        base = folder()
        if base is None or java_major < MIN_JAVA or any(c.isspace() for c in str(base)):
            return ""  # Spark's launcher splits the JVM options on whitespace
        key = _key(java_version, settings)
        final = base / f"jvm-classes-{key}.jsa"
        if final.is_file():
            return f"-XX:SharedArchiveFile={final} {QUIET}"
        unsupported = base / f"jvm-classes-{key}.unsupported"
        if unsupported.exists():
            return ""
        base.mkdir(parents=True, exist_ok=True)
        lock = os.open(base / f"jvm-classes-{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process writes it now
            os.close(lock)
            return ""
        if final.is_file():  # written while this process waited for the lock
            _release(lock)
            return f"-XX:SharedArchiveFile={final} {QUIET}"
        for stale in base.glob(f"jvm-classes-{key}.*.tmp"):  # writers that died
            stale.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - see the docstring: no archive, nothing else changes
        return ""
    temporary = base / f"jvm-classes-{key}.{os.getpid()}.tmp"
    _pending = _Pending(temporary, final, unsupported, lock)
    return f"-XX:ArchiveClassesAtExit={temporary} {QUIET}"


def discard() -> None:
    """Give up writing the archive (a SIGTERM exit must not wait for it)."""
    global _pending
    pending, _pending = _pending, None
    if pending is not None:
        _release(pending.lock)


def finish(gateway: Any) -> None:
    """At exit, after ``spark.stop()``: when this process's JVM was asked to write the
    archive, let it exit (its gateway's stdin closed), wait, and publish the archive only if
    the JVM exited 0. Nothing to do otherwise."""
    global _pending
    pending, _pending = _pending, None
    if pending is None:
        return
    try:
        proc = getattr(gateway, "proc", None)
        if proc is None:
            return
        print(f"headwater: saving the JVM's classes for faster session starts (once, about "
              f"10 s; {CLASS_ARCHIVE_ENV}=0 turns this off)", file=sys.stderr, flush=True)
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM exits at EOF on its stdin (PythonGatewayServer)
        if proc.wait(timeout=WAIT_SECONDS) != 0:
            return
        if not pending.temporary.is_file():  # this JDK writes no archive: never ask again
            pending.unsupported.touch()
            return
        _publish(pending.temporary, pending.final)
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - best effort at exit: no archive
        pass
    finally:
        pending.temporary.unlink(missing_ok=True)
        _release(pending.lock)


def _publish(temporary: Path, final: Path) -> None:
    """``temporary`` on disk, then linked as ``final`` (an existing ``final`` is kept)."""
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    try:
        os.link(temporary, final)
    except FileExistsError:
        return
    directory = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _release(lock: int) -> None:
    try:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    except OSError:
        pass


def jvm_started_with(gateway: Any, option: str) -> bool:
    """True when the running JVM was started with ``option`` (a user's PYSPARK_SUBMIT_ARGS
    ``--driver-java-options`` replaces the configured ones)."""
    try:
        args = gateway.jvm.java.lang.management.ManagementFactory.getRuntimeMXBean() \
            .getInputArguments()
        return any(str(a).startswith(option) for a in args)
    except Exception:  # noqa: BLE001 - unknown: assume it was
        return True


def check_started(gateway: Any) -> None:
    """After the JVM is up: drop the pending archive if the JVM did not get the option."""
    if _pending is not None and not jvm_started_with(gateway, "-XX:ArchiveClassesAtExit"):
        discard()

