"""Deleting a VACUUM plan's files: checked against the storage right before, in parallel batches.

**Re-validation** (``still_deletable``): a planned file goes only if it is still there, still a
regular file and still older than the cutoff — local files by a no-follow ``stat`` each, object
stores by a fresh listing of each planned file's directory (one LIST per directory, concurrently).
A file a writer re-created meanwhile is young again and stays.

**Deletion** (``delete_files``) never follows a symbolic link: on a local file system every
directory is opened component by component from the table root with ``O_NOFOLLOW`` and files are
unlinked relative to that descriptor (``unlinkat``), so a directory swapped for a link after the
listing is refused, not followed. Hadoop checksum shadows (``.<name>.crc``) go with their file.
Object stores delete in bulk requests (up to 1,000 keys), several at once. A file already gone is
fine: a killed run is simply run again.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..errors import InvalidLogPathError, SymlinkInLogError
from ..model.paths import LOG_DIR
from ..storage import LogStore
from ..storage.fsspec_files import mtime_ms

__all__ = ["BATCH", "still_deletable", "delete_files", "remove_empty_dirs", "check_relative"]

BATCH = 1000  # files per deletion request (S3's DeleteObjects limit) and per progress step
WORKERS = 8


def check_relative(path: str) -> list[str]:
    """The components of a path relative to the table root; refuses anything that could leave the
    root or touch the log (``..``, absolute, ``_delta_log/…``)."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or "\x00" in path or any(p in ("", ".", "..") for p in parts) or parts[0] == LOG_DIR:
        raise InvalidLogPathError(f"{path!r} is not a data file path below the table root", path=path)
    return parts


def _group_by_dir(paths: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        check_relative(p)
        directory, _, name = p.rpartition("/")
        groups[directory].append(name)
    return groups


class _LocalDirs:
    """Directory descriptors opened from the table root without following any link."""

    def __init__(self, root: str) -> None:
        self.root = root

    def open(self, directory: str) -> int:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in directory.split("/") if directory else ():
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                        raise SymlinkInLogError(f"{self.root}/{directory}: a symbolic link on the way; refusing to delete through it", path=directory) from None
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat_module.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def still_deletable(store: LogStore, paths: Sequence[str], cutoff_ms: int, *, workers: int = WORKERS) -> list[str]:
    """The planned ``paths`` that are still regular files older than ``cutoff_ms`` (a no-follow
    stat each locally; a LIST of each directory elsewhere), in the given order."""
    groups = _group_by_dir(paths)
    keep: set[str] = set()
    lock = threading.Lock()
    if store.is_local:
        dirs = _LocalDirs(store.table_root)

        def check(item: tuple[str, list[str]]) -> None:
            directory, names = item
            try:
                fd = dirs.open(directory)
            except (FileNotFoundError, NotADirectoryError):
                return
            try:
                ok = []
                for n in names:
                    try:
                        st = os.lstat(n, dir_fd=fd)
                    except FileNotFoundError:
                        continue
                    if stat_module.S_ISREG(st.st_mode) and int(st.st_mtime * 1000) < cutoff_ms:
                        ok.append(f"{directory}/{n}" if directory else n)
                with lock:
                    keep.update(ok)
            finally:
                os.close(fd)
    else:
        fs = store.fs
        root = store.table_root

        def check(item: tuple[str, list[str]]) -> None:
            directory, names = item
            base = f"{root}/{directory}" if directory else root
            fs.invalidate_cache(base)
            try:
                entries = fs.ls(base, detail=True)
            except FileNotFoundError:
                return
            found = {str(e["name"]).rstrip("/").rsplit("/", 1)[-1]: e for e in entries if e.get("type") != "directory"}
            ok = [f"{directory}/{n}" if directory else n for n in names if n in found and mtime_ms(fs, found[n]) < cutoff_ms]
            with lock:
                keep.update(ok)

    items = list(groups.items())
    if len(items) <= 1 or workers <= 1:
        for item in items:
            check(item)
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="vacuum-check") as pool:
            list(pool.map(check, items))
    return [p for p in paths if p in keep]


def delete_files(
    store: LogStore,
    paths: Sequence[str],
    *,
    shadows: bool = True,
    progress: Callable[[int], None] | None = None,
    workers: int = WORKERS,
) -> int:
    """Delete data files (relative to the table root) in batches of ``BATCH``; returns how many
    were deleted by this call (already gone: not counted, not an error). ``progress`` hears the
    size of each finished batch. Local deletions also remove each file's checksum shadow."""
    for p in paths:
        check_relative(p)
    batches = [list(paths[i : i + BATCH]) for i in range(0, len(paths), BATCH)]
    if not batches:
        return 0
    deleted = [0]
    lock = threading.Lock()
    if store.is_local:
        dirs = _LocalDirs(store.table_root)

        def run(batch: list[str]) -> None:
            n = 0
            for directory, names in _group_by_dir(batch).items():
                try:
                    fd = dirs.open(directory)
                except (FileNotFoundError, NotADirectoryError):
                    continue  # the whole directory is gone already
                try:
                    for name in names:
                        try:
                            os.unlink(name, dir_fd=fd)
                            n += 1
                        except FileNotFoundError:
                            pass
                        if shadows:
                            try:
                                os.unlink(f".{name}.crc", dir_fd=fd)
                            except FileNotFoundError:
                                pass
                finally:
                    os.close(fd)
            with lock:
                deleted[0] += n
            if progress is not None:
                progress(len(batch))
    else:
        fs = store.fs
        root = store.table_root

        def run(batch: list[str]) -> None:
            full = [f"{root}/{p}" for p in batch]
            try:
                fs.rm(full)
            except FileNotFoundError:
                pass
            with lock:
                deleted[0] += len(batch)
            if progress is not None:
                progress(len(batch))

    if len(batches) == 1 or workers <= 1:
        for b in batches:
            run(b)
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(batches)), thread_name_prefix="vacuum-delete") as pool:
            for f in [pool.submit(run, b) for b in batches]:
                f.result()
    return deleted[0]


def remove_empty_dirs(store: LogStore, dirs: Sequence[str]) -> int:
    """Remove directories that are still empty (deepest first, never through a link); a directory
    that holds something again, or is gone, is left alone. Local file systems only."""
    if not store.is_local:
        return 0
    opener = _LocalDirs(store.table_root)
    removed = 0
    for d in sorted(dirs, key=lambda p: (-p.count("/"), p)):
        check_relative(d)
        parent, _, name = d.rpartition("/")
        try:
            fd = opener.open(parent)
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            if _is_link(fd, name):
                continue
            os.rmdir(name, dir_fd=fd)
            removed += 1
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
        finally:
            os.close(fd)
    return removed
