"""``TableState``: protocol, metadata and properties of one version without replaying file actions.

What cleanup planning, status, checkpoint due-ness and every feature gate need is a handful of
small actions, not the table's files. As delta-kernel-rs's protocol/metadata replay, the log is
read from the newest end backwards: the segment's commits (and compactions) after the checkpoint,
newest first, skipping ``add``/``remove`` lines unparsed, until both a ``protocol`` and a
``metaData`` action have been seen; only then the checkpoint, and of it only the ``protocol`` and
``metaData`` columns of the row groups that can hold them (a Parquet part is opened for random
access: footer plus those column chunks, never the ``add``/``remove`` columns). A V2 checkpoint is
read at its top-level file only; sidecars hold file actions alone and are never opened. With a
``StateSeed`` (a version checksum the caller checked: ``checksum.protocol_metadata``) the read stops
at the seed's version instead of going on to the checkpoint.

The result equals ``load_snapshot``'s protocol, metadata and properties at every version (the
golden and differential suites check it). It validates less: file actions it skips are not parsed,
so a malformed ``add`` line that ``load_snapshot`` would refuse goes unnoticed here, and a
compaction file is used even when ``load_snapshot`` would fall back to the plain commits because
the compaction repeats a logical file (its protocol and metadata lines are still the newest).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .._runtime.memory import uses_log_operation_memory
from ..errors import CorruptLogError, MissingCommitError, ProtocolViolationError
from ..log_segment.listing import LISTING_ATTEMPTS, CheckpointGroup, LogSegmentFiles, list_log_files
from ..log_segment.segment import CatalogCommit, JsonSource, LogSegment, build_log_segment, is_single_commit
from ..model.actions import Metadata, Protocol
from ..model.features import check_read_supported, in_commit_timestamps_enabled
from ..model.paths import LogFileType, ParsedLogPath
from ..model.table_properties import TableProperties
from ..model.validation import CommitRules, loads_action, parquet_action, require_commit_content, validate_action
from ..storage import LogStore, open_table_storage
from .ndjson_lines import non_file_action_lines
from .version_facts import VersionFacts, in_commit_timestamp, timestamp_at

if TYPE_CHECKING:  # pyarrow.parquet is imported where a checkpoint is read: a log without one never needs it
    import pyarrow.parquet as pq

__all__ = ["TableState", "StateSeed", "load_table_state", "metadata_before_tail", "referenced_sidecar_names", "NON_FILE_KINDS", "segment_non_file_actions"]

_PM_COLUMNS = ("protocol", "metaData")
_PM_BATCH_ROWS = 16_384
# Leaf columns that are non-null exactly when the action is present (required fields).
_PM_PROBES = {
    "protocol": "protocol.minReaderVersion",
    "metaData": "metaData.id",
    "sidecar": "sidecar.path",
    "txn": "txn.appId",
    "domainMetadata": "domainMetadata.domain",
}
# The actions of a version's state besides its files (what a checkpoint writes beside them).
NON_FILE_KINDS = ("protocol", "metaData", "txn", "domainMetadata")


@dataclass(frozen=True)
class TableState(VersionFacts):
    """Protocol, metadata and properties of a table at ``version``, and the listing they came from.

    A drop-in for ``Snapshot`` wherever only these are read (``plan_log_cleanup``, status, gates):
    it has the same ``table_uri``, ``version``, ``protocol``, ``metadata``, ``properties``,
    ``segment``, ``timestamp``, ``now_ms``, ``checkpoint_version``, ``latest_checkpoint_version``
    and ``in_commit_timestamps_enabled``; it has no files, tombstones, txns or domain metadata.
    """

    table_uri: str
    version: int
    protocol: Protocol
    metadata: Metadata
    properties: TableProperties
    segment: LogSegment
    timestamp: int  # in-commit timestamp where enabled, else the commit's modification time
    now_ms: int
    bytes_read: int = 0  # log bytes read to build this state (for benchmarks and tests)
    # The version of the checksum whose protocol or metadata this state holds (no commit after it
    # changed them); None when both came from the log itself. Writers never act on such a state.
    checksum_version: int | None = None
    # Where the metaData came from: the version of the tail source holding it (a compaction's first
    # version), the checkpoint's version (no commit of the tail changes it), or None when unknown
    # (a seed stands for commits nobody read).
    metadata_version: int | None = None


@dataclass(frozen=True)
class StateSeed:
    """Protocol and metadata of ``version`` from a source other than the log (a version checksum
    the caller parsed and checked): used only where no commit after ``version`` supplies them, and
    only when ``version`` lies inside the segment, at or above its checkpoint."""

    version: int
    protocol: Protocol
    metadata: Metadata


class _Finder:
    """Collects the newest protocol and metadata while sources are fed newest first."""

    def __init__(self) -> None:
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.bytes_read = 0

    @property
    def done(self) -> bool:
        return self.protocol is not None and self.metadata is not None

    def take(self, actions: Sequence[tuple[int, dict[str, Any]]], name: str) -> None:
        """``actions`` of ONE source as ``(line, action)`` in file order: its last one of a kind wins
        (as in a forward replay), and only if no newer source already supplied that kind."""
        protocol = metadata = None
        for line, action in actions:
            try:
                if (p := action.get("protocol")) is not None:
                    protocol = Protocol.from_dict(p)
                elif (m := action.get("metaData")) is not None:
                    metadata = Metadata.from_dict(m)
            except (KeyError, TypeError, ValueError) as exc:
                raise CorruptLogError(f"{name}: line {line}: malformed action {exc!s}", path=name, line=line or None) from None
        if self.protocol is None:
            self.protocol = protocol
        if self.metadata is None:
            self.metadata = metadata


def _non_file_lines(data: bytes | memoryview, name: str, *, commit: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """Every action of an NDJSON file except canonical ``add``/``remove`` lines (not parsed), each
    validated (``model.validation``); a ``commit`` must not be empty and holds at most one
    protocol, metadata, txn per app and domain metadata per domain."""
    if commit:
        require_commit_content(name, data)
    rules = CommitRules(name)
    out = []
    for number, raw in non_file_action_lines(data):
        action = loads_action(raw, name, number)
        kind = next(iter(action))
        rules.feed(kind, action[kind], number)
        out.append((number, action))
    return out


def _source_bytes(store: LogStore, source: JsonSource, scratch: bytearray) -> tuple[str, bytes | memoryview]:
    """A commit's bytes; a published one is read into ``scratch`` (valid until the next read)."""
    if isinstance(source, CatalogCommit):
        if source.inline_content is not None:
            return source.source_name, source.inline_content
        return store.display(source.file_name), store.read_into(source.file_name, scratch)
    return store.display(source.name), store.read_into(source.name, scratch)


