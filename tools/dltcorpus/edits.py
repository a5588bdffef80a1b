"""The only edits a notebook gets before it runs on headwater, made mechanically and listed.

1. The import: ``import dlt`` becomes ``import headwater.dlt as dlt`` (a PyPI package named
   ``dlt`` exists, so headwater ships none).
2. Data paths: a string literal (quoted or back-quoted) that starts with a Databricks location
   (``/databricks-datasets/``, ``/Volumes/``, ``dbfs:/``, ``/dbfs/``, ``/tmp/``, ``/FileStore/``,
   ``/home/``, ``s3a://``, ``s3://``) gets the local data folder in front:
   ``/databricks-datasets/x`` -> ``<data>/databricks-datasets/x``, ``dbfs:/tmp/x`` ->
   ``<data>/tmp/x``, ``s3a://bucket/k`` -> ``<data>/s3/bucket/k``. The runner writes the
   generated inputs there.
3. Kafka connection options: ``kafka.security.protocol`` (SSL / SASL_SSL for a hosted cluster)
   is removed, since the test broker speaks plaintext, and a literal ``kafka.bootstrap.servers``
   becomes the test broker's address. (Servers read from the pipeline configuration need no
   edit: the configuration names the test broker.) The credentials (``kafka.sasl.*``, the JAAS
   line) and ``kafka.ssl.*`` options stay: headwater translates or passes them on as it would
   for the hosted cluster, and a plaintext connection does not use them.

Configuration the notebooks read (``spark.conf.get``, ``${...}``) is not an edit: it goes into
the project's spec, as a user sets it in the pipeline settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

IMPORT = re.compile(r"^(?P<indent>[ \t]*)import dlt[ \t]*$", re.M)
PREFIXES = ("/databricks-datasets/", "/Volumes/", "dbfs:/", "/dbfs/", "/tmp/", "/FileStore/",
            "/home/", "s3a://", "s3://")
PATH_LITERAL = re.compile(r"(?P<quote>[\"'`])(?P<path>(?:"
                          + "|".join(re.escape(p) for p in PREFIXES) + r")[^\"'`\n]*)")
KAFKA_SECURITY = re.compile(
    r"^[ \t]*\.option\(\s*[\"']kafka\.security\.protocol[\"'].*\)"
    r"[ \t\\]*$\n?", re.M)
KAFKA_SERVERS = re.compile(
    r"(?P<head>\.option\(\s*[\"']kafka\.bootstrap\.servers[\"']\s*,\s*)(?P<q>[\"'])"
    r"(?P<value>[^\"']*)(?P=q)")


@dataclass(frozen=True)
class Edit:
    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


def local_path(path: str, data: Path) -> str:
    """Where a Databricks path lives in the local data folder."""
    if path.startswith("dbfs:/"):
        path = path[len("dbfs:"):]
    elif path.startswith("/dbfs/"):
        path = path[len("/dbfs"):]
    elif path.startswith(("s3a://", "s3://")):
        path = "/s3/" + path.split("://", 1)[1]
    return f"{data}{path}"


def edit_notebook(text: str, data: Path, kafka_servers: str | None = None
                  ) -> tuple[str, list[Edit]]:
    """The notebook with the edits above, and the list of them (line numbers of the
    original)."""
    edits: list[Edit] = []

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def imports(match: re.Match[str]) -> str:
        edits.append(Edit(line_of(match.start()), "`import dlt` -> `import headwater.dlt as dlt`"))
        return f"{match.group('indent')}import headwater.dlt as dlt"

    def paths(match: re.Match[str]) -> str:
        original = match.group("path")
        local = local_path(original, data)
        edits.append(Edit(line_of(match.start()), f"path `{original}` -> `<data>{local[len(str(data)):]}`"))
        return match.group("quote") + local

    def security(match: re.Match[str]) -> str:
        option = re.search(r"kafka\.[\w.]+", match.group(0))
        edits.append(Edit(line_of(match.start()),
                          f"removed the Kafka option `{option.group(0) if option else '?'}`"))
        return ""

    def servers(match: re.Match[str]) -> str:
        if kafka_servers is None:
            return match.group(0)
        edits.append(Edit(line_of(match.start()),
                          f"kafka.bootstrap.servers `{match.group('value')}` -> the test broker"))
        q = match.group("q")
        return f"{match.group('head')}{q}{kafka_servers}{q}"

    # one pass per kind; ``line_of`` reads ``text``, the input of the running pass. Only the
    # last pass removes lines, so every line number is the original's.
    for pattern, replace in ((IMPORT, imports), (PATH_LITERAL, paths), (KAFKA_SERVERS, servers),
                             (KAFKA_SECURITY, security)):
        text = pattern.sub(replace, text)
    edits.sort(key=lambda e: e.line)
    return text, edits
