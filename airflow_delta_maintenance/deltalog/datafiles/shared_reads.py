"""Idle threads help the bins still running read their small files.

A worker engine runs more bins than threads only in waves; in the last one, threads whose bins are
done would idle while the last bin is read and written on one thread (a tenth of a 10,000-file
run, profiled). ``ReadSharing`` lets them read ahead for it instead: a bin's run of small files is
cut into chunks; its own thread claims chunks in order and reads them, and an idle thread may claim
the next unclaimed chunk of any running bin, read it, and hand the tables over. Only idle threads
help (while every thread has a bin of its own there is nothing to gain and a hand-off to pay), and
at most ``MAX_AHEAD`` chunks of a bin wait to be written, which bounds the memory helping adds.

The rows of a bin's output are the same; their order within it follows the hand-overs. A helper's
failure is raised on the bin's own thread, as its own reading failure would be.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

__all__ = ["ReadSharing", "SharedRun", "chunks_of", "MAX_AHEAD"]

MAX_AHEAD = 2  # chunks a helper may have read (or be reading) for a bin before its thread takes them


def chunks_of(sources: Sequence[Any], chunk_bytes: int) -> list[list[Any]]:
    """Consecutive sources in chunks of about ``chunk_bytes`` (by their ``size``)."""
    out: list[list[Any]] = [[]]
    size = 0
    for src in sources:
        if out[-1] and size >= chunk_bytes:
            out.append([])
            size = 0
        out[-1].append(src)
        size += int(src.size)
    return [c for c in out if c]


ReadChunk = Callable[[list[Any]], list[pa.Table]]


class SharedRun:
    """One bin's run of small files; iterate it on the bin's own thread."""

    def __init__(self, chunks: list[list[Any]], read: ReadChunk, owner_read: Callable[[list[Any]], Iterator[pa.Table]],
                 changed: threading.Condition) -> None:
        self._chunks = chunks
        self._read = read
        self._owner_read = owner_read
        self._next = 0
        self._helped = 0  # chunks claimed by helpers and not yet taken by the owner
        self._ready: queue.SimpleQueue[tuple[list[pa.Table] | None, BaseException | None]] = queue.SimpleQueue()
        self._changed = changed  # the sharing's condition: the lock of every run's counters
        self.closed = False

    @property
    def unclaimed(self) -> int:
        return len(self._chunks) - self._next

    def _claim(self, helper: bool) -> list[Any] | None:
        with self._changed:
            if self.closed or self._next >= len(self._chunks) or (helper and self._helped >= MAX_AHEAD):
                return None
            chunk = self._chunks[self._next]
            self._next += 1
            if helper:
                self._helped += 1
            return chunk

    def help_once(self) -> bool:
        """Read one chunk for the owner (on a helper thread); False when there was none to claim."""
        chunk = self._claim(helper=True)
        if chunk is None:
            return False
        try:
            self._ready.put((self._read(chunk), None))
        except BaseException as exc:  # noqa: BLE001 - raised on the owner's thread
            self._ready.put((None, exc))
        return True

    def _take(self, block: bool) -> list[pa.Table] | None:
        try:
            tables, error = self._ready.get(block=block)
        except queue.Empty:
            return None
        with self._changed:
            self._helped -= 1
            self._changed.notify_all()  # a helper held back by MAX_AHEAD may claim again
        if error is not None:
            raise error
        return tables

    def __iter__(self) -> Iterator[pa.Table]:
        while True:
            while (ready := self._take(block=False)) is not None:
                yield from ready
            chunk = self._claim(helper=False)
            if chunk is None:
                break
            yield from self._owner_read(chunk)
        while True:  # chunks helpers still read
            with self._changed:
                if self._helped == 0:
                    return
            ready = self._take(block=True)
            if ready:
                yield from ready


class ReadSharing:
    """The running bins' shared runs, and the loop idle threads help them with."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._runs: list[SharedRun] = []
        self._open_bins = 0

    def bin_started(self) -> None:
        with self._changed:
            self._open_bins += 1

    def bin_done(self) -> None:
        with self._changed:
            self._open_bins -= 1
            self._changed.notify_all()

    @contextmanager
    def share(self, sources: Sequence[Any], chunk_bytes: int, read: ReadChunk,
              owner_read: Callable[[list[Any]], Iterator[pa.Table]]) -> Iterator[SharedRun]:
        run = SharedRun(chunks_of(sources, chunk_bytes), read, owner_read, self._changed)
        with self._changed:
            self._runs.append(run)
            self._changed.notify_all()
        try:
            yield run
        finally:
            with self._changed:
                run.closed = True
                self._runs.remove(run)

    def help_until_done(self) -> None:
        """On a thread with no bin left to start: read chunks for running bins until they are done."""
        while True:
            with self._changed:
                candidates = sorted((r for r in self._runs if r.unclaimed), key=lambda r: -r.unclaimed)
                if not candidates:
                    if self._open_bins <= 0:
                        return
                    self._changed.wait(timeout=0.05)
                    continue
            if not any(run.help_once() for run in candidates):
                with self._changed:
                    self._changed.wait(timeout=0.05)  # every candidate has MAX_AHEAD chunks waiting