def _parquet_pm(
    store: LogStore, part: ParsedLogPath, finder: _Finder, columns: Sequence[str] = _PM_COLUMNS
) -> list[tuple[int, dict[str, Any]]]:
    """Non-null rows of ``columns`` (default ``protocol``/``metaData``) of a Parquet checkpoint part,
    read by column projection from the row groups whose statistics do not rule them out."""
    name = store.display(part.name)
    found: list[tuple[int, dict[str, Any]]] = []
    try:
        import pyarrow.parquet as pq

        with store.open_input(part.name) as raw:
            counted = _CountingReader(raw)
            pf = pq.ParquetFile(counted)
            present = [c for c in columns if c in pf.schema_arrow.names]
            if present:
                leaves = {pf.schema.column(i).path: i for i in range(pf.metadata.num_columns)}
                row_base = 0
                for rg in range(pf.metadata.num_row_groups):
                    meta = pf.metadata.row_group(rg)
                    wanted = [c for c in present if _may_hold(meta, leaves.get(_PM_PROBES[c]))]
                    # in slices: a checkpoint's row group can hold millions of (null) rows
                    batch_base = row_base
                    for batch in pf.iter_batches(_PM_BATCH_ROWS, row_groups=[rg], columns=wanted, use_threads=False) if wanted else ():
                        for column in wanted:
                            col = batch.column(column)
                            if col.null_count < len(col):
                                found.extend((batch_base + i, _checked_row(name, batch_base + i, column, v)) for i, v in enumerate(col.to_pylist()) if v is not None)
                        batch_base += batch.num_rows
                    row_base += meta.num_rows
            finder.bytes_read += counted.bytes_read
    except FileNotFoundError:
        raise  # gone since the listing (another cleanup): the caller lists again, not a corrupt log
    except (pa.ArrowException, ValueError, OSError) as exc:  # ValueError: a footer whose names are not UTF-8
        raise CorruptLogError(f"{name}: not a readable Parquet checkpoint ({exc})", path=name) from None
    found.sort(key=lambda t: t[0])
    return found


def _checked_row(name: str, row: int, kind: str, value: Mapping[str, Any]) -> dict[str, Any]:
    action = parquet_action(kind, value)
    validate_action(action, f"{name}: row {row}")
    return action


def _may_hold(meta: pq.RowGroupMetaData, leaf: int | None) -> bool:
    """False only when the row group's statistics prove the probe column is null in every row."""
    if leaf is None:
        return True  # column without the probe leaf (odd writer): read it
    stats = meta.column(leaf).statistics
    if stats is None or not stats.has_null_count:
        return True
    return bool(stats.null_count < meta.num_rows)


