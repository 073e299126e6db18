"""The compiled newest-action-per-path pass (``_file_keys`` of the optional
``airflow-delta-maintenance-accel`` distribution), when it is installed.

Reconciliation needs, for every distinct file path, the largest action order. The pure path
dictionary-encodes the paths with pyarrow (which also copies each distinct path into a new
dictionary); the extension hashes them in place and compares keys byte for byte, so both give the
same answer. It is optional, like the statistics reader: ``AVAILABLE`` says whether it loaded (see
``_runtime/accelerators.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from .._runtime import accelerators
from ..stats.parsed_columns import string_offsets

_file_keys = accelerators.load("_file_keys")  # None: replay dictionary-encodes with pyarrow
AVAILABLE = _file_keys is not None

__all__ = ["AVAILABLE", "newest_orders"]


def newest_orders(paths: Sequence[pa.Array], orders: Sequence[np.ndarray], size: int) -> tuple[np.ndarray, int] | None:
    """``(won, distinct)``: ``won[order]`` (``size`` entries) is True for the largest order of each
    distinct path (all null paths one key), ignoring negative orders; ``distinct`` counts the keys.
    None when the extension is missing or a chunk is not a plain string array."""
    if _file_keys is None or any(not (pa.types.is_string(p.type) or pa.types.is_large_string(p.type)) for p in paths):
        return None
    specs = []
    for p, o in zip(paths, orders, strict=True):
        data = p.buffers()[2]
        valid = p.is_valid().to_numpy(zero_copy_only=False).view(np.uint8) if p.null_count else None
        offsets = string_offsets(p)
        specs.append((offsets, offsets.itemsize, b"" if data is None else data, valid, np.ascontiguousarray(o, dtype=np.int64)))
    won = np.zeros(size, dtype=np.bool_)
    distinct = _file_keys.newest(tuple(specs), won.view(np.uint8))
    return won, int(distinct)
