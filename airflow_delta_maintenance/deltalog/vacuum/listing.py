"""FULL VACUUM's listing of the table root: every data-side file, never the log, never through a link.

``list_table_files`` walks the table root (names relative to it) and returns Arrow columns, one row
per regular file: ``path``, ``size``, ``mtime`` (storage modification time, epoch ms). What it
leaves out, and why:

- hidden names (``paths.HiddenNames``: ``_delta_log``, ``.``/``_`` names except partition
  directories, ``_change_data`` and ``_delta_index``), at any depth — except Hadoop's checksum
  shadows ``.<name>.crc``, which are kept aside (``shadows``) to be deleted with their file;
- symbolic links, to files or directories: never followed, never deleted, counted (``links``).
  Only local file systems have them; object stores are flat key spaces.

Directories that hold nothing at all are reported (``empty_dirs``, with their mtime): VACUUM
removes them as delta-spark does, once they are older than the retention (a writer that just
created a partition directory is about to write into it).

The walk runs in parallel by prefix: each top-level directory is one task (local: a thread each,
the GIL is released in every directory read and ``stat``; object stores: one recursive listing
per prefix, concurrently — on S3 by Arrow's C++ client where it equals the table's s3fs client,
``s3_listing``). Directory marker objects (``a/b/``) are directories, not files.
"""

from __future__ import annotations

import logging
import os
import re
import stat as stat_module
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from .._runtime.memory import release_free_memory, uses_log_operation_memory
from ..storage import LogStore
from ..storage.fsspec_files import mtime_ms
from .paths import MAYBE_HIDDEN, HiddenNames, ListingStoppedError

__all__ = [
    "TableListing", "FILE_SCHEMA", "DIR_SCHEMA", "LISTING_SCHEMA", "list_table_files", "concat_listings", "shadow_of", "split_hidden", "split_listing",
    "list_prefix", "listing_to_arrow", "listing_from_arrow",
]

FILE_SCHEMA = pa.schema([pa.field("path", pa.string()), pa.field("size", pa.int64()), pa.field("mtime", pa.int64())])
DIR_SCHEMA = pa.schema([pa.field("path", pa.string()), pa.field("mtime", pa.int64())])
DEFAULT_WORKERS = 8
log = logging.getLogger(__name__)


def shadow_of(name: str) -> str | None:
    """``.x.crc`` → ``x`` (Hadoop's checksum shadow of ``x``), None for any other name."""
    if name.startswith(".") and name.endswith(".crc") and len(name) > 5:
        return name[1:-4]
    return None


@dataclass
class TableListing:
    """What a listing of the table root found (see the module docstring)."""

    files: pa.Table  # FILE_SCHEMA
    empty_dirs: pa.Table = field(default_factory=DIR_SCHEMA.empty_table)
    shadows: pa.Table = field(default_factory=FILE_SCHEMA.empty_table)  # .<name>.crc beside listed names
    links: tuple[str, ...] = ()
    source: str = "listing"  # listing | inventory
    # Set by a names-only local listing (``list_table_files(lazy_stats=True)``): the files' size
    # and mtime are null until ``with_stats`` reads them — only for the files a plan needs them of.
    stat_root: str | None = None
    client: str | None = None  # which client listed an object store: "arrow" (C++) or "s3fs"/"adlfs"/…

    @property
    def num_files(self) -> int:
        return int(self.files.num_rows)

    def with_stats(self, files: pa.Table, workers: int = DEFAULT_WORKERS) -> pa.Table:
        """``files`` (rows of this listing's ``files``) with their size and mtime, read now where
        the listing left them null; a file gone since, or no longer a regular file, is dropped."""
        return files if self.stat_root is None else _stat_local(self.stat_root, files, workers)


def concat_listings(parts: Sequence[TableListing], source: str = "listing") -> TableListing:
    return TableListing(
        files=pa.concat_tables([p.files for p in parts]) if parts else FILE_SCHEMA.empty_table(),
        empty_dirs=pa.concat_tables([p.empty_dirs for p in parts]) if parts else DIR_SCHEMA.empty_table(),
        shadows=pa.concat_tables([p.shadows for p in parts]) if parts else FILE_SCHEMA.empty_table(),
        links=tuple(sorted(x for p in parts for x in p.links)),
        source=source,
        stat_root=next((p.stat_root for p in parts if p.stat_root is not None), None),
    )


def _files_table(paths: list[str], sizes: list[int], mtimes: list[int]) -> pa.Table:
    return pa.table([pa.array(paths, pa.string()), pa.array(sizes, pa.int64()), pa.array(mtimes, pa.int64())], schema=FILE_SCHEMA)


