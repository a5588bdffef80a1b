"""Object-storage credentials: where they come from, how they reach the executors, and the
filesystems they open.

Three sources, later ones winning per key:

1. the environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...): delta-rs and pyarrow
   read it themselves; Spark's Python workers inherit the environment the driver had when the
   JVM started;
2. ``[storage]`` in ``headwater.toml`` (:func:`set_defaults`): for every object-store URI;
3. reader / writer options on a ``delta`` path (:func:`split_options`): for that bucket.

Option names are delta-rs' ``storage_options`` keys (case-insensitive: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``, ``AZURE_*``, ``GOOGLE_*``), plus the Hadoop s3a names delta-spark users
pass as DataFrame options (:data:`S3A_KEYS`), translated to delta-rs' names.

Values live in memory only: :class:`Credentials` prints its keys, never its values, and
travels to Spark's Python workers inside the pickled reader / writer, registering itself in the
worker when unpickled (a worker started before the options were set never saw them in its
environment).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from headwater.errors import HeadwaterError

#: option-name prefixes that are delta-rs / object_store storage keys
STORAGE_PREFIXES = ("aws_", "azure_", "google_")
#: Hadoop s3a option -> delta-rs key (``connection.ssl.enabled`` is inverted into allow_http)
S3A_KEYS = {
    "fs.s3a.access.key": "aws_access_key_id",
    "fs.s3a.secret.key": "aws_secret_access_key",
    "fs.s3a.session.token": "aws_session_token",
    "fs.s3a.endpoint": "aws_endpoint_url",
    "fs.s3a.endpoint.region": "aws_region",
    "fs.s3a.connection.ssl.enabled": "aws_allow_http",
}
LOCAL_SCHEMES = ("", "file")

_defaults: dict[str, str] = {}
_by_bucket: dict[str, dict[str, str]] = {}  # every table's options of a bucket, merged
_by_table: dict[str, dict[str, str]] = {}   # table URI -> the options given for it
_SAME_STORE = {"s3a": "s3", "s3n": "s3"}     # Hadoop's names for the same S3 buckets
_s3_filesystems: dict[tuple[tuple[str, str], ...], Any] = {}


def _norm_key(key: str) -> str | None:
    """The delta-rs name of an option, or None when it is no storage option."""
    low = key.lower()
    if low.startswith(STORAGE_PREFIXES):
        return low
    if low.startswith("fs.s3a."):
        if low not in S3A_KEYS:
            raise HeadwaterError(
                "HW_STORAGE_OPTION_UNKNOWN",
                f"Storage option {key!r} is not one headwater can pass to delta-rs.",
                "s3a options are translated to delta-rs' object-store keys; this one has no "
                "counterpart.",
                f"Use one of {sorted(S3A_KEYS)} or a delta-rs key (AWS_*, AZURE_*, GOOGLE_*).")
        return S3A_KEYS[low]
    return None


def normalize(options: Mapping[str, Any]) -> dict[str, str]:
    """Storage options with delta-rs' lower-case names; raises on unknown ``fs.s3a.*``."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = _norm_key(str(key))
        if name is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if str(key).lower() == "fs.s3a.connection.ssl.enabled":
            text = "false" if text.lower() == "true" else "true"
        out[name] = text
    return out


def split_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(storage options, every other option) of a reader / writer's options."""
    storage = normalize(options)
    rest = {k: v for k, v in options.items() if _norm_key(str(k)) is None}
    return storage, rest


def bucket_of(uri: str) -> str | None:
    """``scheme://bucket`` of an object-store URI; None for a local path."""
    parsed = urlparse(uri)
    if parsed.scheme in LOCAL_SCHEMES or len(parsed.scheme) == 1:  # C:\ on Windows
        return None
    return f"{_SAME_STORE.get(parsed.scheme, parsed.scheme)}://{parsed.netloc}"


def _table_key(uri: str) -> str:
    bucket = bucket_of(uri) or ""
    return bucket + urlparse(uri).path.rstrip("/")


def set_defaults(options: Mapping[str, Any]) -> None:
    """Storage options for every object-store URI in this process (``[storage]``)."""
    _defaults.clear()
    _defaults.update(normalize(options))


def add_defaults(options: Mapping[str, Any]) -> None:
    """More storage options for every object-store URI (they win over earlier ones)."""
    _defaults.update(normalize(options))


def from_hadoop_conf(conf: Mapping[str, Any]) -> dict[str, str]:
    """The credentials among a session's ``spark.hadoop.fs.s3a.*`` settings (the names of
    :data:`S3A_KEYS`, without the ``spark.hadoop.`` prefix), for delta-rs and pyarrow.

    Spark has no s3a filesystem here, so delta-spark users' session settings would otherwise
    be ignored for ``s3://`` tables. Other ``fs.s3a.*`` settings (``fs.s3a.impl``, ...) are
    Hadoop's own, for a cluster that brings hadoop-aws: left to it, not read here."""
    prefix = "spark.hadoop."
    return {key[len(prefix):]: str(value) for key, value in conf.items()
            if str(key).lower().startswith(prefix) and key[len(prefix):].lower() in S3A_KEYS}


