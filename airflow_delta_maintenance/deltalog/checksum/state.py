"""``ChecksumState``: one version's checksum in memory, its JSON as delta-spark 4.4 writes it, and
a strict parser of ``<v>.crc`` files (a checksum is trusted input only after it parsed here)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptLogError
from ..model.actions import DomainMetadata, Metadata, Protocol, Txn, dv_unique_id
from ..model.schema_validation import strict_json_loads
from ..model.validation import validate_action
from .histograms import DELETED_RECORD_BINS, FILE_SIZE_BINS

__all__ = ["ChecksumError", "ChecksumState", "FileKey", "parse_checksum", "self_inconsistency", "ALL_FILES_THRESHOLD"]

# delta-spark's `allFilesInCrc.thresholdNumFiles`: the live adds are embedded below this many files.
ALL_FILES_THRESHOLD = 50
# delta-spark's `setTransactionsInCrc.maxAllowed` and `domainMetadatasInCrc.maxAllowed`.
MAX_SET_TRANSACTIONS = 100
MAX_DOMAIN_METADATA = 10

FileKey = tuple[str, str | None]  # (path, deletion vector unique id)


class ChecksumError(CorruptLogError):
    """A ``<v>.crc`` that cannot be parsed, or whose content disagrees with the table's replay."""

    def __init__(self, message: str, *, version: int, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.version = version


@dataclass
class ChecksumState:
    """The fields of a version checksum. ``txns``/``domains`` are None where the checksum does not
    carry them (delta-spark leaves them out past its thresholds); ``all_files`` maps each live file
    to its ``add`` while the table has fewer than ``ALL_FILES_THRESHOLD`` files, else None."""

    version: int
    table_size_bytes: int
    num_files: int
    metadata: Metadata
    protocol: Protocol
    txns: dict[str, Txn] | None = field(default_factory=dict)
    domains: dict[str, DomainMetadata] | None = field(default_factory=dict)
    txn_id: str | None = None
    in_commit_timestamp: int | None = None
    file_counts: list[int] | None = None
    file_bytes: list[int] | None = None
    num_deleted_records: int | None = None
    num_deletion_vectors: int | None = None
    deleted_record_counts: list[int] | None = None
    all_files: dict[FileKey, dict[str, Any]] | None = None
    num_metadata: int = 1
    num_protocol: int = 1

    def copy(self) -> ChecksumState:
        """An independent copy (a commit applied to it leaves this one as it was)."""
        return ChecksumState(
            self.version, self.table_size_bytes, self.num_files, self.metadata, self.protocol,
            None if self.txns is None else dict(self.txns), None if self.domains is None else dict(self.domains),
            self.txn_id, self.in_commit_timestamp,
            None if self.file_counts is None else list(self.file_counts), None if self.file_bytes is None else list(self.file_bytes),
            self.num_deleted_records, self.num_deletion_vectors,
            None if self.deleted_record_counts is None else list(self.deleted_record_counts),
            None if self.all_files is None else dict(self.all_files), self.num_metadata, self.num_protocol,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The checksum in delta-spark's field order (``VersionChecksum``); absent options left out."""
        out: dict[str, Any] = {}
        if self.txn_id is not None:
            out["txnId"] = self.txn_id
        out["tableSizeBytes"] = self.table_size_bytes
        out["numFiles"] = self.num_files
        if self.num_deleted_records is not None:
            out["numDeletedRecordsOpt"] = self.num_deleted_records
        if self.num_deletion_vectors is not None:
            out["numDeletionVectorsOpt"] = self.num_deletion_vectors
        out["numMetadata"] = self.num_metadata
        out["numProtocol"] = self.num_protocol
        if self.in_commit_timestamp is not None:
            out["inCommitTimestampOpt"] = self.in_commit_timestamp
        if self.txns is not None:
            out["setTransactions"] = [t.to_dict() for t in self.txns.values()]
        if self.domains is not None:
            out["domainMetadata"] = [d.to_dict() for d in self.domains.values()]
        out["metadata"] = self.metadata.to_dict()
        out["protocol"] = self.protocol.to_dict()
        if self.file_counts is not None and self.file_bytes is not None:
            out["fileSizeHistogram"] = {"sortedBinBoundaries": list(FILE_SIZE_BINS), "fileCounts": self.file_counts, "totalBytes": self.file_bytes}
        if self.deleted_record_counts is not None:
            out["deletedRecordCountsHistogramOpt"] = {"deletedRecordCounts": self.deleted_record_counts}
        if self.all_files is not None:
            out["allFiles"] = list(self.all_files.values())
        return out

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False).encode()


def _fail(name: str, version: int, what: str) -> ChecksumError:
    return ChecksumError(f"{name}: {what}", version=version, path=name)


def _long(d: Mapping[str, Any], key: str, name: str, version: int, *, required: bool = True) -> int | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not -(2**63) <= v < 2**63:
        raise _fail(name, version, f"{key} is {'missing' if v is None else 'not a long'}")
    return v


def _longs(v: Any, key: str, name: str, version: int, length: int) -> list[int]:
    if not isinstance(v, list) or len(v) != length or any(not isinstance(x, int) or isinstance(x, bool) for x in v):
        raise _fail(name, version, f"{key} is not an array of {length} longs")
    return list(v)


def _actions(d: Mapping[str, Any], key: str, kind: str, name: str, version: int) -> list[dict[str, Any]] | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, list):
        raise _fail(name, version, f"{key} is not an array")
    for i, body in enumerate(v):
        try:
            validate_action({kind: body}, f"{name} {key}[{i}]", None)
        except CorruptLogError as exc:
            raise _fail(name, version, str(exc)) from None
    return v


