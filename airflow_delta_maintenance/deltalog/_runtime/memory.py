"""Which Arrow allocator the log operations use.

pyarrow's default pool (jemalloc or, in recent wheels, mimalloc) keeps freed pages in per-thread
arenas: the JSON reader and the Parquet writer allocate on pool threads, so a snapshot load or a
checkpoint peaks well above its live data — and mimalloc hands a small buffer's pages back and
faults fresh, zeroed ones in for the next (OPTIMIZE reading thousands of small files). For a
maintenance job the peak is what matters (it sizes the Airflow worker), so log operations and
OPTIMIZE's bins allocate from the system allocator, which hands large blocks back to the OS when
they are freed. ``ARROW_DEFAULT_MEMORY_POOL`` set by the user wins.

In the command's process (below) the system allocator is Arrow's default from the start: some of
Arrow's buffers ignore pyarrow's pool — the Parquet reader decompresses every page into a buffer
of Arrow's process-wide default pool — so only the environment reaches them (mimalloc faulting
fresh pages in for each small file's pages cost OPTIMIZE 4-6% of its CPU, measured).

Buffers remember the pool they came from, so switching the default while an operation runs is
safe for other threads: they merely allocate from the system pool for that time.

glibc's malloc keeps freed blocks inside its heaps (and raises its mmap threshold after large
frees), so memory freed by one phase is not returned before the next one allocates more:
``release_free_memory`` hands it back (``malloc_trim``), between phases and after an operation.

Inside an operation the opposite serves better: a freed block is the next phase's allocation, and
every page handed back is a page the kernel must fault in and zero again (a third of a snapshot
load's CPU time went to that). So while an operation runs, glibc keeps large blocks in its heaps
(mmap threshold at its 32 MiB maximum) and does not trim them; the operation's end trims once
and sets glibc's initial thresholds again. A user who tunes malloc through the environment keeps
their settings.

That tuning is for processes that are ours alone — the ``delta-maintenance`` command and a Spark
job's driver — which call ``own_process_allocator()`` at start. Setting ``M_MMAP_THRESHOLD`` turns
glibc's dynamic threshold off for the rest of the process, so it cannot be undone: inside an
Airflow worker, triggerer or DAG processor, or any program that imports the library, the
thresholds are never touched (the Arrow pool is switched and restored, and memory trimmed, only).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # imported where used: the CLI calls own_process_allocator() before it needs pyarrow
    import pyarrow as pa

__all__ = ["log_operation_memory", "uses_log_operation_memory", "release_free_memory", "own_process_allocator"]

_lock = threading.Lock()
_depth = 0
_saved: pa.MemoryPool | None = None
F = TypeVar("F", bound=Callable[..., object])


def _load_glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")  # by name: find_library would spawn ldconfig
        libc.malloc_trim, libc.mallopt  # noqa: B018 - both or neither: glibc
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune or trim
        return None
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc


_glibc = _load_glibc()
_malloc_trim: Callable[[int], int] | None = _glibc.malloc_trim if _glibc is not None else None

# mallopt(3) parameters, and glibc's initial value of both thresholds.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_GLIBC_INITIAL_THRESHOLD = 128 << 10
_OPERATION_THRESHOLDS = {_M_MMAP_THRESHOLD: 32 << 20, _M_TRIM_THRESHOLD: 1 << 30}


def _load_mallopt() -> Callable[[int, int], int] | None:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if _glibc is None or any(f"MALLOC_{p}_THRESHOLD_" in os.environ or f"malloc.{p.lower()}_threshold" in tunables for p in ("MMAP", "TRIM")):
        return None  # not glibc, or the thresholds tuned by the user: leave them alone
    mallopt: Callable[[int, int], int] = _glibc.mallopt
    return mallopt


_mallopt: Callable[[int, int], int] | None = None  # set by own_process_allocator(): only in our own processes

_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"  # read by Arrow once, when pyarrow loads


def _pool_from_environment() -> bool:
    """Arrow's default pool is the one the environment names (the user's, or ours, inherited by
    the processes the command starts): nothing to switch."""
    return bool(os.environ.get(_POOL_ENV))


def own_process_allocator() -> None:
    """This process is ours alone (the CLI command, a Spark job): log operations may tune glibc's
    malloc thresholds while they run, and Arrow's process-wide default pool is the system
    allocator unless the user chose one — where pyarrow is not imported yet (Arrow reads the
    variable once): the command, and the processes it starts; a Spark job imports pyarrow first.
    Never call it in a process that hosts other code."""
    global _mallopt
    _mallopt = _load_mallopt()
    if not _pool_from_environment() and "pyarrow" not in sys.modules:
        os.environ[_POOL_ENV] = "system"


def _keep_freed_blocks(keep: bool) -> None:
    if _mallopt is not None:
        for param, value in _OPERATION_THRESHOLDS.items():
            _mallopt(param, value if keep else _GLIBC_INITIAL_THRESHOLD)


def release_free_memory() -> None:
    """Return the C heap's free memory to the OS (glibc only; a no-op elsewhere)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


@contextmanager
def log_operation_memory() -> Iterator[None]:
    """Allocate Arrow buffers from the system pool inside the block (re-entrant), unless the user
    chose a pool (``ARROW_DEFAULT_MEMORY_POOL``: kept); either way the block's freed memory is
    handed back at its end (a worker told to set the variable keeps that)."""
    global _depth, _saved
    import pyarrow as pa

    with _lock:
        if _depth == 0:
            if not _pool_from_environment():
                _saved = pa.default_memory_pool()
                pa.set_memory_pool(pa.system_memory_pool())
            _keep_freed_blocks(True)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _saved is not None:
                    pa.set_memory_pool(_saved)
                    _saved = None
                _keep_freed_blocks(False)
                release_free_memory()


def uses_log_operation_memory(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> object:
        with log_operation_memory():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