# A path with a component that may be hidden (``MAYBE_HIDDEN`` at its start; ``HiddenNames`` decides).
_MAYBE_HIDDEN_COMPONENT = "(^|/)(" + "|".join(re.escape(b) for b in MAYBE_HIDDEN) + ")"


def split_hidden(files: pa.Table, hidden: HiddenNames) -> tuple[pa.Table, pa.Table]:
    """``files`` (``FILE_SCHEMA``, paths relative to the root) without those under a hidden
    directory or hidden themselves, and apart the checksum shadows among the hidden ones. Only
    paths with a component that may be hidden are judged in Python."""
    maybe = pc.fill_null(pc.match_substring_regex(files.column("path"), _MAYBE_HIDDEN_COMPONENT), False)
    if not pc.any(maybe).as_py():
        return files, FILE_SCHEMA.empty_table()
    indices = pc.indices_nonzero(maybe).to_pylist()
    drop, shadows = [], []
    for i, rel in zip(indices, files.column("path").take(indices).to_pylist(), strict=True):
        parts = rel.split("/")
        if any(hidden(p) for p in parts[:-1]):
            drop.append(i)
        elif hidden(parts[-1]):
            drop.append(i)
            if shadow_of(parts[-1]) is not None:
                shadows.append(i)
    if not drop:
        return files, FILE_SCHEMA.empty_table()
    keep = pc.invert(pc.is_in(pa.array(range(files.num_rows), pa.int64()), value_set=pa.array(drop, pa.int64())))
    return files.filter(keep), files.take(pa.array(shadows, pa.int64()))


# ---- local file systems -----------------------------------------------------------------------


