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
from pyspark.sql.types import StructType

from headwater.conf.layout import DELTA_LOG
from headwater.delta.commit import Transaction, commit
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.protocol import FEATURES_MIN_WRITER, Protocol, feature
from headwater.delta.snapshot_adds import checkpoint_at_or_before
from headwater.errors import HeadwaterError
from headwater.errors.delta import DeltaAnalysisError

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


# --- checks and changes of the clustering columns (CREATE / ALTER TABLE ... CLUSTER BY) -----

MAX_COLUMNS = 4  # delta-spark's clusteredTable.numClusteringColumnsLimit
INDEXED_COLUMNS_PROPERTY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"
# Types with min/max statistics, which data skipping (and so clustering) reads.
_SKIPPING_TYPES = ("byte", "short", "integer", "long", "float", "double", "decimal", "date",
                   "timestamp", "timestamp_ntz", "string")
FEATURE_PROPERTY = "delta.feature.clustering"


def check_columns(schema: StructType, columns: list[str], properties: dict[str, str],
                  table: str) -> list[str]:
    """delta-spark's checks of clustering columns, in its order; returns them as the schema
    spells them. Up to :data:`MAX_COLUMNS` top-level columns of the schema, each with
    statistics (among the first ``delta.dataSkippingNumIndexedCols`` columns, or listed in
    ``delta.dataSkippingStatsColumns``) and of a type that has min/max."""
    if len(columns) > MAX_COLUMNS:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", f"CLUSTER BY supports up to {MAX_COLUMNS} clustering "
            f"columns, but table {table} has {len(columns)} clustering columns.",
            "Delta clusters by at most 4 columns.", "Remove the extra clustering columns.",
            error_class="DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS")
    nested = [c for c in columns if "." in c]
    if nested:
        raise HeadwaterError(
            "HW_SQL_UNSUPPORTED", f"CLUSTER BY {', '.join(nested)} (table {table}): headwater "
            "clusters by top-level columns only.",
            "Nested clustering columns need the stats of struct fields, which headwater's "
            "OPTIMIZE does not order by.",
            "Cluster by top-level columns (add one that copies the field if needed).")
    by_name = {f.name.lower(): f for f in schema.fields}
    missing = [c for c in columns if c.lower() not in by_name]
    if missing:
        raise HeadwaterError(
            "HW_TABLE_DEFINITION_INVALID",
            f"The clustering columns {missing} are not columns of table {table}.",
            "A table's clustering columns are some of its columns.",
            f"Use some of: {', '.join(schema.fieldNames())}.")
    fields = [by_name[c.lower()] for c in columns]
    wrong = [f"{f.name} : {f.dataType.simpleString()}" for f in fields
             if f.dataType.typeName() not in _SKIPPING_TYPES]
    if wrong:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", f"CLUSTER BY is not supported because the following "
            f"column(s): {', '.join(wrong)} don't support data skipping (table {table}).",
            "Clustering orders files by their columns' min/max statistics; these types have "
            "none.", "Cluster by numeric, date, timestamp or string columns.",
            error_class="DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED")
    without = [f.name for f in fields if not _has_stats(schema, f.name, properties)]
    if without:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", f"Clustering requires clustering columns to have stats. "
            f"Couldn't find clustering column(s) {without} in the stats schema of table "
            f"{table}.", f"Delta collects statistics for the first "
            f"{INDEXED_COLUMNS_PROPERTY} (32) columns, or those of {STATS_COLUMNS_PROPERTY}.",
            f"Move the columns forward, or raise {INDEXED_COLUMNS_PROPERTY}.",
            error_class="DELTA_CLUSTERING_COLUMN_MISSING_STATS")
    return [f.name for f in fields]


def _has_stats(schema: StructType, name: str, properties: dict[str, str]) -> bool:
    listed = properties.get(STATS_COLUMNS_PROPERTY)
    if listed is not None:
        return name.lower() in {c.strip().strip("`").lower() for c in listed.split(",")}
    indexed = int(properties.get(INDEXED_COLUMNS_PROPERTY, "32"))
    names = [f.name.lower() for f in schema.fields]
    return indexed < 0 or names.index(name.lower()) < indexed


