"""Table features this library understands, and the gates built on them."""

from __future__ import annotations

from ..errors import UnsupportedFeatureError
from .actions import Protocol

__all__ = [
    "SUPPORTED_READER_FEATURES",
    "SUPPORTED_WRITER_FEATURES",
    "check_read_supported",
    "check_write_supported",
    "check_data_rewrite_supported",
    "is_catalog_managed",
    "is_coordinated",
    "in_commit_timestamps_enabled",
]

# Reading the *log* (not data files) is safe with these reader features: they change data-file
# interpretation (column mapping, types, DVs as keys) or the log layout we implement (v2Checkpoint,
# catalogManaged). Anything else, or a reader version above 3, is refused rather than misread.
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "catalogManaged",
        "catalogOwned-preview",
        "geospatial",
    }
)
CATALOG_MANAGED_FEATURES = ("catalogManaged", "catalogOwned-preview")

# Writer features whose rules our writers (checkpoint, log compaction, metadata cleanup) can honour:
# they copy reconciled actions or delete by the protocol's rules, so a feature is supported when it
# adds no obligation on those files that we do not implement.
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "columnMapping",
        "changeDataFeed",
        "identityColumns",
        "deletionVectors",
        "rowTracking",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "inCommitTimestamp",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "checkpointProtection",
        "coordinatedCommits-preview",
        "catalogManaged",
        "catalogOwned-preview",
        "allowColumnDefaults",
        "collations-preview",
        "materializePartitionColumns",
        "collations",
    }
)



def check_read_supported(protocol: Protocol, *, path: str | None = None) -> None:
    if protocol.min_reader_version > 3:
        raise UnsupportedFeatureError(
            f"reader version {protocol.min_reader_version} is not supported (max 3)",
            features=[f"readerVersion{protocol.min_reader_version}"],
            path=path,
        )
    if protocol.min_reader_version == 3:
        unknown = sorted(set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES)
        if unknown:
            raise UnsupportedFeatureError(
                f"unsupported reader features: {', '.join(unknown)}", features=unknown, path=path
            )


def check_write_supported(protocol: Protocol, *, operation: str, path: str | None = None) -> None:
    """The gate of every operation that writes or deletes log files (checkpoint, compaction on one
    node or Spark, cleanup): unknown reader or writer features are refused, by name."""
    try:
        check_read_supported(protocol, path=path)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{operation}: {exc}", features=exc.features, path=path) from None
    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"{operation}: writer version {protocol.min_writer_version} is not supported",
            features=[f"writerVersion{protocol.min_writer_version}"],
            path=path,
        )
    unknown = sorted(set(protocol.writer_features or ()) - SUPPORTED_WRITER_FEATURES)
    if unknown:
        raise UnsupportedFeatureError(f"{operation}: unsupported writer features {', '.join(unknown)}", features=unknown, path=path)


def is_catalog_managed(protocol: Protocol) -> bool:
    return any(protocol.has_writer_feature(f) or protocol.has_reader_feature(f) for f in CATALOG_MANAGED_FEATURES)


def is_coordinated(protocol: Protocol, configuration: dict[str, str] | None = None) -> bool:
    conf = configuration or {}
    return (
        is_catalog_managed(protocol)
        or protocol.has_writer_feature("coordinatedCommits-preview")
        or "delta.coordinatedCommits.commitCoordinator-preview" in conf
    )


def in_commit_timestamps_enabled(protocol: Protocol, configuration: dict[str, str]) -> bool:
    return (
        protocol.has_writer_feature("inCommitTimestamp")
        and str(configuration.get("delta.enableInCommitTimestamps", "false")).lower() == "true"
    )


# Writer features a rewrite of data files (OPTIMIZE) cannot honour yet, though log writers can: the
# files it writes would break their rules. Refused by name, on top of ``check_write_supported``.
DATA_REWRITE_REFUSED = {
    "icebergCompatV1": "Iceberg-compatible data files (field ids everywhere, no deletion vectors) are not written yet",
    "icebergCompatV2": "Iceberg-compatible data files (field ids everywhere, no deletion vectors) are not written yet",
    "variantShredding-preview": "shredded variant columns are not rewritten yet",
    "collations-preview": "statistics of collated string columns are not collected yet",
    "collations": "statistics of collated string columns are not collected yet",
    "geospatial": "geometry and geography columns are not rewritten yet",
}


def check_data_rewrite_supported(protocol: Protocol, *, operation: str, path: str | None = None) -> None:
    """The gate of operations that rewrite data files: ``check_write_supported``, then the features
    whose data-file rules are not implemented, by name."""
    check_write_supported(protocol, operation=operation, path=path)
    refused = sorted(f for f in DATA_REWRITE_REFUSED if protocol.has_writer_feature(f) or protocol.has_reader_feature(f))
    if refused:
        reasons = "; ".join(f"{f}: {DATA_REWRITE_REFUSED[f]}" for f in refused)
        raise UnsupportedFeatureError(f"{operation}: refused, {reasons}", features=refused, path=path)
