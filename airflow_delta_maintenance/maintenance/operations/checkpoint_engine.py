"""``engine: auto`` for checkpoints: the worker unless the table's log is too big for one process.

The single-node checkpoint holds the table's live files in memory while it writes them. Measured
(benchmarks/checkpoint_engines.py, both engines by log size in one run; benchmarks/RESULTS.md): the
worker is faster at every size it can hold (Spark pays tens of seconds of JVM start), and its peak
grows by about 1.4 MiB per MiB of log segment (1.3 GiB at 2M live files, 846 MiB of log). So the
worker is the better engine until the state no longer fits a worker comfortably. The state's size is judged from the
bytes of the log segment the checkpoint replays (checkpoint parts, V2 sidecars, commits after it),
which the listing already has: no file is read to decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...deltalog.replay.table_state import TableState
from ...deltalog.storage import LogStore
from .summary import human_bytes

__all__ = ["LOCAL_MAX_LOG_BYTES", "EngineChoice", "choose_checkpoint_engine"]

# 512 MiB of log segment: a worker peak of about 0.85 GiB (140 MiB + 1.37 x the log, measured),
# inside the 1 GiB a Celery slot or a default pod usually has; about 1.2M live files of JSON commits.
LOCAL_MAX_LOG_BYTES = 512 << 20


@dataclass(frozen=True)
class EngineChoice:
    engine: str  # "local" or "spark"
    log_bytes: int
    limit: int

    @property
    def reason(self) -> str:
        relation = "≤" if self.engine == "local" else ">"
        return f"engine auto: {self.engine} (the log to replay is {human_bytes(self.log_bytes)} {relation} {human_bytes(self.limit)})"


def _segment_bytes(store: LogStore, state: TableState) -> int:
    segment = state.segment
    total = sum(d.size for d in segment.deltas)
    if segment.checkpoint is not None:
        files = segment.checkpoint.files
        total += sum(f.size for f in files)
        if "v2Checkpoint" in (state.protocol.reader_features or ()):  # a V2 checkpoint's sidecars hold the files
            # Every sidecar in the directory, an upper bound (old checkpoints' sidecars may still be there).
            total += sum(s.size for s in store.list_dir("_sidecars"))
    return total


def choose_checkpoint_engine(store: LogStore, state: TableState, *, local_max_log_bytes: int = LOCAL_MAX_LOG_BYTES) -> EngineChoice:
    """``local`` when the log segment of ``state`` is at most ``local_max_log_bytes``, else ``spark``."""
    size = _segment_bytes(store, state)
    return EngineChoice("local" if size <= local_max_log_bytes else "spark", size, local_max_log_bytes)