def feature_property_error(table: str, statement: str) -> HeadwaterError:
    """``delta.feature.clustering`` in TBLPROPERTIES: delta-spark enables clustering only with
    CLUSTER BY (a clustering domain without columns would be meaningless)."""
    create = statement.startswith("CREATE")
    return DeltaAnalysisError(
        "HW_CLUSTERING_INVALID", f"{statement} {table}: cannot enable the clustering table "
        "feature using TBLPROPERTIES.",
        "A clustered table records its columns in the delta.clustering domain, which CLUSTER "
        "BY writes.", "Use CREATE OR REPLACE TABLE ... CLUSTER BY (cols), or ALTER TABLE "
        f"{table} CLUSTER BY (cols).",
        error_class="DELTA_CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED" if create
        else "DELTA_ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED")


def alter(path: str, columns: list[str], table: str) -> int | None:
    """ALTER TABLE t CLUSTER BY (cols) | NONE, as delta-spark's AlterTableClusterByDeltaCommand:
    one commit of the clustering domain (and, on a table not yet clustered, the protocol with
    the clustering and domainMetadata writer features), operation CLUSTER BY. Existing files
    are not rewritten: OPTIMIZE clusters new data by the new columns, OPTIMIZE FULL all of it.
    NONE on an unclustered table changes nothing (None)."""
    uri = normalize_uri(path)
    log = DeltaLog(uri)
    current = log.table()
    protocol = Protocol.of_table(current)
    clustered = protocol.supports("clustering")
    if not columns and not clustered:
        return None
    if current.metadata().partition_columns:
        raise DeltaAnalysisError(
            "HW_CLUSTERING_INVALID", f"ALTER TABLE {table} CLUSTER BY cannot be applied to a "
            "partitioned table.", "A Delta table is either partitioned or clustered.",
            "Rewrite it unpartitioned and clustered: CREATE OR REPLACE TABLE ... CLUSTER BY "
            "(cols) AS SELECT * FROM ...",
            error_class="DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED")
    schema = StructType.fromJson(json.loads(current.schema().to_json()))
    config = dict(current.metadata().configuration or {})
    columns = check_columns(schema, columns, config, table)
    old = clustering_columns(uri, current)
    actions: list[dict[str, Any]] = []
    clustering = feature("clustering")  # it requires domainMetadata
    assert clustering is not None
    upgraded = protocol if clustered else \
        Protocol.of(protocol.reader, FEATURES_MIN_WRITER).with_feature(clustering).merge(protocol)
    if upgraded != protocol:
        actions.append(upgraded.action())
    actions.append(domain_action(columns))
    return commit(Transaction(
        uri=uri, read_version=current.version(), operation="CLUSTER BY",
        parameters={"oldClusteringColumns": ",".join(old),
                    "newClusteringColumns": ",".join(columns)},
        metrics={}, actions=actions, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


# --- files OPTIMIZE clustered (delta-spark's ZCube tags) --------------------------------------

PROVIDER = "liquid"  # AddFile.clusteringProvider of a file OPTIMIZE clustered
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"


def zcube_tags(zcube: str, columns: list[str]) -> dict[str, str]:
    """The tags delta-spark's ZCubeInfo gives each file of one clustering job's output."""
    return {ZCUBE_ID: zcube, ZCUBE_ZORDER_BY: json.dumps(columns, separators=(",", ":"))}


def zcube_of(add: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(ZCube id, its clustering columns) of a file's add action, None when unclustered."""
    tags = add.get("tags") or {}
    if ZCUBE_ID not in tags or ZCUBE_ZORDER_BY not in tags:
        return None
    return str(tags[ZCUBE_ID]), list(json.loads(tags[ZCUBE_ZORDER_BY]))


def candidates(adds: list[dict[str, Any]], columns: list[str], full: bool
               ) -> list[dict[str, Any]]:
    """The files an OPTIMIZE of a table clustered by ``columns`` rewrites, as delta-spark's
    ClusteringStrategy picks them (its ZCube size thresholds, 100 GiB and more, taken as never
    reached): unclustered files, and files of ZCubes clustered by the same columns, unless
    they are all one ZCube and nothing is unclustered (already clustered: nothing to do).
    Files clustered by other columns (or by another provider) are left alone, except by
    OPTIMIZE FULL, which takes every file."""
    picked, other = [], []
    for add in adds:
        cube = zcube_of(add)
        provider = add.get("clusteringProvider")
        if (provider in (None, PROVIDER)) and (cube is None or cube[1] == columns):
            picked.append(add)
        else:
            other.append(add)
    cubes = {c[0] for c in map(zcube_of, picked) if c is not None}
    unclustered = any(zcube_of(a) is None for a in picked)
    if full and other:
        return picked + other
    if not unclustered and len(cubes) <= 1:
        return []
    return picked
