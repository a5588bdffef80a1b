"""A Delta table's protocol (reader/writer versions, table features) as delta-spark computes it.

delta-rs reads a table's protocol and can add a feature (``alter.add_feature``), but with its
own rules: it turns a legacy (1, 2) table into (1, 7, [appendOnly]) where delta-spark sees
appendOnly as already supported, and it cannot drop a feature. ``upgradeTableProtocol``,
``addFeatureSupport`` and ``dropFeatureSupport`` therefore compute the new protocol here, with
delta-spark's rules (``TableFeatureSupport.scala``: implicit legacy features, ``merge``,
``normalized`` / ``denormalized``, ``removeFeature``), and commit one ``protocol`` action
through :mod:`headwater.delta.commit`.

Which features: every table feature delta-spark knows outside its test build (its test
features, e.g. ``testRemovableWriter``, exist only when delta-spark's own tests run with
DELTA_TESTING set; here they are unknown names, as in a released delta-spark). A feature is
added only if headwater's engine, delta-rs, still reads and writes the table afterwards
(measured on deltalake 1.6.6: :data:`WRITABLE`); adding any other known feature would leave a
table headwater can no longer write, so it is refused with delta-spark's
DELTA_UNSUPPORTED_FEATURES_FOR_WRITE. A feature is dropped when the drop needs no rewrite of
data or history: delta-spark drops reader-writer features by rewriting files and protecting
history with the ``checkpointProtection`` writer feature, which delta-rs cannot write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from deltalake import DeltaTable as RsTable

from headwater.delta import row_tracking
from headwater.delta.commit import Transaction, commit
from headwater.delta.log import DeltaLog, normalize_uri
from headwater.delta.metadata import metadata_action
from headwater.delta.snapshot_adds import snapshot_adds
from headwater.errors import HeadwaterError

FEATURES_MIN_READER = 3  # reader versions from here list their features
FEATURES_MIN_WRITER = 7
FEATURE_PROPERTY_PREFIX = "delta.feature."
MIN_READER_PROPERTY = "delta.minReaderVersion"
MIN_WRITER_PROPERTY = "delta.minWriterVersion"


@dataclass(frozen=True)
class Feature:
    """One table feature of delta-spark's catalog.

    legacy: also implied by the protocol versions alone (reader >= min_reader and writer >=
    min_writer). removable: delta-spark can drop it. history: dropping it needs history
    protection (reader-writer features). requires: features it depends on.
    """

    name: str
    reader_writer: bool
    legacy: bool
    min_reader: int
    min_writer: int
    removable: bool = False
    requires: tuple[str, ...] = ()

    @property
    def history(self) -> bool:
        return self.removable and self.reader_writer


def _legacy_writer(name: str, writer: int, removable: bool = False) -> Feature:
    return Feature(name, False, True, 0, writer, removable)


def _writer(name: str, removable: bool = False, requires: tuple[str, ...] = ()) -> Feature:
    return Feature(name, False, False, 0, FEATURES_MIN_WRITER, removable, requires)


def _reader_writer(name: str, removable: bool = False, requires: tuple[str, ...] = ()
                   ) -> Feature:
    return Feature(name, True, False, FEATURES_MIN_READER, FEATURES_MIN_WRITER, removable,
                   requires)


# delta-spark's TableFeature.allSupportedFeaturesMap (test features left out, see above).
FEATURES: dict[str, Feature] = {f.name.lower(): f for f in (
    _legacy_writer("appendOnly", 2),
    _legacy_writer("invariants", 2),
    _legacy_writer("checkConstraints", 3, removable=True),
    _legacy_writer("changeDataFeed", 4),
    _legacy_writer("generatedColumns", 4),
    Feature("columnMapping", True, True, 2, 5, removable=True),
    _legacy_writer("identityColumns", 6),
    _writer("allowColumnDefaults"),
    _writer("domainMetadata", removable=True),
    _writer("clustering", requires=("domainMetadata",)),
    _writer("rowTracking", removable=True, requires=("domainMetadata",)),
    _writer("icebergCompatV1", requires=("columnMapping",)),
    _writer("icebergCompatV2", requires=("columnMapping",)),
    _writer("icebergCompatV3", requires=("columnMapping", "rowTracking")),
    _writer("inCommitTimestamp", removable=True),
    _writer("materializePartitionColumns", removable=True),
    _writer("checkpointProtection", removable=True),
    _writer("coordinatedCommits-preview", removable=True,
            requires=("inCommitTimestamp", "vacuumProtocolCheck")),
    _reader_writer("timestampNtz"),
    _reader_writer("deletionVectors", removable=True),
    _reader_writer("v2Checkpoint", removable=True),
    _reader_writer("vacuumProtocolCheck", removable=True),
    _reader_writer("typeWidening-preview", removable=True),
    _reader_writer("typeWidening", removable=True),
    _reader_writer("variantType-preview"),
    _reader_writer("variantType"),
    _reader_writer("variantShredding-preview", requires=("variantType",)),
    _reader_writer("variantShredding", requires=("variantType",)),
    _reader_writer("geospatial-dev", removable=True),
    _reader_writer("geospatial", removable=True),
    _reader_writer("catalogManaged", removable=True,
                   requires=("inCommitTimestamp", "vacuumProtocolCheck")),
)}

# Features with which delta-rs (deltalake 1.6.6) still loads, reads and appends to a table.
WRITABLE = frozenset({
    "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns",
    "columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "variantType",
    "variantType-preview",
})


# Features deltalake cannot write but headwater's own commits maintain (every write that
# computes column values goes through Spark's SQL and headwater's commit; typeWidening: the
# writes' files have the current types, older files are widened by every reader): they may
# be added.
MAINTAINED_HERE = frozenset({"allowColumnDefaults", "typeWidening", "rowTracking",
                             "domainMetadata"})


def feature(name: str) -> Feature | None:
    """delta-spark's feature of that name (case-insensitive), or None for an unknown name."""
    return FEATURES.get(name.lower())


