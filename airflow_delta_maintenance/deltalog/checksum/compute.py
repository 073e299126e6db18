"""Computing a version's checksum: from a replayed ``Snapshot`` (vectorised over its files), or
from the previous version's checksum plus one commit (``apply_commit``: work in the size of the
commit, never of the table — delta-spark's ``computeNewChecksum``).

``apply_commit`` raises ``NeedsReplay`` where the commit alone cannot say what the state is: a
``remove`` without its size, a file re-added under the same key while the live files are not
known (delta-spark's ComputeStats / row-tracking backfill), deletion-vector metrics the previous
checksum lacks. The caller then computes that version from a replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.compute as pc

from ..model.actions import DomainMetadata, Metadata, Protocol, Txn, dv_unique_id
from ..model.validation import loads_action
from .histograms import DELETED_RECORD_BINS, DELETED_RECORD_BOUNDARIES, FILE_SIZE_BINS, deleted_records_bin, file_size_bin
from .state import ALL_FILES_THRESHOLD, MAX_DOMAIN_METADATA, MAX_SET_TRANSACTIONS, ChecksumState, FileKey

if TYPE_CHECKING:
    from ..replay.snapshot import Snapshot

__all__ = ["NeedsReplay", "apply_commit", "checksum_from_snapshot", "commit_actions", "dv_metrics_wanted"]

# Operations that re-add a live file under the same key (the add replaces, it does not add).
_READD_OPERATIONS = frozenset({"COMPUTE STATS", "ROW TRACKING BACKFILL", "ROW TRACKING UNBACKFILL"})
_TXN_RETENTION = "delta.setTransactionRetentionDuration"


class NeedsReplay(Exception):
    """This commit's checksum cannot be derived from the previous one; the reason says why."""


def commit_actions(data: bytes, name: str) -> list[dict[str, Any]]:
    """The validated actions of one commit file, in order (``CorruptLogError`` naming the line)."""
    return [loads_action(line, name, i + 1) for i, line in enumerate(data.splitlines()) if line.strip()]


def dv_metrics_wanted(protocol: Protocol, metadata: Metadata, *, had: bool) -> bool:
    """delta-spark keeps deletion-vector metrics while DVs are writable, or readable and already kept."""
    readable = protocol.has_reader_feature("deletionVectors")
    writable = protocol.has_writer_feature("deletionVectors") and str(metadata.configuration.get("delta.enableDeletionVectors", "")).lower() == "true"
    return writable or (readable and had)


def _limited_txns(txns: Mapping[str, Txn], metadata: Metadata) -> dict[str, Txn] | None:
    if _TXN_RETENTION in metadata.configuration or len(txns) > MAX_SET_TRANSACTIONS:
        return None
    return dict(txns)


def _limited_domains(domains: Mapping[str, DomainMetadata]) -> dict[str, DomainMetadata] | None:
    live = {k: v for k, v in domains.items() if not v.removed}
    return live if len(live) <= MAX_DOMAIN_METADATA else None


_MAPS = frozenset({"partitionValues", "tags"})


def _clean(value: Any) -> Any:
    """An action as JSON writes it: null fields dropped (Arrow rows carry every column), Arrow
    maps (lists of pairs) as objects."""
    if isinstance(value, dict):
        return {k: dict(v) if k in _MAPS and isinstance(v, list) else _clean(v) for k, v in value.items() if v is not None}
    return value


def checksum_from_snapshot(snapshot: Snapshot, commit_info: Mapping[str, Any] | None = None) -> ChecksumState:
    """The checksum of ``snapshot.version`` from its replayed state (``commit_info``: that version's,
    for ``txnId``)."""
    files = snapshot.files
    sizes = files.column("size").to_numpy(zero_copy_only=False).astype(np.int64) if files.num_rows else np.zeros(0, np.int64)
    bins = np.searchsorted(np.asarray(FILE_SIZE_BINS, np.int64), sizes, side="right") - 1
    counted = bins >= 0
    counts = np.bincount(bins[counted], minlength=len(FILE_SIZE_BINS))
    totals = np.bincount(bins[counted], weights=sizes[counted], minlength=len(FILE_SIZE_BINS))
    protocol, metadata = snapshot.protocol, snapshot.metadata
    state = ChecksumState(
        version=snapshot.version,
        table_size_bytes=int(sizes.sum()),
        num_files=int(files.num_rows),
        metadata=metadata,
        protocol=protocol,
        txns=_limited_txns(snapshot.txns, metadata),
        domains=_limited_domains(snapshot.domain_metadata),
        txn_id=(commit_info or {}).get("txnId"),
        in_commit_timestamp=snapshot.timestamp if snapshot.in_commit_timestamps_enabled else None,
        file_counts=[int(c) for c in counts],
        file_bytes=[int(t) for t in totals],
    )
    if dv_metrics_wanted(protocol, metadata, had=True):
        cardinality = np.zeros(files.num_rows, np.int64)
        num_dvs = 0
        if files.num_rows and "deletionVector" in files.column_names:
            dv = files.column("deletionVector")
            num_dvs = int(files.num_rows - dv.null_count)
            if num_dvs:
                card = pc.fill_null(pc.struct_field(dv, "cardinality"), 0)
                cardinality = card.to_numpy(zero_copy_only=False).astype(np.int64)
        dbins = np.searchsorted(np.asarray(DELETED_RECORD_BOUNDARIES, np.uint64), cardinality.astype(np.uint64), side="right") - 1
        state.num_deletion_vectors = num_dvs
        state.num_deleted_records = int(cardinality.sum())
        state.deleted_record_counts = [int(c) for c in np.bincount(np.minimum(dbins, DELETED_RECORD_BINS - 1), minlength=DELETED_RECORD_BINS)]
    if files.num_rows < ALL_FILES_THRESHOLD:
        rows = snapshot.add_actions().to_pylist()
        state.all_files = {}
        for row in rows:
            add = _clean(row)
            add["dataChange"] = False
            state.all_files[(add["path"], dv_unique_id(add.get("deletionVector")))] = add
    return state