class _CountingReader:
    """A read-only file wrapper that counts the bytes pyarrow reads through it."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.bytes_read = 0
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._raw.read(n)
        self.bytes_read += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._raw.seek(offset, whence))

    def tell(self) -> int:
        return int(self._raw.tell())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    @property
    def size(self) -> int:
        return int(self._raw.size)


def _read_checkpoint_pm(store: LogStore, group: CheckpointGroup, finder: _Finder) -> None:
    """Protocol and metadata of a checkpoint: every part (a multi-part set may hold them anywhere),
    parts in order and rows in order so that the last row of a kind wins as in a forward replay."""
    actions: list[tuple[int, dict[str, Any]]] = []
    for part in group.files:
        if part.extension == "json":  # V2 checkpoint in JSON: the top-level file only
            data = store.read(part.name)
            finder.bytes_read += len(data)
            actions.extend(_non_file_lines(data, store.display(part.name)))
        else:
            actions.extend(_parquet_pm(store, part, finder))
    finder.take(actions, store.display(group.files[0].name))


def segment_non_file_actions(store: LogStore, segment: LogSegment) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(version, action)`` for every protocol, metaData, txn and domainMetadata action of
    ``segment`` in replay order: the checkpoint's rows of those columns (row groups whose statistics
    allow them; sidecars hold file actions only and are not opened), then the commits oldest first,
    their ``add``/``remove`` lines skipped unparsed. One commit and one row-group slice are held at
    a time, so memory does not grow with the table."""
    finder = _Finder()  # counts the bytes read; the kinds are collected here, not by it
    if segment.checkpoint is not None:
        v = segment.checkpoint.version
        for part in segment.checkpoint.files:
            if part.extension == "json":
                rows = _non_file_lines(store.read(part.name), store.display(part.name))
            else:
                rows = _parquet_pm(store, part, finder, NON_FILE_KINDS)
            yield from ((v, a) for _, a in rows if any(a.get(k) is not None for k in NON_FILE_KINDS))
    scratch = bytearray()
    for source in segment.deltas:
        name, data = _source_bytes(store, source, scratch)
        rows = _non_file_lines(data, name, commit=is_single_commit(source))
        del data  # a view of `scratch`, which the next read may grow
        yield from ((source.version, a) for _, a in rows if any(a.get(k) is not None for k in NON_FILE_KINDS))


@uses_log_operation_memory
def referenced_sidecar_names(store: LogStore, checkpoints: Sequence[ParsedLogPath]) -> set[str]:
    """File names of the sidecars these checkpoint files reference, reading only their ``sidecar``
    column (Parquet: footer plus that column's chunks) or non-file lines (JSON); a multi-part
    (V1) checkpoint never references sidecars. For cleanup, which must keep them."""
    names: set[str] = set()
    finder = _Finder()
    for c in checkpoints:
        if c.type is LogFileType.CHECKPOINT_MULTIPART:
            continue
        if c.extension == "json":
            rows = _non_file_lines(store.read(c.name), store.display(c.name))
        else:
            rows = _parquet_pm(store, c, finder, ("sidecar",))
        for _, action in rows:
            sidecar = action.get("sidecar")
            if isinstance(sidecar, Mapping) and sidecar.get("path"):
                names.add(str(sidecar["path"]).rsplit("/", 1)[-1])
    return names


def _target_timestamp(
    store: LogStore, segment: LogSegment, files: LogSegmentFiles, target_info: Mapping[str, Any] | None, ict_from: int | None
) -> int:
    """The timestamp ``load_snapshot`` reports for ``segment.version`` (same rules, same sources)."""
    source = segment.commit_sources.get(segment.version)
    if source is None:
        return timestamp_at(store, files, segment.version, ict_from)
    ict = in_commit_timestamp(target_info) if ict_from is not None and segment.version >= ict_from else None
    if ict is None and isinstance(source, CatalogCommit):
        ict = source.timestamp if source.timestamp >= 0 else source.modification_time
    return ict if ict is not None else source.modification_time