@dataclass(frozen=True)
class Protocol:
    """A protocol action: versions, and feature lists from reader 3 / writer 7 on."""

    reader: int
    writer: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    @classmethod
    def of(cls, reader: int, writer: int) -> Protocol:
        """A protocol with empty feature lists where its versions have them."""
        return cls(reader, writer,
                   frozenset() if reader >= FEATURES_MIN_READER else None,
                   frozenset() if writer >= FEATURES_MIN_WRITER else None)

    @classmethod
    def of_table(cls, table: RsTable) -> Protocol:
        p = table.protocol()
        return cls(p.min_reader_version, p.min_writer_version,
                   frozenset(p.reader_features) if p.reader_features is not None else None,
                   frozenset(p.writer_features) if p.writer_features is not None else None)

    @property
    def lists_readers(self) -> bool:
        return self.reader >= FEATURES_MIN_READER

    @property
    def lists_writers(self) -> bool:
        return self.writer >= FEATURES_MIN_WRITER

    @property
    def explicit(self) -> frozenset[str]:
        return (self.reader_features or frozenset()) | (self.writer_features or frozenset())

    def implicit(self) -> frozenset[Feature]:
        """Legacy features the versions alone support (none once both lists exist)."""
        if self.lists_readers and self.lists_writers:
            return frozenset()
        return frozenset(
            f for f in FEATURES.values() if f.legacy
            and not self.lists_readers and self.reader >= f.min_reader
            and not self.lists_writers and self.writer >= f.min_writer)

    def known(self) -> frozenset[Feature]:
        """The features this protocol supports, implicitly or by name (known names only)."""
        named = {feature(n) for n in self.explicit}
        return frozenset(f for f in named if f is not None) | self.implicit()

    def names(self) -> list[str]:
        """Every supported feature's name, sorted (DESCRIBE DETAIL's tableFeatures)."""
        return sorted({f.name for f in self.implicit()} | set(self.explicit))

    def supports(self, name: str) -> bool:
        """delta-spark's check for DROP FEATURE: by exact name, implicit ones included."""
        return name in {f.name for f in self.known()} or name in self.explicit

    # -- delta-spark's protocol algebra ------------------------------------------------
    def with_feature(self, f: Feature) -> Protocol:
        """The feature (and the ones it requires) added, as ``Protocol.withFeature``."""
        protocol = self
        for required in f.requires:
            protocol = protocol.with_feature(FEATURES[required.lower()])
        to_readers = f.reader_writer
        to_writers = True
        if f.legacy:
            if f.reader_writer:
                to_readers = protocol._needs_listing(f.name, f.min_reader, reader=True)
            to_writers = protocol._needs_listing(f.name, f.min_writer, reader=False)
        return protocol._named(f.name, to_readers, to_writers)

    def _needs_listing(self, name: str, required: int, reader: bool) -> bool:
        if self.lists_readers if reader else self.lists_writers:
            return True
        if required <= (self.reader if reader else self.writer):
            return False
        raise _too_low(name, self, reader)

    def _named(self, name: str, to_readers: bool, to_writers: bool) -> Protocol:
        if to_readers and not self.lists_readers:
            raise _too_low(name, self, reader=True)
        if to_writers and not self.lists_writers:
            raise _too_low(name, self, reader=False)
        readers = self.reader_features
        writers = self.writer_features
        if to_readers and readers is not None:
            readers = readers | {name}
        if to_writers and writers is not None:
            writers = writers | {name}
        return replace(self, reader_features=readers, writer_features=writers)

    def with_features(self, features: Iterable[Feature]) -> Protocol:
        protocol = self
        for f in sorted(features, key=lambda f: f.name):
            protocol = protocol.with_feature(f)
        return protocol

    def merge(self, *others: Protocol) -> Protocol:
        """The weakest protocol supporting everything ``self`` and ``others`` support."""
        protocols = (self, *others)
        merged = Protocol.of(max(p.reader for p in protocols), max(p.writer for p in protocols))
        for p in protocols:
            for name in sorted(p.reader_features or ()):
                merged = merged._named(name, True, False)
            for name in sorted(p.writer_features or ()):
                merged = merged._named(name, False, True)
        merged = merged.with_features(f for p in protocols for f in p.implicit())
        return merged.denormalized().normalized()

    def normalized(self) -> Protocol:
        """A table-features protocol as legacy versions when exactly their features remain,
        else with the lowest reader version its features need."""
        if not self.lists_writers:
            return self
        named = [f for f in (feature(n) for n in self.explicit) if f is not None]
        reader = max([f.min_reader for f in named] + [1])
        writer = max([f.min_writer for f in named] + [1])
        legacy = Protocol.of(reader, writer)
        if self.known() == legacy.known() and self.explicit <= {f.name for f in named}:
            return legacy
        return Protocol.of(reader, FEATURES_MIN_WRITER).with_features(named)._keep_unknown(self)

    def _keep_unknown(self, other: Protocol) -> Protocol:
        """Names this catalog does not know stay listed where they were."""
        known = {f.name for f in FEATURES.values()}
        readers = {n for n in other.reader_features or () if n not in known}
        writers = {n for n in other.writer_features or () if n not in known}
        protocol = self
        if readers and protocol.reader_features is not None:
            protocol = replace(protocol, reader_features=protocol.reader_features | readers)
        if writers and protocol.writer_features is not None:
            protocol = replace(protocol, writer_features=protocol.writer_features | writers)
        return protocol

    def denormalized(self) -> Protocol:
        """A legacy protocol as a table-features one listing its implicit features."""
        if self.lists_writers:
            return self
        implicit = self.implicit()
        reader = max([f.min_reader for f in implicit] + [1])
        return Protocol.of(reader, FEATURES_MIN_WRITER).with_features(implicit)

    def without(self, f: Feature) -> Protocol:
        """``removeFeature``: the feature dropped, then the weakest form."""
        current = self.denormalized()
        readers = current.reader_features
        if f.reader_writer and readers is not None:
            readers = readers - {f.name}
        writers = (current.writer_features or frozenset()) - {f.name}
        return replace(current, reader_features=readers, writer_features=writers).normalized()

    def action(self) -> dict[str, object]:
        body: dict[str, object] = {"minReaderVersion": self.reader,
                                   "minWriterVersion": self.writer}
        if self.reader_features is not None:
            body["readerFeatures"] = sorted(self.reader_features)
        if self.writer_features is not None:
            body["writerFeatures"] = sorted(self.writer_features)
        return {"protocol": body}

    def __str__(self) -> str:
        if self.reader_features is None and self.writer_features is None:
            return f"{self.reader},{self.writer}"
        lists = ["[" + ",".join(sorted(x)) + "]" if x is not None else "None"
                 for x in (self.reader_features, self.writer_features)]
        return f"{self.reader},{self.writer},{lists[0]},{lists[1]}"


