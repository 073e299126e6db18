"""Read and validate, in full, the log tail a version's state depends on: every commit (and chosen
compaction) after its checkpoint, up to the version — what a writer must be able to read before it
writes or deletes anything on the strength of that state.

``load_table_state`` (protocol and metadata for the gates) skips ``add``/``remove`` lines unparsed
for speed; a truncated, mistyped or self-contradicting commit at the table's head would then go
unnoticed while cleanup deletes files on its word. ``validate_tail`` closes that gap with the one
strict validation (``model.validation``): the vectorised NDJSON reader for large tails, or the
line-by-line validator for small ones and in a process without numpy (the cleanup command keeps
numpy out). Memory stays bounded by one batch; nothing parsed is kept.

A file is read once per process: the strict reader records every log file it parsed without error
(name, size and modification time: log files are never rewritten) on the store, and this check
skips those — a checkpoint or compaction run validates its own segment while reading it, and only
the rest of the tail is read here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..log_segment.segment import CatalogCommit, JsonSource, LogSegment, is_single_commit
from ..model.partition_keys import check_partition_keys, partition_value_keys
from ..model.paths import ParsedLogPath
from ..model.validation import CommitRules, canonical_path, loads_action, require_commit_content
from ..storage import LogStore

__all__ = ["validate_tail", "Partitioning", "tail_sources", "mark_validated", "SMALL_TAIL_BYTES"]

# Below this many bytes the line-by-line validator is as fast as setting up the columnar one.
SMALL_TAIL_BYTES = 1 << 20
# Bytes of commits per columnar batch: bounds the memory of a check of a long tail.
_BATCH_BYTES = 8 << 20


def _identity(source: JsonSource) -> tuple[str, int, int] | None:
    return (source.name, source.size, source.modification_time) if isinstance(source, ParsedLogPath) else None


def mark_validated(store: LogStore, sources: Sequence[JsonSource]) -> None:
    """Record published log files read and validated in full by this process."""
    store.validated_files.update(key for s in sources if (key := _identity(s)) is not None)


def tail_sources(segment: LogSegment) -> list[JsonSource]:
    """The deltas of ``segment`` and, for each compaction among them, the commits it stands for:
    a reader that cannot use the compaction falls back to them."""
    out: list[JsonSource] = list(segment.deltas)
    covered = [(d.version, d.end_version) for d in segment.deltas if isinstance(d, ParsedLogPath) and d.end_version != d.version]
    if covered:
        out += [c for c in segment.files.commits if any(a <= c.version <= b for a, b in covered)]
    return out


@dataclass(frozen=True)
class Partitioning:
    """The partition columns and the ``partitionValues`` keys adds may carry under one metaData
    (``partition_value_keys``); ``keys`` None when unknown (nothing is checked)."""

    columns: tuple[str, ...] = ()
    keys: frozenset[str] | None = None

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> Partitioning:
        if metadata is None:
            return cls()
        return cls(tuple(metadata.get("partitionColumns") or ()), partition_value_keys(metadata))


def validate_tail(
    store: LogStore, segment: LogSegment, newest: Partitioning, newest_version: int | None, before: Callable[[], Partitioning],
) -> int:
    """Validate every source ``segment``'s state is built from (``tail_sources``) not validated
    before by this process; ``CorruptLogError`` names the first bad file and line. Returns the
    number of bytes read.

    Adds are checked against the metaData in effect at their commit: ``before()`` (the checkpoint's:
    ``table_state.metadata_before_tail``) until a metaData of the tail, that one from its commit
    on; a compaction's commits from the metaData in effect before the compaction. ``newest`` is the
    state's, found at ``newest_version`` (``TableState.metadata_version``; None: unknown). Sources
    this process validated are skipped only where that leaves the partitioning known: when every
    source left to read comes at or after ``newest_version``; otherwise the tail is read from its start."""
    deltas = list(segment.deltas)

    def done(source: JsonSource) -> bool:
        key = _identity(source)
        return key is not None and key in store.validated_files

    first = next((i for i, d in enumerate(deltas) if not done(d)), len(deltas))
    covered = {i: [c for c in segment.files.commits if d.version <= c.version <= d.end_version and not done(c)]
               for i, d in enumerate(deltas) if isinstance(d, ParsedLogPath) and d.end_version != d.version}
    covered = {i: commits for i, commits in covered.items() if commits}
    if first == len(deltas) and not covered:
        return 0
    # Skipping validated files keeps the partitioning known when `newest` holds from `first` on and
    # no compaction before `first` has commits left to read; else the tail is read from its start.
    skip = 0 < first < len(deltas) and newest_version is not None and newest_version <= deltas[first].version and \
        min(covered, default=first) >= first
    begin, at = (first, newest) if skip else (0, before())
    todo = [d for d in deltas[begin:] if not (skip and done(d))]
    size = sum(_size(s) for s in [*todo, *(c for cs in covered.values() for c in cs)])
    check = _columnar if size > SMALL_TAIL_BYTES and _has_numpy() else _line_by_line
    read = 0
    run: list[JsonSource] = []
    for i in range(begin, len(deltas)):
        wanted = not (skip and done(deltas[i]))
        if i not in covered:
            if wanted:
                run.append(deltas[i])
            continue
        n, at = check(store, run, at) if run else (0, at)
        before_compaction = at
        n2, at = check(store, [deltas[i]], at) if wanted else (0, at)
        n3, _ = check(store, covered[i], before_compaction)  # what a reader falls back to
        read += n + n2 + n3
        run = []
    if run:
        read += check(store, run, at)[0]
    return read


def _size(source: JsonSource) -> int:
    return source.size if isinstance(source, ParsedLogPath) else len(source.inline_content or b"") or source.size


def _has_numpy() -> bool:
    try:
        import numpy  # noqa: F401  (the columnar reader needs it; a cleanup process may keep it out)
    except ImportError:
        return False
    return True


def _contents(store: LogStore, sources: Sequence[JsonSource]) -> Iterator[tuple[JsonSource, str, bytes]]:
    for s in sources:
        if isinstance(s, CatalogCommit):
            if s.inline_content is not None:
                yield s, s.source_name, s.inline_content
            else:
                yield s, store.display(s.file_name), store.read(s.file_name)
        else:
            yield s, store.display(s.name), store.read(s.name)


def _line_by_line(store: LogStore, sources: Sequence[JsonSource], at: Partitioning) -> tuple[int, Partitioning]:
    """Each line validated; adds' partition-value keys checked against the metadata in effect:
    ``at`` until a metaData, that one's from its commit on. Returns the bytes read and the
    partitioning after the last source."""
    read = 0
    done: list[JsonSource] = []
    for source, name, data in _contents(store, sources):
        read += len(data)
        single = is_single_commit(source)
        if single:
            require_commit_content(name, data)
        rules = CommitRules(name, canonical_path)
        adds = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            action = loads_action(raw, name, number)
            kind = next(iter(action))
            if single or kind not in ("add", "remove"):
                rules.feed(kind, action[kind], number)
            if kind == "metaData":  # it rules its whole commit, adds before it included
                at = Partitioning.of(action[kind])
            elif kind == "add":
                adds.append((number, action[kind]))
        if at.keys is not None:
            for number, body in adds:
                check_partition_keys(body, at.keys, name, number)
        done.append(source)
    mark_validated(store, done)
    return read, at


def _columnar(store: LogStore, sources: Sequence[JsonSource], at: Partitioning) -> tuple[int, Partitioning]:
    from .ndjson import parse_ndjson  # numpy and pyarrow's JSON reader: only for a large tail

    read = 0
    batch: list[tuple[JsonSource, str, bytes]] = []
    size = 0

    def flush() -> None:
        nonlocal at
        for source, name, data in batch:
            if is_single_commit(source):
                require_commit_content(name, data)
        part = parse_ndjson([(n, d) for _, n, d in batch], keys_only=True, keep_lines=False, partition_columns=at.columns,
                            single_commit=[is_single_commit(s) for s, _, _ in batch], partition_keys=at.keys)
        for _, _, _, action in part.others:  # the next batch starts under this one's last metaData
            if action.get("metaData") is not None:
                at = Partitioning.of(action["metaData"])
        del part
        mark_validated(store, [s for s, _, _ in batch])
        batch.clear()

    for item in _contents(store, sources):
        batch.append(item)
        size += len(item[2])
        read += len(item[2])
        if size >= _BATCH_BYTES:
            flush()
            size = 0
    if batch:
        flush()
    return read, at
