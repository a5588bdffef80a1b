"""The one catalog of the options headwater's readers and writers take: name, default, meaning.

The options themselves are parsed where they are used (``conf/options.py`` holds the parsers),
so this catalog is what documents them: the options reference of the docs site is generated
from it, group by group. tests/test_option_catalog.py keeps it in step with the code, as
tests/test_errors.py does for the error codes: every option name a group's modules read
(``options.get("name")``, ``parse_bool("name", ...)``, ...) must be declared in the group, and
every option declared must be read by one of the group's modules. To add an option: read it in
the code, then add it here with its default and one line of meaning.

Names are written as users spell them (``maxFilesPerTrigger``); Spark hands them to the data
sources lower-cased, so matching ignores case.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.conf.layout import (
    ANSI_CONF,
    DELTA_DYNAMIC_OVERWRITE_CONF,
    DELTA_TXN_APP_ID_CONF,
    DELTA_TXN_AUTO_RESET_CONF,
    DELTA_TXN_VERSION_CONF,
    DELTA_USER_METADATA_CONF,
    IGNORE_MISSING_FILES_CONF,
    LAKEHOUSE_ROOT_CONF,
    LOG_LEVEL_CONF,
    PARTITION_OVERWRITE_CONF,
    TIMESTAMP_TYPE_CONF,
)


@dataclass(frozen=True)
class Option:
    """One option: its name, default (as text; "" when there is none), kind and meaning.

    kind: how the value is parsed (``conf/options.py``): boolean, size, whole number, column
        list, choice, or text / JSON / timestamp for values parsed where they are used.
    applies: where the option counts, for groups that serve several ("stream", "batch").
    aliases: other names read for the same option (delta-spark's or Auto Loader's).
    pattern: the name stands for a family (``kafka.<property>``), not one literal option.
    """

    name: str
    default: str
    kind: str
    meaning: str
    applies: str = ""
    aliases: tuple[str, ...] = ()
    pattern: bool = False


@dataclass(frozen=True)
class OptionGroup:
    """The options of one reader or writer, and the modules that read them."""

    key: str
    title: str
    usage: str          # how the options are given, as code
    modules: tuple[str, ...]  # src/headwater/<module>: where the options are read
    options: tuple[Option, ...]
    # names the modules read that are not user options (Spark's own, or headwater-internal)
    internal: tuple[str, ...] = ()
    note: str = ""


DELTA_READ = OptionGroup(
    key="delta-read",
    title="Delta reader: spark.read / spark.readStream .format(\"delta\")",
    usage='spark.readStream.format("delta").option("maxFilesPerTrigger", 100).load(path)',
    modules=("delta/source.py", "delta/datasource.py", "delta/cdf.py"),
    # __hw_commit_wait_ms: set by continuous pipeline runs (conf.layout.COMMIT_WAIT_OPTION)
    internal=("path", "__hw_commit_wait_ms"),
    note="The same options apply to `.table(name)` reads of lakehouse tables.",
    options=(
        Option("maxFilesPerTrigger", "1000", "whole number", "Files per micro-batch.",
               applies="stream"),
        Option("maxBytesPerTrigger", "none", "size",
               "Soft cap on bytes per micro-batch (at least one file is read).",
               applies="stream"),
        Option("startingVersion", "the snapshot", "whole number or `latest`",
               "Stream the commits from this version on instead of the table's snapshot; "
               "with readChangeFeed, the first version of the feed.", applies="stream, batch"),
        Option("startingTimestamp", "the snapshot", "timestamp",
               "Stream the commits made at or after this time (ISO 8601); with "
               "readChangeFeed, the feed's start.", applies="stream, batch"),
        Option("endingVersion", "the latest version", "whole number",
               "Last version of a batch change data feed read.", applies="batch"),
        Option("endingTimestamp", "the latest version", "timestamp",
               "Last commit time of a batch change data feed read.", applies="batch"),
        Option("ignoreDeletes", "false", "boolean",
               "Skip commits that only remove whole files.", applies="stream"),
        Option("schemaTrackingLocation", "none", "refused",
               "delta-spark's schema log for streaming across a column-mapped table's rename "
               "or drop: refused (HW_OPTION_UNSUPPORTED); such a stream stops at the change "
               "(DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG).",
               applies="stream"),
        Option("skipChangeCommits", "false", "boolean",
               "Skip every commit that updates or deletes rows.", applies="stream"),
        Option("ignoreChanges", "false", "boolean",
               "Re-emit the files rewritten by updates and deletes (rows may repeat).",
               applies="stream"),
        Option("failOnDataLoss", "true", "boolean",
               "Fail when commits the stream needs were removed by log cleanup.",
               applies="stream"),
        Option("readChangeFeed", "false", "boolean",
               "Read the table's change data feed (`_change_type`, `_commit_version`, "
               "`_commit_timestamp`) instead of its rows.", applies="stream, batch",
               aliases=("readChangeData",)),
        Option("versionAsOf", "the latest version", "whole number",
               "Time travel: read the table as of this version.", applies="batch"),
        Option("timestampAsOf", "the latest version", "timestamp",
               "Time travel: read the table as of this time.", applies="batch"),
    ),
)

DELTA_WRITE = OptionGroup(
    key="delta-write",
    title="Delta writer: df.write / df.writeStream .format(\"delta\")",
    usage='df.writeStream.format("delta").option("checkpointLocation", cp).start(path)',
    modules=("delta/sink.py", "delta/batch.py", "delta/write/request.py", "lakehouse/hooks.py"),
    internal=("path", "__partition_columns", "checkpointlocation", "__hw_dynamic_from_conf",
              "__hw_dynamic_enabled"),
    note="`checkpointLocation` is Spark's own streaming option; headwater reads it to name "
         "the query's Delta transactions.",
    options=(
        Option("partitionBy", "none", "column list",
               "Partition columns of a new table (`.partitionBy(...)` works too on path "
               "writes and `saveAsTable`).", applies="stream, batch"),
        Option("mergeSchema", "false", "boolean",
               "Add the data's new columns to the table; otherwise schema enforcement names "
               "the mismatched columns.", applies="stream, batch"),
        Option("overwriteSchema", "false", "boolean",
               "With mode overwrite: replace the table's schema and partitioning too.",
               applies="batch"),
        Option("targetFileSize", "128m", "size", "Size of the parquet files written.",
               applies="stream, batch"),
        Option("compression", "snappy", "text", "Parquet compression codec.",
               applies="stream, batch"),
        Option("autoCompact", "false", "boolean",
               "Compact small files after the commit (dataChange=false), as the table "
               "property `delta.autoOptimize.autoCompact` does; the property wins when set.",
               applies="stream, batch"),
        Option("replaceWhere", "none", "SQL condition",
               "With mode overwrite: replace only the rows matching this condition (any "
               "columns; every written row must match it, else DELTA_REPLACE_WHERE_MISMATCH "
               "and nothing is written). One commit.", applies="batch"),
        Option("dataChange", "true", "boolean",
               "`false` marks a write that only rearranges the table's rows (compaction by "
               "hand): its add and remove actions carry dataChange=false, so streams reading "
               "the table skip it. Refused where it would change the table's metadata.",
               applies="batch"),
        Option("maxRecordsPerFile", "none", "whole number",
               "At most this many rows per parquet file (Spark's parquet writer).",
               applies="stream, batch"),
        Option("txnAppId", "none", "text",
               "With txnVersion: an idempotent write; a repeated (txnAppId, txnVersion) "
               "pair writes nothing (how foreachBatch writes exactly once). The session "
               "settings `spark.databricks.delta.write.txnAppId` / `txnVersion` give them to "
               "writes and SQL INSERTs that set none.", applies="batch"),
        Option("txnVersion", "none", "whole number",
               "The version of the write for txnAppId (e.g. the micro-batch id).",
               applies="batch"),
        Option("userMetadata", "none", "text",
               "Kept in the commit's `commitInfo.userMetadata` (history); the session "
               "setting `spark.databricks.delta.commitInfo.userMetadata` gives a default.",
               applies="stream, batch"),
        Option("partitionOverwriteMode", "static", "choice",
               "`dynamic`: an overwrite replaces only the partitions the written rows fall "
               "in (an unpartitioned table whole, as delta-spark); default from Spark's "
               "`spark.sql.sources.partitionOverwriteMode`. Not with replaceWhere.",
               applies="batch"),
        Option("replaceUsing", "none", "refused",
               "Databricks' overwrite by key columns: refused (HW_OPTION_UNSUPPORTED), never "
               "ignored into a whole-table overwrite.", applies="batch"),
        Option("replaceOn", "none", "refused",
               "Databricks' overwrite by a join condition: refused (HW_OPTION_UNSUPPORTED).",
               applies="batch"),
    ),
)

CLOUD_FILES = OptionGroup(
    key="cloudfiles",
    title="File ingestion: headwater.read_files / format(\"cloudFiles\")",
    usage='spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")'
          '.option("cloudFiles.schemaLocation", folder).load(path)',
    modules=("ingest/source.py", "ingest/api.py"),
    # __hw_commit_wait_ms: set by continuous pipeline runs on a local folder's stream
    # (conf.layout.COMMIT_WAIT_OPTION): the wait for a new file
    internal=("path", "__hw_commit_wait_ms"),
    note="Every option is accepted with or without the `cloudFiles.` prefix. "
         "`headwater.read_files` takes the same options as keywords (in snake_case: "
         "`schema_hints=`, `clean_source=`, ...); see its API reference.",
    options=(
        Option("format", "json", "choice", "`json`, `csv` or `parquet`."),
        Option("schemaLocation", "(required; read_files picks one in a pipeline or lakehouse)",
               "path", "Folder for the schema versions and the list of ingested files "
                       "(local or a mount)."),
        Option("schema", "inferred", "DDL or JSON schema",
               "The schema, used as given; without it the first files are sampled once."),
        Option("schemaHints", "none", "DDL", "Types for chosen columns, e.g. "
                                              "`amount decimal(10,2), ts timestamp`."),
        Option("schemaEvolutionMode", "addNewColumns (none with a schema)", "choice",
               "`addNewColumns`, `rescue`, `failOnNewColumns` or `none`."),
        Option("rescuedDataColumn", "_rescued_data", "text",
               "Column keeping every value that did not fit, as JSON; `none` turns rescue "
               "off."),
        Option("multiLine", "false", "boolean",
               "JSON: one document (object or array) per file."),
        Option("header", "true", "boolean", "CSV: the first line names the columns."),
        Option("sep", ",", "one character", "CSV field separator.", aliases=("delimiter",)),
        Option("maxFilesPerTrigger", "1000", "whole number or `none`",
               "Files per micro-batch."),
        Option("maxBytesPerTrigger", "none", "size", "Soft cap on bytes per micro-batch."),
        Option("includeExistingFiles", "true", "boolean",
               "false: skip the files present at the first listing."),
        Option("pathGlobFilter", "none", "glob", "Only file names matching it, e.g. `*.json`."),
        Option("cleanSource", "off", "choice",
               "`off`, `archive` (move to sourceArchiveDir) or `delete`, once the batch that "
               "read a file is committed."),
        Option("sourceArchiveDir", "none", "path",
               "Where cleanSource=archive moves files (keeping their relative paths).",
               aliases=("archiveDir",)),
        Option("schemaInference.sampleSize.numFiles", "1000", "whole number",
               "Files sampled to infer the schema (default from the session's "
               "`spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles`, as on "
               "Databricks)."),
        Option("schemaInference.sampleSize.numBytes", "256m", "size",
               "Bytes sampled to infer the schema (session setting "
               "`spark.databricks.cloudFiles.schemaInference.sampleSize.numBytes`)."),
        Option("inferColumnTypes", "true", "boolean",
               "Column types are always inferred: `true` is accepted, `false` (Auto "
               "Loader's all-strings schema) is refused."),
        Option("ignoreMissingFiles", "false", "boolean",
               "Skip a listed file that vanished before it was read (otherwise the stream "
               "stops)."),
    ),
)

KAFKA_SOURCE = OptionGroup(
    key="kafka-source",
    title="Kafka reader: spark.read / spark.readStream .format(\"kafka\") or "
          ".format(\"headwater.kafka\")",
    usage='spark.readStream.format("headwater.kafka")'
          '.option("kafka.bootstrap.servers", servers).option("subscribe", "events").load()',
    modules=("kafka/options.py", "kafka/source.py"),
    note="Spark's option names; `kafka.*` properties are librdkafka's. A Java JAAS line "
         "(`kafka.sasl.jaas.config`) with PlainLoginModule or ScramLoginModule becomes "
         "`sasl.username` / `sasl.password`; other Java-only properties are refused "
         "(HW_KAFKA_CLIENT_CONFIG), and so are minOffsetsPerTrigger, maxTriggerDelay and "
         "maxRecordsPerPartition (HW_KAFKA_OPTION_UNSUPPORTED).",
    options=(
        Option("kafka.bootstrap.servers", "(required)", "text", "Brokers to connect to."),
        Option("kafka.<property>", "", "text",
               "Passed to librdkafka without the prefix (e.g. `kafka.security.protocol`, "
               "`kafka.sasl.username`).", pattern=True),
        Option("subscribe", "(one of three required)", "text", "Topics, a comma list."),
        Option("subscribePattern", "(one of three required)", "regex",
               "A regular expression matched against the whole topic name."),
        Option("assign", "(one of three required)", "JSON", 'Partitions: `{"t":[0,1]}`.'),
        Option("startingOffsets", "latest (stream), earliest (batch)", "keyword or JSON",
               '`earliest`, `latest` or `{"t":{"0":23,"1":-2}}` (-2 earliest, -1 latest; '
               'partitions left out start at earliest).'),
        Option("startingTimestamp", "none", "ms since epoch",
               "Start every partition at this time; wins over startingOffsets."),
        Option("startingOffsetsByTimestamp", "none", "JSON",
               "Start time per partition; wins over startingOffsets."),
        Option("startingOffsetsByTimestampStrategy", "latest", "latest",
               "A partition without a record at or after the starting time starts at its "
               "end (Spark's `latest`; Spark's default `error` is refused)."),
        Option("endingOffsets", "latest", "keyword or JSON",
               "Where a batch read ends (-1 latest).", applies="batch"),
        Option("endingTimestamp", "none", "ms since epoch", "Batch reads: end time.",
               applies="batch"),
        Option("endingOffsetsByTimestamp", "none", "JSON", "Batch reads: end time per "
                                                             "partition.", applies="batch"),
        Option("maxOffsetsPerTrigger", "none", "whole number",
               "Records per micro-batch, spread over partitions by their backlog.",
               applies="stream"),
        Option("minPartitions", "one task per partition", "whole number",
               "Split offset ranges so a batch has at least this many tasks."),
        Option("failOnDataLoss", "true", "boolean",
               "Fail (HW_KAFKA_DATA_LOSS) when unread offsets are gone; false skips them."),
        Option("includeHeaders", "false", "boolean", "Add the `headers` column."),
        Option("groupIdPrefix", "spark-kafka-source", "text",
               "Prefix of the generated consumer group (nothing is committed to it)."),
        Option("kafkaConsumer.pollTimeoutMs", "120000", "whole number",
               "How long a task waits for records before HW_KAFKA_UNAVAILABLE."),
        Option("fetchOffset.numRetries", "3", "whole number",
               "Retries of the driver's metadata and offset requests."),
        Option("fetchOffset.retryIntervalMs", "10", "whole number",
               "Milliseconds between those retries."),
        Option("fetchOffset.timeoutMs", "30000", "whole number",
               "Time one such request may take (headwater's own)."),
    ),
)

KAFKA_SINK = OptionGroup(
    key="kafka-sink",
    title="Kafka writer: df.write / df.writeStream .format(\"kafka\") or "
          ".format(\"headwater.kafka\")",
    usage='df.write.format("kafka").option("kafka.bootstrap.servers", servers)'
          '.option("topic", "out").save()',
    modules=("kafka/options.py",),
    note="Rows need a `value` column (string or binary), optionally `key`, `topic`, "
         "`partition`, `headers`. Batch writes append (no mode, or append); overwrite and "
         "ignore are HW_KAFKA_SAVE_MODE, as Spark's Kafka sink refuses them.",
    options=(
        Option("kafka.bootstrap.servers", "(required)", "text", "Brokers to connect to."),
        Option("kafka.<property>", "", "text",
               "Passed to librdkafka without the prefix; `enable.idempotence` defaults to "
               "true.", pattern=True),
        Option("topic", "the `topic` column", "text",
               "Topic of every row; overrides a `topic` column."),
    ),
)

GROUPS: tuple[OptionGroup, ...] = (DELTA_READ, DELTA_WRITE, CLOUD_FILES, KAFKA_SOURCE,
                                   KAFKA_SINK)


@dataclass(frozen=True)
class Setting:
    """A Spark session setting or Delta table property headwater reads (declared in the code
    as a ``*_CONF`` / ``*_PROPERTY`` constant)."""

    name: str
    where: str   # "session" (spark.conf), "table" (TBLPROPERTIES) or "keyword" (an argument)
    default: str
    meaning: str


SETTINGS: tuple[Setting, ...] = (
    Setting(LAKEHOUSE_ROOT_CONF, "session", "set when a lakehouse is attached",
            "The root of the lakehouse attached to the session (read it, do not set it)."),
    Setting("headwater.lakehouse.stateDir", "session", "the root",
            "The attached lakehouse's local state folder (checkpoints, _ingest, _runs)."),
    Setting(LOG_LEVEL_CONF, "session", "WARN",
            "Log level set on the SparkContext headwater starts (a running one keeps its "
            "own unless this is given)."),
    Setting("headwater.dml.engine", "session", "auto",
            "Engine of SQL DELETE / UPDATE / MERGE: `auto`, `spark` (copy-on-write on the "
            "executors) or `delta-rs` (on the driver)."),
    Setting("spark.databricks.delta.schema.autoMerge.enabled", "session", "false",
            "delta-spark's: every MERGE and write evolves the table's schema."),
    Setting(DELTA_USER_METADATA_CONF, "session", "none",
            "delta-spark's: the `userMetadata` of every commit the session writes (the "
            "writer's `userMetadata` option wins)."),
    Setting(DELTA_TXN_APP_ID_CONF, "session", "none",
            "delta-spark's: with txnVersion, the idempotent-write id of every write and SQL "
            "INSERT in the session that sets no txnAppId option (a repeated pair writes "
            "nothing)."),
    Setting(DELTA_TXN_VERSION_CONF, "session", "none",
            "delta-spark's: the version of the session's idempotent writes (see txnAppId)."),
    Setting(DELTA_TXN_AUTO_RESET_CONF, "session", "false",
            "delta-spark's: true clears the session's txnVersion after each write that used "
            "it."),
    Setting(PARTITION_OVERWRITE_CONF, "session", "static",
            "Spark's: `dynamic` makes overwrites (df.write, saveAsTable, insertInto, INSERT "
            "OVERWRITE) of partitioned Delta tables replace only the partitions written."),
    Setting(DELTA_DYNAMIC_OVERWRITE_CONF, "session", "true",
            "delta-spark's: false refuses dynamic partition overwrites."),
    Setting(TIMESTAMP_TYPE_CONF, "session", "INT96 (Spark's default)",
            "Spark's; headwater's native Delta writes give Spark's parquet writer "
            "TIMESTAMP_MICROS as a write option whatever it says (Delta readers expect "
            "microseconds), leaving the setting to other parquet writes."),
    Setting(ANSI_CONF, "session", "true (Spark 4); false in pipelines written in DLT's dialect",
            "Spark's ANSI SQL mode. `headwater run` turns it off for pipelines in DLT's "
            "dialect (notebooks, `import dlt`, `LIVE.`), as the Databricks runtimes they were "
            "written for did, unless the pipeline's configuration sets it."),
    Setting(IGNORE_MISSING_FILES_CONF, "session", "false",
            "Spark's; RESTORE of a table headwater commits itself (identity columns, "
            "clustering) re-adds a version's files even when some are gone (otherwise "
            "HW_DELTA_FILE_NOT_FOUND), as delta-spark does."),
    Setting("spark.databricks.delta.retentionDurationCheck.enabled", "session", "true",
            "false allows VACUUM with a retention below the table's."),
    Setting("spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled", "session",
            "true", "Z-order only by columns with statistics (delta-spark's check)."),
    Setting("spark.databricks.delta.optimize.minFileSize", "session", "1g",
            "OPTIMIZE compacts files smaller than this."),
    Setting("spark.databricks.delta.optimize.maxFileSize", "session", "1g",
            "Target size of the files OPTIMIZE writes."),
    Setting("spark.databricks.cloudFiles.schemaInference.sampleSize.numFiles", "session",
            "1000", "Default of the file streams' `schemaInference.sampleSize.numFiles` "
            "(`SET` in a pipeline's SQL, as on Databricks)."),
    Setting("spark.databricks.cloudFiles.schemaInference.sampleSize.numBytes", "session",
            "256m", "Default of the file streams' `schemaInference.sampleSize.numBytes`."),
    Setting("pipelines.cdc.tombstoneGCThresholdInSeconds", "keyword", "172800 (two days)",
            "Databricks' name for how long AUTO CDC keeps a delete's tombstone; headwater "
            "takes it as `create_auto_cdc_flow(tombstone_gc_seconds=...)`."),
    Setting("delta.autoOptimize.autoCompact", "table", "false (true in `headwater run`)",
            "Compact small files after each write, with dataChange=false."),
    Setting("headwater.autoCompact.minNumFiles", "table", "50",
            "Auto compaction starts once the table has this many small files."),
    Setting("headwater.autoCompact.maxFileSize", "table", "128m",
            "Files smaller than this count as small for auto compaction."),
    Setting("delta.enableChangeDataFeed", "table", "false",
            "Record the changes of DELETE / UPDATE / MERGE for readChangeFeed."),
    Setting("delta.deletedFileRetentionDuration", "table", "interval 7 days",
            "VACUUM keeps removed files this long."),
    Setting("delta.dataSkippingNumIndexedCols", "table", "32",
            "Columns with min/max statistics (Z-order needs them)."),
    Setting("delta.minReaderVersion", "table", "1", "Protocol reader version."),
    Setting("delta.minWriterVersion", "table", "2", "Protocol writer version."),
    Setting("delta.dataSkippingStatsColumns", "table", "unset",
            "delta-spark's: the columns with statistics (instead of the first "
            "dataSkippingNumIndexedCols); clustering columns must be among them."),
    Setting("delta.feature.clustering", "table", "unset",
            "Refused in TBLPROPERTIES, as delta-spark does: CLUSTER BY enables clustering."),
    Setting("delta.compatibility.symlinkFormatManifest.enabled", "table", "false",
            "Refused when true: headwater's writes do not regenerate the manifests; run "
            "GENERATE symlink_format_manifest FOR TABLE t instead."),
    Setting("delta.enableDeletionVectors", "table", "false",
            "Deletion vectors: the feature alone in headwater's own commit; DML reads the "
            "vectors and rewrites touched files whole (no new vectors written)."),
    Setting("delta.enableTypeWidening", "table", "false",
            "Type widening: ALTER COLUMN ... TYPE to a wider type as a metadata commit "
            "(delta.typeChanges); old files read widened."),
    Setting("delta.enableRowTracking", "table", "false",
            "Row tracking: new files get baseRowId / defaultRowCommitVersion and the "
            "delta.rowTracking high-water mark rises with every headwater commit; enabling it "
            "on a table backfills every file; _metadata.row_id / row_commit_version readable; "
            "UPDATE / DELETE keep ids. MERGE and OPTIMIZE (which would give rows new ids) "
            "are refused by name."),
    Setting("delta.feature.rowTracking", "table", "unset",
            "Refused in TBLPROPERTIES: use delta.enableRowTracking = true (or "
            "addFeatureSupport('rowTracking'))."),
    Setting("delta.rowTracking.materializedRowIdColumnName", "table", "set when enabled",
            "Row tracking: the hidden column rewritten files keep each row's id in (named "
            "as delta-spark names it when row tracking is enabled; not set by users)."),
    Setting("delta.rowTracking.materializedRowCommitVersionColumnName", "table",
            "set when enabled",
            "Row tracking: the hidden column rewritten files keep each row's commit version "
            "in (named as delta-spark names it when row tracking is enabled)."),
    Setting("delta.rowTrackingSuspended", "table", "false",
            "Row tracking: true while DROP FEATURE rowTracking removes it (new files get no "
            "ids), as delta-spark sets it."),
    Setting("delta.enableInCommitTimestamps", "table", "false",
            "Kept on tables that have it (every headwater commit carries an increasing "
            "inCommitTimestamp); enabling it is refused by name."),
    Setting("delta.dropFeatureTruncateHistory.retentionDuration", "table", "24 hours",
            "DROP FEATURE ... TRUNCATE HISTORY waits this long after the feature's last use "
            "before truncating the log."),
    Setting("delta.feature.allowColumnDefaults", "table", "unset",
            "'enabled' or 'supported': the allowColumnDefaults writer feature (column DEFAULT "
            "values), recorded in the protocol, not as a property."),
)


# --- project files ----------------------------------------------------------------------------
# headwater.toml's [pipeline] keys (conf/project_file.py accepts exactly these).
PROJECT_KEYS: dict[str, Option] = {o.name: o for o in (
    Option("name", "the folder's name", "text", "The pipeline's name."),
    Option("root", "lakehouse", "path or URI",
           "The lakehouse: a folder relative to the project, or an object-store URI "
           "(`s3://bucket/lake`, with state_dir)."),
    Option("definitions", "(required)", "list of globs",
           "The definition files, `.py` and `.sql` globs relative to the project."),
    Option("trigger", "available-now", "trigger",
           "Default trigger of `headwater run`: `available-now`, `once`, an interval "
           "(`\"30 seconds\"`) or `continuous`."),
    Option("master", "local[*]", "Spark master URL", "Where Spark runs."),
    Option("event_log", "true", "boolean", "Write every batch's progress to `_event_log`."),
    Option("catalog", "spark_catalog", "catalog name",
           "The catalog of the pipeline's tables (`<root>/<catalog>/<schema>/<table>`, named "
           "`catalog.schema.table`); created by the run when missing."),
    Option("database", "none", "schema name",
           "Unqualified names in the definitions are tables of this schema "
           "(`<root>/<database>/<table>`; in the catalog's folder with `catalog`)."),
    Option("schema", "none", "schema name", "Another name for `database`."),
    Option("auto_compact", "true", "boolean",
           "Compact the small files of every table the run writes; a table's "
           "`delta.autoOptimize.autoCompact` wins."),
    Option("state_dir", "the root", "path",
           "Local folder for checkpoints, run files and read_files state; required when the "
           "root is on an object store."),
)}
# the other tables of headwater.toml
PROJECT_TABLES: dict[str, str] = {
    "[spark]": "Spark settings for the run's session (`\"spark.sql.shuffle.partitions\" = "
               "\"8\"`).",
    "[storage]": "Object-store credentials for every path of the pipeline, with delta-rs' "
                 "names (`AWS_REGION = \"eu-west-1\"`); never printed or logged.",
}
# spark-pipeline.yml's keys (conf/sdp_spec.py accepts exactly these)
SPEC_KEYS: dict[str, str] = {
    "name": "The pipeline's name (required).",
    "storage": "The lakehouse root: Delta tables and checkpoints (a `file://` URI or a path "
               "relative to the spec; required).",
    "libraries": "The definition files: `glob: {include: folder/**}` or `file: {path: ...}` "
                 "entries, SDP's two shapes.",
    "configuration": "Spark settings (strings); `spark.conf.get(...)` sees them.",
    "catalog": "The catalog of the pipeline's tables (`main`: `main.<schema>.<name>`), "
               "created by the run when missing.",
    "database": "The schema the pipeline's tables live in.",
    "schema": "Another name for database.",
    "headwater": "headwater's own keys (below). spark-pipelines refuses this key: put them in "
                 "a headwater.toml beside the spec instead.",
}
SPEC_HEADWATER_KEYS: dict[str, str] = {
    "trigger": "As `trigger` in headwater.toml.",
    "master": "As `master` in headwater.toml.",
    "event_log": "As `event_log` in headwater.toml.",
    "auto_compact": "As `auto_compact` in headwater.toml.",
}
