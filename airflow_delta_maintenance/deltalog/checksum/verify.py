"""Comparing a checksum found in the log with the one the replay gives (delta-spark's
``validateChecksum``): every field the found checksum carries must agree."""

from __future__ import annotations

from typing import Any

from .state import ChecksumState

__all__ = ["checksum_mismatches"]


def _files(state: ChecksumState) -> dict[Any, tuple[int, Any]]:
    assert state.all_files is not None
    return {k: (int(a["size"]), (a.get("deletionVector") or {}).get("cardinality")) for k, a in state.all_files.items()}


def checksum_mismatches(found: ChecksumState, expected: ChecksumState) -> list[str]:
    """One line per field of ``found`` that disagrees with ``expected`` (empty: it verifies).
    Optional fields ``found`` leaves out are not required; ``txnId`` is not state and not compared."""
    out: list[str] = []

    def differ(name: str, got: Any, want: Any) -> None:
        if got != want:
            out.append(f"{name} is {got!r}, the log says {want!r}")

    differ("numFiles", found.num_files, expected.num_files)
    differ("tableSizeBytes", found.table_size_bytes, expected.table_size_bytes)
    differ("numMetadata", found.num_metadata, 1)
    differ("numProtocol", found.num_protocol, 1)
    if found.metadata != expected.metadata:
        keys = [k for k, v in found.metadata.to_dict().items() if expected.metadata.to_dict().get(k) != v]
        out.append(f"metadata differs from the log's ({', '.join(keys) or 'fields'})")
    if found.protocol.to_dict() != expected.protocol.to_dict() and not _same_protocol(found, expected):
        out.append(f"protocol is {found.protocol.to_dict()}, the log says {expected.protocol.to_dict()}")
    if found.txns is not None and expected.txns is not None:
        differ("setTransactions", {k: t.version for k, t in found.txns.items()}, {k: t.version for k, t in expected.txns.items()})
    if found.domains is not None and expected.domains is not None:
        differ("domainMetadata", {k: d.configuration for k, d in found.domains.items()}, {k: d.configuration for k, d in expected.domains.items()})
    if found.in_commit_timestamp is not None and expected.in_commit_timestamp is not None:
        differ("inCommitTimestampOpt", found.in_commit_timestamp, expected.in_commit_timestamp)
    if found.file_counts is not None and expected.file_counts is not None:
        differ("fileSizeHistogram.fileCounts", found.file_counts, expected.file_counts)
        differ("fileSizeHistogram.totalBytes", found.file_bytes, expected.file_bytes)
    if found.num_deleted_records is not None and expected.num_deleted_records is not None:
        differ("numDeletedRecordsOpt", found.num_deleted_records, expected.num_deleted_records)
    if found.num_deletion_vectors is not None and expected.num_deletion_vectors is not None:
        differ("numDeletionVectorsOpt", found.num_deletion_vectors, expected.num_deletion_vectors)
    if found.deleted_record_counts is not None and expected.deleted_record_counts is not None:
        differ("deletedRecordCountsHistogramOpt", found.deleted_record_counts, expected.deleted_record_counts)
    if found.all_files is not None:
        if expected.all_files is None:
            out.append(f"allFiles lists {len(found.all_files)} files, the log has {expected.num_files}")
        elif _files(found) != _files(expected):
            missing = sorted(str(k[0]) for k in expected.all_files.keys() - found.all_files.keys())[:3]
            extra = sorted(str(k[0]) for k in found.all_files.keys() - expected.all_files.keys())[:3]
            out.append(f"allFiles differs from the live files (missing {missing}, not live {extra})")
    return out


def _same_protocol(a: ChecksumState, b: ChecksumState) -> bool:
    """Feature lists compare as sets: their order carries no meaning."""
    pa, pb = a.protocol, b.protocol
    return (
        (pa.min_reader_version, pa.min_writer_version) == (pb.min_reader_version, pb.min_writer_version)
        and set(pa.reader_features or ()) == set(pb.reader_features or ())
        and set(pa.writer_features or ()) == set(pb.writer_features or ())
    )
