"""VACUUM's plan: which data-side files go, from the table's head and (FULL) a listing of its root.

- **FULL**: every listed file (``listing``) older than the cutoff by storage mtime that no retained
  version references (``referenced``), and empty directories older than the cutoff.
- **LITE**: the files the log says were removed — ``remove`` actions (with their deletion vectors)
  and ``cdc`` files of the commits from the last VACUUM's horizon (``_last_vacuum_info``) + 1 up to
  the cutoff's version — that no retained version references. Needs every one of those commits;
  when metadata cleanup removed one, ``LiteVacuumUnavailableError`` says to run FULL.

The plan never lists a path outside the table root, a hidden name, the log, a symbolic link or
anything below one. Its files are an Arrow table; counts and bytes come per partition.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from .._runtime.memory import uses_log_operation_memory
from ..errors import DataPathError, DeltaLogError, InvalidOptionError
from ..log_segment.segment import CatalogCommit
from ..model.data_paths import DataPathResolver
from ..model.features import check_write_supported
from ..replay.snapshot import Snapshot
from ..storage import LogStore
from .last_vacuum import LastVacuumInfo
from .listing import DIR_SCHEMA, TableListing
from .paths import HiddenNames, names_of, protected_name_array
from .referenced import ReferencedSet, dv_paths, read_file_actions, version_at

__all__ = ["VacuumMode", "VacuumPlan", "LiteVacuumUnavailableError", "plan_vacuum", "hidden_names_for", "PLAN_SCHEMA"]

VacuumMode = Literal["full", "lite"]
PLAN_SCHEMA = pa.schema([pa.field("path", pa.string()), pa.field("size", pa.int64()), pa.field("mtime", pa.int64())])
TOP_PARTITIONS = 20  # partitions named in a report (the plan keeps them all)


class LiteVacuumUnavailableError(DeltaLogError):
    """LITE cannot see every file it should delete (commits it needs are gone): run FULL."""


def hidden_names_for(snapshot: Snapshot) -> HiddenNames:
    formats = snapshot.metadata.configuration.get("delta.universalFormat.enabledFormats", "")
    iceberg = "iceberg" in {f.strip().lower() for f in str(formats).split(",")}
    return HiddenNames(list(snapshot.metadata.partition_columns), iceberg_metadata_hidden=iceberg)


@dataclass(frozen=True)
class VacuumPlan:
    table_uri: str
    mode: VacuumMode
    now_ms: int
    retention_ms: int
    cutoff_ms: int  # files older than this (by storage mtime) may go
    head_version: int  # the catalog's latest ratified version
    published_version: int
    retained_from: int | None  # the version live at the cutoff (None: every version is newer)
    horizon: int | None  # what _last_vacuum_info records once this plan is executed
    deletions: pa.Table = field(default_factory=PLAN_SCHEMA.empty_table)  # files, sorted by path
    empty_dirs: tuple[str, ...] = ()
    shadows: tuple[str, ...] = ()  # Hadoop checksum shadows of planned files (deleted with them)
    referenced: int = 0
    listed: int = 0
    kept_young: tuple[int, int] = (0, 0)  # untracked files kept for being younger than the cutoff
    links: tuple[str, ...] = ()  # symbolic links under the root (never followed or deleted)
    by_partition: tuple[tuple[str, int, int], ...] = ()  # (partition, files, bytes), most bytes first
    lite_range: tuple[int, int] | None = None
    pending_versions: tuple[int, ...] = ()  # ratified, unpublished: their files are kept at any age
    listing_source: str = "listing"
    listing_client: str | None = None  # which client listed an object store ("arrow": C++; "s3fs", …)
    warnings: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return int(self.deletions.num_rows)

    @property
    def bytes(self) -> int:
        total = pc.sum(self.deletions.column("size")).as_py() if self.deletions.num_rows else 0
        return int(total or 0)

    def paths(self) -> list[str]:
        return [str(p) for p in self.deletions.column("path").to_pylist()]

    def summary_dict(self, top: int = TOP_PARTITIONS) -> dict[str, Any]:
        """Small facts of the plan (no file list): for XCom records and ``--json``."""
        return {
            "mode": self.mode,
            "files": self.count,
            "bytes": self.bytes,
            "empty_dirs": len(self.empty_dirs),
            "shadows": len(self.shadows),
            "referenced": self.referenced,
            "listed": self.listed,
            "kept_young_files": self.kept_young[0],
            "kept_young_bytes": self.kept_young[1],
            "links_skipped": len(self.links),
            "head_version": self.head_version,
            "published_version": self.published_version,
            "retained_from_version": self.retained_from,
            "pending_versions": len(self.pending_versions),
            "lite_range": list(self.lite_range) if self.lite_range else None,
            "horizon": self.horizon,
            "partitions": len(self.by_partition),
            "by_partition": [{"partition": p, "files": n, "bytes": b} for p, n, b in self.by_partition[:top]],
            "listing_source": self.listing_source,
            "listing_client": self.listing_client,
            "warnings": list(self.warnings),
        }


def _partition_prefix_regex(partition_columns: list[str]) -> str | None:
    if not partition_columns:
        return None
    inner = "/".join(f"{re.escape(c)}=[^/]*" for c in partition_columns)
    return rf"^(?P<p>(?:_change_data/)?{inner})/"


def _by_partition(deletions: pa.Table, partition_columns: list[str]) -> tuple[tuple[str, int, int], ...]:
    if deletions.num_rows == 0:
        return ()
    pattern = _partition_prefix_regex(partition_columns)
    if pattern is None:
        keys = pa.array([""] * deletions.num_rows, pa.string())
    else:
        extracted = pc.extract_regex(deletions.column("path"), pattern)
        keys = pc.fill_null(pc.struct_field(extracted, "p"), "")
    grouped = pa.table({"p": keys, "size": deletions.column("size")}).group_by("p").aggregate([("size", "count"), ("size", "sum")])
    rows = sorted(zip(grouped.column("p").to_pylist(), grouped.column("size_count").to_pylist(), grouped.column("size_sum").to_pylist(), strict=True),
                  key=lambda r: (-(r[2] or 0), r[0]))
    return tuple((p, int(n), int(b or 0)) for p, n, b in rows)


def _retained_sources(snapshot: Snapshot, retained_from: int | None) -> tuple[list[Any], list[CatalogCommit]]:
    """Commits after the cutoff's version (published ones from the listing, catalog commits from
    the head's segment), and the catalog's unpublished commits (all of them)."""
    pending = [d for d in snapshot.segment.deltas if isinstance(d, CatalogCommit)]
    pending_versions = {c.version for c in pending}
    head = snapshot.version
    floor = -1 if retained_from is None else retained_from
    published = [c for c in snapshot.segment.files.commits if floor < c.version <= head and c.version not in pending_versions]
    return sorted(published, key=lambda c: c.version), pending


def _lite_candidates(
    store: LogStore,
    snapshot: Snapshot,
    retained_from: int | None,
    last: LastVacuumInfo | None,
    resolver: DataPathResolver,
) -> tuple[pa.Table, tuple[int, int] | None]:
    """Files the commits ``[horizon + 1, retained_from]`` removed (with their deletion vectors)
    or wrote as change data, as ``(path, size, null mtime)``; the range read."""
    empty = PLAN_SCHEMA.empty_table()
    if retained_from is None:
        return empty, None  # every commit is inside the retention: nothing is outside it yet
    horizon = last.horizon if last is not None and last.horizon is not None and last.horizon <= snapshot.version else None
    start = 0 if horizon is None else horizon + 1
    if start > retained_from:
        return empty, None
    pending = {d.version: d for d in snapshot.segment.deltas if isinstance(d, CatalogCommit)}
    published = {c.version: c for c in snapshot.segment.files.commits}
    sources: list[Any] = []
    for v in range(start, retained_from + 1):
        source = pending.get(v) or published.get(v)
        if source is None:
            why = "no VACUUM recorded in _last_vacuum_info" if horizon is None else f"_last_vacuum_info says v{horizon}"
            if last is not None and last.problem:
                why = f"_last_vacuum_info cannot be used ({last.problem})"
            raise LiteVacuumUnavailableError(
                f"{store.uri}: VACUUM LITE needs commits {start}..{retained_from} ({why}), but commit {v} is gone "
                f"(metadata cleanup removed it); run a FULL VACUUM once",
                path=store.log_dir,
            )
        sources.append(source)
    actions = read_file_actions(store, sources)
    removes = actions.remove_table()
    rows: dict[str, int] = {}
    for raw, size in zip(removes.column("path").to_pylist(), removes.column("size").to_pylist(), strict=True):
        _candidate(rows, raw, size, resolver)
    if "deletionVector" in removes.column_names:
        dvs = removes.column("deletionVector").combine_chunks() if removes.num_rows else None
        if dvs is not None and dvs.null_count < len(dvs):
            sizes = pc.struct_field(dvs, "sizeInBytes").to_pylist()
            for raw, row_size in zip([_dv_or_none(d) for d in dvs.to_pylist()], sizes, strict=True):
                if raw:
                    _candidate(rows, raw, row_size, resolver)
    for raw, size in actions.cdc:
        _candidate(rows, raw, size, resolver)
    names = sorted(rows)
    table = pa.table([pa.array(names, pa.string()), pa.array([rows[n] for n in names], pa.int64()), pa.nulls(len(names), pa.int64())], schema=PLAN_SCHEMA)
    return table, (start, retained_from)


def _dv_or_none(dv: Any) -> str | None:
    paths = dv_paths(pa.array([dv])) if dv else []
    return paths[0] if paths else None


def _candidate(rows: dict[str, int], raw: str | None, size: int | None, resolver: DataPathResolver) -> None:
    """A LITE candidate is the one file the resolver names; a path it refuses is never deleted."""
    if not raw:
        return
    try:
        rel = resolver.resolve(raw).relative
    except DataPathError:
        return
    rows[rel] = max(rows.get(rel, 0), int(size or 0))


@uses_log_operation_memory
def plan_vacuum(
    store: LogStore,
    snapshot: Snapshot,
    *,
    mode: VacuumMode = "full",
    retention_ms: int | None = None,
    now_ms: int | None = None,
    listing: TableListing | None = None,
    last_vacuum: LastVacuumInfo | None = None,
    published_version: int | None = None,
) -> VacuumPlan:
    """Plan (never delete) the VACUUM of ``snapshot``'s table at the catalog's head (see the module
    docstring). ``listing`` is required for FULL. The protocol must be readable and writable by
    this library (``vacuumProtocolCheck``: checked on every table)."""
    if mode not in ("full", "lite"):
        raise InvalidOptionError(f"VACUUM mode must be full or lite, got {mode!r}", option="mode")
    check_write_supported(snapshot.protocol, operation=f"VACUUM of {store.uri}", path=store.uri)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    retention = snapshot.properties.deleted_file_retention_ms if retention_ms is None else retention_ms
    if retention < 0:
        raise InvalidOptionError(f"{store.uri}: a VACUUM retention must not be negative, got {retention / 3_600_000:g} hours", option="retention")
    cutoff = now - retention
    resolver = DataPathResolver.for_store(store)
    segment = snapshot.segment
    pending = [d for d in segment.deltas if isinstance(d, CatalogCommit)]
    ict_from = snapshot.ict_enablement_version
    retained_from, _ = version_at(store, [c for c in segment.files.commits if c.version <= snapshot.version], pending, cutoff, ict_from)

    # Everything the retained versions read.
    published_sources, pending_sources = _retained_sources(snapshot, retained_from)
    actions = read_file_actions(store, [*published_sources, *pending_sources])
    live = snapshot.files
    tombstones = snapshot.tombstones
    if tombstones.num_rows:  # delta-spark's rule too: tombstones not older than the cutoff
        tombstones = tombstones.filter(pc.greater_equal(pc.fill_null(tombstones.column("deletionTimestamp"), 0), cutoff))
    dv_names = names_of([*dv_paths(live.column("deletionVector")), *dv_paths(tombstones.column("deletionVector"))], resolver)
    referenced = ReferencedSet.build(
        [
            protected_name_array(live.column("path"), resolver),
            protected_name_array(tombstones.column("path"), resolver),
            pa.array(sorted(dv_names), pa.string()),
            actions.protected(resolver),
        ]
    )
    partition_columns = list(snapshot.metadata.partition_columns)
    published = segment.published_version if published_version is None else published_version
    base: dict[str, Any] = dict(
        table_uri=store.uri, mode=mode, now_ms=now, retention_ms=retention, cutoff_ms=cutoff, head_version=snapshot.version,
        published_version=published, retained_from=retained_from, referenced=len(referenced),
        pending_versions=tuple(c.version for c in pending),
    )
    previous = last_vacuum.horizon if last_vacuum is not None and last_vacuum.horizon is not None and last_vacuum.horizon <= snapshot.version else None
    horizon = max((h for h in (previous, retained_from) if h is not None), default=None)
    if mode == "lite":
        candidates, lite_range = _lite_candidates(store, snapshot, retained_from, last_vacuum, resolver)
        keep = referenced.contains(candidates.column("path")) if candidates.num_rows else pa.array([], pa.bool_())
        deletions = candidates.filter(pc.invert(keep)) if candidates.num_rows else candidates
        return VacuumPlan(**base, horizon=horizon, deletions=deletions, by_partition=_by_partition(deletions, partition_columns),
                          lite_range=lite_range, listing_source="log")
    if listing is None:
        raise InvalidOptionError("a FULL VACUUM plan needs a listing of the table root", option="listing")
    files = listing.files
    untracked = files.filter(pc.invert(referenced.contains(files.column("path")))) if files.num_rows else files
    untracked = listing.with_stats(untracked)  # a names-only listing: sizes and mtimes of these alone
    old = pc.less(untracked.column("mtime"), cutoff) if untracked.num_rows else pa.array([], pa.bool_())
    deletions = untracked.filter(old).sort_by("path") if untracked.num_rows else PLAN_SCHEMA.empty_table()
    young = untracked.filter(pc.invert(old)) if untracked.num_rows else untracked
    young_bytes = int(pc.sum(young.column("size")).as_py() or 0) if young.num_rows else 0
    dirs = listing.empty_dirs
    old_dirs = dirs.filter(pc.less(dirs.column("mtime"), cutoff)) if dirs.num_rows else DIR_SCHEMA.empty_table()
    going = set(deletions.column("path").to_pylist()) if listing.shadows.num_rows else set()
    shadows = tuple(sorted(s for s in listing.shadows.column("path").to_pylist() if _shadowed(s) in going))
    if listing.links:
        base["warnings"] = (f"{len(listing.links)} symbolic link(s) under the table root were neither followed nor deleted",)
    return VacuumPlan(
        **base, horizon=horizon, deletions=deletions.cast(PLAN_SCHEMA) if deletions.schema != PLAN_SCHEMA else deletions,
        empty_dirs=tuple(sorted(old_dirs.column("path").to_pylist(), key=lambda p: (-p.count("/"), p))),
        shadows=shadows, listed=listing.num_files, kept_young=(int(young.num_rows), young_bytes), links=listing.links,
        by_partition=_by_partition(deletions, partition_columns), listing_source=listing.source,
        listing_client=listing.client,
    )


def _shadowed(shadow_path: str) -> str:
    directory, _, name = shadow_path.rpartition("/")
    target = name[1:-4]
    return f"{directory}/{target}" if directory else target

