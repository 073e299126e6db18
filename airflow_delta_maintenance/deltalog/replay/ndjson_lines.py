"""Where the lines of an NDJSON log file are, found with numpy instead of a Python loop.

A commit of a large table holds tens of thousands of ``add`` lines; splitting it into Python
``bytes`` objects and testing each one costs about half a microsecond per line, seconds for a
log of millions of actions, when most callers only want the few lines that are not file actions.
"""

from __future__ import annotations

try:
    import numpy as np
except ImportError:  # a process that keeps numpy out: `delta-maintenance cleanup` of a classic local table
    np = None  # type: ignore[assignment]

FILE_ACTION_PREFIXES = (b'{"add":', b'{"remove":')


# The newline search compares slices of this size into one reused mask: it stays in the CPU cache
# and no mask of the whole text (one bool per byte of the log) is allocated and faulted in.
_NEWLINE_SCAN_BYTES = 1 << 20


def newline_positions(text: np.ndarray) -> np.ndarray:
    """Offsets of every ``\\n`` in ``text``, ascending (int64)."""
    mask = np.empty(min(_NEWLINE_SCAN_BYTES, len(text)), dtype=bool)
    parts = []
    for i in range(0, len(text), _NEWLINE_SCAN_BYTES):
        chunk = text[i : i + _NEWLINE_SCAN_BYTES]
        np.equal(chunk, 10, out=mask[: len(chunk)])
        parts.append(np.flatnonzero(mask[: len(chunk)]) + i)
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def line_starts(text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, stops)`` of every line of ``text`` as ``bytes.split(b"\\n")`` cuts it (the stop
    excludes the newline; a last line without newline counts, an empty one after it too)."""
    newlines = newline_positions(text)
    starts = np.concatenate([np.zeros(1, np.int64), newlines + 1])
    stops = np.concatenate([newlines, np.array([len(text)], np.int64)])
    return starts, stops


def starts_with(text: np.ndarray, starts: np.ndarray, prefix: bytes) -> np.ndarray:
    """Which lines (by start offset) begin with ``prefix``. Offsets past the end are clipped to
    the last byte: a newline or the end stops a short line before the prefix could match, since no
    prefix used here repeats its last byte."""
    mask = np.ones(len(starts), dtype=bool)
    if not len(text):
        return mask & False
    last = len(text) - 1
    for i, byte in enumerate(prefix):
        mask &= text[np.minimum(starts + i, last)] == byte
    return mask


def non_file_action_lines(data: bytes | memoryview) -> list[tuple[int, bytes]]:
    """``(line number from 1, raw line)`` of every non-blank line that is not a canonical
    ``add``/``remove`` line, in file order. Without numpy: the ``bytes.split`` loop it replaces."""
    if np is None:
        return split_non_file_action_lines(data)
    text = np.frombuffer(data, dtype=np.uint8)
    starts, stops = line_starts(text)
    file_action = np.zeros(len(starts), dtype=bool)
    for prefix in FILE_ACTION_PREFIXES:
        file_action |= starts_with(text, starts, prefix)
    out = []
    for i in np.flatnonzero(~file_action & (stops > starts)).tolist():
        raw = bytes(data[int(starts[i]) : int(stops[i])])
        if raw.strip():
            out.append((i + 1, raw))
    return out


def split_non_file_action_lines(data: bytes | memoryview) -> list[tuple[int, bytes]]:
    """``non_file_action_lines`` as a loop over ``bytes.split``: same result, ~0.5 µs per line."""
    return [(i, raw) for i, raw in enumerate(bytes(data).split(b"\n"), start=1) if not raw.startswith(FILE_ACTION_PREFIXES) and raw.strip()]
