"""Every name with a meaning to headwater, in one place: folders, tables, files, metric
prefixes, configuration keys, and the environment variables tests use as hooks.

A lakehouse root looks like this::

    <root>/<table>/                    a Delta table (``<schema>/<table>/`` in a schema)
    <root>/<table>__quarantine/        rows an expectation dropped, kept      (QUARANTINE_SUFFIX)
    <root>/<table>__late/              rows that arrived after their window   (LATE_SUFFIX)
    <root>/_event_log/                 the pipeline event log, a Delta table  (EVENT_LOG)
    <root>/_checkpoints/<table>/       one Spark checkpoint per writing query (CHECKPOINTS)
        .../headwater-flow.json        what the checkpoint's flow looked like (FLOW_STATE)
        .../headwater-snapshot.json    a snapshot flow's last version applied (SNAPSHOT_STATE)
        .../_lease/<n>.json            the lock's lease on a network mount or s3a:// (LEASE)
        .../_ingest/<stream id>/       a file stream's schema versions and file list
    <root>/_ingest/<stream id>/        the same for read_files outside a pipeline (INGEST)
        _schemas/<n>.json, _files.sqlite                                  (SCHEMAS, FILE_INDEX)
    <root>/_runs/<run id>.json         running and finished `headwater run`s   (RUNS)
    <root>/_warehouse/                 Spark's managed-table folder, always empty (WAREHOUSE)
    <root>/_external/<name>.json       an external table's location (CREATE TABLE ... LOCATION,
                                       DeltaTable.create().location(...)) (EXTERNAL)
    <root>/_temporary/<table>/         a pipeline's TEMPORARY table: stored, known by name only
                                       inside the pipeline, not in the catalog (TEMPORARY)
    <root>/<catalog>/_catalog.json     a catalog (CREATE CATALOG, or a table named
                                       catalog.schema.table): its schemas are its folders,
        .../<schema>/<table>/          their tables inside them         (CATALOG_MARKER)

A root on an object store (``s3://bucket/lake``) holds the tables and ``_event_log`` only;
``_checkpoints``, ``_ingest``, ``_runs``, ``_warehouse`` and ``_external`` go to its local state folder
(``Lakehouse(root, state_dir=...)``, ``state_dir`` in headwater.toml).

Names starting with ``_`` or ``.`` are never user tables (RESERVED_PREFIXES).
"""

from __future__ import annotations

# --- folders and tables under a lakehouse root -------------------------------------------
CHECKPOINTS = "_checkpoints"
INGEST = "_ingest"
RUNS = "_runs"
EVENT_LOG = "_event_log"
WAREHOUSE = "_warehouse"
TEMPORARY = "_temporary"  # a pipeline's TEMPORARY (private) tables, out of the catalog
EXTERNAL = "_external"  # in the state folder: <qualified name>.json -> an external table's location
RESERVED_PREFIXES = ("_", ".")
# One part of a table name (a schema or a table): a folder name, lower case.
NAME_PART = r"^[a-z_][a-z0-9_]*$"
# A folder under the root holding this file is a catalog (its name and comment inside).
CATALOG_MARKER = "_catalog.json"
SCHEMA_MARKER = "_schema.json"  # a catalog's schema made by CREATE SCHEMA (object stores
# have no empty folders)
DEFAULT_CATALOG = "spark_catalog"  # Spark's session catalog: the root's own schemas
CATALOG_SEPARATOR = "__"  # Spark's database for schema s of catalog c: c__s
LEASE = "_lease"  # put-if-absent lease objects of a checkpoint lock (spark/lease.py)
# Tables headwater writes itself, queryable like any other (names users cannot take).
SYSTEM_TABLES = (EVENT_LOG,)

# --- side tables next to a pipeline table ---------------------------------------------------
QUARANTINE_SUFFIX = "__quarantine"
LATE_SUFFIX = "__late"
SIDE_SUFFIXES = {QUARANTINE_SUFFIX: "quarantine", LATE_SUFFIX: "late rows"}


def quarantine_table(table: str) -> str:
    """``<table>__quarantine``: rows a "drop" expectation removed."""
    return f"{table}{QUARANTINE_SUFFIX}"


def late_table(table: str) -> str:
    """``<table>__late``: rows that arrived after their window closed."""
    return f"{table}{LATE_SUFFIX}"


# --- inside a Delta table's folder (Delta readers skip names starting with "_") ------------
# AUTO CDC's per-key state (applied sequence, tombstones): a Delta table of its own.
CDC_STATE = "_hw_cdc_state"
# Databricks' name for how long a delete's tombstone is kept (seconds).
CDC_TOMBSTONE_GC_CONF = "pipelines.cdc.tombstoneGCThresholdInSeconds"

# --- files ----------------------------------------------------------------------------------
DELTA_LOG = "_delta_log"             # Delta's own: a folder with one is a Delta table
FLOW_STATE = "headwater-flow.json"   # in a flow's checkpoint: its output mode, state, schema
# in an AUTO CDC FROM SNAPSHOT flow's checkpoint folder: the last version applied, the count
SNAPSHOT_STATE = "headwater-snapshot.json"
SCHEMAS = "_schemas"                 # in a file stream's schema location: <version>.json
FILE_INDEX = "_files.sqlite"         # in a file stream's schema location: every file seen

# --- observed metrics (Dataset.observe names) --------------------------------------------------
EXPECTATIONS_METRICS = "expectations:"  # + table: <rule>_failed counts and rows
INGEST_METRICS = "ingest:"              # + stream id: rows, rescued_rows, malformed_rows
SINK_METRICS = "sink:"                  # + flow key: rows (a sink's writer may not count them)