def _too_low(name: str, protocol: Protocol, reader: bool) -> HeadwaterError:
    kind, current, needed = (("reader", protocol.reader, FEATURES_MIN_READER) if reader
                             else ("writer", protocol.writer, FEATURES_MIN_WRITER))
    return HeadwaterError(
        "HW_DELTA_PROTOCOL_INVALID",
        f"Unable to enable table feature {name} because it requires a higher {kind} protocol "
        f"version (current {current}).",
        "The table's protocol versions are too low to list table features.",
        f"Upgrade the table's {kind} version to {needed} first.",
        error_class=f"DELTA_FEATURE_REQUIRES_HIGHER_{kind.upper()}_VERSION")


# --- the commands ---------------------------------------------------------------------------

def upgrade(path: str, reader_version: int, writer_version: int) -> Protocol:
    """``upgradeTableProtocol``: merge the versions' features into the protocol (never a
    downgrade: lower versions leave it unchanged). Returns the protocol after."""
    for key, value, allowed in ((MIN_READER_PROPERTY, reader_version, (1, 2, 3)),
                                (MIN_WRITER_PROPERTY, writer_version, tuple(range(1, 8)))):
        if value not in allowed:
            raise HeadwaterError(
                "HW_TABLE_PROPERTY_INVALID",
                f"{key} needs to be one of {', '.join(map(str, allowed))}.",
                "Delta's protocol has these versions.",
                "Pass a reader version 1-3 and a writer version 1-7.")
    table = DeltaLog(normalize_uri(path)).table()
    current = Protocol.of_table(table)
    # reader 3 without writer 7 is no protocol: delta-spark caps it at 2 (the versions'
    # implied features only), so the features come from writer 7 alone
    reader = reader_version if writer_version >= FEATURES_MIN_WRITER else min(2, reader_version)
    requested = Protocol.of(reader, writer_version)
    new = current.merge(requested)
    if new != current:
        _commit(table, new, "SET TBLPROPERTIES", {"properties": json.dumps({
            MIN_READER_PROPERTY: str(reader_version),
            MIN_WRITER_PROPERTY: str(writer_version)})})
    return new


