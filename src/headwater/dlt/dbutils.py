"""``dbutils`` for pipeline definition files: the part of Databricks' utilities DLT code uses.

Why: Databricks puts a ``dbutils`` object in every notebook's globals, and published DLT
pipelines call it while their definitions load or inside their functions: ``dbutils.fs.ls``
to find snapshot folders (a try/except around it to test that a path exists),
``dbutils.widgets.get`` for a parameter. Without it such a notebook fails with NameError. The
loader puts one in the globals of every Python definition file (notebook or not).

What it does:

- ``dbutils.fs``: ``ls`` (``FileInfo`` with ``path``, ``name``, ``size``, ``modificationTime``
  in ms; a folder's path and name end with ``/``), ``head``, ``mkdirs``, ``rm``, ``cp``,
  ``mv``, ``put``, over local paths, ``file:`` URIs and object-store URIs (``s3://``, ...,
  through :func:`headwater.conf.storage.pyarrow_filesystem`, with the project's
  ``[storage]`` credentials). A missing path raises :class:`FileNotFoundException`, a
  ``FileNotFoundError`` whose message is Databricks' (``java.io.FileNotFoundException: File
  ... does not exist.``), so ``except:`` / ``except FileNotFoundError`` catch it. ``dbfs:``
  paths are refused (HW_DBUTILS_UNSUPPORTED): there is no DBFS here.
- ``dbutils.widgets.get(name)``: the pipeline configuration's value, as in DLT (a
  pipeline's parameters are its configuration); ``text`` / ``dropdown`` / ``combobox`` /
  ``multiselect`` record a default for a name the configuration does not set.
- ``dbutils.secrets.*`` and every other utility: HW_DBUTILS_UNSUPPORTED, saying where the
  value can come from instead (the pipeline's configuration, an environment variable).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlparse

import pyarrow.fs as pafs

from headwater.conf import storage
from headwater.errors import HeadwaterError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HEAD_BYTES = 65536  # Databricks' default maxBytes of dbutils.fs.head


class FileInfo(NamedTuple):
    """One entry of ``dbutils.fs.ls``, as Databricks returns it."""

    path: str
    name: str
    size: int
    modificationTime: int  # noqa: N815 - Databricks' field name

    def isDir(self) -> bool:  # noqa: N802 - Databricks' method name
        return self.name.endswith("/")

    def isFile(self) -> bool:  # noqa: N802 - Databricks' method name
        return not self.isDir()


class FileNotFoundException(FileNotFoundError):
    """A path dbutils.fs was given does not exist; the message is Databricks' own, so code that
    matches it (or catches FileNotFoundError, or anything) keeps working."""

    def __init__(self, path: str) -> None:
        super().__init__(f"java.io.FileNotFoundException: File {path} does not exist.")
        self.path = path


class _Location(NamedTuple):
    fs: Any        # a pyarrow FileSystem
    inner: str     # the path inside it
    shown: str     # the path as written, without a trailing "/"


def _unsupported(what: str, why: str, fix: str) -> HeadwaterError:
    return HeadwaterError("HW_DBUTILS_UNSUPPORTED", what, why, fix)


def _locate(path: str, call: str) -> _Location:
    """The filesystem and inner path of ``path`` (local, file:, or an object-store URI)."""
    text = str(path)
    if text.startswith(("dbfs:", "/dbfs/")) or text == "/dbfs":
        raise _unsupported(
            f"dbutils.fs.{call}({text!r}): headwater has no Databricks File System.",
            "dbfs: paths name Databricks' workspace storage, which exists only there.",
            "Use a local path, a file: URI or an object-store URI (s3://..., abfss://..., "
            "gs://...), e.g. read from the pipeline's configuration with spark.conf.get.")
    shown = text.rstrip("/") or "/"
    parsed = urlparse(text)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # C:\ on Windows
        local = parsed.path if parsed.scheme == "file" else text
        return _Location(pafs.LocalFileSystem(), os.path.abspath(local), shown)
    uri = "s3" + text[3:] if parsed.scheme == "s3a" and not storage.options_for(text) else text
    try:
        fs, inner = storage.pyarrow_filesystem(uri)
    except Exception as exc:  # noqa: BLE001 - pyarrow knows no such scheme (ArrowInvalid, ...)
        raise _unsupported(
            f"dbutils.fs.{call}({text!r}): no filesystem for {parsed.scheme}:// paths.",
            f"headwater reaches object stores through pyarrow and delta-rs: {exc}",
            "Use a local path, a file: URI, or s3://, gs://, abfss:// with the project's "
            "[storage] credentials.") from exc
    return _Location(fs, inner.rstrip("/"), shown)


def _info(loc: _Location) -> Any:
    info = loc.fs.get_file_info(loc.inner)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundException(loc.shown)
    return info


def _millis(info: Any) -> int:
    mtime = getattr(info, "mtime_ns", None)
    return int(mtime // 1_000_000) if mtime else 0


class FsUtils:
    """``dbutils.fs`` (see the module docstring)."""

    def ls(self, dir: str) -> list[FileInfo]:  # noqa: A002 - Databricks' argument name
        """The entries of folder ``dir`` in name order (a file: that file alone)."""
        loc = _locate(dir, "ls")
        info = _info(loc)
        if info.type != pafs.FileType.Directory:
            return [FileInfo(loc.shown, info.base_name, int(info.size or 0), _millis(info))]
        entries = loc.fs.get_file_info(pafs.FileSelector(loc.inner, recursive=False))
        found = []
        prefix = "" if loc.shown == "/" else loc.shown
        for entry in sorted(entries, key=lambda e: e.base_name):
            folder = entry.type == pafs.FileType.Directory
            name = entry.base_name + ("/" if folder else "")
            found.append(FileInfo(f"{prefix}/{name}", name,
                                  0 if folder else int(entry.size or 0), _millis(entry)))
        return found

    def head(self, file: str, maxBytes: int = HEAD_BYTES) -> str:  # noqa: N803 - Databricks'
        """The first ``maxBytes`` bytes of ``file`` as text (UTF-8)."""
        loc = _locate(file, "head")
        if _info(loc).type == pafs.FileType.Directory:
            raise HeadwaterError(
                "HW_DBUTILS_INVALID", f"dbutils.fs.head({file!r}): that is a folder.",
                "head reads the beginning of one file.", "Name a file in it (dbutils.fs.ls).")
        with loc.fs.open_input_stream(loc.inner) as stream:
            return bytes(stream.read(int(maxBytes))).decode("utf-8", errors="replace")

    def mkdirs(self, dir: str) -> bool:  # noqa: A002 - Databricks' argument name
        """Create folder ``dir`` and its parents (nothing to do when it exists)."""
        loc = _locate(dir, "mkdirs")
        loc.fs.create_dir(loc.inner, recursive=True)
        return True

    def rm(self, dir: str, recurse: bool = False) -> bool:  # noqa: A002 - Databricks' name
        """Delete a file, or a folder with everything in it when ``recurse`` is True. False
        when nothing was there."""
        loc = _locate(dir, "rm")
        try:
            info = _info(loc)
        except FileNotFoundException:
            return False
        if info.type == pafs.FileType.Directory:
            inside = loc.fs.get_file_info(pafs.FileSelector(loc.inner, recursive=False))
            if inside and not recurse:
                raise HeadwaterError(
                    "HW_DBUTILS_INVALID", f"dbutils.fs.rm({dir!r}): the folder is not empty.",
                    "Deleting a folder deletes everything in it: rm asks for it explicitly.",
                    f"dbutils.fs.rm({dir!r}, recurse=True).")
            loc.fs.delete_dir(loc.inner)
        else:
            loc.fs.delete_file(loc.inner)
        return True

    def cp(self, from_: str, to: str, recurse: bool = False) -> bool:
        """Copy a file (a folder with ``recurse=True``) to ``to``."""
        source, target = _locate(from_, "cp"), _locate(to, "cp")
        self._check_folder(source, from_, recurse, "cp")
        if _info(source).type == pafs.FileType.Directory:
            target.fs.create_dir(target.inner, recursive=True)
        elif target.fs.get_file_info(target.inner).type == pafs.FileType.Directory:
            target = target._replace(inner=f"{target.inner}/{os.path.basename(source.inner)}")
        pafs.copy_files(source.inner, target.inner, source_filesystem=source.fs,
                        destination_filesystem=target.fs)
        return True

    def mv(self, from_: str, to: str, recurse: bool = False) -> bool:
        """Move a file (a folder with ``recurse=True``) to ``to``."""
        source, target = _locate(from_, "mv"), _locate(to, "mv")
        self._check_folder(source, from_, recurse, "mv")
        if isinstance(source.fs, pafs.LocalFileSystem) and \
                isinstance(target.fs, pafs.LocalFileSystem):
            if target.fs.get_file_info(target.inner).type == pafs.FileType.Directory:
                target = target._replace(
                    inner=f"{target.inner}/{os.path.basename(source.inner)}")
            os.makedirs(os.path.dirname(target.inner), exist_ok=True)
            os.replace(source.inner, target.inner)
            return True
        self.cp(from_, to, recurse)
        return self.rm(from_, recurse)

    def put(self, file: str, contents: str, overwrite: bool = False) -> bool:
        """Write ``contents`` (UTF-8) to ``file``; an existing file only with ``overwrite``."""
        loc = _locate(file, "put")
        if loc.fs.get_file_info(loc.inner).type != pafs.FileType.NotFound and not overwrite:
            raise HeadwaterError(
                "HW_DBUTILS_INVALID", f"dbutils.fs.put({file!r}): the file exists.",
                "put does not replace a file unless asked to.",
                f"dbutils.fs.put({file!r}, contents, overwrite=True).")
        parent = os.path.dirname(loc.inner)
        if parent:
            loc.fs.create_dir(parent, recursive=True)
        with loc.fs.open_output_stream(loc.inner) as stream:
            stream.write(str(contents).encode("utf-8"))
        return True

    @staticmethod
    def _check_folder(loc: _Location, given: str, recurse: bool, call: str) -> None:
        if _info(loc).type == pafs.FileType.Directory and not recurse:
            raise HeadwaterError(
                "HW_DBUTILS_INVALID", f"dbutils.fs.{call}({given!r}, ...): that is a folder.",
                f"{call} of a folder takes everything in it: it asks for it explicitly.",
                f"dbutils.fs.{call}({given!r}, ..., recurse=True).")


class WidgetsUtils:
    """``dbutils.widgets``: a pipeline's parameters are its configuration (see the module
    docstring)."""

    def __init__(self, spark: SparkSession | None) -> None:
        self._spark = spark
        self._defaults: dict[str, str] = {}

    def get(self, name: str) -> str:
        """The configuration's value of ``name`` (else a widget's default)."""
        value = self._spark.conf.get(name, None) if self._spark is not None else None
        if value is None:
            value = self._defaults.get(name)
        if value is None:
            raise HeadwaterError(
                "HW_PIPELINE_CONF_MISSING", f"dbutils.widgets.get({name!r}): the pipeline's "
                "configuration does not set it.",
                "In a pipeline, a notebook's widgets are the pipeline's configuration.",
                f"Set it: `configuration: {{{name}: ...}}` in spark-pipeline.yml, [spark] in "
                f"headwater.toml, or `headwater run --conf {name}=...`.")
        return str(value)

    def getArgument(self, name: str, optional: str | None = None) -> str | None:  # noqa: N802
        """Databricks' older spelling of :meth:`get`, with a fallback value."""
        try:
            return self.get(name)
        except HeadwaterError:
            if optional is not None:
                return optional
            raise

    def text(self, name: str, defaultValue: str = "", label: str | None = None) -> None:  # noqa: N803
        self._defaults[name] = str(defaultValue)

    def dropdown(self, name: str, defaultValue: str, choices: Any = None,  # noqa: N803
                 label: str | None = None) -> None:
        self._defaults[name] = str(defaultValue)

    combobox = dropdown

    def multiselect(self, name: str, defaultValue: str, choices: Any = None,  # noqa: N803
                    label: str | None = None) -> None:
        self._defaults[name] = str(defaultValue)

    def remove(self, name: str) -> None:
        self._defaults.pop(name, None)

    def removeAll(self) -> None:  # noqa: N802 - Databricks' method name
        self._defaults.clear()