def register(uri: str, options: Mapping[str, str]) -> None:
    bucket = bucket_of(uri)
    if bucket is not None and options:
        _by_table[_table_key(uri)] = dict(options)
        _by_bucket.setdefault(bucket, {}).update(options)


def forget_registered() -> None:
    """Drop the options registered for tables in this process (tests prove each path of
    credentials on its own)."""
    _by_table.clear()
    _by_bucket.clear()


def options_for(uri: str) -> dict[str, str] | None:
    """The storage options delta-rs / pyarrow get for ``uri``; None: the environment's."""
    bucket = bucket_of(uri)
    if bucket is None:
        return None
    # the options given for this table (or a table it is inside, e.g. its _delta_log); for
    # other paths of the bucket (a checkpoint's lease) what its tables were given
    key = _table_key(uri)
    tables = [t for t in _by_table if key == t or key.startswith(t + "/")]
    given = _by_table[max(tables, key=len)] if tables else _by_bucket.get(bucket, {})
    merged = {**_defaults, **given}
    return merged or None


class Credentials:
    """The storage options of one bucket, carried to Spark's Python workers by pickling.

    ``repr`` names the keys only. Unpickling registers the options in the receiving process.
    """

    def __init__(self, uri: str, options: Mapping[str, str] | None) -> None:
        self.uri = uri
        self._options = dict(options or {})

    @classmethod
    def for_uri(cls, uri: str) -> Credentials:
        return cls(uri, options_for(uri))

    def __repr__(self) -> str:
        return f"Credentials({self.uri!r}, keys={sorted(self._options)})"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.uri, self._options = state["uri"], state["options"]
        register(self.uri, self._options)


class Defaults:
    """This process's ``[storage]`` options, pickled with a session's data source classes
    (``ingest/registration.py``) so Spark's planning workers have them too."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._options = dict(options)

    @classmethod
    def current(cls) -> Defaults:
        return cls(_defaults)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Defaults) and other._options == self._options

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._options)))

    def __repr__(self) -> str:
        return f"StorageDefaults(keys={sorted(self._options)})"

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._options = state["options"]
        _defaults.clear()  # a reused worker forgets an earlier session's [storage]
        _defaults.update(self._options)


def pyarrow_filesystem(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for ``uri`` with its registered credentials.

    S3 gets pyarrow's native S3 filesystem; other schemes with options go through delta-rs'
    object store (``DeltaStorageHandler``); without options pyarrow reads the environment.
    """
    options = options_for(uri)
    if not options:
        return pafs.FileSystem.from_uri(uri)
    parsed = urlparse(uri)
    path = f"{parsed.netloc}{parsed.path}".rstrip("/")
    if parsed.scheme in ("s3", "s3a"):
        key = tuple(sorted(options.items()))
        if key not in _s3_filesystems:  # one client per credentials, not one per file
            _s3_filesystems[key] = pafs.S3FileSystem(**_pyarrow_s3(options))
        return _s3_filesystems[key], path
    from deltalake.fs import DeltaStorageHandler  # noqa: PLC0415 - worker: deltalake only for non-S3 object stores

    root = f"{parsed.scheme}://{parsed.netloc}"
    return pafs.PyFileSystem(DeltaStorageHandler(root, options)), parsed.path.lstrip("/")


def _pyarrow_s3(options: Mapping[str, str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    names = {"aws_access_key_id": "access_key", "access_key_id": "access_key",
             "aws_secret_access_key": "secret_key", "secret_access_key": "secret_key",
             "aws_session_token": "session_token", "aws_region": "region",
             "aws_endpoint_url": "endpoint_override", "aws_endpoint": "endpoint_override"}
    for key, value in options.items():
        if key in names:
            kwargs[names[key]] = value
    endpoint = kwargs.get("endpoint_override")
    if endpoint and "://" in endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs["endpoint_override"], kwargs["scheme"] = host.rstrip("/"), scheme
    if options.get("aws_allow_http", "").lower() == "true" and "scheme" not in kwargs:
        kwargs["scheme"] = "http"
    return kwargs


def boto3_client(uri: str) -> Any:
    """A boto3 S3 client with ``uri``'s credentials (the lease lock's conditional writes)."""
    try:
        import boto3  # noqa: PLC0415 - optional: boto3 is the [s3] extra
    except ImportError as exc:
        raise HeadwaterError(
            "HW_STORAGE_CLIENT_MISSING",
            f"A lease on {bucket_of(uri)} needs boto3, which is not installed.",
            "Conditional writes (If-None-Match) go through boto3; pyarrow has no such call.",
            "pip install 'headwater[s3]' (boto3).") from exc
    options = options_for(uri) or {}
    kwargs = {k: v for k, v in _pyarrow_s3(options).items() if k != "scheme"}
    endpoint = kwargs.pop("endpoint_override", None)
    if endpoint:
        scheme = _pyarrow_s3(options).get("scheme", "https")
        kwargs["endpoint_url"] = f"{scheme}://{endpoint}"
    names = {"access_key": "aws_access_key_id", "secret_key": "aws_secret_access_key",
             "session_token": "aws_session_token", "region": "region_name"}
    return boto3.client("s3", **{names.get(k, k): v for k, v in kwargs.items()})
