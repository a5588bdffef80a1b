"""The protocol a new table needs for its columns and properties, as delta-spark computes it.

deltalake is the judge of the ``delta.*`` properties it knows: they and the column types are
handed to its ``DeltaTable.create`` in a scratch folder, which refuses a bad property value
and says which protocol they need (``delta.enableChangeDataFeed`` -> writer 4, deletion
vectors -> table features...). Features deltalake's create does not know about (generated or
identity columns, clustering) are added by the callers; the result is written as the
smallest protocol that covers the features: legacy versions when some do, else table
features, as delta-spark writes it.

Used by every path that writes a table's first commit itself: CREATE TABLE with a full
definition (:mod:`headwater.delta.definition`) and a first write that creates the table with
properties (the session's ``properties.defaults.*``, :func:`headwater.delta.write.commit.commit_files`).
"""

from __future__ import annotations

import tempfile
from types import SimpleNamespace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from headwater.errors import HeadwaterError
from headwater.spark.jvm import interval_microseconds

# the feature alone, without enabling it (refused: headwater enables row tracking whole)
ROW_TRACKING_FEATURE_PROPERTY = "delta.feature.rowTracking"

# The table features each legacy writer / reader version implies (Delta's protocol).
LEGACY_WRITER = {2: {"appendOnly", "invariants"}, 3: {"checkConstraints"},
                 4: {"changeDataFeed", "generatedColumns"}, 5: {"columnMapping"},
                 6: {"identityColumns"}}
LEGACY_READER = {2: {"columnMapping"}}


# delta-spark's table properties (DeltaConfigs; docs.delta.io "Delta table properties
# reference"), lower-cased: a delta.* key outside these is refused, as delta-spark does.
KNOWN_PROPERTIES = frozenset(k.lower() for k in (
    "delta.appendOnly", "delta.autoOptimize", "delta.autoOptimize.autoCompact",
    "delta.autoOptimize.optimizeWrite", "delta.checkpointInterval",
    "delta.checkpointRetentionDuration", "delta.checkpoint.writeStatsAsJson",
    "delta.checkpoint.writeStatsAsStruct", "delta.checkpointPolicy",
    "delta.columnMapping.mode", "delta.columnMapping.maxColumnId",
    "delta.compatibility.symlinkFormatManifest.enabled", "delta.dataSkippingNumIndexedCols",
    "delta.dataSkippingStatsColumns", "delta.deletedFileRetentionDuration",
    "delta.enableChangeDataFeed", "delta.enableDeletionVectors",
    "delta.enableExpiredLogCleanup", "delta.enableFullRetentionRollback",
    "delta.enableInCommitTimestamps", "delta.enableRowTracking", "delta.enableTypeWidening",
    "delta.enableIcebergCompatV1", "delta.enableIcebergCompatV2", "delta.isolationLevel",
    "delta.logRetentionDuration", "delta.minReaderVersion", "delta.minWriterVersion",
    "delta.randomizeFilePrefixes", "delta.randomPrefixLength",
    "delta.sampleRetentionDuration", "delta.setTransactionRetentionDuration",
    "delta.targetFileSize", "delta.tuneFileSizesForRewrites",
    "delta.universalFormat.enabledFormats", "delta.enableVariantShredding",
    "delta.dropFeatureTruncateHistory.retentionDuration",
    "delta.inCommitTimestampEnablementVersion", "delta.inCommitTimestampEnablementTimestamp",
))
SYMLINK_MANIFEST_PROPERTY = "delta.compatibility.symlinkFormatManifest.enabled"
KNOWN_PREFIXES = ("delta.constraints.", "delta.feature.", "delta.coordinatedcommits.",
                  "delta.rowtracking.", "delta.columnmapping.", "delta.universalformat.")
# Properties that turn on a feature every writer must then maintain and headwater does not
# (row ids and commit versions, widened types, in-commit timestamps, Iceberg metadata):
# enabling one is refused rather than recorded without the feature's upkeep.
UNMAINTAINED = {
    "delta.enableincommittimestamps": "inCommitTimestamp",
    "delta.enableicebergcompatv1": "icebergCompatV1",
    "delta.enableicebergcompatv2": "icebergCompatV2",
}
UNMAINTAINED_FEATURES = {"rowtracking", "typewidening-preview",
                         "incommittimestamp", "icebergcompatv1", "icebergcompatv2",
                         "allowcolumndefaults"}