def _walk_local(top: str, rel: str, mtime: int, hidden: HiddenNames, subdirs: list[tuple[str, str, int]] | None = None) -> TableListing:
    """Everything below the local directory ``top`` (``rel`` relative to the table root; "" for
    the root itself, whose sub-directories go to ``subdirs`` for the caller to walk as tasks)."""
    subdirs = [] if subdirs is None else subdirs
    paths: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    shadows: tuple[list[str], list[int], list[int]] = ([], [], [])
    empty: tuple[list[str], list[int]] = ([], [])
    links: list[str] = []
    stack = [(top, rel, mtime)]
    while stack:
        directory, prefix, dir_mtime = stack.pop()
        seen = 0
        try:
            it = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            for entry in it:
                seen += 1
                name = entry.name
                relpath = f"{prefix}/{name}" if prefix else name
                try:
                    if entry.is_symlink():
                        links.append(relpath)
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if not hidden(name):
                            st = entry.stat(follow_symlinks=False)
                            if prefix:
                                stack.append((entry.path, relpath, int(st.st_mtime * 1000)))
                            else:  # the root's own sub-directories: separate tasks of the caller
                                subdirs.append((entry.path, relpath, int(st.st_mtime * 1000)))
                        continue
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while listing (a writer's temporary file)
                if not stat_module.S_ISREG(st.st_mode):
                    continue  # sockets, fifos: not data files
                if hidden(name):
                    if shadow_of(name) is not None:
                        shadows[0].append(relpath)
                        shadows[1].append(st.st_size)
                        shadows[2].append(int(st.st_mtime * 1000))
                    continue
                paths.append(relpath)
                sizes.append(st.st_size)
                mtimes.append(int(st.st_mtime * 1000))
        if seen == 0 and prefix:
            empty[0].append(prefix)
            empty[1].append(dir_mtime)
    return TableListing(
        files=_files_table(paths, sizes, mtimes),
        empty_dirs=pa.table([pa.array(empty[0], pa.string()), pa.array(empty[1], pa.int64())], schema=DIR_SCHEMA),
        shadows=_files_table(*shadows),
        links=tuple(links),
    )


def _list_local(root: str, hidden: HiddenNames, workers: int, lazy_stats: bool = False) -> TableListing:
    # The root's files (and its links) in this thread; every non-hidden sub-directory is a task.
    if lazy_stats:
        tops: list[tuple[str, str, int]] = []
        head = _names_local(root, "", 0, hidden, tops)
        return concat_listings([head, *_run_tasks(lambda t: _names_local(f"{root}/{t[0]}", t[0], t[1], hidden), [(r, m) for _, r, m in tops], workers)])
    head, tasks = _split_local(root, hidden)
    return concat_listings([head, *_run_tasks(lambda t: _walk_local(f"{root}/{t[0]}", t[0], t[1], hidden), tasks, workers)])


def _names_local(top: str, rel: str, mtime: int, hidden: HiddenNames, subdirs: list[tuple[str, str, int]] | None = None) -> TableListing:
    """``_walk_local`` without a ``stat`` per file: the entry types come from the directory itself
    (``d_type``; ``DirEntry`` falls back to ``lstat`` where a file system does not give it), so a
    listing costs one ``getdents`` per directory instead of a system call per file. Sizes and
    mtimes are read later, by ``TableListing.with_stats``, for the files a plan may delete — most
    files of a table are referenced and never need them. Directories (for the recursion and the
    empty ones' mtime) and hidden checksum shadows are ``lstat``-ed here: they are few."""
    subdirs = [] if subdirs is None else subdirs
    chunks: list[pa.Array] = []
    shadows: tuple[list[str], list[int], list[int]] = ([], [], [])
    empty: tuple[list[str], list[int]] = ([], [])
    links: list[str] = []
    stack = [(top, rel, mtime)]
    while stack:
        if hidden.stopped:
            raise ListingStoppedError(f"listing of {top} stopped")
        directory, prefix, dir_mtime = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not entries:
            if prefix:
                empty[0].append(prefix)
                empty[1].append(dir_mtime)
            continue
        lead = f"{prefix}/" if prefix else ""
        names = [e.name for e in entries if e.is_file(follow_symlinks=False)]
        if len(names) < len(entries):  # links, directories, sockets and fifos
            for entry in entries:
                try:
                    if entry.is_symlink():
                        links.append(lead + entry.name)
                    elif entry.is_dir(follow_symlinks=False) and not hidden(entry.name):
                        st = entry.stat(follow_symlinks=False)
                        task = (entry.path, lead + entry.name, int(st.st_mtime * 1000))
                        (stack if prefix else subdirs).append(task)  # the root's sub-directories: tasks of the caller
                except FileNotFoundError:
                    continue  # removed while listing
        hidden_files = [n for n in names if n.startswith(MAYBE_HIDDEN) and hidden(n)]
        if hidden_files:
            for name in hidden_files:
                if shadow_of(name) is None:
                    continue
                try:
                    st = os.lstat(f"{directory}/{name}")
                except FileNotFoundError:
                    continue
                shadows[0].append(lead + name)
                shadows[1].append(st.st_size)
                shadows[2].append(int(st.st_mtime * 1000))
            drop = set(hidden_files)
            names = [n for n in names if n not in drop]
        if names:
            array = pa.array(names, pa.string())
            chunks.append(pc.binary_join_element_wise(lead, array, "") if lead else array)
    paths = pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())
    return TableListing(
        files=pa.table([paths, pa.nulls(len(paths), pa.int64()), pa.nulls(len(paths), pa.int64())], schema=FILE_SCHEMA),
        empty_dirs=pa.table([pa.array(empty[0], pa.string()), pa.array(empty[1], pa.int64())], schema=DIR_SCHEMA),
        shadows=_files_table(*shadows),
        links=tuple(links),
        stat_root=top if not rel else top[: -len(rel) - 1],
    )


