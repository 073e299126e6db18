"""Local file system fast paths of ``LogStore``: a directory scan that follows nothing,
create-if-absent by hard link, atomic replace, fsync of a directory, and bulk unlinks overlapped
on threads. Only ``os``: no fsspec import."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Container, Sequence
from typing import Any

from ..errors import AtomicWriteUnsupportedError, CorruptLogError, LogFileExistsError, SymlinkInLogError
from .run_identity import new_run

__all__ = [
    "scan_local_dir",
    "link_create",
    "replace_file",
    "fsync_dir",
    "temp_path_for",
    "unlink_batches",
    "ignore_missing",
    "checksum_shadow",
    "drop_checksum_shadow",
]


def checksum_shadow(name: str) -> str:
    """The name of Hadoop's checksum file beside ``name`` (``dir/x`` → ``dir/.x.crc``).

    On a local file system Hadoop (delta-spark) writes ``.<name>.crc`` next to each file it writes
    and verifies it on every read: a shadow left beside a replaced file fails that check (delta-spark
    then falls back to listing the log), one left beside a deleted file is clutter, and one left
    from an older file of the same name fails the read of the new one. So every write and delete
    of ours removes the shadow with the file."""
    directory, _, base = name.rpartition("/")
    return f"{directory}/.{base}.crc" if directory else f".{base}.crc"


def drop_checksum_shadow(path: str) -> None:
    try:
        os.unlink(checksum_shadow(path))
    except FileNotFoundError:
        pass


def scan_local_dir(
    directory: str, prefix: str, known: Container[str], display: Callable[[str], str], refuse_dir: Callable[[str], bool] = lambda name: False
) -> list[tuple[str, int, int]]:
    """``(prefix + name, size, mtime ms)`` of the files of a local directory in listing order;
    names in ``known`` are not stat'ed (size and mtime -1). ``SymlinkInLogError`` for a symbolic
    link (``display`` names it), ``CorruptLogError`` for a directory whose name ``refuse_dir``
    (a log file's name: it would be read as one); a missing directory is empty."""
    # os.scandir: one directory read plus a stat per entry (fsspec's ls is ~3x slower), through
    # a descriptor of the directory: each stat is an fstatat relative to it, not a walk of the
    # whole path again (a third of a 20,000-file listing). Nothing is followed: a symbolic
    # link (file or directory) inside _delta_log is refused by name.
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                try:
                    if entry.is_symlink():
                        raise SymlinkInLogError(
                            f"{display(prefix + entry.name)} is a symbolic link; refusing to follow it out of the table",
                            path=prefix + entry.name,
                        )
                    if not entry.is_file(follow_symlinks=False):
                        if entry.is_dir(follow_symlinks=False) and refuse_dir(prefix + entry.name):
                            raise CorruptLogError(f"{display(prefix + entry.name)} is a directory, not a log file", path=prefix + entry.name)
                        continue
                    if prefix + entry.name in known:
                        out.append((prefix + entry.name, -1, -1))
                        continue
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # vanished while listing (another writer's temporary file): skip only it
                out.append((prefix + entry.name, st.st_size, int(st.st_mtime * 1000)))
    finally:
        os.close(fd)
    return out


def link_create(path: str, content: bytes | Callable[[Any], None], name: str, display: str) -> int:
    """Create ``path`` without ever replacing a file: the content goes to a private temp file beside
    it (fsynced), which is hard-linked to ``path`` (no-replace: ``LogFileExistsError`` when it
    exists) and removed, then the directory is fsynced. ``AtomicWriteUnsupportedError`` where the
    file system has no hard links. ``name``/``display``: the log name, for errors."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = temp_path_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        try:
            os.link(tmp, path)  # no-replace: fails with EEXIST when the target exists
        except FileExistsError as exc:
            raise LogFileExistsError(f"{display} already exists", path=name) from exc
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise AtomicWriteUnsupportedError(
                    f"hard links are not supported under {directory}; cannot create {name} atomically",
                    path=name,
                ) from exc
            raise
        fsync_dir(directory)
        drop_checksum_shadow(path)  # a stale one (of an earlier file of this name) would fail Hadoop's read
        return size
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def replace_file(path: str, data: bytes) -> None:
    """Replace ``path`` atomically (readers see the old or the new bytes): a private temp file,
    fsynced, renamed over it, then the directory fsynced. Hadoop's checksum shadow of the old
    bytes goes first: a reader between the two sees the old bytes unchecked, never the new ones
    checked against the old checksum."""
    directory = os.path.dirname(path)
    drop_checksum_shadow(path)
    os.makedirs(directory, exist_ok=True)
    tmp = temp_path_for(path)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)


# An unlink waits for the file system's journal; on a busy disk each one blocks for milliseconds
# (measured here: 20,000 unlinks 76 s on one thread, 2.6 s on 32). Threads overlap those waits
# (the GIL is released in unlink), so a slow disk gets many more threads than cores. On a quiet
# disk an unlink is a few microseconds of CPU under the directory's lock, and 32 threads only
# contend (20,000 unlinks: 0.25 s on 32 threads, 0.14 s on 2): the first batch runs on a few
# threads; the next batches escalate when one after the first was slow, and stay escalated only
# while that is clearly faster (an old, written-back log: 20,000 unlinks 0.43 s on 32, 0.76 s on 4).
_UNLINK_THREADS = 32
_UNLINK_THREADS_FAST = 4
_UNLINK_SLOW_SECONDS = 60e-6  # per unlink per thread: ~25 µs when the directory is cached, 150+ µs when it waits on the disk
_UNLINK_SERIAL_BELOW = 64


def _unlink_each(paths: Sequence[str], failed: threading.Event | None = None) -> None:
    for p in paths:
        if failed is not None and failed.is_set():
            return  # another thread hit an error: stop, as a serial loop would
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass  # another cleaner removed it first: fine
        except BaseException:
            if failed is not None:
                failed.set()
            raise


def unlink_batches(batches: Sequence[Sequence[str]], progress: Callable[[int], None] | None) -> None:
    """Unlink batch after batch (a batch is gone before the next one starts), each spread over
    one set of threads that lives for the whole call: starting 32 threads per batch cost more
    than the unlinks of a small file system (20 batches: 640 thread starts and joins)."""
    if sum(len(b) for b in batches) < _UNLINK_SERIAL_BELOW:
        for batch in batches:
            _unlink_each(batch)
            if progress is not None:
                progress(len(batch))
        return
    from concurrent.futures import ThreadPoolExecutor

    # Thread i takes every n-th path of a batch: the deleted range grows from the oldest file.
    # The first error (a permission error) stops every thread and is re-raised once they stopped.
    n = _UNLINK_THREADS_FAST
    gave_up = False
    fast_rate = float("inf")  # seconds per file on the few threads (best seen)
    failed = threading.Event()
    with ThreadPoolExecutor(max_workers=_UNLINK_THREADS, thread_name_prefix="delta-unlink") as pool:
        for b, batch in enumerate(batches):
            started = time.perf_counter()
            futures = [pool.submit(_unlink_each, batch[i::n], failed) for i in range(min(n, len(batch)))]
            for f in futures:
                f.exception()  # wait for all before raising: no thread is still deleting
            for f in futures:
                f.result()
            rate = (time.perf_counter() - started) / max(len(batch), 1)
            if n == _UNLINK_THREADS_FAST:
                fast_rate = min(fast_rate, rate)
                # The first batch also starts the threads: only later ones say the disk is slow.
                if b > 0 and rate * n > _UNLINK_SLOW_SECONDS and not gave_up:
                    n = _UNLINK_THREADS  # the unlinks wait on the disk: overlap the waits
            elif rate > 0.75 * fast_rate:
                n, gave_up = _UNLINK_THREADS_FAST, True  # more threads did not clearly help: contention, not waits
            if progress is not None:
                progress(len(batch))


def ignore_missing(func: Any, path: str, exc_info: Any) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):  # another cleaner removed it first: fine
        raise exc_info[1]


def temp_path_for(path: str) -> str:
    """A private temp file beside ``path``, named with this write's run tag (see ``run_identity``)
    so that a killed writer's leftover can be told from a live writer's."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{new_run().tag}.tmp")


def fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
