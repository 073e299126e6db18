"""Plan an OPTIMIZE (bin-packing compaction) of one snapshot: which files, in which bins.

As delta-spark's ``OptimizeExecutor``: per partition, the candidates are the live files smaller
than the minimum size, and files whose deletion vector deletes more than
``max_deleted_rows_ratio`` (0.05) of their rows (or that have a DV but no ``numRecords``); sorted
by size, they are packed greedily into bins of at most the target size. A bin of one file is
dropped — rewriting it would change nothing — unless its deletion vector purges enough rows
(delta-spark drops those too; purging them is the point of rewriting them). Sizes default to
``delta.targetFileSize`` when the table sets it, else delta-spark's defaults (1 GiB for both the
minimum and the target: ``spark.databricks.delta.optimize.minFileSize``/``maxFileSize``).

Beyond delta-spark: an optional partition predicate, a byte budget per run (bins in a stable
order — partitions sorted by value — until the next would exceed it), and files of clustered
tables: files a clustering already placed (``clusteringProvider`` set) are never candidates, so a
compaction never undoes clustering; only not-yet-clustered files are packed together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..datafiles.stats import stats_num_records
from ..errors import InvalidOptionError
from .predicate import PartitionPredicate

__all__ = ["parse_size", "OptimizeOptions", "Bin", "OptimizePlan", "plan_optimize", "DEFAULT_FILE_SIZE", "DEFAULT_MAX_DELETED_ROWS_RATIO", "file_sizes_for"]

DEFAULT_FILE_SIZE = 1 << 30  # delta-spark's optimize.minFileSize and optimize.maxFileSize
DEFAULT_MAX_DELETED_ROWS_RATIO = 0.05  # delta-spark's optimize.maxDeletedRowsRatio
TARGET_FILE_SIZE = "delta.targetFileSize"


@dataclass(frozen=True)
class OptimizeOptions:
    min_file_size: int | None = None  # None: from the table (delta.targetFileSize) or the default
    target_file_size: int | None = None
    max_deleted_rows_ratio: float = DEFAULT_MAX_DELETED_ROWS_RATIO
    predicate: PartitionPredicate | None = None
    max_bytes: int | None = None  # the run's budget of input bytes; None: no limit

    def __post_init__(self) -> None:
        for name in ("min_file_size", "target_file_size", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise InvalidOptionError(f"{name} must be positive, got {value}", option=name)
        if not 0 <= self.max_deleted_rows_ratio <= 1:
            raise InvalidOptionError(f"max_deleted_rows_ratio must be within [0, 1], got {self.max_deleted_rows_ratio}", option="max_deleted_rows_ratio")


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_size(value: int | str, option: str) -> int:
    """``134217728``, ``128MB``, ``128 MiB``, ``1g`` → bytes (binary units, as delta-spark's
    ``delta.targetFileSize`` and Spark's byte strings); positive, else ``InvalidOptionError``."""
    if isinstance(value, bool):
        raise InvalidOptionError(f"{option}: expected a size in bytes, got {value!r}", option=option)
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE.match(str(value).lower())
        if not m or m.group(2) not in _UNITS:
            raise InvalidOptionError(f"{option}: expected a size such as 134217728, 128MB or 1GiB, got {value!r}", option=option)
        size = int(float(m.group(1)) * _UNITS[m.group(2)])
    if size <= 0:
        raise InvalidOptionError(f"{option}: a size must be positive, got {value!r}", option=option)
    return size


def _size_property(configuration: Mapping[str, str]) -> int | None:
    raw = configuration.get(TARGET_FILE_SIZE)
    return None if raw is None else parse_size(str(raw), TARGET_FILE_SIZE)


def file_sizes_for(options: OptimizeOptions, configuration: Mapping[str, str]) -> tuple[int, int]:
    """(minimum size, target size): the options', else ``delta.targetFileSize``, else 1 GiB."""
    table = _size_property(configuration)
    target = options.target_file_size or table or DEFAULT_FILE_SIZE
    minimum = options.min_file_size or table or (target if options.target_file_size else DEFAULT_FILE_SIZE)
    return minimum, target


@dataclass(frozen=True)
class Bin:
    """Files of one partition rewritten into one file. ``files`` are the live ``add`` actions
    (maps as dicts); ``expected_bytes_out`` scales the input by the share of live rows."""

    index: int
    partition_values: Mapping[str, str | None]
    files: tuple[Mapping[str, Any], ...]
    bytes_in: int
    expected_bytes_out: int
    deleted_rows: int = 0

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f["path"] for f in self.files)

    def describe(self) -> dict[str, Any]:
        return {
            "partition": dict(self.partition_values),
            "files": len(self.files),
            "bytes_in": self.bytes_in,
            "expected_bytes_out": self.expected_bytes_out,
            "deleted_rows": self.deleted_rows,
        }


