"""Upgrading a new table's ``protocol`` action to table features (reader 3 / writer 7).

Coordinated and catalog-managed tables need named features (``coordinatedCommits-preview``,
``catalogManaged``, ``inCommitTimestamp``, …), which only exist from reader 3 / writer 7; the
features implied by the legacy versions must then be listed explicitly (PROTOCOL "Table Features").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["upgrade_protocol"]

_IMPLIED_WRITER = ((2, "appendOnly"), (2, "invariants"), (3, "checkConstraints"), (4, "changeDataFeed"),
                   (4, "generatedColumns"), (5, "columnMapping"), (6, "identityColumns"))


def upgrade_protocol(protocol: Mapping[str, Any], reader_features: Iterable[str], writer_features: Iterable[str]) -> dict[str, Any]:
    """``protocol`` at (3, 7) with the given features added (reader features are also writer features)."""
    reader_v, writer_v = int(protocol.get("minReaderVersion", 1)), int(protocol.get("minWriterVersion", 2))
    implied_w = [f for v, f in _IMPLIED_WRITER if writer_v < 7 and writer_v >= v]
    implied_r = ["columnMapping"] if reader_v == 2 else []
    readers = set(protocol.get("readerFeatures") or []) | set(implied_r) | set(reader_features)
    writers = set(protocol.get("writerFeatures") or []) | set(implied_w) | set(writer_features) | readers
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(readers), "writerFeatures": sorted(writers)}
