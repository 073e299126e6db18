"""The files VACUUM must keep, and the commits it reads to know them.

The **retained versions** are the version live at the cutoff (``now - retention``: the newest
version whose timestamp is at or before it, ``version_at``) and every later one up to the catalog's
ratified head. Every file any of them reads is **referenced**: a data file, its deletion vector,
or a ``_change_data`` file of a change inside the window. They are

- the live files of the head and their deletion vectors;
- every file named by an ``add``, ``remove`` or ``cdc`` action of a commit after the cutoff's
  version (a file of the cutoff's version that is gone at the head was removed by one of them);
- every file named by a ratified commit the catalog has not published, whatever its age;
- the head's tombstones not older than the cutoff (delta-spark's rule, kept for parity).

Timestamps are in-commit timestamps where the table has them (found by binary search: they
strictly increase), else commit-file modification times made monotonic as delta-spark does; a
catalog's unpublished commits carry the catalog's timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..cleanup.plan import adjusted_commit_timestamps
from ..errors import CorruptLogError
from ..log_segment.segment import CatalogCommit, JsonSource
from ..model.data_paths import DataPathResolver
from ..model.paths import ParsedLogPath
from ..replay.ndjson import parse_ndjson
from ..replay.version_facts import in_commit_timestamp
from ..storage import LogStore
from .paths import dv_file_path, names_of, protected_name_array

__all__ = ["FileActions", "read_file_actions", "version_at", "dv_paths", "ReferencedSet"]

# JSON commits are parsed in batches of about this many bytes (memory bounded by the batch).
BATCH_BYTES = 16 << 20


def dv_paths(dv_column: pa.ChunkedArray | pa.Array) -> list[str]:
    """The log paths of the on-disk deletion vectors in a ``deletionVector`` column."""
    if isinstance(dv_column, pa.ChunkedArray):
        dv_column = dv_column.combine_chunks() if dv_column.num_chunks else pa.array([], dv_column.type)
    if len(dv_column) == 0 or dv_column.null_count == len(dv_column):
        return []
    kinds = pc.struct_field(dv_column, "storageType")
    on_disk = pc.and_kleene(pc.is_valid(dv_column), pc.is_in(kinds, value_set=pa.array(["u", "p"])))
    rows = dv_column.filter(pc.fill_null(on_disk, False)).to_pylist()
    return [p for p in (dv_file_path(r) for r in rows) if p]


@dataclass
class FileActions:
    """The file actions of some commits: adds and removes (``path``, ``size``,
    ``deletionTimestamp``, deletion vector file path) and ``cdc`` files (``path``, ``size``)."""

    add_paths: list[pa.Array] = field(default_factory=list)
    add_dv_paths: list[str] = field(default_factory=list)
    removes: list[pa.Table] = field(default_factory=list)  # path, size, deletionTimestamp, deletionVector
    cdc: list[tuple[str, int]] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def remove_table(self) -> pa.Table:
        cols = ["path", "size", "deletionTimestamp", "deletionVector"]
        if not self.removes:
            return pa.table({"path": pa.array([], pa.string()), "size": pa.array([], pa.int64()), "deletionTimestamp": pa.array([], pa.int64())})
        return pa.concat_tables([t.select(cols) for t in self.removes])

    def protected(self, resolver: DataPathResolver) -> pa.Array:
        """Every name these actions protect (data files, deletion vectors, change data files)."""
        parts = [protected_name_array(a, resolver) for a in self.add_paths]
        removes = self.remove_table()
        parts.append(protected_name_array(removes.column("path"), resolver))
        small = names_of(self.add_dv_paths, resolver)
        if "deletionVector" in removes.column_names:
            small |= names_of(dv_paths(removes.column("deletionVector")), resolver)
        small |= names_of((p for p, _ in self.cdc), resolver)
        parts.append(pa.array(sorted(small), pa.string()))
        return pa.concat_arrays(parts) if parts else pa.array([], pa.string())


def _source_name(store: LogStore, source: JsonSource) -> str:
    if isinstance(source, CatalogCommit):
        return store.display(source.file_name) if source.file_name else source.source_name
    return store.display(source.name)


def _read_sources(store: LogStore, sources: Sequence[JsonSource]) -> list[tuple[str, bytes]]:
    published = [s.name for s in sources if isinstance(s, ParsedLogPath)]
    staged = [s.file_name for s in sources if isinstance(s, CatalogCommit) and s.inline_content is None]
    contents = store.read_many(published + staged)
    out = []
    for s in sources:
        if isinstance(s, CatalogCommit):
            data = s.inline_content if s.inline_content is not None else contents[s.file_name]
        else:
            data = contents[s.name]
        out.append((_source_name(store, s), bytes(data)))
    return out


def read_file_actions(store: LogStore, sources: Sequence[JsonSource], into: FileActions | None = None) -> FileActions:
    """The file actions of ``sources`` (published commits and catalog commits), batch by batch."""
    out = into if into is not None else FileActions()
    batch: list[JsonSource] = []
    size = 0

    def flush() -> None:
        if not batch:
            return
        parsed = parse_ndjson(_read_sources(store, batch), keys_only=True, keep_lines=False)
        out.add_paths.append(parsed.adds.column("path").combine_chunks())
        out.add_dv_paths.extend(dv_paths(parsed.adds.column("deletionVector")))
        out.removes.append(parsed.removes.select(["path", "size", "deletionTimestamp", "deletionVector"]))
        for _, s, line, action in parsed.others:
            cdc = action.get("cdc")
            if cdc is None:
                continue
            if not isinstance(cdc, dict) or not isinstance(cdc.get("path"), str):
                name = _source_name(store, batch[s])
                raise CorruptLogError(f"{name}: line {line}: cdc action without a path", path=name, line=line)
            out.cdc.append((cdc["path"], int(cdc.get("size") or 0)))
        out.versions.extend(s.version for s in batch)
        batch.clear()

    for s in sources:
        n = s.size if isinstance(s, ParsedLogPath) else (len(s.inline_content) if s.inline_content is not None else s.size)
        if batch and size + n > BATCH_BYTES:
            flush()
            size = 0
        batch.append(s)
        size += n
    flush()
    return out


def version_at(
    store: LogStore,
    commits: Sequence[ParsedLogPath],
    pending: Sequence[CatalogCommit],
    cutoff_ms: int,
    ict_from: int | None,
) -> tuple[int | None, dict[int, int]]:
    """The newest version whose timestamp is at or before ``cutoff_ms`` (None: every commit is
    newer), and the timestamps read on the way (version → ms)."""
    known: dict[int, int] = {}
    published = sorted((c for c in commits), key=lambda c: c.version)
    pending_sorted = sorted(pending, key=lambda c: c.version)
    for c in reversed(pending_sorted):
        ts = c.timestamp if c.timestamp >= 0 else c.modification_time
        known[c.version] = ts
        if ts <= cutoff_ms:
            return c.version, known
    pre = [c for c in published if ict_from is None or c.version < ict_from]
    ict_era = [c for c in published if ict_from is not None and c.version >= ict_from]
    if ict_era:
        found = _ict_search(store, ict_era, cutoff_ms, known)
        if found is not None:
            return found, known
    adjusted = adjusted_commit_timestamps(pre)
    known.update(adjusted)
    best = None
    for v, ts in adjusted.items():
        if ts <= cutoff_ms:
            best = v
    return best, known


def _ict_search(store: LogStore, commits: Sequence[ParsedLogPath], cutoff_ms: int, known: dict[int, int]) -> int | None:
    """Binary search over commits whose in-commit timestamps strictly increase."""

    def ict(i: int) -> int:
        c = commits[i]
        head = store.read_heads([c.name])[c.name]
        try:
            value = in_commit_timestamp(json.loads(head).get("commitInfo"))
        except (ValueError, AttributeError):
            value = None
        if value is None:
            raise CorruptLogError(f"{store.display(c.name)}: in-commit timestamps are enabled but the first action has none", path=c.name, line=1)
        known[c.version] = value
        return value

    lo, hi = 0, len(commits) - 1
    if ict(lo) > cutoff_ms:
        return None
    while lo < hi:  # invariant: commits[lo] <= cutoff
        mid = (lo + hi + 1) // 2
        if ict(mid) <= cutoff_ms:
            lo = mid
        else:
            hi = mid - 1
    return commits[lo].version


@dataclass
class ReferencedSet:
    """The names (relative to the table root) VACUUM keeps, as one Arrow array of unique names."""

    names: pa.Array

    @classmethod
    def build(cls, parts: Iterable[pa.Array]) -> ReferencedSet:
        arrays = [p for p in parts if len(p)]
        if not arrays:
            return cls(pa.array([], pa.string()))
        # One array (most tables: the live files' names) is deduplicated in place, without a copy first.
        return cls(pc.unique(arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)))

    def __len__(self) -> int:
        return len(self.names)

    def contains(self, paths: pa.Array | pa.ChunkedArray) -> Any:
        return pc.is_in(paths, value_set=self.names)
