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
KEY = class_archive._key("17", SETTINGS)


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(class_archive.CLASS_ARCHIVE_ENV, str(tmp_path))
    yield tmp_path
    class_archive.discard()


class _Proc:
    """A stand-in for the gateway's JVM process: exits with ``code``, writing ``archive``."""

    def __init__(self, code: int, writes: Path | None) -> None:
        self.code, self.writes, self.stdin = code, writes, None

    def wait(self, timeout: float) -> int:
        if self.writes is not None:
            self.writes.write_bytes(b"archive")
        return self.code


class _Gateway:
    def __init__(self, proc: _Proc) -> None:
        self.proc = proc


def _other_process_options(folder: Path) -> str:
    """jvm_options as another process asks it (the lock is per process)."""
    code = ("from headwater.spark import class_archive as c; "
            "print(repr(c.jvm_options(17, '17', {})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, class_archive.CLASS_ARCHIVE_ENV: str(folder)},
                         check=True).stdout
    return eval(out)  # noqa: S307 - our own repr of a str


def test_first_session_writes_at_exit_and_others_wait_for_it(archive_dir):
    options = class_archive.jvm_options(17, "17", SETTINGS)
    assert "-XX:ArchiveClassesAtExit=" in options and "-Xlog:cds=off" in options
    assert _other_process_options(archive_dir) == ""  # the lock is held: no second writer
    class_archive.discard()
    assert "-XX:ArchiveClassesAtExit=" in _other_process_options(archive_dir)  # released


def test_the_archive_is_published_only_when_the_jvm_exited_0(archive_dir):
    class_archive.jvm_options(17, "17", SETTINGS)
    pending = class_archive._pending
    class_archive.finish(_Gateway(_Proc(1, pending.temporary)))  # crashed after writing
    assert sorted(p.suffix for p in archive_dir.iterdir()) == [".lock"]
    class_archive.jvm_options(17, "17", SETTINGS)
    pending = class_archive._pending
    class_archive.finish(_Gateway(_Proc(0, pending.temporary)))
    final = archive_dir / f"jvm-classes-{KEY}.jsa"
    assert final.read_bytes() == b"archive" and not pending.temporary.exists()
    assert class_archive.jvm_options(17, "17", SETTINGS) == \
        f"-XX:SharedArchiveFile={final} {class_archive.QUIET}"


def test_a_jdk_that_writes_nothing_is_not_asked_again(archive_dir):
    class_archive.jvm_options(17, "17", SETTINGS)
    class_archive.finish(_Gateway(_Proc(0, None)))
    assert (archive_dir / f"jvm-classes-{KEY}.unsupported").exists()
    assert class_archive.jvm_options(17, "17", SETTINGS) == ""


def test_a_dead_writers_partial_archive_is_never_used(archive_dir):
    partial = archive_dir / f"jvm-classes-{KEY}.4242.tmp"
    partial.write_bytes(b"cut short")  # its writer was killed: its flock is gone with it
    assert "-XX:ArchiveClassesAtExit=" in class_archive.jvm_options(17, "17", SETTINGS)
    assert not partial.exists()
    assert not (archive_dir / f"jvm-classes-{KEY}.jsa").exists()


def test_an_archive_already_published_is_kept(archive_dir):
    class_archive.jvm_options(17, "17", SETTINGS)
    pending = class_archive._pending
    final = archive_dir / f"jvm-classes-{KEY}.jsa"
    final.write_bytes(b"mapped by a running JVM")
    class_archive.finish(_Gateway(_Proc(0, pending.temporary)))
    assert final.read_bytes() == b"mapped by a running JVM"


def test_off_old_jdks_and_spaces_start_as_before(archive_dir, monkeypatch, tmp_path):
    assert class_archive.jvm_options(11, "11", SETTINGS) == ""
    monkeypatch.setenv(class_archive.CLASS_ARCHIVE_ENV, str(tmp_path / "a folder"))
    assert class_archive.jvm_options(17, "17", SETTINGS) == ""  # the launcher splits on spaces
    monkeypatch.setenv(class_archive.CLASS_ARCHIVE_ENV, "0")
    assert class_archive.jvm_options(17, "17", SETTINGS) == ""
    assert list(archive_dir.iterdir()) == []


def test_the_key_follows_the_jdk_the_class_path_and_driver_options():
    assert class_archive._key("17.0.1", {}) != class_archive._key("17.0.2", {})
    assert class_archive._key("17", {}) != class_archive._key("17", {"spark.jars": "/x.jar"})
    assert class_archive._key("17", {}) != class_archive._key(
        "17", {"spark.driver.extraJavaOptions": "-Xshare:off"})


SESSION = textwrap.dedent("""
    from headwater.spark.session import build_session
    spark = build_session("local[1]", conf={"spark.ui.enabled": "false"})
    args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    print("JVM_ARGS", " ".join(str(a) for a in args))
""")


@pytest.mark.procs
def test_a_real_jvm_writes_the_archive_once_and_the_next_maps_it(tmp_path):
    env = {**os.environ, class_archive.CLASS_ARCHIVE_ENV: str(tmp_path / "archives")}
    work = tmp_path / "work"
    work.mkdir()
    first = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True,
                           text=True, timeout=600, cwd=work)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "-XX:ArchiveClassesAtExit=" in first.stdout
    assert "saving the JVM's classes" in first.stderr
    archives = sorted(p.name for p in (tmp_path / "archives").glob("*.jsa"))
    assert len(archives) == 1 and not list((tmp_path / "archives").glob("*.tmp")), archives
    second = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True,
                            text=True, timeout=600, cwd=work)
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"-XX:SharedArchiveFile={tmp_path / 'archives' / archives[0]}" in second.stdout
    assert "saving" not in second.stderr and "cds" not in second.stderr.lower()
    assert list(work.iterdir()) == []  # the warm-up left no spark-warehouse behind