def add_feature(path: str, name: str) -> Protocol:
    """``addFeatureSupport``: the feature (and its dependencies) supported, the protocol moved
    to table features where it has to be. Returns the protocol after."""
    f = feature(name)
    if f is None:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            "Table features configured in the following Spark configs or Delta table "
            f"properties are not recognized by this version of Delta Lake: "
            f"{FEATURE_PROPERTY_PREFIX}{name.lower()}.",
            f"{name!r} is not a table feature of delta-spark (its test features, such as "
            "testRemovableWriter, exist only in delta-spark's own test runs).",
            "Use a feature name of the Delta protocol, e.g. deletionVectors or appendOnly.",
            error_class="DELTA_UNSUPPORTED_FEATURES_IN_CONFIG")
    table = DeltaLog(normalize_uri(path)).table()
    current = Protocol.of_table(table)
    _check_writable(table, [f, *_closure(f)])
    if f.name in current.explicit:
        return current
    reader = FEATURES_MIN_READER if any(x.reader_writer for x in [f, *_closure(f)]) \
        else current.reader
    new = Protocol.of(reader, FEATURES_MIN_WRITER).with_feature(f).merge(current)
    if new != current:
        _commit(table, new, "SET TBLPROPERTIES", {"properties": json.dumps(
            {f"{FEATURE_PROPERTY_PREFIX}{f.name}": "supported"})})
    return new


def drop_feature(path: str, name: str, truncate_history: bool = False) -> Protocol:
    """``dropFeatureSupport``: delta-spark's checks in its order, then one commit of the
    weaker protocol. Returns the protocol after. (Features whose drop rewrites files first,
    deletionVectors, typeWidening and rowTracking, are :mod:`headwater.delta.drop_feature`'s.)"""
    table = DeltaLog(normalize_uri(path)).table()
    f = check_drop(table, name, truncate_history)
    if f.name != "checkConstraints":
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"headwater cannot drop {f.name} yet.",
            "delta-spark drops it by rewriting the table's files or properties first and, for "
            "reader-writer features, by protecting history with the checkpointProtection "
            "writer feature, which delta-rs (headwater's engine) cannot write.",
            "Drop the feature with delta-spark, or copy the data into a new table.")
    return commit_drop(table, f, name, truncate_history)