def _file_change(state: ChecksumState, size: int, dv: Mapping[str, Any] | None, sign: int) -> None:
    state.table_size_bytes += sign * size
    state.num_files += sign
    if state.file_counts is not None and state.file_bytes is not None:
        b = file_size_bin(size)
        if b >= 0:
            state.file_counts[b] += sign
            state.file_bytes[b] += sign * size
    cardinality = int(dv.get("cardinality") or 0) if dv else 0
    if state.num_deleted_records is not None:
        state.num_deleted_records += sign * cardinality
    if state.num_deletion_vectors is not None:
        state.num_deletion_vectors += sign * (1 if dv else 0)
    if state.deleted_record_counts is not None:
        state.deleted_record_counts[deleted_records_bin(cardinality)] += sign


def apply_commit(previous: ChecksumState, version: int, actions: Sequence[Mapping[str, Any]]) -> ChecksumState:
    """The checksum of ``version`` from the checksum of ``version - 1`` and that commit's actions."""
    if previous.version != version - 1:
        raise ValueError(f"checksum of v{previous.version} cannot advance to v{version}")
    if previous.txns is None or previous.domains is None:
        raise NeedsReplay(f"the checksum of v{previous.version} lacks set transactions or domain metadata")
    state = previous.copy()
    state.version, state.txn_id, state.in_commit_timestamp = version, None, None
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None) or {}
    readd = info.get("operation") in _READD_OPERATIONS
    for action in actions:
        if (p := action.get("protocol")) is not None:
            state.protocol = Protocol.from_dict(p)
        elif (m := action.get("metaData")) is not None:
            state.metadata = Metadata.from_dict(m)
    if dv_metrics_wanted(state.protocol, state.metadata, had=previous.num_deletion_vectors is not None):
        if previous.num_deletion_vectors is None or previous.num_deleted_records is None or previous.deleted_record_counts is None:
            raise NeedsReplay(f"the checksum of v{previous.version} lacks deletion-vector metrics this version needs")
    else:
        state.num_deleted_records = state.num_deletion_vectors = state.deleted_record_counts = None
    live = state.all_files
    for action in actions:
        if (add := action.get("add")) is not None:
            key: FileKey = (add["path"], dv_unique_id(add.get("deletionVector")))
            if live is not None:
                if key in live:
                    old = live[key]
                    _file_change(state, int(old["size"]), old.get("deletionVector"), -1)
                live[key] = {**add, "dataChange": False}
            elif readd:
                raise NeedsReplay(f"v{version} ({info.get('operation')}) re-adds live files while the live files are not known")
            _file_change(state, int(add["size"]), add.get("deletionVector"), 1)
        elif (remove := action.get("remove")) is not None:
            key = (remove["path"], dv_unique_id(remove.get("deletionVector")))
            if live is not None:
                gone = live.pop(key, None)
                if gone is not None:
                    _file_change(state, int(gone["size"]), gone.get("deletionVector"), -1)
                continue
            if remove.get("size") is None:
                raise NeedsReplay(f"v{version} removes {remove['path']} without its size")
            _file_change(state, int(remove["size"]), remove.get("deletionVector"), -1)
        elif (t := action.get("txn")) is not None:
            txn = Txn.from_dict(t)
            state.txns[txn.app_id] = txn  # type: ignore[index]  # checked above
        elif (d := action.get("domainMetadata")) is not None:
            dm = DomainMetadata.from_dict(d)
            if dm.removed:
                state.domains.pop(dm.domain, None)  # type: ignore[union-attr]
            else:
                state.domains[dm.domain] = dm  # type: ignore[index]
        elif (ci := action.get("commitInfo")) is not None:
            state.in_commit_timestamp = ci.get("inCommitTimestamp")
            state.txn_id = ci.get("txnId")
    if _TXN_RETENTION in state.metadata.configuration or len(state.txns or {}) > MAX_SET_TRANSACTIONS:
        raise NeedsReplay(f"v{version}: set transactions are not carried (retention set or more than {MAX_SET_TRANSACTIONS})")
    if len(state.domains or {}) > MAX_DOMAIN_METADATA:
        raise NeedsReplay(f"v{version}: more than {MAX_DOMAIN_METADATA} domains")
    if state.num_files == 0:
        state.all_files = {}
    elif live is not None and state.num_files >= ALL_FILES_THRESHOLD:
        state.all_files = None
    return state
