"""Version checksums (``<v>.crc``): computed from a replay or from the previous checksum plus one
commit, written create-if-absent, parsed strictly and verified against the replay."""

from .compute import apply_commit, checksum_from_snapshot, commit_actions
from .state import ChecksumError, ChecksumState, parse_checksum
from .verify import checksum_mismatches

__all__ = [
    "ChecksumError",
    "ChecksumState",
    "apply_commit",
    "checksum_from_snapshot",
    "checksum_mismatches",
    "commit_actions",
    "parse_checksum",
]
