"""The worker engine: bins rewritten by ``datafiles.writer.write_bin`` on a few local threads.

The same ``BinTask`` → ``add`` seam a Spark engine maps over its executors. Parquet decoding,
encoding and compression release the GIL, so a couple of threads keep both cores busy; each holds
at most one row group buffer (``ROW_GROUP_BYTES``), which bounds the engine's memory. Once no bin
waits to start and the running ones leave a core idle (the end of every run, and a run of one
bin), a running bin is granted that core for a second thread reading its sources (``SpareCores``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from .._runtime.memory import uses_log_operation_memory
from ..datafiles.files import DataFiles
from ..datafiles.writer import BinTask, write_bin

__all__ = ["WorkerEngine", "BinFailedError", "SpareCores"]


class BinFailedError(RuntimeError):
    """A bin's task failed; ``written`` holds the files the batch's other tasks wrote (unreferenced)."""

    def __init__(self, message: str, written: Sequence[str]) -> None:
        super().__init__(message)
        self.written = tuple(written)


class SpareCores:
    """The cores a run's bins leave idle once no bin waits to start.

    Each running bin uses one core; a bin granted a spare core uses two until it ends. Before the
    last bin has started no core is spare: a waiting bin uses it better than a second reader, whose
    hand-offs cost CPU on a machine the bins already fill."""

    def __init__(self, cores: int, bins: int) -> None:
        self._lock = threading.Lock()
        self._cores = cores
        self._waiting = bins
        self._busy = 0

    def start(self) -> _BinCores:
        with self._lock:
            self._waiting -= 1
            self._busy += 1
        return _BinCores(self)

    def _grant(self) -> bool:
        with self._lock:
            if self._waiting > 0 or self._busy >= self._cores:
                return False
            self._busy += 1
            return True

    def _release(self, cores: int) -> None:
        with self._lock:
            self._busy -= cores


class _BinCores:
    """One running bin's cores: ``grant`` is its ``spare_core`` question for ``write_bin``; once
    granted, the core is the bin's until it ends."""

    def __init__(self, spare: SpareCores) -> None:
        self._spare = spare
        self.granted = False

    def grant(self) -> bool:
        if not self.granted:
            self.granted = self._spare._grant()
        return self.granted

    def finish(self) -> None:
        self._spare._release(2 if self.granted else 1)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


class WorkerEngine:
    name = "local"

    def __init__(self, files: DataFiles, max_workers: int | None = None) -> None:
        self.files = files
        self.max_workers = max_workers or max(1, min(4, (os.cpu_count() or 1) + 1))

    # The bins allocate from the system pool like the log operations: pyarrow's default pool
    # (mimalloc) returned the pages of each small file's buffers and faulted fresh, zeroed ones in
    # for the next (~10% of the run's CPU in page faults, profiled); glibc reuses them, and the
    # peak is lower (10,000 files: CPU 7.2 -> 6.5-6.9 s, peak 340 -> 290 MiB, 5 runs each).
    @uses_log_operation_memory
    def run(self, tasks: Sequence[BinTask]) -> list[Mapping[str, Any] | None]:
        """One ``add`` (or None: every row deleted) per task, in order. If any task fails, the
        others are cancelled or finished, and ``BinFailedError`` names the files they wrote."""
        spare = SpareCores(usable_cores() if self.max_workers > 1 else 1, len(tasks))
        if self.max_workers == 1 or len(tasks) == 1:
            results: list[Mapping[str, Any] | None] = []
            for task in tasks:
                try:
                    results.append(self._write(spare, task))
                except Exception as exc:
                    raise BinFailedError(f"bin of {len(task.sources)} file(s) failed: {exc}", [r["path"] for r in results if r]) from exc
            return results
        with ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="optimize") as pool:
            futures = [pool.submit(self._write, spare, t) for t in tasks]
            _done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                for f in futures:
                    f.cancel()
                wait(futures)
                written = [r["path"] for f in futures if not f.cancelled() and f.exception() is None and (r := f.result())]
                cause = failed.exception()
                raise BinFailedError(f"a bin failed: {cause}", written) from cause
            return [f.result() for f in futures]

    def _write(self, spare: SpareCores, task: BinTask) -> dict[str, Any] | None:
        cores = spare.start()
        try:
            return write_bin(self.files, task, spare_core=cores.grant)
        finally:
            cores.finish()
