"""Facts derived from a loaded version, shared by ``Snapshot`` and the light ``TableState``."""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..model.features import in_commit_timestamps_enabled

if TYPE_CHECKING:
    from ..log_segment.listing import LogSegmentFiles
    from ..log_segment.segment import LogSegment
    from ..model.actions import Metadata, Protocol
    from ..model.table_properties import TableProperties
    from ..storage import LogStore

# Light on purpose (no pyarrow compute, no numpy): status, cleanup and the gates import these
# without the replay machinery.
__all__ = ["VersionFacts", "in_commit_timestamp", "timestamp_at"]


def in_commit_timestamp(commit_info: Mapping[str, Any] | None) -> int | None:
    """The ``inCommitTimestamp`` of a ``commitInfo`` action, None when absent or not a number."""
    if not commit_info:
        return None
    value = commit_info.get("inCommitTimestamp")
    # numbers.Integral also covers numpy's integers (values read back through Arrow); a float
    # (1e400 is infinite) or a boolean is not a timestamp.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not -(2**63) <= int(value) < 2**63:
        return None
    return int(value)


def timestamp_at(store: LogStore, files: LogSegmentFiles, version: int, ict_from: int | None) -> int:
    """Timestamp of a version whose commit was not replayed (the snapshot sits on a checkpoint)."""
    commit = next((c for c in reversed(files.commits) if c.version == version), None)
    if commit is None:
        group = next(g for g in reversed(files.complete_checkpoints()) if g.version == version)
        return group.files[0].modification_time
    if ict_from is not None and version >= ict_from:
        first_line = store.read(commit.name).split(b"\n", 1)[0]
        try:
            ict = in_commit_timestamp(json.loads(first_line).get("commitInfo"))
        except (ValueError, AttributeError, RecursionError):
            ict = None
        if ict is not None:
            return ict
    return commit.modification_time


class VersionFacts:
    """Mixin of a loaded version: needs ``protocol``, ``metadata``, ``properties`` and ``segment``."""

    protocol: Protocol
    metadata: Metadata
    properties: TableProperties
    segment: LogSegment

    @property
    def checkpoint_version(self) -> int:
        """Version of the checkpoint the segment starts from (-1 if none)."""
        return self.segment.checkpoint_version

    @property
    def latest_checkpoint_version(self) -> int:
        """Newest complete checkpoint in the log, whatever version was loaded (-1 if none)."""
        complete = self.segment.files.complete_checkpoints()
        return complete[-1].version if complete else -1

    @property
    def in_commit_timestamps_enabled(self) -> bool:
        return in_commit_timestamps_enabled(self.protocol, dict(self.metadata.configuration))

    @property
    def ict_enablement_version(self) -> int | None:
        """First version with in-commit timestamps (0 when enabled at creation), None if disabled."""
        return (self.properties.ict_enablement_version or 0) if self.in_commit_timestamps_enabled else None
