"""The one catalog of headwater's error codes: code -> what it means, one line each.

``HeadwaterError`` refuses a code that is not here, and tests/test_errors.py checks that every
``"HW_..."`` literal in the source is listed and every code listed is raised somewhere, so the
catalog neither misses a code nor keeps a dead one. Callers and tests match on these codes:
a code, once released, keeps its meaning. To add one: pick a name after what went wrong (not
where), add it here with its meaning, and raise it.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    # --- configuration: options, triggers, projects --------------------------------------
    "HW_OPTION_INVALID": "An option or parameter has a value headwater cannot use (a boolean "
                         "that is not true/false, a size without a known suffix, an unknown "
                         "mode, a missing required option).",
    "HW_OPTION_CONFLICT": "Two options were given that exclude each other.",
    "HW_OPTION_UNSUPPORTED": "A writer option headwater does not implement, which would "
                             "widen the write if ignored (replaceUsing, replaceOn).",
    "HW_TRIGGER_INVALID": "A trigger is not one of available-now, once, an interval or a "
                          "PySpark trigger dict.",
    "HW_PROJECT_NOT_FOUND": "No headwater.toml where a project was expected (and no --root).",
    "HW_PROJECT_INVALID": "headwater.toml or the definition files it names cannot be used.",
    "HW_PROJECT_EXISTS": "`headwater init` would write into a folder that is not empty.",
    # --- the machine -----------------------------------------------------------------------
    "HW_JAVA_MISSING": "No working Java runtime for Spark was found.",
    "HW_JAVA_TOO_OLD": "The Java runtime is older than the Java 17 Spark 4 needs.",
    # --- Delta tables by path --------------------------------------------------------------
    "HW_DELTA_PATH_EXISTS": "A write without mode append/overwrite found a Delta table already "
    "at its path (delta-spark's DELTA_PATH_EXISTS).",
    "HW_DELTA_TABLE_NOT_FOUND": "No Delta table (no _delta_log commits) at the given path.",
    "HW_DELTA_UNREADABLE": "A Delta log or its deletion vectors cannot be read consistently.",
    "HW_DELTA_VERSION_NOT_FOUND": "A time-travel version cannot be loaded (never existed, or "
                                  "its log was cleaned up).",
    "HW_DELTA_UNSUPPORTED_FEATURE": "The table uses a Delta feature headwater does not read or "
                                    "write yet (column mapping, deletion vectors in a stream).",
    "HW_DELTA_PROTOCOL_INVALID": "A protocol change Delta does not allow (a feature that is "
                                 "absent, not removable, or needs higher versions).",
    "HW_DELTA_TIMESTAMP_INVALID": "A time-travel timestamp (restore, clone) is not a timestamp "
                                  "Spark can read.",
    "HW_DELTA_UNSUPPORTED_TYPE": "A column type cannot be mapped between Delta, Arrow and Spark.",
    "HW_DELTA_DV_MISSING": "A data file's deletion vector could not be loaded.",
    "HW_DELTA_FILE_NOT_FOUND": "A data file listed in the Delta log is missing on storage.",
    # --- the Delta streaming source ----------------------------------------------------------
    "HW_SOURCE_NO_PATH": "A Delta read arrived without a table path.",
    "HW_SOURCE_NOT_APPEND_ONLY": "A streamed table's commit changes or deletes existing rows.",
    "HW_SOURCE_SCHEMA_CHANGED": "A streamed table's schema changed; the stream must restart.",
    "HW_SOURCE_TABLE_DELETED": "A streamed table was deleted while the stream read it.",
    "HW_SOURCE_TABLE_RECREATED": "A streamed table was deleted and recreated (a new table id).",
    "HW_SOURCE_DATA_LOSS": "Commits a stream still needs were removed by log cleanup.",
    "HW_SOURCE_VERSION_AFTER_LATEST": "startingVersion is after the table's latest version.",
    "HW_SOURCE_TIMESTAMP_AFTER_LATEST": "startingTimestamp / timestampAsOf is after the table's "
                                        "latest commit.",
    # --- writing Delta ----------------------------------------------------------------------
    "HW_SINK_NO_PATH": "A Delta write arrived without a table path.",
    "HW_SINK_SCHEMA_MISMATCH": "Written data does not fit the table's schema.",
    "HW_SINK_OUTPUT_MODE": "A stream's output mode the Delta sink cannot write into this table.",
    "HW_SINK_PARTITION_MISMATCH": "Requested partition columns differ from the table's or are "
                                  "not columns of the data.",
    "HW_REPLACE_WHERE_UNSUPPORTED": "A selective overwrite headwater cannot honour on this "
                                    "table or write path (refused, never widened).",
    "HW_CONSTRAINT_VIOLATED": "A row breaks a table's NOT NULL or CHECK constraint (or a new "
                              "constraint breaks existing rows); nothing was written.",
    "HW_COLUMN_DEFAULT_INVALID": "A column DEFAULT that Delta does not take: not a constant "
                                 "of the column's type, on a table without the "
                                 "allowColumnDefaults feature, or in ADD COLUMN.",
    "HW_REPLACE_WHERE_MISMATCH": "Rows written with replaceWhere fall outside its condition.",
    "HW_MERGE_KEYS_INVALID": "Update mode / MERGE has no usable key columns.",
    "HW_CHECKPOINT_IN_USE": "Another running query holds the same checkpoint.",
    # --- lakehouse tables by name -----------------------------------------------------------
    "HW_LAKEHOUSE_MISSING": "The lakehouse folder does not exist.",
    "HW_LAKEHOUSE_NOT_ATTACHED": "A table was read by name with no lakehouse attached to the "
                                 "session.",
    "HW_TABLE_NOT_FOUND": "No table of that name in the lakehouse.",
    "HW_TABLE_EXISTS": "A table of that name already exists in the lakehouse.",
    "HW_TABLE_NAME_INVALID": "A table name is not a valid [[catalog.]schema.]name.",
    "HW_CATALOG_NAME_INVALID": "A catalog name is not valid (or is taken by a schema).",
    "HW_CATALOG_NOT_FOUND": "A catalog named in SQL or a setting does not exist "
                            "(Spark's CATALOG_NOT_FOUND).",
    "HW_CATALOG_EXISTS": "CREATE CATALOG of a catalog that exists.",
    "HW_CATALOG_NOT_EMPTY": "DROP CATALOG without CASCADE of a catalog holding tables.",
    "HW_SCHEMA_NOT_FOUND": "A catalog's schema named in SQL does not exist.",
    "HW_SCHEMA_EXISTS": "CREATE SCHEMA of a catalog's schema that exists.",
    "HW_SCHEMA_NOT_EMPTY": "DROP SCHEMA without CASCADE of a schema holding tables.",
    "HW_TABLE_SCHEMA_INVALID": "A new table's schema cannot be a Delta schema (duplicate "
                               "columns).",
    "HW_SQL_UNSUPPORTED": "A SQL statement cannot be run on the lakehouse as written.",
    "HW_ALTER_COLUMN_UNSUPPORTED": "A column change (ADD / ALTER / CHANGE / REPLACE COLUMNS) "
                                   "Delta does not make on this table; delta-spark's error "
                                   "class is named.",
    "HW_ALTER_COLUMN_NOT_FOUND": "ALTER TABLE names a column or nested field the table does "
                                 "not have.",
    "HW_SQL_FAILED": "`headwater sql`: Spark could not run the query.",
    # --- file ingestion ---------------------------------------------------------------------
    "HW_INGEST_NO_FILES": "No files to infer a schema from, and no schema given.",
    "HW_INGEST_BAD_SCHEMA": "A schema, hint or DDL for file ingestion cannot be parsed or "
                            "produced from files.",
    "HW_INGEST_BAD_RECORD": "A record does not fit the schema and rescued data is off.",
    "HW_INGEST_FILE_MISSING": "A listed file vanished before it was read.",
    "HW_INGEST_NEW_COLUMNS": "New columns arrived under schema_evolution_mode "
                             "'failOnNewColumns'.",
    "HW_INGEST_SCHEMA_EVOLVED": "New columns were saved as a new schema version; the stream "
                                "stops to restart with them.",
    # --- pipelines --------------------------------------------------------------------------
    "HW_PIPELINE_DEFINITION_FAILED": "Running a definition file or function raised an error.",
    "HW_PIPELINE_CONF_MISSING": "Pipeline SQL names a ${key} (or dbutils.widgets.get a "
                                "name) that the pipeline's configuration does not set.",
    "HW_DBUTILS_UNSUPPORTED": "Definition code called a dbutils utility headwater has no "
                              "equivalent for (secrets, DBFS paths, notebook workflows).",
    "HW_DBUTILS_INVALID": "A dbutils.fs call cannot do what it was asked (a directory "
                          "without recurse=True, a file that exists without overwrite=True).",
    "HW_PIPELINE_SQL_INVALID": "A SQL pipeline file has a statement that is not a pipeline "
                               "statement or does not parse.",
    "HW_PIPELINE_NOT_LOADING": "A pipeline decorator was used outside a pipeline run.",
    "HW_PIPELINE_DUPLICATE": "A dataset or flow is defined twice.",
    "HW_PIPELINE_UNKNOWN_TABLE": "A definition or option names a dataset the pipeline does not "
                                 "have.",
    "HW_PIPELINE_CYCLE": "The pipeline's reads form a cycle.",
    "HW_PIPELINE_READ_MISMATCH": "read_stream() of a view over batch data.",
    "HW_PIPELINE_NOT_A_DATAFRAME": "A definition returned something other than a DataFrame.",
    "HW_PIPELINE_NOT_A_STREAM": "A streaming table's definition returned a batch DataFrame.",
    "HW_PIPELINE_STREAM_IN_MATERIALIZED_VIEW": "A materialized view's query is a stream.",
    "HW_STREAM_UNSUPPORTED": "Spark cannot run this query as a stream (an unsupported "
                             "operation for the output mode).",
    "HW_EXPECTATION_INVALID": "An expectation's condition is not a valid boolean row filter.",
    "HW_EXPECTATION_FAILED": "A 'fail' expectation failed on a row.",
    "HW_LATE_ROWS_UNSUPPORTED": "keep_late_rows on a query that is not a windowed aggregation "
                                "with a watermark.",
    "HW_LATE_ROWS_CHECKPOINT": "The offset log lacks the batch whose watermark judges late rows.",
    "HW_NATIVE_READ_DV": "A table read by Spark's parquet reader gained deletion vectors.",
    "HW_NATIVE_READ_CHANGED": "A table read by Spark's parquet reader changed its schema, "
                              "partitioning or reader features after the DataFrame was made.",
    "HW_CHECKPOINT_INCOMPATIBLE": "A flow changed in a way its checkpoint cannot survive.",
    "HW_FLOW_FAILED": "Spark stopped a flow's query with an error.",
    # --- tables: properties, DDL, writers --------------------------------------------------
    "HW_DELTA_COMMIT_CONFLICT": "Another writer committed first and its commit conflicts with "
                                "this one; nothing of this one was committed.",
    "HW_TABLE_PROPERTY_INVALID": "A table property has a value Delta cannot use.",
    "HW_TABLE_PROPERTY_NOT_FOUND": "UNSET TBLPROPERTIES names a property the table does not have.",
    "HW_SQL_NOT_SUPPORTED_YET": "A statement headwater recognises (Delta's or Spark's) but cannot "
                                "run on a lakehouse table yet.",
    "HW_WRITER_FORMAT_CONFLICT": "A writer's format conflicts with the lakehouse table it "
                                 "writes (e.g. parquet into a Delta table).",
    "HW_TABLE_DEFINITION_INVALID": "A table definition (CREATE TABLE, the table builder) "
                                   "cannot make a Delta table: no columns, unknown partition / "
                                   "clustering columns, both partitioning and clustering.",
    "HW_TABLE_LOCATION_MISMATCH": "CREATE OR REPLACE / the table builder gives a table name "
                                  "a LOCATION other than the existing table's.",
    "HW_GENERATED_COLUMN_INVALID": "A generated column's expression reads unknown or generated "
                                   "columns, or gives another type than the column's.",
    "HW_GENERATED_COLUMN_MISMATCH": "Written data gives a generated column a value other than "
                                    "its expression's.",
    "HW_IDENTITY_COLUMN_INVALID": "An identity column is declared or written against Delta's "
                                  "rules (not BIGINT, step 0, partitioned by, given values "
                                  "for GENERATED ALWAYS, updated).",
    # --- Kafka ---------------------------------------------------------------------------
    "HW_KAFKA_DATA_LOSS": "Kafka offsets not yet read are gone (deleted, truncated, topic "
                          "recreated) while failOnDataLoss is true.",
    "HW_KAFKA_UNAVAILABLE": "The Kafka brokers did not answer after the retries.",
    "HW_KAFKA_CLIENT_CONFIG": "The Kafka client refused a kafka.* property.",
    "HW_KAFKA_SINK_SCHEMA": "A Kafka sink's input lacks value or has wrongly typed key/topic/"
                            "partition/headers columns.",
    "HW_KAFKA_PRODUCE_FAILED": "Kafka refused or did not acknowledge produced records.",
    "HW_KAFKA_OPTION_UNSUPPORTED": "A Spark Kafka source option headwater does not implement "
                                   "(minOffsetsPerTrigger, maxTriggerDelay, ...).",
    "HW_KAFKA_SAVE_MODE": "A batch write to Kafka asks for save mode overwrite or ignore "
                          "(a topic is appended to).",
    # --- changing tables: DML and maintenance --------------------------------------------
    "HW_DML_UNSUPPORTED_FEATURE": "DML on a table using a feature headwater cannot rewrite "
                                  "(column mapping, deletion vectors, constraints, generated "
                                  "columns).",
    "HW_DML_APPEND_ONLY": "DML on a table with delta.appendOnly=true.",
    "HW_DELTA_APPEND_ONLY": "An overwrite (or a complete-mode stream) would remove files of a "
    "table with delta.appendOnly=true.",
    "HW_DML_INVALID": "A DML or RESTORE statement is incomplete or its condition/value does "
                      "not parse.",
    "HW_DML_UNKNOWN_COLUMN": "An assignment names a column the table does not have.",
    "HW_DML_NOT_NULL_VIOLATED": "A DML would write NULL into a NOT NULL column.",
    "HW_DML_CONCURRENT_CONFLICT": "Another writer committed a conflicting change; nothing of "
                                  "this DML was committed.",
    "HW_DML_STORAGE_UNSUPPORTED": "The Spark DML path cannot commit to this storage yet.",
    "HW_MERGE_MULTIPLE_SOURCE_ROWS": "Two source rows of a MERGE match one target row.",
    "HW_MERGE_CLAUSE_ORDER": "A MERGE clause without a condition is not the last of its kind.",
    "HW_MERGE_SOURCE_COLUMN_MISSING": "A MERGE * clause's source lacks a target column (and "
                                      "schema evolution is off).",
    "HW_OPTIMIZE_WHERE_NOT_PARTITION": "OPTIMIZE WHERE names columns that are not partition "
                                       "columns.",
    "HW_CLUSTERING_INVALID": "Liquid clustering as Delta refuses it: more than 4 clustering "
                             "columns, columns without statistics or of a type without "
                             "min/max, ALTER TABLE CLUSTER BY of a partitioned table, ZORDER BY "
                             "or WHERE in an OPTIMIZE of a clustered table, OPTIMIZE FULL of "
                             "an unclustered one.",
    "HW_OPTIMIZE_ZORDER_INVALID": "ZORDER BY names a partition column, a column the table "
                                  "lacks, or one without statistics.",
    "HW_VACUUM_RETENTION_TOO_SHORT": "VACUUM with a retention under the 168-hour safety limit.",
    "HW_VACUUM_READER_NEEDS_FILES": "VACUUM would delete files a named reader still needs.",
    "HW_DELTA_OPERATION_FAILED": "A delta-rs maintenance operation failed; the table is "
                                 "unchanged.",
    # --- pipelines written for SDP ---------------------------------------------------------
    "HW_PIPELINE_UNSUPPORTED": "A pipeline feature headwater refuses or does not have yet.",
    "HW_PIPELINE_COMPLETE_FLOW_SHARED": "A streaming table rewritten whole each micro-batch "
                                        "(complete mode, e.g. an aggregation without a "
                                        "watermark) has more than one flow writing it.",
    "HW_PIPELINE_NO_FLOW": "A streaming table has no flow writing it.",
    "HW_PIPELINE_NOT_A_FUNCTION": "A pipeline decorator was applied to something that is not "
                                  "a function.",
    "HW_PIPELINE_SCHEMA_MISMATCH": "A query's columns do not match the dataset's declared "
                                   "schema.",
    "HW_PIPELINE_SCHEMA_INVALID": "A declared schema is neither a StructType nor DDL.",
    # --- running and watching ------------------------------------------------------------------
    "HW_STREAM_NOT_READY": "A stream did not complete the awaited micro-batches in time.",
    "HW_STOP_TIMEOUT": "`headwater stop`: pipeline processes still run after the timeout.",
    "HW_DASHBOARD_PORT": "The dashboard's address is already in use.",
    # sql13
    "HW_DML_ENGINE_UNSUPPORTED": "engine='delta-rs' was forced for a DML delta-rs cannot run "
    "exactly like Spark.",
    # cdf13
    "HW_CDF_NO_START": "A batch change data feed read has no startingVersion/startingTimestamp.",
    "HW_CDF_NOT_RECORDED": "A change data feed range covers versions written without "
                           "delta.enableChangeDataFeed=true.",
    # cdc14
    "HW_CDC_INVALID": "AUTO CDC arguments contradict each other or miss keys / sequence_by.",
    "HW_CDC_COLUMN_UNKNOWN": "An AUTO CDC key or column list names a column the source lacks.",
    "HW_CDC_SEQUENCE_NULL": "A change event has a NULL sequence_by value.",
    "HW_CDC_DUPLICATE_SEQUENCE": "Two different change events share a key and a sequence value.",
    "HW_CDC_TARGET_MISMATCH": "An AUTO CDC target table lacks columns the flow writes.",
    "HW_EVENT_LOG_UNKNOWN": "event_log(...) names no pipeline (or table) of the lakehouse's "
                            "event log.",
    "HW_CDC_SNAPSHOT_DUPLICATE_KEY": "A snapshot for AUTO CDC FROM SNAPSHOT holds a key twice.",
    "HW_CDC_SNAPSHOT_INVALID": "A snapshot source gave no (DataFrame, version) pair, or a "
                               "version of an unsupported type or NULL.",
    "HW_CDC_SNAPSHOT_VERSION_ORDER": "A snapshot's version is not above the last one applied.",
    "HW_CDC_SNAPSHOT_FIRST_EMPTY": "A snapshot function returned None before any snapshot "
                                   "was applied.",
    # sinks16
    "HW_PIPELINE_SINK_FORMAT": "A pipeline sink's format has no streaming writer here, or "
                               "misses an option it needs (path).",
    # s3obj15
    "HW_STORAGE_OPTION_UNKNOWN": "An fs.s3a.* storage option has no delta-rs counterpart.",
    "HW_STORAGE_CLIENT_MISSING": "A lease on object storage needs boto3 (headwater[s3]).",
    "HW_STORAGE_INVALID": "[storage] in headwater.toml is not a table of string options.",
    "HW_HADOOP_FILESYSTEM_MISSING": "Spark has no Hadoop filesystem for a path's scheme "
                                    "(an s3:// checkpoint without hadoop-aws).",
    "HW_LEASE_HELD": "A live lease held by another writer guards this location.",
    "HW_LEASE_LOST": "A running query's checkpoint lease was taken over by another writer; "
                     "the query was stopped.",
    # cdc14
    "HW_DEBEZIUM_NOT_ENVELOPE": "Events given to debezium_changes are not Debezium envelopes, "
                                "or their columns clash with op/lsn/ts_ms.",
    # s3lake15
    "HW_LAKEHOUSE_STATE_DIR_MISSING": "A lakehouse root on an object store was given no local "
                                      "state folder (checkpoints, run files, ingest state).",
    "HW_LAKEHOUSE_STATE_DIR_INVALID": "A lakehouse state folder was given on an object store; "
                                      "it must be local or a mount.",
}


def meaning(code: str) -> str:
    """The one-line meaning of ``code``; KeyError when it is not a headwater code."""
    return CODES[code]
