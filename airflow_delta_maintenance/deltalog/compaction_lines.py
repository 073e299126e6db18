"""The winning file-action lines of a compaction, streamed in key order without holding the log.

Reconciliation needs only each action's key and position, so it runs first over batches parsed
with ``keys_only`` (``replay_actions``). The commits are then read a second time, batch by batch:
of each batch only the winning lines are kept, sorted by their output position (a "run"). The
output is produced in windows of positions; each run holds a window's lines as one contiguous
slice, so a window is a concatenation of small slices put in order. Peak memory is the keys, one
batch, the winning lines (never all lines) and one window, instead of every line of the log plus
its copies.

Line positions match the JSON reader's ``_order``: lines are counted over the sources in order,
a source that does not end with a newline gets one (``parse_ndjson``'s rule).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .errors import CorruptLogError
from .log_segment import JsonSource
from .replay import _read_deltas
from .storage import LogStore

__all__ = ["LineRuns", "collect_winning_lines"]

_CANONICAL = (b'{"add":', b'{"remove":')
# Bytes of commits read per batch in the second pass, and output lines per window.
BATCH_BYTES = 16 << 20
WINDOW_LINES = 1 << 13  # a few MiB: the same-sized blocks are reused, not piled up


@dataclass
class _Run:
    ranks: np.ndarray  # ascending output positions
    lines: pa.LargeBinaryArray  # the lines at those positions, each with its newline


@dataclass
class LineRuns:
    """Winning lines of every batch, each run sorted by output position; ``total`` lines in all."""

    runs: list[_Run]
    total: int

    def windows(self, window: int | None = None) -> Iterator[memoryview]:
        """The lines in output order, as consecutive byte views of at most ``window`` lines."""
        window = window or WINDOW_LINES
        for lo in range(0, self.total, window):
            hi = min(lo + window, self.total)
            pieces, ranks = [], []
            for run in self.runs:
                a, b = np.searchsorted(run.ranks, [lo, hi])
                if b > a:
                    pieces.append(run.lines.slice(int(a), int(b - a)))
                    ranks.append(run.ranks[a:b])
            if not pieces:
                continue
            merged = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
            ordered = merged.take(pa.array(np.argsort(np.concatenate(ranks), kind="stable")))
            yield _data_view(ordered)


def _data_view(arr: pa.LargeBinaryArray) -> memoryview:
    """The concatenated values of a large-binary array, without copying them again."""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    return memoryview(data)[offsets[0] : offsets[-1]] if data is not None else memoryview(b"")


def _batches(deltas: Sequence[JsonSource], batch_bytes: int) -> Iterator[list[JsonSource]]:
    batch: list[JsonSource] = []
    size = 0
    for d in deltas:
        if batch and size + d.size > batch_bytes:
            yield batch
            batch, size = [], 0
        batch.append(d)
        size += d.size
    if batch:
        yield batch


def collect_winning_lines(
    store: LogStore, deltas: Sequence[JsonSource], output_orders: np.ndarray, *, batch_bytes: int | None = None
) -> LineRuns:
    """Read ``deltas`` again and keep the lines whose ``_order`` (base 0) is in ``output_orders``;
    the line of ``output_orders[i]`` goes to output position ``i``."""
    sorter = np.argsort(output_orders, kind="stable")
    wanted = np.asarray(output_orders, dtype=np.int64)[sorter]  # ascending line numbers
    rank_of = sorter.astype(np.int64)  # rank_of[j] = output position of wanted[j]
    runs: list[_Run] = []
    first_line = 0
    for batch in _batches(deltas, batch_bytes or BATCH_BYTES):
        sources = _read_deltas(store, batch)
        total = sum(len(d) + 1 for _, d in sources)
        text = np.empty(total, dtype=np.uint8)
        pos = 0
        for _, data in sources:
            n = len(data)
            text[pos : pos + n] = np.frombuffer(data, dtype=np.uint8)
            pos += n
            if n and data[-1:] != b"\n":
                text[pos] = 10
                pos += 1
        del sources
        text = text[:pos]
        ends = np.flatnonzero(text == 10).astype(np.int64)
        count = len(ends)
        a, b = np.searchsorted(wanted, [first_line, first_line + count])
        if b > a:
            selected = np.zeros(count, dtype=bool)
            selected[wanted[a:b] - first_line] = True
            lines = _take_lines(text, ends, selected)
            order = np.argsort(rank_of[a:b], kind="stable")
            runs.append(_Run(rank_of[a:b][order], lines.take(pa.array(order))))
            del lines, selected
        del text
        first_line += count
    kept = sum(len(r.ranks) for r in runs)
    if kept != len(output_orders):
        raise CorruptLogError(
            f"{store.uri}: the commits changed while they were compacted ({kept} of {len(output_orders)} winning lines found)",
            path=store.log_dir,
        )
    return LineRuns(runs, kept)


def _prefixed(text: np.ndarray, starts: np.ndarray, prefix: bytes) -> np.ndarray:
    mask = np.ones(len(starts), dtype=bool)
    last = len(text) - 1
    for i, byte in enumerate(prefix):
        mask &= text[np.minimum(starts + i, last)] == byte
    return mask


def _take_lines(text: np.ndarray, ends: np.ndarray, selected: np.ndarray) -> pa.LargeBinaryArray:
    """The selected lines of ``text`` (newline positions ``ends``; every line with its newline) as
    one array. A line that is not in canonical form loses a ``\r`` before its newline, as
    ``ParsedActions.original_lines`` gives it."""
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    lengths = ends - starts + 1
    data = text[np.repeat(selected, lengths)]  # the lines cover ``text`` exactly
    starts, lengths, stops = starts[selected], lengths[selected], ends[selected] + 1
    odd = ~(_prefixed(text, starts, _CANONICAL[0]) | _prefixed(text, starts, _CANONICAL[1]))
    carriage = odd & (lengths >= 2) & (text[np.maximum(stops - 2, 0)] == 13)
    if carriage.any():  # rare: rebuild the batch's lines in Python
        values = [bytes(text[s:e]) for s, e in zip(starts.tolist(), stops.tolist(), strict=True)]
        for i in np.flatnonzero(carriage).tolist():
            values[i] = values[i][:-1].rstrip(b"\r") + b"\n"
        return pa.array(values, pa.large_binary())
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
