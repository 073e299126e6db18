"""Data-file I/O below one table root: open, read a range, create, stat — never outside the root.

Local tables are served through ``os`` (a path whose real location leaves the root through a
symbolic link is refused); other stores through the table's fsspec file system. Names are
file-system paths relative to the root (``resolve`` turns a logged ``add.path`` into one, through the
one resolver of ``model.data_paths``).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidLogPathError, SymlinkInLogError
from ..model.data_paths import DataPathResolver
from ..model.paths import LOG_DIR
from ..storage import LogStore

__all__ = ["DataFiles", "WrittenDataFile", "WHOLE_FILE_BYTES"]

WHOLE_FILE_BYTES = 8 << 20
# what only the resolver decides: escapes, schemes, NUL, "?", "#", backslashes; empty, "." or ".." segments
_NOT_PLAIN = re.compile(r"[%:\x00?#\\]|(?:^|/)\.{0,2}(?:/|$)")


@dataclass(frozen=True)
class WrittenDataFile:
    relative_path: str
    size: int
    modification_time: int  # epoch ms


class DataFiles:
    """The data files of the table whose log ``store`` serves."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.root = store.table_root
        self.is_local = store.is_local
        self._real_root = os.path.realpath(self.root) if self.is_local else None
        self._real_inside = (self._real_root or "").rstrip("/") + "/"  # what a real path inside the table starts with
        self._real_dirs: dict[str, str] = {}
        self._resolver = DataPathResolver.for_store(store)

    def resolve(self, logged: str) -> str:
        """The file a log path (``add.path``, a ``p`` deletion vector) names, relative to the root;
        ``DataPathError`` for one that is not below it."""
        return self._resolver.resolve(logged).relative

    def path(self, relative: str) -> str:
        parts = relative.split("/")
        if not relative or relative.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] == "_delta_log":
            raise InvalidLogPathError(f"data file {relative!r} escapes the table root {self.store.uri}", path=relative)
        full = posixpath.join(self.root, relative)
        if self._real_root is not None:
            self._check_inside(full, relative)
        return full

    def _check_inside(self, full: str, relative: str) -> None:
        """``SymlinkInLogError`` when local file ``full`` leads out of the table. A directory's real
        location is resolved once (a bin's files share a few partition directories; a realpath per
        file is a stat per path component, under the GIL); the file itself only when it is a link."""
        directory, _, name = full.rpartition("/")
        real_dir = self._real_dirs.get(directory)
        if real_dir is None:
            real_dir = self._real_dirs[directory] = os.path.realpath(directory)
        real = os.path.realpath(full) if os.path.islink(full) else f"{real_dir}/{name}"
        if not real.startswith(self._real_inside):
            raise SymlinkInLogError(f"data file {relative!r} of {self.store.uri} leads out of the table through a symbolic link", path=relative)

    def local_paths(self, logged: Sequence[str]) -> list[str]:
        """``path(resolve(p))`` for many log paths of a local table, with the same checks: a
        plain relative path (no escape, scheme, ``.``/``..``/empty segment, NUL, ``?`` or ``#``,
        and not below ``_delta_log``) names itself and skips the resolver, a directory's real
        location is resolved once, a file's only when it is a link — per file a few string
        operations and one ``lstat``, which matters when a bin reads thousands of small files."""
        if self._real_root is None:
            raise ValueError("local_paths serves local tables only")
        root = self.root
        not_plain = _NOT_PLAIN.search
        out = []
        for raw in logged:
            if not_plain(raw) is not None or raw.split("/", 1)[0] == LOG_DIR:
                out.append(self.path(self.resolve(raw)))
                continue
            full = posixpath.join(root, raw)
            self._check_inside(full, raw)
            out.append(full)
        return out

    def open_input(self, relative: str) -> Any:
        """A seekable binary file for pyarrow (a local file or an fsspec file)."""
        full = self.path(relative)
        if self.is_local:
            return open(full, "rb")
        return self.store.fs.open(full, "rb")

    def open_parquet(self, relative: str) -> tuple[Any, bool]:
        """A pyarrow file to read a data file's Parquet from, and whether to pre-buffer its reads.

        A file of at most ``WHOLE_FILE_BYTES`` is read whole in one call (a small file is what
        OPTIMIZE reads most, and one read beats the footer and column-chunk reads each going
        through pyarrow's I/O thread pool: half a worker's time on 50 KB files, measured). A larger
        local file is read natively without pre-buffering (no Python call per read); a larger
        remote one through its fsspec file, pre-buffered (reads coalesced into few requests)."""
        import pyarrow as pa

        full = self.path(relative)
        if self.is_local:
            fd = os.open(full, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if size <= WHOLE_FILE_BYTES:
                    chunks = []
                    while chunk := os.read(fd, max(size, 1 << 16)):  # to EOF, whatever the size was
                        chunks.append(chunk)
                    return pa.BufferReader(chunks[0] if len(chunks) == 1 else b"".join(chunks)), False
            finally:
                os.close(fd)
            return pa.OSFile(full, "rb"), False
        handle = self.store.fs.open(full, "rb")
        remote_size = getattr(handle, "size", None)
        if remote_size is not None and int(remote_size) <= WHOLE_FILE_BYTES:
            with handle:
                return pa.BufferReader(handle.read()), False
        return handle, True

    def read_range(self, relative: str, offset: int, length: int) -> bytes:
        with self.open_input(relative) as f:
            f.seek(offset)
            data: bytes = f.read(length)
            return data

    def open_output(self, relative: str) -> Any:
        """A new file for writing; its directory is created. The name is unique (a UUID), so the
        file is visible to no reader until a commit references it."""
        full = self.path(relative)
        if self.is_local:
            import pyarrow as pa

            os.makedirs(os.path.dirname(full), exist_ok=True)
            os.close(os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))  # ours alone: created exclusively
            return pa.OSFile(full, "wb")  # native writes, no GIL per write
        return self.store.fs.open(full, "wb")

    def finish(self, relative: str, handle: Any) -> WrittenDataFile:
        """Close ``handle`` and stat the file. A local file is not yet durable: ``sync`` the files
        before a commit references them (the kernel writes them back meanwhile)."""
        if self.is_local:
            handle.close()
            st = os.stat(self.path(relative))
            return WrittenDataFile(relative, st.st_size, int(st.st_mtime * 1000))
        handle.close()
        info = self.store.fs.info(self.path(relative))
        from ..storage.fsspec_files import mtime_ms

        return WrittenDataFile(relative, int(info.get("size") or 0), mtime_ms(self.store.fs, info))

    def sync(self, relatives: Sequence[str]) -> None:
        """Make written local files durable (fsync each, and its directory), a few at once: a
        commit must never reference a file a crash could truncate. Object stores: a no-op (an
        object is durable once its upload completed)."""
        if not self.is_local or not relatives:
            return
        from concurrent.futures import ThreadPoolExecutor

        def one(rel: str) -> str:
            full = self.path(rel)
            fd = os.open(full, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            return os.path.dirname(full)

        with ThreadPoolExecutor(max_workers=min(8, len(relatives)), thread_name_prefix="fsync") as pool:
            directories = set(pool.map(one, relatives))
        for directory in directories:
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete_quietly(self, relative: str) -> None:
        """Best effort removal of a file this run wrote and will not commit."""
        try:
            if self.is_local:
                os.unlink(self.path(relative))
            else:
                self.store.fs.rm_file(self.path(relative))
        except (OSError, InvalidLogPathError):
            pass
