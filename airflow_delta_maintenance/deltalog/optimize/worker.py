"""The worker engine: bins rewritten by ``datafiles.writer.write_bin`` on a few local threads.

The same ``BinTask`` → ``add`` seam a Spark engine maps over its executors. Parquet decoding,
encoding and compression release the GIL, so a couple of threads keep both cores busy; each holds
at most one row group buffer (``ROW_GROUP_BYTES``), which bounds the engine's memory.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..datafiles.files import DataFiles
from ..datafiles.shared_reads import ReadSharing
from ..datafiles.writer import BinTask, write_bin

__all__ = ["WorkerEngine", "BinFailedError"]


class BinFailedError(RuntimeError):
    """A bin's task failed; ``written`` holds the files the batch's other tasks wrote (unreferenced)."""

    def __init__(self, message: str, written: Sequence[str]) -> None:
        super().__init__(message)
        self.written = tuple(written)


class WorkerEngine:
    name = "local"

    def __init__(self, files: DataFiles, max_workers: int | None = None) -> None:
        self.files = files
        self.max_workers = max_workers or max(1, min(4, (os.cpu_count() or 1) + 1))

    def run(self, tasks: Sequence[BinTask]) -> list[Mapping[str, Any] | None]:
        """One ``add`` (or None: every row deleted) per task, in order. If any task fails, the
        others are not started or run to their end, and ``BinFailedError`` names the files they wrote."""
        if self.max_workers == 1 or len(tasks) == 1:
            results: list[Mapping[str, Any] | None] = []
            for task in tasks:
                try:
                    results.append(write_bin(self.files, task))
                except Exception as exc:
                    raise BinFailedError(f"bin of {len(task.sources)} file(s) failed: {exc}", [r["path"] for r in results if r]) from exc
            return results
        return self._run_shared(tasks)

    def _run_shared(self, tasks: Sequence[BinTask]) -> list[Mapping[str, Any] | None]:
        """Each thread takes the next bin until none is left, then helps the running ones read
        (``ReadSharing``). After a failure no bin is started; the ones running finish."""
        sharing = ReadSharing()
        results: list[Mapping[str, Any] | None] = [None] * len(tasks)
        finished = [False] * len(tasks)
        errors: list[BaseException] = []
        lock = threading.Lock()
        next_task = iter(range(len(tasks)))

        def work() -> None:
            while True:
                with lock:
                    i = None if errors else next(next_task, None)
                    if i is not None:
                        sharing.bin_started()
                if i is None:
                    break
                try:
                    results[i] = write_bin(self.files, tasks[i], sharing)
                    finished[i] = True
                except BaseException as exc:  # noqa: BLE001 - re-raised by run()
                    with lock:
                        errors.append(exc)
                finally:
                    sharing.bin_done()
            sharing.help_until_done()

        threads = [threading.Thread(target=work, name=f"optimize_{n}", daemon=True) for n in range(min(self.max_workers, len(tasks)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            written = [r["path"] for r, ok in zip(results, finished, strict=True) if ok and r]
            raise BinFailedError(f"a bin failed: {errors[0]}", written) from errors[0]
        return results