def commit_drop(table: RsTable, f: Feature, name: str, truncate_history: bool) -> Protocol:
    """One DROP FEATURE commit: the protocol without ``f``. Returns it."""
    new = Protocol.of_table(table).without(f)
    _commit(table, new, "DROP FEATURE",
            {"featureName": name, "truncateHistory": json.dumps(bool(truncate_history))})
    return new


def check_drop(table: RsTable, name: str, truncate_history: bool) -> Feature:
    """delta-spark's checks of DROP FEATURE ``name``, in its order; the feature dropped."""
    current = Protocol.of_table(table)
    f = feature(name)
    present = current.supports(name)
    config = dict(table.metadata().configuration or {})
    if not present and name.lower().startswith("delta.") and f is None:
        raise HeadwaterError(
            "HW_DELTA_PROTOCOL_INVALID",
            f"Cannot drop `{name}` from this table because this is a delta table property "
            "and not a table feature.", "DROP FEATURE removes table features only.",
            "Unset the property with ALTER TABLE ... UNSET TBLPROPERTIES.",
            error_class="DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY")
    if f is None:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f"Cannot drop {name} because it is not supported by this Delta version.",
            f"{name!r} is not a table feature delta-spark (or headwater) knows.",
            "Check the name: detail().tableFeatures lists the table's features.",
            error_class="DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE")
    if not present:
        raise HeadwaterError(
            "HW_DELTA_PROTOCOL_INVALID",
            f"Cannot drop {name} from this table because it is not currently present in the "
            "table's protocol.", "Only a feature the protocol supports can be dropped.",
            "Check detail().tableFeatures for the table's features.",
            error_class="DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT")
    if not f.removable:
        raise HeadwaterError(
            "HW_DELTA_PROTOCOL_INVALID",
            f"Cannot drop {name} because dropping this feature is not supported.",
            "Delta lets only removable features be dropped; readers and writers rely on this "
            "one for good.", "Keep the feature, or copy the data into a new table.",
            error_class="DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE")
    if truncate_history and not f.history:
        raise HeadwaterError(
            "HW_DELTA_PROTOCOL_INVALID",
            "The particular feature does not require history truncation.",
            f"{f.name} is a writer feature: dropping it never rewrites the table's history.",
            "Call dropFeatureSupport without truncateHistory.",
            error_class="DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED")
    dependents = sorted(g.name for g in current.known() if f.name in g.requires)
    if dependents:
        raise HeadwaterError(
            "HW_DELTA_PROTOCOL_INVALID",
            f"Cannot drop table feature `{f.name}` because some other features "
            f"({', '.join(dependents)}) in this table depends on `{f.name}`.",
            "A feature cannot outlive the features it depends on.",
            "Consider dropping them first before dropping this feature.",
            error_class="DELTA_FEATURE_DROP_DEPENDENT_FEATURE")
    if f.name == "checkConstraints":
        constraints = sorted(k[len("delta.constraints."):] for k in config
                             if k.lower().startswith("delta.constraints."))
        if constraints:
            raise HeadwaterError(
                "HW_DELTA_PROTOCOL_INVALID",
                "Cannot drop the CHECK constraints table feature. The following constraints "
                f"must be dropped first: {', '.join(constraints)}.",
                "The feature guards the table's CHECK constraints.",
                "ALTER TABLE ... DROP CONSTRAINT each of them, then drop the feature.",
                error_class="DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE")
    return f


def _closure(f: Feature) -> list[Feature]:
    out: list[Feature] = []
    for name in f.requires:
        required = FEATURES[name.lower()]
        out += [required, *_closure(required)]
    return out


