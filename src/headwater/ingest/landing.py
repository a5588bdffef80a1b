"""Landing folders on object stores (``s3://bucket/prefix``, other pyarrow / delta-rs schemes):
listing, reading, copying and deleting files through pyarrow's filesystem with the
credentials of ``conf/storage.py`` (reader options, ``[storage]``, the environment).

Local folders never come here: ``index.py``, ``source.py`` and ``clean.py`` keep their
``os`` code for them (ctime-driven listing, atomic rename).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from dataclasses import dataclass

import pyarrow.fs as pafs

from headwater.conf import storage
from headwater.errors import HeadwaterError


def is_remote(path: str | None) -> bool:
    """True for an object-store URI (``s3://...``), False for a local path."""
    return bool(path) and storage.bucket_of(str(path)) is not None


_GLOB_CHARS = set("*?[{")


@dataclass(frozen=True)
class FileFilter:
    """Which files under a landing folder a read takes.

    name_glob: ``pathGlobFilter``, matched against file names (fnmatch).
    path_glob: the glob part of the read's path (``/landing/*/orders-*.json`` read from
        ``/landing``), matched against the path relative to the folder as Hadoop (Spark, Auto
        Loader) matches globs: ``*`` and ``?`` within one folder level, ``[abc]``, ``[^a]``,
        ``{a,b}``; a pattern matching a folder takes every file below it.
    """

    name_glob: str | None = None
    path_glob: str | None = None

    def __bool__(self) -> bool:
        return bool(self.name_glob or self.path_glob)

    def matches(self, relative_path: str) -> bool:
        parts = relative_path.split("/")
        if self.name_glob and not fnmatch.fnmatch(parts[-1], self.name_glob):
            return False
        if not self.path_glob:
            return True
        pattern = _glob_regex(self.path_glob)
        return any(pattern.fullmatch("/".join(parts[:k])) for k in range(1, len(parts) + 1))

    def describe(self) -> str:
        """The filter in the stream's identity (``*`` for none; unchanged for name globs)."""
        if not self.path_glob:
            return self.name_glob or "*"
        return f"{self.path_glob} {self.name_glob or '*'}"


ALL_FILES = FileFilter()


def split_glob(path: str) -> tuple[str, str | None]:
    """(the folder, the glob below it) of a read's path: ``/in/2024-*/x.json`` ->
    (``/in``, ``2024-*/x.json``); a path without glob characters is all folder."""
    text = str(path)
    if not _GLOB_CHARS & set(text):
        return text, None
    scheme, rest = ("", text)
    if "://" in text:
        scheme, rest = text.split("://", 1)
        scheme += "://"
    parts = rest.split("/")
    first = next(i for i, p in enumerate(parts) if _GLOB_CHARS & set(p))
    if scheme and first < 1:
        raise HeadwaterError(
            "HW_OPTION_INVALID", f"The path {path} has a glob in its bucket name.",
            "A glob matches files and folders inside a bucket.", "Put the glob after the bucket.")
    base = "/".join(parts[:first])
    if not base:  # /*.json: the root; *.json: the working directory, as Hadoop qualifies it
        base = "/" if rest.startswith("/") else "."
    return scheme + base, "/".join(parts[first:])


@functools.lru_cache(maxsize=64)
def _glob_regex(glob: str) -> re.Pattern[str]:
    return re.compile(_translate(glob))


def _translate(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = glob.find("]", i + 2)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = glob[i + 1:end]
                if body[:1] in ("^", "!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif ch == "{":
            end, depth = i, 0
            for j in range(i, len(glob)):
                depth += {"{": 1, "}": -1}.get(glob[j], 0)
                if depth == 0:
                    end = j
                    break
            if end == i:
                out.append(re.escape(ch))
            else:
                options, depth, start = [], 0, i + 1
                for j in range(i + 1, end):
                    depth += {"{": 1, "}": -1}.get(glob[j], 0)
                    if glob[j] == "," and depth == 0:
                        options.append(glob[start:j])
                        start = j + 1
                options.append(glob[start:end])
                out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def normalize(path: str) -> str:
    """A landing folder's canonical name: the URI without a trailing slash, or an absolute
    local path."""
    text = str(path)
    if is_remote(text):
        return text.rstrip("/")
    return os.path.abspath(text)


def relative(path: str, root: str) -> str:
    """``path`` relative to the folder ``root`` (both URIs, or both local)."""
    if is_remote(root):
        return path[len(root.rstrip("/")) + 1:] if path.startswith(root.rstrip("/") + "/") \
            else path.rsplit("/", 1)[-1]
    return os.path.relpath(path, root)


def join(root: str, rel: str) -> str:
    return f"{root.rstrip('/')}/{rel}" if is_remote(root) else os.path.join(root, rel)


@dataclass(frozen=True)
class Listed:
    folder: str      # URI of the folder holding the file
    name: str
    size: int
    mtime_ns: int


def hidden(name: str) -> bool:
    """Names every listing skips: hidden, temporary or in-progress files, as Spark does."""
    return name.startswith((".", "_")) or name.endswith(("._COPYING_", ".tmp", ".crc"))




def list_files(root: str, files: FileFilter = ALL_FILES) -> list[Listed]:
    """Every file under ``root`` (recursively), skipping hidden names and hidden folders
    (``.x``, ``_x``, ``*.tmp``, ...) and files ``files`` does not take; oldest first.

    An object store has no folder change times, so each call lists the whole prefix: keep
    the landing prefix small with ``clean_source``.
    """
    fs, base = storage.pyarrow_filesystem(root)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    found = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(base):].lstrip("/")
        parts = rel.split("/")
        if any(hidden(p) for p in parts):
            continue
        if not files.matches(rel):
            continue
        folder = "/".join([root.rstrip("/"), *parts[:-1]])
        mtime = info.mtime_ns or 0
        found.append(Listed(folder, parts[-1], info.size or 0, mtime))
    found.sort(key=lambda f: (f.mtime_ns, f.folder, f.name))
    return found


def sample(root: str, files: FileFilter, max_files: int,
           max_bytes: int) -> list[tuple[str, bytes]]:
    """(path, content) of the oldest files under ``root``, up to ``max_files`` files or
    about ``max_bytes``: what schema inference reads."""
    found: list[tuple[int, str]] = []
    if is_remote(root):
        found = [(f.mtime_ns, f"{f.folder}/{f.name}") for f in list_files(root, files)]
    else:
        for directory, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not hidden(d)]
            for name in names:
                full = os.path.join(directory, name)
                if hidden(name) or not files.matches(
                        os.path.relpath(full, root).replace(os.sep, "/")):
                    continue
                try:
                    found.append((os.stat(full).st_mtime_ns, full))
                except FileNotFoundError:
                    continue
    found.sort()
    samples, total = [], 0
    for _, full in found[:max_files]:
        data = read_file(full)
        if data is None:
            continue
        samples.append((full, data))
        total += len(data)
        if total >= max_bytes:
            break
    return samples


def read_file(path: str) -> bytes | None:
    """A file's content (local path or URI), None when it is gone."""
    if is_remote(path):
        return read_bytes(path)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def read_bytes(uri: str) -> bytes | None:
    """The content of ``uri``, or None when it does not exist."""
    fs, path = storage.pyarrow_filesystem(uri)
    try:
        with fs.open_input_stream(path) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def stat(uri: str) -> tuple[int, int] | None:
    """(size, mtime in ns) of ``uri``, or None when it does not exist."""
    fs, path = storage.pyarrow_filesystem(uri)
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        return None
    return info.size or 0, info.mtime_ns or 0


def exists(uri: str) -> bool:
    if not is_remote(uri):
        return os.path.exists(uri)
    return stat(uri) is not None


def same_content_stamp(listed: tuple[int, int], now: tuple[int, int]) -> bool:
    """Whether a file still has the size and modification time it was listed with. Object
    stores give modification times to the second in HEAD and to the millisecond in listings:
    compare whole seconds."""
    return listed[0] == now[0] and listed[1] // 10**9 == now[1] // 10**9


def copy(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` (overwriting): server-side within one filesystem, streamed
    otherwise (an S3 landing folder archived to a local folder, or the reverse)."""
    src_fs, src_path = _fs(src)
    dst_fs, dst_path = _fs(dst)
    if not is_remote(dst):
        os.makedirs(os.path.dirname(dst_path), exist_ok=True)
    if src_fs is dst_fs:
        src_fs.copy_file(src_path, dst_path)
        return
    pafs.copy_files(src_path, dst_path, source_filesystem=src_fs,
                    destination_filesystem=dst_fs)


def delete(uri: str) -> None:
    """Delete ``uri``; a file already gone is fine. On object stores through delta-rs' object
    store: pyarrow's S3 filesystem leaves an empty ``folder/`` marker object behind when it
    deletes a folder's last file."""
    if not is_remote(uri):
        try:
            os.remove(uri)
        except FileNotFoundError:
            pass
        return
    from deltalake.fs import DeltaStorageHandler  # noqa: PLC0415 - worker: deltalake only where cleanSource deletes remote files

    bucket = storage.bucket_of(uri) or ""
    handler = DeltaStorageHandler(bucket, storage.options_for(uri))
    handler.delete_file(uri[len(bucket):].lstrip("/"))


def _fs(uri: str):
    if is_remote(uri):
        return storage.pyarrow_filesystem(uri)
    return pafs.LocalFileSystem(), uri
