"""Coordinator-call budgets: a token bucket per coordinator endpoint, shared by every poller of a
process.

The triggerer runs every deferred sensor and every ``AssetWatcher`` of the fleet in one process;
their polls of one endpoint (a DynamoDB table, a UC server) draw from one bucket, so 1,000 tables
polling every 30 s cannot exceed ``calls_per_second`` against that endpoint, however their polls
line up. A poller that finds the bucket empty waits for its token (``reserve`` says how long)
instead of calling: the effective poll interval stretches, the endpoint's rate does not. Worker
processes (poke/reschedule sensors) each hold their own bucket; pools bound how many of them poll
at once (docs/fleet/scheduling.md, "Sizing").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["TokenBucket", "bucket_for"]


@dataclass
class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up. Thread-safe."""

    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    _tokens: float = field(init=False)
    _stamp: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    calls: int = field(init=False, default=0)  # tokens handed out (benchmarks, tests)

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, got {self.rate}, {self.burst}")
        self._tokens = float(self.burst)
        self._stamp = self.clock()

    def reserve(self) -> float:
        """Take one token; the seconds to wait before using it (0 when one was available). The
        token is reserved either way, so concurrent callers queue up instead of racing."""
        with self._lock:
            now = self.clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= 1.0
            self.calls += 1
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def tighten(self, rate: float, burst: float) -> None:
        """Two configurations for one endpoint: the stricter wins."""
        with self._lock:
            self.rate = min(self.rate, rate)
            self.burst = min(self.burst, burst)
            self._tokens = min(self._tokens, float(self.burst))


_BUCKETS: dict[str, TokenBucket] = {}
_REGISTRY_LOCK = threading.Lock()


def bucket_for(endpoint: str, calls_per_second: float | None, burst: float | None = None) -> TokenBucket | None:
    """The process-wide bucket of ``endpoint`` (None: no limit configured)."""
    if not calls_per_second:
        return None
    size = max(1.0, float(burst if burst is not None else calls_per_second))
    with _REGISTRY_LOCK:
        bucket = _BUCKETS.get(endpoint)
        if bucket is None:
            bucket = _BUCKETS[endpoint] = TokenBucket(float(calls_per_second), size)
        else:
            bucket.tighten(float(calls_per_second), size)
        return bucket


