"""Landing folders on object stores (``s3://bucket/prefix``, other pyarrow / delta-rs schemes):
listing, reading, copying and deleting files through pyarrow's filesystem with the
credentials of ``conf/storage.py`` (reader options, ``[storage]``, the environment).

Local folders never come here: ``index.py``, ``source.py`` and ``clean.py`` keep their
``os`` code for them (ctime-driven listing, atomic rename).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass

import pyarrow.fs as pafs

from headwater.conf import storage


def is_remote(path: str | None) -> bool:
    """True for an object-store URI (``s3://...``), False for a local path."""
    return bool(path) and storage.bucket_of(str(path)) is not None


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




def list_files(root: str, glob: str | None = None) -> list[Listed]:
    """Every file under ``root`` (recursively), skipping hidden names and hidden folders
    (``.x``, ``_x``, ``*.tmp``, ...) and names not matching ``glob``; oldest first.

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
        if glob and not fnmatch.fnmatch(parts[-1], glob):
            continue
        folder = "/".join([root.rstrip("/"), *parts[:-1]])
        mtime = info.mtime_ns or 0
        found.append(Listed(folder, parts[-1], info.size or 0, mtime))
    found.sort(key=lambda f: (f.mtime_ns, f.folder, f.name))
    return found


def sample(root: str, glob: str | None, max_files: int,
           max_bytes: int) -> list[tuple[str, bytes]]:
    """(path, content) of the oldest files under ``root``, up to ``max_files`` files or
    about ``max_bytes``: what schema inference reads."""
    found: list[tuple[int, str]] = []
    if is_remote(root):
        found = [(f.mtime_ns, f"{f.folder}/{f.name}") for f in list_files(root, glob)]
    else:
        for directory, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not hidden(d)]
            for name in files:
                if hidden(name) or (glob and not fnmatch.fnmatch(name, glob)):
                    continue
                full = os.path.join(directory, name)
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
