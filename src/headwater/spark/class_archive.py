"""A class-data-sharing (CDS) archive of the driver JVM's classes, written once per machine.

A Spark driver loads and verifies ~15,000 classes before its first query: on 2 cores a
session took 4.7 s to start and its first statements 3.0 s more. The JDK can map classes it
archived from an earlier run instead (``-XX:SharedArchiveFile``, JDK 13+): measured here 2.8 s
and 1.8 s. So the first session that finds no archive asks its JVM to write one when it exits
(``-XX:ArchiveClassesAtExit``, about 150 MB), and every later session uses it.

An archive cut short (a JVM killed while writing it) makes the next JVM crash when it maps the
file, so none is used before it is known whole: the JVM writes a temporary file, and
:func:`finish` (at the Python process's exit, after ``spark.stop()``) closes the gateway, waits
for the JVM to exit, and renames the file only when the JVM exited 0. One process writes at a
time (a lock file); the others start as before. An archive made by another JDK, pyspark or
class path is named by a different key and never used. The JVM's own CDS messages are off.

``HEADWATER_CLASS_ARCHIVE=0`` turns this off; ``HEADWATER_CLASS_ARCHIVE=<folder>`` keeps the
archives there (default: ``$XDG_CACHE_HOME/headwater`` or ``~/.cache/headwater``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from headwater.conf.layout import CLASS_ARCHIVE_ENV

ENV = CLASS_ARCHIVE_ENV
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # no JVM warnings on the user's console
MIN_JAVA = 13  # -XX:ArchiveClassesAtExit
WAIT_SECONDS = 120  # longest wait at exit for the JVM to write its archive
# what else shapes the JVM's class path and flags (an archive is tied to both)
JVM_ENV = ("SPARK_HOME", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")
CLASS_PATH_SETTINGS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")


@dataclass
class _Pending:
    temporary: Path
    final: Path
    lock: Path


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
    """What the archive depends on: the JDK, pyspark's jars and the class path settings."""
    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    parts = [java_version, importlib.metadata.version("pyspark"),
             *(os.environ.get(name, "") for name in JVM_ENV), *jars,
             *(f"{k}={settings.get(k, '')}" for k in CLASS_PATH_SETTINGS)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def jvm_options(java_major: int, java_version: str, settings: dict[str, str]) -> str:
    """The driver JVM's options: map the archive if there is one, else (if no other process
    is writing it) write one at exit. Empty when turned off or the JDK cannot."""
    global _pending
    base = folder()
    if base is None or java_major < MIN_JAVA:
        return ""
    try:
        base.mkdir(parents=True, exist_ok=True)
        key = _key(java_version, settings)
        final = base / f"jvm-classes-{key}.jsa"
        if final.is_file():
            return f"-XX:SharedArchiveFile={final} {QUIET}"
        lock = base / f"jvm-classes-{key}.lock"
        _clear_stale(lock)
        descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:  # read-only home, another process writing: start as before
        return ""
    os.write(descriptor, str(os.getpid()).encode())
    os.close(descriptor)
    temporary = base / f"jvm-classes-{key}.{os.getpid()}.tmp"
    _pending = _Pending(temporary, final, lock)
    return f"-XX:ArchiveClassesAtExit={temporary} {QUIET}"


def _clear_stale(lock: Path) -> None:
    """Remove a lock (and its temporary archive) left by a process that is gone: killed
    before its exit, where :func:`finish` removes both."""
    try:
        pid = int(lock.read_text() or "0")
    except (OSError, ValueError):
        return
    if _alive(pid):
        return
    for path in (lock, lock.with_name(lock.name.replace(".lock", f".{pid}.tmp"))):
        try:
            path.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def finish(gateway: Any) -> None:
    """At exit, after ``spark.stop()``: when this process's JVM was asked to write the
    archive, let it exit (its gateway's stdin closed), wait, and keep the archive only if the
    JVM exited 0. Nothing to do otherwise."""
    global _pending
    pending, _pending = _pending, None
    if pending is None:
        return
    try:
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            print("headwater: saving the JVM's classes for faster session starts (once, "
                  f"about 10 s; {ENV}=0 turns this off)", file=sys.stderr, flush=True)
            if proc.stdin is not None:
                proc.stdin.close()  # the JVM exits at EOF on its stdin (PythonGatewayServer)
            if proc.wait(timeout=WAIT_SECONDS) == 0 and pending.temporary.is_file():
                os.replace(pending.temporary, pending.final)
    except Exception:  # noqa: BLE001 - best effort at exit: no archive, sessions start as before
        pass
    finally:
        for path in (pending.temporary, pending.lock):
            try:
                path.unlink()
            except OSError:
                pass