# Interval properties deltalake 1.6.6 cannot parse (its kernel refuses any value): checked
# here with delta-spark's rule and kept out of deltalake's validation.
CHECKED_HERE = {"delta.dropfeaturetruncatehistory.retentionduration"}


def check_interval(key: str, value: str, label: str) -> None:
    """delta-spark's check of an interval-valued property: Spark's interval parser reads it,
    no months, not negative in total (DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED).
    Without a Spark session (a worker committing what the driver checked) nothing is
    checked."""
    spark = SparkSession.getActiveSession()
    if spark is None:
        return
    parsed = interval_microseconds(spark, str(value))
    if parsed is None or parsed[0] != 0 or parsed[1] * 86_400_000_000 + parsed[2] < 0:
        raise HeadwaterError(
            "HW_TABLE_PROPERTY_INVALID", f"{key} = {value!r} on {label} is not a valid "
            "interval.", "Delta reads this property with Spark's interval parser, as a "
            "non-negative interval without months.", f"Use e.g. '{key}' = '24 hours' (or "
            "'interval 1 days').", error_class="DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED")


def check_properties(configuration: dict[str, str] | None, label: str = "the table") -> None:
    """Refuse a ``delta.*`` property delta-spark does not know (DELTA_UNKNOWN_CONFIGURATION)
    and one that enables a feature headwater's writes do not maintain."""
    for key, value in (configuration or {}).items():
        lowered = key.lower()
        if not lowered.startswith("delta."):
            continue
        if lowered not in KNOWN_PROPERTIES and not lowered.startswith(KNOWN_PREFIXES):
            raise HeadwaterError(
                "HW_TABLE_PROPERTY_INVALID", f"Unknown configuration was specified: {key} "
                f"(on {label}).", "Delta's own delta.* namespace holds the properties Delta "
                "defines; an unknown one is a typo or a property of another system.",
                "Check the name (docs.delta.io: table properties reference), or use a key "
                "outside the delta. prefix for your own metadata.",
                error_class="DELTA_UNKNOWN_CONFIGURATION")
        if lowered in CHECKED_HERE:
            check_interval(key, value, label)
        if lowered == SYMLINK_MANIFEST_PROPERTY.lower() and \
                str(value).strip().lower() == "true":
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE", f"{key} = {value} on {label}: headwater's "
                "writes do not regenerate symlink-format manifests.",
                "With the property set, delta-spark rewrites the manifests after every write; "
                "headwater's writers (streams, DML, pipelines) would leave them stale, and "
                "Presto / Athena / Redshift Spectrum would read old files.",
                "Leave the property out and run GENERATE symlink_format_manifest FOR TABLE t "
                "after the writes the external reader needs.")
        feature_name = UNMAINTAINED.get(lowered)
        if lowered.startswith("delta.feature.") and \
                lowered[len("delta.feature."):] in UNMAINTAINED_FEATURES:
            feature_name = key[len("delta.feature."):]
        elif feature_name is not None and str(value).strip().lower() != "true":
            feature_name = None
        if lowered == ROW_TRACKING_FEATURE_PROPERTY.lower() and feature_name is not None:
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE", f"{key} = {value} on {label}: headwater adds "
                "the rowTracking feature only together with enabling it.",
                "A table that supports row tracking without enabling it gets row ids on new "
                "files only; headwater enables it whole (every file backfilled).",
                "Use 'delta.enableRowTracking' = 'true' instead (or DeltaTable's "
                "addFeatureSupport('rowTracking')).",
                error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
        if feature_name is not None and feature_name.lower() == "allowcolumndefaults":
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE", f"{key} = {value} on {label}: headwater "
                "cannot enable column defaults here (an object store).",
                "A table with the allowColumnDefaults feature is committed by headwater "
                "itself, which needs local or mounted storage; deltalake cannot write it.",
                "Create the table on a local or mounted path (CREATE TABLE ... TBLPROPERTIES "
                f"('{key}' = 'enabled'), or the write's option), or leave the feature out.",
                error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")
        if feature_name is not None:
            raise HeadwaterError(
                "HW_DELTA_UNSUPPORTED_FEATURE", f"{key} = {value} on {label} would enable the "
                f"table feature {feature_name}, which headwater's writes do not maintain yet.",
                "Every writer of a table with that feature must keep it up to date (row ids, "
                "widened types, commit timestamps...); a table that names it without its "
                "upkeep would be wrong for every other Delta reader.",
                "Leave the property out, or enable the feature with delta-spark and write the "
                "table there.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def split_properties(configuration: dict[str, str] | None
                     ) -> tuple[dict[str, str], dict[str, str]]:
    """(Delta's ``delta.*`` properties, the user's own): deltalake accepts only the first kind
    when it creates or replaces a table, the second through ``alter.set_table_properties``.
    Properties headwater refuses (:func:`check_properties`) raise here, before any write."""
    check_properties(configuration)
    config = dict(configuration or {})
    delta = {k: v for k, v in config.items() if k.startswith("delta.")}
    return delta, {k: v for k, v in config.items() if k not in delta}