@dataclass(frozen=True)
class OptimizePlan:
    table_uri: str
    version: int
    min_file_size: int
    target_file_size: int
    bins: tuple[Bin, ...]
    considered_files: int  # live files the predicate selected
    candidate_files: int  # below the minimum size or with too many deleted rows
    skipped_clustered_files: int = 0
    deferred_bins: tuple[Bin, ...] = ()  # over the budget: left for the next run
    predicate: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def files_in(self) -> int:
        return sum(len(b.files) for b in self.bins)

    @property
    def bytes_in(self) -> int:
        return sum(b.bytes_in for b in self.bins)

    @property
    def expected_bytes_out(self) -> int:
        return sum(b.expected_bytes_out for b in self.bins)

    @property
    def partitions(self) -> int:
        return len({tuple(sorted(b.partition_values.items(), key=lambda kv: kv[0])) for b in self.bins})

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "bins": len(self.bins),
            "files_in": self.files_in,
            "bytes_in": self.bytes_in,
            "expected_files_out": len(self.bins),
            "expected_bytes_out": self.expected_bytes_out,
            "partitions": self.partitions,
            "considered_files": self.considered_files,
            "candidate_files": self.candidate_files,
            "deferred_bins": len(self.deferred_bins),
            "deferred_bytes": sum(b.bytes_in for b in self.deferred_bins),
            "skipped_clustered_files": self.skipped_clustered_files,
            "min_file_size": self.min_file_size,
            "target_file_size": self.target_file_size,
            "predicate": self.predicate,
        }


def _num_records(add: Mapping[str, Any]) -> int | None:
    value = stats_num_records(add.get("stats"))
    return None if value is None else int(value)


def _deleted(add: Mapping[str, Any]) -> int:
    dv = add.get("deletionVector")
    return int(dv.get("cardinality") or 0) if dv else 0


def _purges_enough(add: Mapping[str, Any], ratio: float) -> bool:
    if not add.get("deletionVector"):
        return False
    records = _num_records(add)
    if records is None:
        return True  # delta-spark: a DV without numRecords is always rewritten (the output has stats)
    return records > 0 and _deleted(add) / records > ratio


def _sort_key(values: Mapping[str, str | None], columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple((values.get(c) is None, values.get(c) or "") for c in columns)


def plan_optimize(
    table_uri: str,
    version: int,
    adds: Sequence[Mapping[str, Any]],
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    options: OptimizeOptions,
    partition_keys: Sequence[str] | None = None,
) -> OptimizePlan:
    """Bins for the live files ``adds`` (``add`` actions, maps as dicts) of ``version``.

    ``partition_keys`` are the keys of ``partitionValues`` for ``partition_columns`` (their
    physical names under column mapping; default the column names). A bin keeps its files'
    ``partitionValues`` exactly as the log spells them."""
    minimum, target = file_sizes_for(options, configuration)
    keys = list(partition_keys or partition_columns)
    by_partition: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    values_of: dict[tuple[Any, ...], Mapping[str, str | None]] = {}
    considered = clustered = 0
    for add in adds:
        pv = add.get("partitionValues") or {}
        if options.predicate is not None and not options.predicate.matches({c: pv.get(k) for c, k in zip(partition_columns, keys, strict=True)}):
            continue
        considered += 1
        if add.get("clusteringProvider"):
            clustered += 1
            continue
        size = int(add.get("size") or 0)
        if size < minimum or _purges_enough(add, options.max_deleted_rows_ratio):
            key = tuple(pv.get(k) for k in keys)
            if key not in by_partition:
                by_partition[key], values_of[key] = [], dict(pv)
            by_partition[key].append(add)
    candidates = sum(len(v) for v in by_partition.values())
    bins: list[Bin] = []
    for key in sorted(by_partition, key=lambda k: _sort_key(values_of[k], keys)):
        files = sorted(by_partition[key], key=lambda a: (int(a.get("size") or 0), a["path"]))
        groups: list[list[Mapping[str, Any]]] = []
        current: list[Mapping[str, Any]] = []
        current_size = 0
        for add in files:
            size = int(add.get("size") or 0)
            if current and current_size + size > target:
                groups.append(current)
                current, current_size = [], 0
            current.append(add)
            current_size += size
        if current:
            groups.append(current)
        for group in groups:
            if len(group) == 1 and not _purges_enough(group[0], options.max_deleted_rows_ratio):
                continue
            bytes_in = sum(int(a.get("size") or 0) for a in group)
            deleted = sum(_deleted(a) for a in group)
            live_share = 1.0
            if deleted:  # the statistics are parsed only where deletion vectors shrink the output
                rows = [_num_records(a) for a in group]
                total = sum(r for r in rows if r is not None)
                live_share = 1.0 if None in rows or total == 0 else max(0.0, (total - deleted) / total)
            bins.append(Bin(len(bins), values_of[key], tuple(group), bytes_in, int(bytes_in * live_share), deleted))
    kept: list[Bin] = []
    deferred: list[Bin] = []
    spent = 0
    for b in bins:
        # Once a bin is over the budget every later one waits too (a stable order, no starvation);
        # a first bin alone over the budget still runs, or such a table could never progress.
        if options.max_bytes is not None and kept and (deferred or spent + b.bytes_in > options.max_bytes):
            deferred.append(b)
            continue
        kept.append(b)
        spent += b.bytes_in
    notes = []
    if clustered:
        notes.append(f"{clustered} clustered file(s) left as they are: compacting them would undo their clustering")
    return OptimizePlan(
        table_uri=table_uri, version=version, min_file_size=minimum, target_file_size=target, bins=tuple(kept),
        considered_files=considered, candidate_files=candidates, skipped_clustered_files=clustered,
        deferred_bins=tuple(deferred), predicate=options.predicate.text if options.predicate else None, notes=tuple(notes),
    )