def _check_writable(table: RsTable, features: Iterable[Feature]) -> None:
    unsupported = sorted({f.name for f in features} - WRITABLE - MAINTAINED_HERE)
    if unsupported:
        raise HeadwaterError(
            "HW_DELTA_UNSUPPORTED_FEATURE",
            f'Unsupported Delta write feature: table "{table.table_uri}" requires writer table '
            f'feature(s) that are unsupported by headwater: {", ".join(unsupported)}.',
            "headwater writes through delta-rs, which cannot write a table whose protocol "
            "lists these features; the protocol was left unchanged.",
            f"Use one of: {', '.join(sorted(WRITABLE | MAINTAINED_HERE))}.",
            error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def _commit(table: RsTable, protocol: Protocol, operation: str,
            parameters: Mapping[str, str]) -> int:
    uri = normalize_uri(table.table_uri)
    return commit(Transaction(uri=uri, read_version=table.version(), operation=operation,
                              parameters=dict(parameters), metrics={},
                              actions=[protocol.action()]))


# Properties whose value ``true`` turns on a feature headwater can add to a protocol here.
ENABLING_PROPERTIES = {"delta.enabledeletionvectors": "deletionVectors",
                       "delta.enablerowtracking": "rowTracking",
                       "delta.enabletypewidening": "typeWidening",
                       "delta.enablechangedatafeed": "changeDataFeed",
                       "delta.appendonly": "appendOnly"}


def enabled_features(properties: Mapping[str, str]) -> list[str]:
    """The features ``properties`` turn on (``delta.enableDeletionVectors = true``,
    ``delta.checkpointPolicy = v2``...)."""
    found = {ENABLING_PROPERTIES[k.lower()] for k, v in properties.items()
             if k.lower() in ENABLING_PROPERTIES and str(v).strip().lower() == "true"}
    if any(k.lower() == "delta.checkpointpolicy" and str(v).strip().lower() == "v2"
           for k, v in properties.items()):
        found.add("v2Checkpoint")
    return sorted(found)


def with_enabled(table: RsTable, current: Protocol, names: Iterable[str]) -> Protocol:
    """``current`` upgraded, with delta-spark's rules, to support the features ``names``
    (what :func:`enabled_features` found in properties); refused when headwater's engine
    could not write ``table`` with them."""
    wanted = [FEATURES[n.lower()] for n in names]
    closure = [g for f in wanted for g in (f, *_closure(f))]
    _check_writable(table, closure)
    missing = [f for f in wanted if not current.supports(f.name)]
    if not missing:
        return current
    reader = FEATURES_MIN_READER if any(f.reader_writer for f in closure) else current.reader
    return Protocol.of(reader, FEATURES_MIN_WRITER).with_features(missing).merge(current)


def set_properties_with_features(path: str, properties: Mapping[str, str],
                                 names: Iterable[str]) -> int:
    """SET TBLPROPERTIES of properties that turn on features: the protocol upgraded with
    delta-spark's rules and the new configuration in one commit (as delta-spark writes it;
    deltalake's ``set_table_properties`` would also list variantType). Returns the version."""
    table = DeltaLog(normalize_uri(path)).table()
    current = Protocol.of_table(table)
    new = with_enabled(table, current, names)
    configuration = {**dict(table.metadata().configuration or {}), **properties}
    if row_tracking.FEATURE in names and row_tracking.enables(properties):
        # every file gets its row ids before the table says they are there (delta-spark:
        # the protocol, then ROW TRACKING BACKFILL, then the property)
        if new != current:
            _commit(table, new, "SET TBLPROPERTIES", {"properties": json.dumps(
                {f"{FEATURE_PROPERTY_PREFIX}{row_tracking.FEATURE}": "supported"})})
            current = new
        table = DeltaLog(normalize_uri(path)).table()
        if backfill_row_ids(table) is not None:
            table = DeltaLog(normalize_uri(path)).table()
    actions = ([new.action()] if new != current else []) + \
        [metadata_action(table, configuration=configuration)]
    return commit(Transaction(
        uri=normalize_uri(table.table_uri), read_version=table.version(),
        operation="SET TBLPROPERTIES", parameters={"properties": json.dumps(dict(properties))},
        metrics={}, actions=actions, conflict_code="HW_DELTA_COMMIT_CONFLICT"))


def backfill_row_ids(table: RsTable) -> int | None:
    """delta-spark's ROW TRACKING BACKFILL: every file of ``table`` without a ``baseRowId``
    re-added (``dataChange = false``) so that the commit gives it its row ids. Returns the
    version, None when every file had them."""
    uri = normalize_uri(table.table_uri)
    log = DeltaLog(uri)
    adds = [a for a in snapshot_adds(log, table) if a.get("baseRowId") is None]
    if not adds:
        return None
    return commit(Transaction(
        uri=uri, read_version=table.version(), operation="ROW TRACKING BACKFILL",
        parameters={}, metrics={"numSuccessfulFiles": len(adds)},
        actions=[{"add": {**a, "dataChange": False}} for a in adds],
        read_paths=[a["path"] for a in adds], conflict_code="HW_DELTA_COMMIT_CONFLICT"))
