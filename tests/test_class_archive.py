"""The driver JVM's class archive (headwater.spark.class_archive): written once, whole, by one
process at a time; used by later sessions; never a file a killed JVM left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headwater.spark import class_archive

SETTINGS: dict[str, str] = {}


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.ENV, str(tmp_path))
    yield tmp_path
    class_archive._pending = None


def _lock(folder: Path) -> Path:
    return folder / f"jvm-classes-{class_archive._key('17', SETTINGS)}.lock"


def test_first_session_writes_the_archive_at_exit_and_takes_the_lock(archive_dir):
    options = class_archive.jvm_options(17, "17", SETTINGS)
    assert "-XX:ArchiveClassesAtExit=" in options and "-Xlog:cds=off" in options
    assert _lock(archive_dir).read_text() == str(os.getpid())
    assert class_archive._pending is not None
    assert class_archive._pending.temporary.name.endswith(f".{os.getpid()}.tmp")


def test_a_whole_archive_is_mapped(archive_dir):
    final = archive_dir / f"jvm-classes-{class_archive._key('17', SETTINGS)}.jsa"
    final.write_bytes(b"x")
    assert class_archive.jvm_options(17, "17", SETTINGS) == \
        f"-XX:SharedArchiveFile={final} {class_archive.QUIET}"


def test_no_archive_while_a_live_process_writes_one(archive_dir):
    _lock(archive_dir).write_text(str(os.getppid()))  # pytest's parent: alive
    assert class_archive.jvm_options(17, "17", SETTINGS) == ""
    assert class_archive._pending is None


def test_a_dead_writers_lock_and_partial_archive_are_cleared(archive_dir):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    _lock(archive_dir).write_text(gone)
    partial = archive_dir / _lock(archive_dir).name.replace(".lock", f".{gone}.tmp")
    partial.write_bytes(b"cut short")
    options = class_archive.jvm_options(17, "17", SETTINGS)
    assert "-XX:ArchiveClassesAtExit=" in options
    assert not partial.exists()  # never renamed into place: a JVM mapping it would crash
    assert _lock(archive_dir).read_text() == str(os.getpid())


def test_off_and_old_jdks_start_as_before(archive_dir, monkeypatch):
    assert class_archive.jvm_options(11, "11", SETTINGS) == ""
    monkeypatch.setenv(class_archive.ENV, "0")
    assert class_archive.jvm_options(17, "17", SETTINGS) == ""
    assert list(archive_dir.iterdir()) == []


def test_the_key_follows_the_jdk_and_the_class_path():
    assert class_archive._key("17.0.1", {}) != class_archive._key("17.0.2", {})
    assert class_archive._key("17", {}) != class_archive._key("17", {"spark.jars": "/x.jar"})


SESSION = textwrap.dedent("""
    import sys
    from headwater.spark.session import build_session
    spark = build_session("local[1]", conf={"spark.ui.enabled": "false"})
    spark.sql("SHOW TABLES").collect()
    args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    print("JVM_ARGS", " ".join(str(a) for a in args))
""")


@pytest.mark.procs
def test_a_real_jvm_writes_the_archive_once_and_the_next_maps_it(tmp_path):
    env = {**os.environ, class_archive.ENV: str(tmp_path / "archives")}
    first = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True,
                           text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "-XX:ArchiveClassesAtExit=" in first.stdout
    assert "saving the JVM's classes" in first.stderr
    left = sorted(p.name for p in (tmp_path / "archives").iterdir())
    assert len(left) == 1 and left[0].endswith(".jsa"), left  # no lock, no temporary file
    second = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True,
                            text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"-XX:SharedArchiveFile={tmp_path / 'archives' / left[0]}" in second.stdout
    assert "saving" not in second.stderr and "cds" not in second.stderr.lower()