# --- internal read options -----------------------------------------------------------------
# A stream read option set by continuous pipeline runs (commit-driven hops, see
# pipeline/run/hops.py): with nothing new, a Delta source's latestOffset waits this many
# milliseconds for the table's next commit (a file source of a local folder: for a new file)
# before answering "nothing new". Internal: the run sets it on the reads of the flows it
# starts on a zero-interval trigger.
COMMIT_WAIT_OPTION = "__hw_commit_wait_ms"


def expectations_metrics(table: str) -> str:
    return f"{EXPECTATIONS_METRICS}{table}"


def ingest_metrics(stream_id: str) -> str:
    return f"{INGEST_METRICS}{stream_id}"


# --- columns ----------------------------------------------------------------------------------
RESCUED_DATA = "_rescued_data"      # read_files' default rescued data column

# --- configuration keys ------------------------------------------------------------------------
# Spark runtime conf: the root of the lakehouse attached to a session (set when attached;
# cloned foreachBatch sessions inherit it), so lower rooms find it without the lakehouse.
LAKEHOUSE_ROOT_CONF = "headwater.lakehouse.root"
# Spark runtime conf: the same lakehouse's local state folder (checkpoints, _ingest, _runs):
# the root itself unless the root is on an object store.
LAKEHOUSE_STATE_CONF = "headwater.lakehouse.stateDir"
# Spark conf: the log level headwater sets on the SparkContext (default WARN).
LOG_LEVEL_CONF = "headwater.logLevel"
# The engine SQL DML uses in a session: auto (default), spark or delta-rs.
DML_ENGINE_CONF = "headwater.dml.engine"
# delta-spark's session conf: true makes every MERGE evolve the table's schema (as
# withSchemaEvolution() / MERGE WITH SCHEMA EVOLUTION do).
DELTA_AUTO_MERGE_CONF = "spark.databricks.delta.schema.autoMerge.enabled"
# delta-spark's session conf: the userMetadata of every commit that sets none as an option.
DELTA_USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# delta-spark's session confs of an idempotent write (the writer options txnAppId / txnVersion
# win); with autoReset on, txnVersion is cleared after each write that used it.
DELTA_TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
DELTA_TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
DELTA_TXN_AUTO_RESET_CONF = "spark.databricks.delta.write.txnVersion.autoReset.enabled"
# Spark's: `dynamic` makes an overwrite of a partitioned table replace only the partitions the
# data has (the writer option partitionOverwriteMode wins), as delta-spark does.
PARTITION_OVERWRITE_CONF = "spark.sql.sources.partitionOverwriteMode"
# delta-spark's: false refuses dynamic partition overwrite (default true).
DELTA_DYNAMIC_OVERWRITE_CONF = "spark.databricks.delta.dynamicPartitionOverwrite.enabled"
# Spark's: RESTORE re-adds a version's files even when some are missing (delta/restore.py)
IGNORE_MISSING_FILES_CONF = "spark.sql.files.ignoreMissingFiles"
# Spark's ANSI SQL mode: off by default for pipelines in DLT's dialect (pipeline/dialect.py)
ANSI_CONF = "spark.sql.ansi.enabled"
# Spark's parquet timestamp encoding; native Delta writes pass TIMESTAMP_MICROS as a write option
TIMESTAMP_TYPE_CONF = "spark.sql.parquet.outputTimestampType"

# Delta table properties headwater acts on. The two autoCompact limits are delta-spark's
# session confs spark.databricks.delta.autoCompact.*, here per table (delta-rs refuses unknown
# delta.* properties, hence the headwater. prefix).
AUTO_COMPACT_PROPERTY = "delta.autoOptimize.autoCompact"
AUTO_COMPACT_MIN_FILES_PROPERTY = "headwater.autoCompact.minNumFiles"
AUTO_COMPACT_MAX_FILE_SIZE_PROPERTY = "headwater.autoCompact.maxFileSize"

# --- environment variables ---------------------------------------------------------------------
# The driver JVM's class archive (spark/class_archive.py): "0" off, a folder to keep it in
# (default $XDG_CACHE_HOME/headwater). Read before the JVM starts, so not a session setting.
CLASS_ARCHIVE_ENV = "HEADWATER_CLASS_ARCHIVE"

# --- environment variables: test hooks, not configuration ------------------------------------
# Seconds between event-log appends (default 3); crash and CLI tests shorten it.
EVENT_FLUSH_SECONDS_ENV = "HEADWATER_EVENT_FLUSH_SECONDS"
# Seconds a Kafka sink task waits for the brokers to acknowledge its records (default 120);
# the broker tests shorten it.
KAFKA_FLUSH_TIMEOUT_ENV = "HEADWATER_KAFKA_FLUSH_TIMEOUT"
# Fault injection for crash tests: "sink_before_commit" (files written, nothing committed),
# "sink_after_commit" (Delta committed, Spark's commit log not yet written), a native-path
# point, "python_writer_after_commit" (a pipeline flow's batch committed through the Python
# writer, as on an object store; its checkpoint commit not yet), or "cdc_between_commits"
# (an AUTO CDC target committed, its key state not yet); the process kills itself there.
# FAULT_TABLE_ENV limits it to paths containing it.
FAULT_ENV = "HEADWATER_FAULT"
FAULT_TABLE_ENV = "HEADWATER_FAULT_TABLE"
# Checkpoint locks: "1" uses the lease (spark/lease.py) on local paths too (tests have no
# network mount); LEASE_TTL_ENV: the lease's seconds (default 60), shortened by lease tests.
LEASE_ALWAYS_ENV = "HEADWATER_LEASE_ALWAYS"
LEASE_TTL_ENV = "HEADWATER_LEASE_TTL"