def invalid_property(exc: BaseException, path: str) -> BaseException:
    """deltalake's "Error parsing property" as an HW_ error; other errors unchanged."""
    if "Error parsing property" not in str(exc):
        return exc
    return HeadwaterError(
        "HW_TABLE_PROPERTY_INVALID", f"A table property of {path} is not valid: {exc}.",
        "Delta checks the names and values of its own delta.* properties.",
        "Use a property Delta knows with a valid value (e.g. 'delta.appendOnly'='true').")


def deltalake_protocol(schema: StructType, partition_by: list[str],
                       properties: dict[str, str] | None, label: str) -> Any:
    """The protocol deltalake gives a table of these column types and ``delta.*``
    properties (created in a scratch folder: deltalake validates both there). label: the
    table's name or path, for the error a bad property raises."""
    from deltalake import DeltaTable, Schema  # noqa: PLC0415 - worker: deltalake only in the worker that commits

    delta_keys, _ = split_properties(properties)
    # deltalake 1.6.6 refuses delta.enableTypeWidening: the feature is added here
    widened = any(k.lower() == TYPE_WIDENING_PROPERTY.lower() and str(v).strip().lower() == "true"
                  for k, v in delta_keys.items())
    # ... and delta.enableRowTracking ("kernel" refusal): rowTracking + domainMetadata added here
    tracked = any(k.lower() == ROW_TRACKING_PROPERTY.lower() and str(v).strip().lower() == "true"
                  for k, v in delta_keys.items())
    delta_keys = {k: v for k, v in delta_keys.items()
                  if k.lower() not in (TYPE_WIDENING_PROPERTY.lower(),
                                       ROW_TRACKING_PROPERTY.lower())
                  and k.lower() not in CHECKED_HERE
                  and not k.lower().startswith("delta.rowtracking.")}
    # column types only: generation and identity are the callers' to add (deltalake would
    # read Spark's SQL expressions with its own dialect)
    fields = [StructField(f.name, f.dataType, f.nullable) for f in schema.fields]
    with tempfile.TemporaryDirectory(prefix="hw-definition-") as scratch:
        try:
            made = DeltaTable.create(
                scratch, Schema.from_json(StructType(fields).json()),
                partition_by=list(partition_by) or None, configuration=delta_keys or None)
        except Exception as exc:  # noqa: BLE001 - deltalake's refusal, translated when known
            raise invalid_property(exc, label) from exc
        protocol = without_spurious_features(made.protocol(), schema)
    if not widened and not tracked:
        return protocol
    reader, writer = features(protocol)
    if widened:
        reader, writer = reader | {TYPE_WIDENING}, writer | {TYPE_WIDENING}
    if tracked:  # a writer feature: readers stay where the other features put them
        writer = writer | set(ROW_TRACKING_FEATURES)
    return SimpleNamespace(min_reader_version=3 if reader else 1, min_writer_version=7,
                           reader_features=sorted(reader) if reader else None,
                           writer_features=sorted(writer | LEGACY_WRITER[2]))


TYPE_WIDENING = "typeWidening"
TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"
ROW_TRACKING_PROPERTY = "delta.enableRowTracking"
ROW_TRACKING_FEATURES = ("rowTracking", "domainMetadata")


