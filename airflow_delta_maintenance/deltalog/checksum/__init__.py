"""Version checksums (``<v>.crc``): computed from a replay or from the previous checksum plus one
commit, written create-if-absent, parsed strictly and verified against the replay; and the
protocol/metadata load that takes them from the newest checksum (``protocol_metadata``)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ChecksumError",
    "ChecksumState",
    "apply_commit",
    "checksum_from_snapshot",
    "checksum_mismatches",
    "commit_actions",
    "parse_checksum",
]

# Imported on first use: the protocol/metadata load (identity, gates, cleanup) reads a checksum
# without the computing side's numpy and Arrow compute.
_HOME = {
    "apply_commit": "compute", "checksum_from_snapshot": "compute", "commit_actions": "compute",
    "ChecksumError": "state", "ChecksumState": "state", "parse_checksum": "state", "checksum_mismatches": "verify",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(name)
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