class SecretsUtils:
    """``dbutils.secrets``: refused with where the value can come from instead."""

    def _refuse(self, call: str) -> HeadwaterError:
        return _unsupported(
            f"dbutils.secrets.{call}: headwater has no secret scopes.",
            "Databricks keeps secrets in its workspace's secret scopes; a pipeline run by "
            "headwater reads its settings from its own configuration and environment.",
            "Pass the value in the pipeline's configuration (spark.conf.get('mypipeline.key'); "
            "set it with `headwater run --conf mypipeline.key=...` or the spec's "
            "`configuration:`), or read an environment variable (os.getenv('KEY')); object "
            "store credentials go in the project's [storage] section.")

    def get(self, scope: str, key: str) -> str:
        raise self._refuse(f"get(scope={scope!r}, key={key!r})")

    def getBytes(self, scope: str, key: str) -> bytes:  # noqa: N802 - Databricks' name
        raise self._refuse(f"getBytes(scope={scope!r}, key={key!r})")

    def list(self, scope: str) -> list[Any]:
        raise self._refuse(f"list({scope!r})")

    def listScopes(self) -> list[Any]:  # noqa: N802 - Databricks' name
        raise self._refuse("listScopes()")


class DBUtils:
    """The ``dbutils`` of a definition file: ``fs``, ``widgets``, ``secrets``; any other
    utility (``notebook``, ``jobs``, ``library``, ...) is HW_DBUTILS_UNSUPPORTED."""

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.fs = FsUtils()
        self.widgets = WidgetsUtils(spark)
        self.secrets = SecretsUtils()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _unsupported(
            f"dbutils.{name}: headwater's dbutils has fs, widgets and secrets only.",
            f"dbutils.{name} reaches Databricks' workspace, which a pipeline run by headwater "
            "does not have.",
            "Remove the call from the definition file (a pipeline's notebooks only declare "
            "datasets).")
