"""Facts derived from a loaded version, shared by ``Snapshot`` and the light ``TableState``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .features import in_commit_timestamps_enabled

if TYPE_CHECKING:
    from .actions import Metadata, Protocol
    from .log_segment import LogSegment
    from .table_properties import TableProperties

__all__ = ["VersionFacts"]


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