def parse_checksum(data: bytes, name: str, version: int) -> ChecksumState:
    """``<v>.crc`` as a ``ChecksumState``; ``ChecksumError`` naming the file and field otherwise.
    Both histogram field names are read (``histogramOpt`` is delta-spark's legacy one)."""
    try:
        d = strict_json_loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _fail(name, version, f"not valid JSON ({exc})") from None
    if not isinstance(d, dict):
        raise _fail(name, version, "not a JSON object")
    try:
        validate_action({"protocol": d.get("protocol")}, f"{name} protocol", None)
        validate_action({"metaData": d.get("metadata")}, f"{name} metadata", None)
        protocol, metadata = Protocol.from_dict(d["protocol"]), Metadata.from_dict(d["metadata"])
    except (CorruptLogError, KeyError, TypeError, ValueError) as exc:
        raise _fail(name, version, f"protocol/metadata unreadable ({exc})") from None
    size, num = _long(d, "tableSizeBytes", name, version), _long(d, "numFiles", name, version)
    txns = _actions(d, "setTransactions", "txn", name, version)
    domains = _actions(d, "domainMetadata", "domainMetadata", name, version)
    hist = d.get("fileSizeHistogram", d.get("histogramOpt"))
    counts = totals = None
    if hist is not None:
        if not isinstance(hist, dict) or hist.get("sortedBinBoundaries") != list(FILE_SIZE_BINS):
            raise _fail(name, version, "fileSizeHistogram does not have delta-spark's bin boundaries")
        counts = _longs(hist.get("fileCounts"), "fileSizeHistogram.fileCounts", name, version, len(FILE_SIZE_BINS))
        totals = _longs(hist.get("totalBytes"), "fileSizeHistogram.totalBytes", name, version, len(FILE_SIZE_BINS))
    deleted = d.get("deletedRecordCountsHistogramOpt")
    deleted_counts = None
    if deleted is not None:
        if not isinstance(deleted, dict):
            raise _fail(name, version, "deletedRecordCountsHistogramOpt is not an object")
        deleted_counts = _longs(deleted.get("deletedRecordCounts"), "deletedRecordCounts", name, version, DELETED_RECORD_BINS)
    adds = _actions(d, "allFiles", "add", name, version)
    txn_id = d.get("txnId")
    if txn_id is not None and not isinstance(txn_id, str):
        raise _fail(name, version, "txnId is not a string")
    assert size is not None and num is not None
    return ChecksumState(
        version=version,
        table_size_bytes=size,
        num_files=num,
        metadata=metadata,
        protocol=protocol,
        txns=None if txns is None else {t["appId"]: Txn.from_dict(t) for t in txns},
        domains=None if domains is None else {m["domain"]: DomainMetadata.from_dict(m) for m in domains},
        txn_id=txn_id,
        in_commit_timestamp=_long(d, "inCommitTimestampOpt", name, version, required=False),
        file_counts=counts,
        file_bytes=totals,
        num_deleted_records=_long(d, "numDeletedRecordsOpt", name, version, required=False),
        num_deletion_vectors=_long(d, "numDeletionVectorsOpt", name, version, required=False),
        deleted_record_counts=deleted_counts,
        all_files=None if adds is None else {(a["path"], dv_unique_id(a.get("deletionVector"))): a for a in adds},
        num_metadata=_long(d, "numMetadata", name, version) or 0,
        num_protocol=_long(d, "numProtocol", name, version) or 0,
    )


def self_inconsistency(state: ChecksumState) -> str | None:
    """Why a checksum cannot be true of any table (its histograms or file list against its totals)."""
    if state.num_files < 0 or state.table_size_bytes < 0:
        return "negative file count or size"
    if (state.num_metadata, state.num_protocol) != (1, 1):
        return "numMetadata/numProtocol are not 1"
    if state.file_counts is not None and state.file_bytes is not None and (sum(state.file_counts), sum(state.file_bytes)) != (state.num_files, state.table_size_bytes):
        return "fileSizeHistogram does not add up to numFiles/tableSizeBytes"
    if state.all_files is not None and (len(state.all_files), sum(int(a["size"]) for a in state.all_files.values())) != (state.num_files, state.table_size_bytes):
        return "allFiles does not add up to numFiles/tableSizeBytes"
    if state.deleted_record_counts is not None and sum(state.deleted_record_counts) != state.num_files:
        return "deletedRecordCountsHistogramOpt does not add up to numFiles"
    return None
