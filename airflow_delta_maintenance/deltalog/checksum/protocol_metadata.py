"""Protocol and metadata of a version taken from the newest version checksum instead of the log.

A table with thousands of commits since its last checkpoint costs a backwards read of all of them
when its protocol and metadata were last changed at (or before) the checkpoint. A ``<v>.crc``
carries both for its version, so, as delta-spark and delta-kernel-rs do, the read stops there.
A checksum is another engine's claim, so it is used under this rule (docs: "Version checksums"):

- only the newest checksum at or below the version asked for, and at or above the segment's
  checkpoint; it stands for its own version only;
- every commit after it is still read, newest first: a protocol or metadata there wins;
- it must parse strictly, add up (``self_inconsistency``), name a protocol this reader supports
  and table properties that parse; otherwise it is ignored with a warning and the log is read —
  a checksum never makes a load fail;
- the state says so (``TableState.checksum_version``): read-only answers and the decision *not*
  to act may rest on it; whatever writes or deletes reads protocol and metadata from the log
  (``maintenance``'s ``ratified_state(..., from_checksum=False)``, the default).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import DeltaLogError
from ..log_segment.listing import LogSegmentFiles, list_log_files
from ..log_segment.segment import CatalogCommit, LogSegment, build_log_segment
from ..model.features import check_read_supported
from ..model.paths import crc_name
from ..model.table_properties import TableProperties
from ..replay.table_state import StateSeed, TableState, load_table_state
from ..storage import LogStore, open_table_storage
from .state import parse_checksum, self_inconsistency

__all__ = ["checksum_seed", "load_table_state_from_checksum"]

log = logging.getLogger(__name__)


def checksum_seed(store: LogStore, segment: LogSegment) -> StateSeed | None:
    """The protocol and metadata of the newest usable checksum of ``segment`` (None: read the log)."""
    low = max(segment.checkpoint_version, 0)
    versions = [p.version for p in segment.files.crcs if low <= p.version <= segment.version]
    if not versions:
        return None
    version = versions[-1]
    name = store.display(crc_name(version))
    try:
        state = parse_checksum(store.read(crc_name(version)), name, version)
        reason = self_inconsistency(state)
        if reason is None:
            check_read_supported(state.protocol, path=name)
            TableProperties.from_configuration(state.metadata.configuration)
    except FileNotFoundError:
        return None  # removed since the listing (a cleanup): the log answers
    except (DeltaLogError, ValueError) as exc:
        reason = " ".join(str(exc).split())
    if reason is not None:
        log.warning("%s: not used for protocol and metadata (%s); reading the log instead", name, reason)
        return None
    return StateSeed(version, state.protocol, state.metadata)


def load_table_state_from_checksum(
    table: str | LogStore,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    catalog_commits: Sequence[CatalogCommit] = (),
    latest_ratified_version: int | None = None,
    files: LogSegmentFiles | None = None,
    now_ms: int | None = None,
) -> TableState:
    """``load_table_state`` (same arguments, same errors) that stops at the newest usable checksum."""
    store = table if isinstance(table, LogStore) else open_table_storage(table, storage_options)
    files = files if files is not None else list_log_files(store)
    seed = None
    try:
        segment = build_log_segment(files, version, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version, table=store.uri)
    except DeltaLogError:
        pass  # the load below raises it with its own message
    else:
        seed = checksum_seed(store, segment)
    return load_table_state(
        store, version, files=files, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version,
        now_ms=now_ms, seed=seed,
    )
