"""Liquid clustering metadata: the ``delta.clustering`` domain of a Delta table.

delta-spark records a table's clustering columns (``CLUSTER BY``, ``clusterBy``) in a
``domainMetadata`` action of domain ``delta.clustering`` whose configuration is
``{"clusteringColumns": [["col"], ...]}`` (each column as its path of physical names), and
lists the writer features ``clustering`` and ``domainMetadata`` in the protocol. deltalake
1.6.6 neither writes nor exposes domain metadata: headwater writes the action with its own
commit (:mod:`headwater.delta.commit`) and reads it back here from the log (the last
checkpoint's ``domainMetadata`` column, then the commits after it).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from headwater.conf.layout import DELTA_LOG
from headwater.delta.log import DeltaLog
from headwater.delta.snapshot_adds import checkpoint_at_or_before

DOMAIN = "delta.clustering"
FEATURES = ("clustering", "domainMetadata")


def domain_action(columns: list[str]) -> dict[str, Any]:
    """The domainMetadata action that clusters a table by ``columns`` (none: unclustered)."""
    config = {"clusteringColumns": [[c] for c in columns]}
    return {"domainMetadata": {"domain": DOMAIN, "configuration":
                               json.dumps(config, separators=(",", ":")), "removed": False}}


def clustering_columns(uri: str, table: Any = None) -> list[str]:
    """The table's clustering columns (top-level names), [] when it is not clustered.

    table: the deltalake table already open at ``uri`` (its latest version), if any."""
    return clustering_domain(uri, table) or []


def clustering_domain(uri: str, table: Any = None) -> list[str] | None:
    """The columns of the table's clustering domain (a snapshot's live ``delta.clustering``
    domainMetadata), None when it has none (not clustered, or the domain was removed).

    table: the deltalake table open at ``uri`` (at the version wanted), if any."""
    log = DeltaLog(uri)
    table = table if table is not None else log.table()
    if "clustering" not in (table.protocol().writer_features or []):
        return None  # no domain to look for
    version = table.version()
    found: dict[str, Any] | None = None
    # the newest checkpoint at or before ``version`` (a RESTORE reads an older version than
    # the last checkpoint: starting there would skip the domain), then the commits after it
    at = checkpoint_at_or_before(log, version)
    checkpoint = at[0] if at is not None else None
    if checkpoint is not None:
        found = _from_checkpoint(log, checkpoint)
    for v in range(-1 if checkpoint is None else checkpoint, version):
        for action in log.read_commit(v + 1) or []:
            domain = action.get("domainMetadata")
            if domain and domain.get("domain") == DOMAIN:
                found = domain
    if not found or found.get("removed"):
        return None
    paths = json.loads(found.get("configuration") or "{}").get("clusteringColumns", [])
    return [".".join(p) for p in paths]


def _from_checkpoint(log: DeltaLog, version: int) -> dict[str, Any] | None:
    prefix = f"{version:020d}.checkpoint"
    selector = pafs.FileSelector(f"{log.root}/{DELTA_LOG}")
    found = None
    for info in log.fs.get_file_info(selector):
        name = info.path.rsplit("/", 1)[-1]
        if not (name.startswith(prefix) and name.endswith(".parquet")):
            continue
        with log.fs.open_input_file(info.path) as handle:
            parquet = pq.ParquetFile(handle)
            if "domainMetadata" not in parquet.schema_arrow.names:
                continue
            for row in parquet.read(columns=["domainMetadata"]).column(0).to_pylist():
                if row and row.get("domain") == DOMAIN:
                    found = row
    return found
