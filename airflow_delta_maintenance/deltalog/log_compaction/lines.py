"""The winning file-action lines of a compaction, streamed in log order without holding the log.

Reconciliation needs only each action's key and position, so it runs first over batches parsed
with ``keys_only`` (``replay_actions``). The commits are then read a second time, batch by batch,
and each batch's winning lines go straight to the output in the order the commits hold them: one
sequential copy per batch, nothing kept between batches. Readers give a compaction's lines no
order (it holds one action per file), and log order is as deterministic as any other: a run
twice, or killed and re-run, writes the same bytes. Peak memory is the keys and one batch.

Line positions match the JSON reader's ``_order``: lines are counted over the sources in order,
a source that does not end with a newline gets one (``parse_ndjson``'s rule).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import CorruptLogError, MissingCommitError
from ..log_segment.segment import JsonSource
from ..model.paths import ParsedLogPath
from ..replay.ndjson_lines import FILE_ACTION_PREFIXES, newline_positions, starts_with
from ..replay.reconcile import _read_deltas
from ..storage import LogStore

__all__ = ["winning_lines"]

# Bytes of commits read per batch in the second pass.
BATCH_BYTES = 16 << 20


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


def winning_lines(
    store: LogStore, deltas: Sequence[JsonSource], wanted: np.ndarray, *, batch_bytes: int | None = None
) -> Iterator[memoryview]:
    """Read ``deltas`` again and yield, batch by batch, the lines whose ``_order`` (base 0) is in
    ``wanted``, in log order. Raises ``CorruptLogError`` after the last batch if some were not
    found (the commits changed meanwhile): a writer consuming this never completes its file."""
    wanted = np.asarray(wanted, dtype=np.int64)
    if len(wanted) > 1 and not bool(np.all(wanted[1:] > wanted[:-1])):
        wanted = np.unique(wanted)  # callers pass them sorted; anything else is put in order
    kept = 0
    first_line = 0
    # One file buffer and one batch buffer for the whole pass: fresh ones per file or batch fault
    # their pages in again each time.
    scratch = bytearray()
    buffer = np.empty(0, dtype=np.uint8)
    for batch in _batches(deltas, batch_bytes or BATCH_BYTES):
        pos = 0
        for data in _contents(store, batch, scratch):
            n = len(data)
            if len(buffer) < pos + n + 1:
                grown = np.empty(max(pos + n + 1, 2 * len(buffer), batch_bytes or BATCH_BYTES), dtype=np.uint8)
                grown[:pos] = buffer[:pos]
                buffer = grown
            buffer[pos : pos + n] = np.frombuffer(data, dtype=np.uint8)
            pos += n
            if n and data[-1] != 10:
                buffer[pos] = 10
                pos += 1
            del data
        text = buffer[:pos]
        ends = newline_positions(text)
        count = len(ends)
        a, b = np.searchsorted(wanted, [first_line, first_line + count])
        if b > a:
            kept += int(b - a)
            yield _data_view(_lines_at(text, ends, wanted[a:b] - first_line))
        del text, ends
        first_line += count
    if kept != len(wanted):
        raise CorruptLogError(
            f"{store.uri}: the commits changed while they were compacted ({kept} of {len(wanted)} winning lines found)",
            path=store.log_dir,
        )


def _contents(store: LogStore, batch: list[JsonSource], scratch: bytearray) -> Iterator[bytes | memoryview]:
    """The bytes of each commit of ``batch`` in order; a local one is read into ``scratch`` (valid
    until the next one), remote ones are fetched together (concurrently)."""
    if not store.is_local:
        for _, fetched in _read_deltas(store, batch):
            yield fetched
        return
    for delta in batch:
        if not isinstance(delta, ParsedLogPath) and delta.inline_content is not None:
            yield delta.inline_content
            continue
        name = delta.name if isinstance(delta, ParsedLogPath) else delta.file_name
        try:
            data = store.read_into(name, scratch)
        except FileNotFoundError:
            raise MissingCommitError(f"{store.display(name)} disappeared while reading the log", version=-1, path=name) from None
        yield data
        del data  # the next read may grow `scratch`, which a live view forbids


def _lines_at(text: np.ndarray, ends: np.ndarray, chosen: np.ndarray) -> pa.LargeBinaryArray:
    """Lines number ``chosen`` of ``text`` (newline positions ``ends``; every line ends with its
    newline), in that order, as one array: one copy of the chosen lines, by Arrow's take over a
    zero-copy view of all lines. A line that is not in canonical form loses a ``\r`` before its
    newline, as ``ParsedActions.original_lines`` gives it."""
    offsets = np.concatenate([np.zeros(1, np.int64), ends + 1])
    every = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    lines = every.take(pa.array(chosen))
    starts, stops = offsets[chosen], ends[chosen] + 1
    odd = ~(starts_with(text, starts, FILE_ACTION_PREFIXES[0]) | starts_with(text, starts, FILE_ACTION_PREFIXES[1]))
    carriage = odd & (stops - starts >= 2) & (text[np.maximum(stops - 2, 0)] == 13)
    if carriage.any():  # rare: rebuild these lines in Python
        values = lines.to_pylist()
        for i in np.flatnonzero(carriage).tolist():
            values[i] = values[i][:-1].rstrip(b"\r") + b"\n"
        return pa.array(values, pa.large_binary())
    return lines
