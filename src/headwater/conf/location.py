"""A lakehouse root that is a local folder or an object-store folder (``s3://bucket/lake``,
``az://``, ``gs://``, ...).

:func:`location` gives a :class:`pathlib.Path` for a local root (exactly as before: expanded
and resolved) and an :class:`ObjectPath` for a URI. ``ObjectPath`` speaks the small part of
pathlib the lakehouse and the monitor use (``/``, ``name``, ``parent``, ``is_dir``,
``exists``, ``iterdir``, ``mkdir``, ``relative_to``), answered through pyarrow's filesystem
with the credentials of :mod:`headwater.conf.storage`, so code that walks a root works on
both without two branches. An object store has no folders: a "folder" exists while some
object's key starts with its prefix, and ``mkdir`` does nothing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

import pyarrow.fs as pafs

from headwater.conf import storage
from headwater.errors import HeadwaterError


class ObjectPath:
    """A folder or object on an object store, named by its URI (never with a trailing ``/``).

    ``str()`` is the URI. Equal URIs are equal paths. No credentials are kept here: every
    call looks them up (``storage.options_for``), so ``repr`` shows only the URI.
    """

    __slots__ = ("uri", "_listed_dir")

    def __init__(self, uri: str, _listed_dir: bool | None = None) -> None:
        self.uri = str(uri).rstrip("/")
        self._listed_dir = _listed_dir  # from the listing that found it: no request to ask

    def __truediv__(self, part: str | os.PathLike[str]) -> ObjectPath:
        return ObjectPath(f"{self.uri}/{str(part).strip('/')}")

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"ObjectPath({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def __lt__(self, other: ObjectPath) -> bool:
        return self.uri < other.uri

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        head, _, _ = self.uri.rpartition("/")
        return self if head.endswith(":/") else ObjectPath(head)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.uri.split("://", 1)[1].split("/") if p)

    def expanduser(self) -> ObjectPath:
        return self

    def resolve(self) -> ObjectPath:
        return self

    def relative_to(self, other: ObjectPath | str) -> Path:
        """The path below ``other`` as a relative (pure) path; ValueError when outside it."""
        base = str(other).rstrip("/")
        if self.uri == base:
            return Path(".")
        if not self.uri.startswith(base + "/"):
            raise ValueError(f"{self.uri} is not inside {base}")
        return Path(self.uri[len(base) + 1:])

    # --- through pyarrow's filesystem ---------------------------------------------------------

    def _info(self) -> Any:
        fs, path = storage.pyarrow_filesystem(self.uri)
        return fs, path, fs.get_file_info(path)

    def is_dir(self) -> bool:
        if self._listed_dir is not None:
            return self._listed_dir
        return bool(self._info()[2].type == pafs.FileType.Directory)

    def is_file(self) -> bool:
        return bool(self._info()[2].type == pafs.FileType.File)

    def exists(self) -> bool:
        return bool(self._info()[2].type != pafs.FileType.NotFound)

    def iterdir(self) -> Iterator[ObjectPath]:
        """The folders and objects directly under this folder (none when it is missing)."""
        fs, path = storage.pyarrow_filesystem(self.uri)
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=False, allow_not_found=True))
        for info in sorted(infos, key=lambda i: i.base_name):
            yield ObjectPath(f"{self.uri}/{info.base_name}",
                             info.type == pafs.FileType.Directory)

    def read_text(self, encoding: str = "utf-8") -> str:
        fs, path = storage.pyarrow_filesystem(self.uri)
        with fs.open_input_stream(path) as stream:
            return bytes(stream.read()).decode(encoding)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        fs, path = storage.pyarrow_filesystem(self.uri)
        with fs.open_output_stream(path) as stream:
            stream.write(text.encode(encoding))

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store's folders exist through the objects inside them."""


#: a lakehouse root, or anything under one
AnyPath = Union[Path, ObjectPath]


def is_remote(root: str | os.PathLike[str] | ObjectPath | None) -> bool:
    """True for an object-store URI (``s3://...``) or :class:`ObjectPath`, False for a local
    path (``file://`` URIs included)."""
    if isinstance(root, ObjectPath):
        return True
    return root is not None and storage.bucket_of(str(root)) is not None


def location(root: str | os.PathLike[str] | ObjectPath) -> AnyPath:
    """An :class:`ObjectPath` for an object-store URI, else the local folder (``~`` expanded,
    made absolute and resolved, as ``Path(root).expanduser().resolve()``)."""
    if isinstance(root, ObjectPath):
        return root
    if is_remote(root):
        return ObjectPath(str(root))
    text = str(root)
    if text.startswith("file://"):
        text = text[len("file://"):]
    return Path(text).expanduser().resolve()


def remove_tree(path: AnyPath) -> None:
    """Delete a folder and everything under it; a missing one is fine."""
    if isinstance(path, ObjectPath):
        fs, inner = storage.pyarrow_filesystem(path.uri)
        try:
            fs.delete_dir(inner)
        except FileNotFoundError:
            pass
        return
    shutil.rmtree(path, ignore_errors=True)


def state_folder(root: AnyPath, state_dir: str | os.PathLike[str] | None) -> Path:
    """The local folder for a lakehouse's checkpoints, run files and ingest state: ``state_dir``
    (local or a mount; an object-store URI is refused), else the root when it is local; a
    root on an object store without one is refused."""
    if state_dir is not None:
        if is_remote(state_dir):
            raise HeadwaterError(
                "HW_LAKEHOUSE_STATE_DIR_INVALID",
                f"The lakehouse state folder {state_dir} is on an object store.",
                "Spark checkpoints, run files and read_files state need a filesystem with "
                "renames and locks; pyspark has no Hadoop filesystem for object stores.",
                "Give state_dir a local folder or a shared mount.")
        return Path(state_dir).expanduser().resolve()
    if isinstance(root, Path):
        return root
    raise HeadwaterError(
        "HW_LAKEHOUSE_STATE_DIR_MISSING",
        f"The lakehouse at {root} is on an object store and has no state folder.",
        "Its tables and event log live there, but Spark checkpoints, run files and "
        "read_files state need a local folder (or a mount), and losing them would make "
        "every stream start over.",
        "Give it a local folder: state_dir = \"...\" under [pipeline] in headwater.toml, "
        "--state-dir DIR on the command line, Lakehouse(root, state_dir=...) or "
        "spark_session(lakehouse=..., lakehouse_state_dir=...).")


def known_state_folder(root: AnyPath, state_dir: str | os.PathLike[str] | None) -> Path | None:
    """As :func:`state_folder` for readers that can do without one (``headwater status``,
    the dashboard): None for a root on an object store given no ``state_dir``."""
    if state_dir is None and not isinstance(root, Path):
        return None
    return state_folder(root, state_dir)
