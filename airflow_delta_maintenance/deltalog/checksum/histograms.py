"""The two histograms of a version checksum, with delta-spark's bin boundaries
(``FileSizeHistogramUtils.DEFAULT_BINS``, ``DeletedRecordCountsHistogramUtils.BUCKET_BOUNDARIES``):
a value goes to the bin of the largest boundary not above it."""

from __future__ import annotations

from bisect import bisect_right

__all__ = ["FILE_SIZE_BINS", "DELETED_RECORD_BOUNDARIES", "file_size_bin", "deleted_records_bin"]

_KB, _MB, _GB = 1 << 10, 1 << 20, 1 << 30
FILE_SIZE_BINS: tuple[int, ...] = (
    0,
    *(k * _KB for k in (8, 16, 32, 64, 128, 256, 512)),
    *(m * _MB for m in (1, 2, 4)),
    *(m * _MB for m in range(8, 41, 4)),
    *(m * _MB for m in range(48, 121, 8)),
    *(m * _MB for m in range(124, 145, 4)),
    *(m * _MB for m in range(160, 577, 16)),
    *(m * _MB for m in range(640, 1409, 64)),
    *(m * _MB for m in range(1536, 2049, 128)),
    *(m * _MB for m in range(2304, 4097, 256)),
    *(g * _GB for g in (8, 16, 32, 64, 128, 256)),
)
_INT_MAX, _LONG_MAX = 2**31 - 1, 2**63 - 1
DELETED_RECORD_BOUNDARIES: tuple[int, ...] = (0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000, _INT_MAX, _LONG_MAX)
DELETED_RECORD_BINS = len(DELETED_RECORD_BOUNDARIES) - 1


def file_size_bin(size: int, boundaries: tuple[int, ...] = FILE_SIZE_BINS) -> int:
    """Index of the bin holding ``size`` (-1 below the first boundary: not counted)."""
    return bisect_right(boundaries, size) - 1


def deleted_records_bin(cardinality: int) -> int:
    if cardinality >= _LONG_MAX:
        return DELETED_RECORD_BINS - 1
    return bisect_right(DELETED_RECORD_BOUNDARIES, cardinality) - 1