def _stat_local(root: str, files: pa.Table, workers: int) -> pa.Table:
    """``files`` with size and mtime from an ``lstat`` of each (threads: the call releases the GIL);
    files gone, or no longer regular files, are dropped."""
    paths = files.column("path").to_pylist()
    if not paths:
        return files.cast(FILE_SCHEMA)
    step = max(1, -(-len(paths) // max(1, workers)))

    def stat_chunk(start: int) -> tuple[list[int], list[int], list[int]]:
        kept, sizes, mtimes = [], [], []
        lstat, is_reg = os.lstat, stat_module.S_ISREG
        for i in range(start, min(start + step, len(paths))):
            try:
                st = lstat(f"{root}/{paths[i]}")
            except (FileNotFoundError, NotADirectoryError):
                continue
            if is_reg(st.st_mode):
                kept.append(i)
                sizes.append(st.st_size)
                mtimes.append(int(st.st_mtime * 1000))
        return kept, sizes, mtimes

    starts = list(range(0, len(paths), step))
    if workers > 1 and len(starts) > 1:
        with ThreadPoolExecutor(max_workers=len(starts), thread_name_prefix="vacuum-stat") as pool:
            parts = list(pool.map(stat_chunk, starts))
    else:
        parts = [stat_chunk(s) for s in starts]
    kept = [i for p in parts for i in p[0]]
    return pa.table([files.column("path").take(pa.array(kept, pa.int64())), pa.array([x for p in parts for x in p[1]], pa.int64()),
                     pa.array([x for p in parts for x in p[2]], pa.int64())], schema=FILE_SCHEMA)


def _split_local(root: str, hidden: HiddenNames) -> tuple[TableListing, list[tuple[str, int]]]:
    tops: list[tuple[str, str, int]] = []
    head = _walk_local(root, "", 0, hidden, tops)
    return head, [(rel, mtime) for _, rel, mtime in tops]


def _run_tasks(fn: Callable[[tuple[str, int]], TableListing], tasks: list[tuple[str, int]], workers: int) -> list[TableListing]:
    if workers <= 1 or len(tasks) <= 1:
        return [fn(t) for t in tasks]
    with ThreadPoolExecutor(max_workers=min(workers, len(tasks)), thread_name_prefix="vacuum-list") as pool:
        return list(pool.map(fn, tasks))


# ---- object stores (fsspec) --------------------------------------------------------------------


def _list_prefix(fs: object, root: str, prefix: str, hidden: HiddenNames) -> TableListing:
    """Every object below ``root/prefix`` (one recursive listing), filtered like the local walk."""
    if hidden.stopped:
        raise ListingStoppedError(f"listing of {root}/{prefix} stopped")
    find = fs.find  # type: ignore[attr-defined]
    base = f"{root}/{prefix}" if prefix else root
    try:
        found = find(base, detail=True, withdirs=False)
    except FileNotFoundError:
        found = {}
    strip = fs._strip_protocol  # type: ignore[attr-defined]
    cut = len(strip(root).rstrip("/")) + 1
    paths: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    for key, info in found.items():
        if info.get("type") == "directory" or _is_marker(key, info):
            continue
        rel = strip(key)[cut:]
        if rel:
            paths.append(rel)
            sizes.append(int(info.get("size") or 0))
            mtimes.append(mtime_ms(fs, info))
    files, shadows = split_hidden(_files_table(paths, sizes, mtimes), hidden)
    return TableListing(files=files, shadows=shadows)


def _is_marker(name: str, info: dict[str, object]) -> bool:
    """A directory marker object (``a/b/``, often empty; s3fs reports it as a file whose name
    loses the slash once stripped): not a data file — a directory, as Hadoop's S3A reads it."""
    return name.endswith("/") or str(info.get("Key") or "").endswith("/")


def _list_fsspec(store: LogStore, hidden: HiddenNames, workers: int) -> TableListing:
    head, prefixes = _split_fsspec(store, hidden)
    return concat_listings([head, *_run_tasks(lambda t: _list_prefix(store.fs, store.table_root, t[0], hidden), prefixes, workers)])


def _split_fsspec(store: LogStore, hidden: HiddenNames) -> tuple[TableListing, list[tuple[str, int]]]:
    fs = store.fs
    root = store.table_root
    fs.invalidate_cache(root)
    try:
        entries = fs.ls(root, detail=True)
    except FileNotFoundError:
        return TableListing(files=FILE_SCHEMA.empty_table()), []
    strip = fs._strip_protocol
    top_files: list[dict[str, object]] = []
    prefixes: list[tuple[str, int]] = []
    for info in entries:
        if _is_marker(str(info["name"]), info):
            continue
        name = strip(str(info["name"])).rstrip("/").rsplit("/", 1)[-1]
        if info.get("type") == "directory":
            if not hidden(name):
                prefixes.append((name, 0))
        else:
            top_files.append({**info, "name": name})
    head_paths, head_sizes, head_mtimes = [], [], []
    shadow: tuple[list[str], list[int], list[int]] = ([], [], [])
    for info in top_files:
        name = str(info["name"])
        size, mtime = int(str(info.get("size") or 0)), mtime_ms(fs, info)
        if hidden(name):
            if shadow_of(name) is not None:
                shadow[0].append(name)
                shadow[1].append(size)
                shadow[2].append(mtime)
            continue
        head_paths.append(name)
        head_sizes.append(size)
        head_mtimes.append(mtime)
    return TableListing(files=_files_table(head_paths, head_sizes, head_mtimes), shadows=_files_table(*shadow)), prefixes


def split_listing(store: LogStore, hidden: HiddenNames) -> tuple[TableListing, list[tuple[str, int]]]:
    """The root's own entries (files, shadows, links), and its sub-directories as ``(name,
    mtime)`` tasks for ``list_prefix`` — how a parallel listing (threads, or Spark tasks) splits."""
    return _split_local(store.table_root, hidden) if store.is_local else _split_fsspec(store, hidden)


def list_prefix(store: LogStore, prefix: str, mtime: int, hidden: HiddenNames) -> TableListing:
    """Everything below the root's sub-directory ``prefix`` (one task of ``split_listing``)."""
    if store.is_local:
        return _walk_local(f"{store.table_root}/{prefix}", prefix, mtime, hidden)
    native = _native_listing(store, hidden, 1, prefix)
    return native if native is not None else _list_prefix(store.fs, store.table_root, prefix, hidden)


# ---- a listing as one Arrow table (what the Spark engine's tasks write and the worker reads) ----

LISTING_SCHEMA = pa.schema([pa.field("kind", pa.string()), pa.field("path", pa.string()), pa.field("size", pa.int64()), pa.field("mtime", pa.int64())])


def listing_to_arrow(listing: TableListing) -> pa.Table:
    """``kind`` is ``file``, ``shadow``, ``empty_dir`` or ``link``."""
    def part(kind: str, paths: pa.Array, sizes: pa.Array, mtimes: pa.Array) -> pa.Table:
        return pa.table([pa.array([kind] * len(paths), pa.string()), paths, sizes, mtimes], schema=LISTING_SCHEMA)

    f, s, d = listing.files, listing.shadows, listing.empty_dirs
    links = pa.array(list(listing.links), pa.string())
    return pa.concat_tables([
        part("file", f.column("path").combine_chunks(), f.column("size").combine_chunks(), f.column("mtime").combine_chunks()),
        part("shadow", s.column("path").combine_chunks(), s.column("size").combine_chunks(), s.column("mtime").combine_chunks()),
        part("empty_dir", d.column("path").combine_chunks(), pa.nulls(d.num_rows, pa.int64()), d.column("mtime").combine_chunks()),
        part("link", links, pa.nulls(len(links), pa.int64()), pa.nulls(len(links), pa.int64())),
    ])


def listing_from_arrow(table: pa.Table, source: str = "listing") -> TableListing:
    """The inverse of ``listing_to_arrow`` (for the parts of many tasks, concatenated)."""
    import pyarrow.compute as pc

    table = table.select(LISTING_SCHEMA.names).cast(LISTING_SCHEMA)

    def rows(kind: str) -> pa.Table:
        return table.filter(pc.equal(table.column("kind"), kind))

    files, shadows, dirs, links = rows("file"), rows("shadow"), rows("empty_dir"), rows("link")
    return TableListing(
        files=files.select(["path", "size", "mtime"]).cast(FILE_SCHEMA),
        shadows=shadows.select(["path", "size", "mtime"]).cast(FILE_SCHEMA),
        empty_dirs=dirs.select(["path", "mtime"]).cast(DIR_SCHEMA),
        links=tuple(sorted(links.column("path").to_pylist())),
        source=source,
    )


def _native_listing(store: LogStore, hidden: HiddenNames, workers: int, prefix: str | None = None) -> TableListing | None:
    """The listing (of the root, or of one of its sub-directories ``prefix``) by Arrow's S3 client
    where it equals the table's s3fs client (``storage.native_s3``); None where it does not, or
    where it failed (s3fs then lists, and reports any error itself)."""
    from ..storage.native_s3 import native_s3

    native = native_s3(store.fs)
    if native is None:
        return None
    from .s3_listing import list_s3_native, list_s3_prefix

    try:
        listing = list_s3_native(store, native, hidden, workers) if prefix is None else list_s3_prefix(store, native, prefix, hidden)
    except (OSError, pa.ArrowException) as exc:  # a network or service error, a key Arrow refuses as a path
        log.info("%s: the native S3 listing failed (%s: %s); listing with s3fs", store.uri, type(exc).__name__, " ".join(str(exc).split())[:300])
        return None
    listing.client = "arrow"
    return listing


@uses_log_operation_memory
def list_table_files(store: LogStore, hidden: HiddenNames, *, workers: int = DEFAULT_WORKERS, lazy_stats: bool = False) -> TableListing:
    """The table root's data-side files (see the module docstring). ``lazy_stats``: on a local
    file system, names only; ``TableListing.with_stats`` reads sizes and mtimes where needed."""
    try:
        if store.is_local:
            return _list_local(store.table_root, hidden, workers, lazy_stats)
        native = _native_listing(store, hidden, workers)
        if native is not None:
            return native
        listing = _list_fsspec(store, hidden, workers)
        listing.client = type(store.fs).__module__.split(".", 1)[0]
        return listing
    finally:
        # The walkers' threads allocated in arenas of their own: hand what they freed back now,
        # not when the snapshot loading beside this listing ends (it peaks meanwhile).
        release_free_memory()


ListFn = Callable[[LogStore, HiddenNames], TableListing]