# deltalake 1.6.6 names these in every protocol it moves to table features (enabling deletion
# vectors gives readers [deletionVectors, variantType]); delta-spark adds them for a variant
# column only.
VARIANT_FEATURES = frozenset({"variantType", "variantType-preview"})


def has_variant(schema_json: str) -> bool:
    """Whether a schema (its JSON) has a variant column, nested ones included."""
    return '"variant"' in schema_json


def without_spurious_features(protocol: Any, schema: StructType) -> Any:
    """deltalake's protocol without the variant features when no column is a variant."""
    if has_variant(schema.json()):
        return protocol

    def drop(names: list[str] | None) -> list[str] | None:
        return None if names is None else [n for n in names if n not in VARIANT_FEATURES]
    return SimpleNamespace(min_reader_version=protocol.min_reader_version,
                           min_writer_version=protocol.min_writer_version,
                           reader_features=drop(protocol.reader_features),
                           writer_features=drop(protocol.writer_features))


def features(protocol: Any) -> tuple[set[str], set[str]]:
    """(reader features, writer features) a protocol supports, legacy versions expanded."""
    reader = set(protocol.reader_features or []) if protocol.min_reader_version >= 3 else \
        {f for v, fs in LEGACY_READER.items() if v <= protocol.min_reader_version for f in fs}
    writer = set(protocol.writer_features or []) if protocol.min_writer_version >= 7 else \
        {f for v, fs in LEGACY_WRITER.items() if v <= protocol.min_writer_version for f in fs}
    return reader, writer | reader


def smallest(reader: set[str], writer: set[str]) -> dict[str, Any]:
    """The legacy versions that cover the features when some do, else table features."""
    legacy_writer = next((v for v in range(1, 7) if writer <= _implied(LEGACY_WRITER, v)),
                         None)
    legacy_reader = next((v for v in range(1, 3) if reader <= _implied(LEGACY_READER, v)),
                         None)
    if legacy_writer is not None and legacy_reader is not None:
        return {"minReaderVersion": legacy_reader, "minWriterVersion": legacy_writer}
    action: dict[str, Any] = {"minReaderVersion": 3 if reader else 1, "minWriterVersion": 7}
    if reader:
        action["readerFeatures"] = sorted(reader)
    action["writerFeatures"] = sorted(writer | reader)
    return action


def _implied(legacy: dict[int, set[str]], version: int) -> set[str]:
    return {f for v, fs in legacy.items() if v <= version for f in fs}


def as_action(protocol: Any) -> dict[str, Any]:
    """A deltalake protocol as the log's ``protocol`` action."""
    action: dict[str, Any] = {"minReaderVersion": protocol.min_reader_version,
                              "minWriterVersion": protocol.min_writer_version}
    if protocol.min_reader_version >= 3:
        action["readerFeatures"] = sorted(protocol.reader_features or [])
    if protocol.min_writer_version >= 7:
        action["writerFeatures"] = sorted(protocol.writer_features or [])
    return action


def first_protocol(schema: StructType, partition_by: list[str],
                   properties: dict[str, str] | None, label: str,
                   writer_features: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The protocol action of a new table of ``schema`` with ``properties`` (a first write):
    (1, 2) for plain columns and no properties, else what deltalake's rules say, written as
    the smallest protocol covering it (at least writer 2, delta-spark's minimum), with the
    ``writer_features`` headwater maintains itself (allowColumnDefaults) added."""
    if writer_features:
        reader, writer = features(deltalake_protocol(schema, partition_by, properties, label))
        return smallest(reader, writer | LEGACY_WRITER[2] | set(writer_features))
    if not properties:  # no scratch table needed
        if '"timestamp_ntz"' in schema.json():  # readers refuse the type without the feature
            return {"minReaderVersion": 3, "minWriterVersion": 7,
                    "readerFeatures": ["timestampNtz"], "writerFeatures": ["timestampNtz"]}
        return {"minReaderVersion": 1, "minWriterVersion": 2}
    reader, writer = features(deltalake_protocol(schema, partition_by, properties, label))
    return smallest(reader, writer | LEGACY_WRITER[2])