@uses_log_operation_memory
def load_table_state(
    table: str | LogStore,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    catalog_commits: Sequence[CatalogCommit] = (),
    latest_ratified_version: int | None = None,
    files: LogSegmentFiles | None = None,
    now_ms: int | None = None,
    seed: StateSeed | None = None,
) -> TableState:
    """Protocol, metadata and properties at ``version`` (default latest), with one LIST of ``_delta_log``.

    Takes the same arguments as ``load_snapshot``: ``catalog_commits``/``latest_ratified_version``
    come from a coordinator (ratified commits not yet published win over published files, and
    nothing above the ratified version is read). Raises what ``load_snapshot`` raises for a
    missing commit, an incomplete checkpoint, a missing protocol or metadata, or an unsupported
    reader feature. ``seed`` (see ``StateSeed``) ends the backwards read at its version.
    """
    store = table if isinstance(table, LogStore) else open_table_storage(table, storage_options)
    files = files if files is not None else list_log_files(store)
    segment = build_log_segment(
        files, version, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version, table=store.uri
    )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    for attempt in range(LISTING_ATTEMPTS):
        try:
            return _state_from(store, files, segment, now, seed)
        except FileNotFoundError as exc:
            # A file of this listing is gone: a concurrent cleanup removed commits and checkpoints
            # below a newer checkpoint, which a fresh listing shows. Same version, listed again.
            if attempt == LISTING_ATTEMPTS - 1:
                raise MissingCommitError(
                    f"{store.uri}: a log file vanished while version {segment.version} was read, {LISTING_ATTEMPTS} listings in a row ({exc})",
                    version=segment.version, path=store.log_dir,
                ) from None
            files = list_log_files(store)
            segment = build_log_segment(
                files, segment.version, catalog_commits=catalog_commits, latest_ratified_version=latest_ratified_version, table=store.uri
            )
    raise AssertionError("unreachable")


def _state_from(store: LogStore, files: LogSegmentFiles, segment: LogSegment, now: int, seed: StateSeed | None = None) -> TableState:
    finder = _Finder()
    target_info: dict[str, Any] | None = None
    target_read = False
    metadata_version: int | None = None
    scratch = bytearray()
    if seed is not None and not max(segment.checkpoint_version, 0) <= seed.version <= segment.version:
        seed = None  # a seed outside the segment says nothing about this version
    # Newest first: the target's commit is always read (its commitInfo gives the timestamp); with
    # a seed, only the sources holding a version above it (their protocol or metadata win).
    for source in reversed(segment.deltas):
        if finder.done and target_read:
            break
        if target_read and seed is not None and _end_version(source) <= seed.version:
            break
        name, data = _source_bytes(store, source, scratch)
        finder.bytes_read += len(data)
        actions = _non_file_lines(data, name, commit=is_single_commit(source))
        del data
        if not target_read:
            target_read = True
            if isinstance(source, CatalogCommit) or source.end_version == source.version:
                target_info = next((a["commitInfo"] for _, a in actions if a.get("commitInfo") is not None), None)
        had_metadata = finder.metadata is not None
        finder.take(actions, name)
        if not had_metadata and finder.metadata is not None:
            metadata_version = source.version
    if finder.metadata is None:  # a seed's (commits nobody read may change it: unknown), else the checkpoint's
        metadata_version = None if seed is not None else segment.checkpoint_version
    from_seed = None
    if not finder.done and seed is not None:
        from_seed = seed.version
        finder.protocol = finder.protocol or seed.protocol
        finder.metadata = finder.metadata or seed.metadata
    if not finder.done and segment.checkpoint is not None:
        _read_checkpoint_pm(store, segment.checkpoint, finder)
    if finder.protocol is None:
        raise ProtocolViolationError(f"{store.uri}: no protocol action in versions ≤ {segment.version}", path=store.log_dir)
    if finder.metadata is None:
        raise ProtocolViolationError(f"{store.uri}: no metaData action in versions ≤ {segment.version}", path=store.log_dir)
    check_read_supported(finder.protocol, path=store.uri)
    properties = TableProperties.from_configuration(finder.metadata.configuration)
    ict_from: int | None = None
    if in_commit_timestamps_enabled(finder.protocol, dict(finder.metadata.configuration)):
        ict_from = properties.ict_enablement_version or 0
    return TableState(
        table_uri=store.uri,
        version=segment.version,
        protocol=finder.protocol,
        metadata=finder.metadata,
        properties=properties,
        segment=segment,
        timestamp=_target_timestamp(store, segment, files, target_info, ict_from),
        now_ms=now,
        bytes_read=finder.bytes_read,
        checksum_version=from_seed,
        metadata_version=metadata_version,
    )


def metadata_before_tail(store: LogStore, state: TableState) -> Metadata | None:
    """The metaData in effect before the first commit of ``state``'s tail (the one its adds were
    written under until a commit of the tail changes it): the state's own when no commit of the tail
    holds one, else the checkpoint's; None when the tail starts the table (no checkpoint)."""
    checkpoint = state.segment.checkpoint
    if checkpoint is None:
        return None
    if state.metadata_version == checkpoint.version:
        return state.metadata
    finder = _Finder()
    _read_checkpoint_pm(store, checkpoint, finder)
    return finder.metadata


def _end_version(source: JsonSource) -> int:
    return source.version if isinstance(source, CatalogCommit) else source.end_version
