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

from collections.abc import Iterator, Sequence

from ..errors import CorruptLogError
from ..log_segment.segment import CatalogCommit, JsonSource, LogSegment, is_single_commit
from ..model.partition_keys import check_partition_keys, partition_value_keys
from ..model.paths import ParsedLogPath
from ..model.validation import CommitRules, canonical_path, loads_action, require_commit_content
from ..storage import LogStore

__all__ = ["validate_tail", "validate_sources", "tail_sources", "mark_validated", "SMALL_TAIL_BYTES"]

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


def validate_tail(
    store: LogStore, segment: LogSegment, partition_columns: Sequence[str] = (), partition_keys: frozenset[str] | None = None
) -> int:
    """Validate every source ``segment``'s state is built from (``tail_sources``) not validated
    before by this process; ``CorruptLogError`` names the first bad file and line. Returns the
    number of bytes read. ``partition_columns``, ``partition_keys``: the table's, as its state says
    (``partition_value_keys``: they apply where no commit of the tail changes the metadata)."""
    return validate_sources(store, tail_sources(segment), partition_columns, partition_keys)


def validate_sources(
    store: LogStore, sources: Sequence[JsonSource], partition_columns: Sequence[str] = (), partition_keys: frozenset[str] | None = None
) -> int:
    todo = [s for s in sources if _identity(s) not in store.validated_files or _identity(s) is None]
    if not todo:
        return 0
    size = sum(s.size if isinstance(s, ParsedLogPath) else len(s.inline_content or b"") or s.size for s in todo)
    if size > SMALL_TAIL_BYTES:
        try:
            import numpy  # noqa: F401  (the columnar reader needs it; a cleanup process may keep it out)
        except ImportError:
            pass
        else:
            # the state's keys hold for the tail unless a commit changes the metadata: one parse
            # sees that; batches of a longer tail only check adds after a metaData of their own
            return _columnar(store, todo, partition_columns, partition_keys if size <= _BATCH_BYTES else None)
    return _line_by_line(store, todo, partition_keys)


def _contents(store: LogStore, sources: Sequence[JsonSource]) -> Iterator[tuple[JsonSource, str, bytes]]:
    for s in sources:
        if isinstance(s, CatalogCommit):
            if s.inline_content is not None:
                yield s, s.source_name, s.inline_content
            else:
                yield s, store.display(s.file_name), store.read(s.file_name)
        else:
            yield s, store.display(s.name), store.read(s.name)


def _line_by_line(store: LogStore, sources: Sequence[JsonSource], partition_keys: frozenset[str] | None) -> int:
    """Each line validated; adds' partition-value keys checked against the metadata in effect: a
    metaData of the tail from its commit on, else ``partition_keys`` (the state's, which hold only
    when no commit of the tail changes the metadata: that error waits for the end of the tail)."""
    read = 0
    in_effect: frozenset[str] | None = None
    metadata_seen = False
    pending: CorruptLogError | None = None
    done: list[JsonSource] = []
    for source, name, data in _contents(store, sources):
        read += len(data)
        single = is_single_commit(source)
        if single:
            require_commit_content(name, data)
        rules = CommitRules(name, canonical_path)
        actions = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            action = loads_action(raw, name, number)
            kind = next(iter(action))
            if single or kind not in ("add", "remove"):
                rules.feed(kind, action[kind], number)
            if kind == "metaData":
                metadata_seen, in_effect = True, partition_value_keys(action[kind])
            actions.append((number, kind, action[kind]))
        allowed = in_effect if metadata_seen else partition_keys
        for number, kind, body in actions:
            if kind == "add" and allowed is not None:
                try:
                    check_partition_keys(body, allowed, name, number)
                except CorruptLogError as exc:
                    if metadata_seen:
                        raise
                    pending = pending or exc
        done.append(source)
    if pending is not None and not metadata_seen:
        raise pending
    mark_validated(store, done)
    return read


def _columnar(store: LogStore, sources: Sequence[JsonSource], partition_columns: Sequence[str], partition_keys: frozenset[str] | None) -> int:
    from .ndjson import parse_ndjson  # numpy and pyarrow's JSON reader: only for a large tail

    read = 0
    batch: list[tuple[JsonSource, str, bytes]] = []
    size = 0

    def flush() -> None:
        for source, name, data in batch:
            if is_single_commit(source):
                require_commit_content(name, data)
        parse_ndjson([(n, d) for _, n, d in batch], keys_only=True, keep_lines=False, partition_columns=partition_columns,
                     single_commit=[is_single_commit(s) for s, _, _ in batch], partition_keys=partition_keys)
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
    return read
