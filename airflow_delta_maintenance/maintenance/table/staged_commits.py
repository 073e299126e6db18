"""Ratified commits' bytes, verified before anything relies on them.

A staged commit is trusted only when it is exactly what the coordinator ratified: its name is a
staged commit of that version, it is a regular file inside the table (the store refuses a symlink
in place of the file or of its directory), its size equals the size the coordinator recorded, its modification time equals the
recorded one where both sides know it, every line is one JSON action, and the first line's
in-commit timestamp is the coordinator's. Anything else is a ``StagedCommitError`` naming the file
and version; nothing is published, reported or read into the table's state from it.

``verify_ratified_commit`` checks the same in bounded memory: a staged file above
``WHOLE_FILE_LIMIT`` is read in chunks and only its size and SHA-256 are kept, so that a later copy
can prove it copied the very bytes that were verified (``stream_verified_copy``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any, BinaryIO, TypeVar

from ...coordinators.base import RatifiedCommit
from ...deltalog.model.paths import LEGACY_STAGED_DIR, STAGED_DIR, LogFileType, parse_log_path
from ...deltalog.replay.commit_stream import CommitStreamValidator, PartitionKeys, RescanCommit
from ...deltalog.storage import FileStat, LogStore
from ..errors import MissingStagedCommitError, PublishForkError, StagedCommitError

_T = TypeVar("_T")

__all__ = [
    "fork_error",
    "is_staged_commit",
    "StagedListing",
    "list_staged",
    "read_ratified_commit",
    "validate_commit_bytes",
    "VerifiedCommit",
    "verify_ratified_commit",
    "stream_verified_copy",
    "file_digest",
    "published_matches",
    "MTIME_TOLERANCE_MS",
    "WHOLE_FILE_LIMIT",
]

# Coordinators record times in ms; Hadoop truncates, a float round trip may land 1 ms off.
MTIME_TOLERANCE_MS = 1
# A staged commit up to this size is read whole; a larger one is verified and copied in chunks.
WHOLE_FILE_LIMIT = 8 << 20
CHUNK = 1 << 20


@dataclass(frozen=True)
class StagedListing:
    """One LIST of each staged-commit directory: name (relative to ``_delta_log``) → stat."""

    stats: Mapping[str, FileStat]

    def get(self, name: str) -> FileStat | None:
        return self.stats.get(name)


def is_staged_commit(commit: RatifiedCommit) -> bool:
    parsed = parse_log_path(commit.file_name)
    return parsed is not None and parsed.type is LogFileType.STAGED_COMMIT and parsed.version == commit.version


def fork_error(store: LogStore, commit: RatifiedCommit, name: str) -> PublishForkError:
    """``name`` (a published ``<v>.json``) holds bytes other than the ratified commit's."""
    return PublishForkError(
        f"{store.display(name)} exists with content different from the ratified commit "
        f"{commit.file_name or '(inline)'}: the table has forked at version {commit.version}; "
        "nothing further was published or reported",
        version=commit.version,
        path=name,
    )


def list_staged(store: LogStore) -> StagedListing:
    """Both staged directories (current and legacy), listed once each (no-follow: a symlinked
    directory or file there is a ``SymlinkInLogError``)."""
    stats: dict[str, FileStat] = {}
    for directory in (STAGED_DIR, LEGACY_STAGED_DIR):
        for s in store.list_dir(directory):
            stats[s.name] = s
    return StagedListing(stats)


def _iso(epoch_ms: int) -> str:
    """A file time for a person: ISO-8601 UTC with milliseconds, not epoch milliseconds."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _check_recorded(store: LogStore, commit: RatifiedCommit, name: str, size: int, stat: FileStat | None) -> None:
    if size != commit.file_size:
        raise StagedCommitError(
            f"{store.display(name)}: staged file of ratified version {commit.version} has {size} bytes, "
            f"but the coordinator recorded {commit.file_size}",
            version=commit.version,
            path=name,
        )
    recorded, actual = commit.file_modification_time, (stat.modification_time if stat is not None else 0)
    if recorded > 0 and actual > 0 and abs(recorded - actual) > MTIME_TOLERANCE_MS:
        raise StagedCommitError(
            f"{store.display(name)}: staged file of ratified version {commit.version} was modified at {_iso(actual)}, "
            f"but the coordinator recorded {_iso(recorded)} (rewritten after ratification?)",
            version=commit.version,
            path=name,
        )


def _staged_candidates(store: LogStore, commit: RatifiedCommit) -> tuple[str, str]:
    """Where the staged file of ``commit`` may be: its name, then the legacy ``_commits/`` directory
    (coordinators that store bare names, DynamoDB's fsName, written by older delta-spark releases)."""
    parsed = parse_log_path(commit.file_name)
    if parsed is None or parsed.type is not LogFileType.STAGED_COMMIT or parsed.version != commit.version:
        raise StagedCommitError(
            f"{store.uri}: ratified commit {commit.version} points at {commit.file_name!r}, "
            "which is not a staged commit of that version under _staged_commits/ or _commits/",
            version=commit.version,
            path=commit.file_name,
        )
    return commit.file_name, f"{LEGACY_STAGED_DIR}/{parsed.filename}"


def _missing(store: LogStore, commit: RatifiedCommit) -> MissingStagedCommitError:
    return MissingStagedCommitError(
        f"{store.display(commit.file_name)}: staged file of ratified version {commit.version} is missing",
        version=commit.version,
        path=commit.file_name,
    )


def read_ratified_commit(
    store: LogStore,
    commit: RatifiedCommit,
    listing: StagedListing | None = None,
    prefetched: Mapping[str, bytes] | None = None,
) -> bytes:
    """The verified bytes of a ratified commit: inline, or its staged file (see the module docstring).

    ``FileNotFoundError`` is turned into a ``StagedCommitError`` naming the missing file.
    """
    if commit.inline_content is not None:
        validate_commit_bytes(store, commit, commit.inline_content)
        return commit.inline_content
    for name in _staged_candidates(store, commit):
        try:
            # the store never follows a symlink inside _delta_log (file or directory)
            data = prefetched[name] if prefetched is not None and name in prefetched else store.read(name)
        except FileNotFoundError:
            continue
        stat = (listing.get(name) if listing is not None else None) or store.stat(name)
        _check_recorded(store, commit, name, len(data), stat)
        validate_commit_bytes(store, commit, data)
        return data
    raise _missing(store, commit)


@dataclass(frozen=True)
class VerifiedCommit:
    """A ratified commit whose bytes were verified: where they are, their size, and either the
    bytes themselves (kept by the caller; inline commits always) or their SHA-256."""

    commit: RatifiedCommit
    name: str | None  # the staged file (relative to _delta_log); None for an inline commit
    size: int
    digest: bytes
    data: bytes | None = None

    def matches(self, size: int, digest: bytes) -> bool:
        assert self.data is None, "kept bytes are compared as bytes"
        return size == self.size and digest == self.digest

    def digest_only(self) -> VerifiedCommit:
        """The same verified commit with its bytes let go (size and SHA-256 kept for the copy's proof)."""
        assert self.data is not None and self.name is not None
        return VerifiedCommit(self.commit, self.name, self.size, hashlib.sha256(self.data).digest())


def verify_ratified_commit(
    store: LogStore,
    commit: RatifiedCommit,
    listing: StagedListing | None = None,
    prefetched: Mapping[str, bytes] | None = None,
    *,
    keep: bool = True,
    strict: bool = False,
    keys: PartitionKeys | None = None,
) -> VerifiedCommit:
    """``read_ratified_commit``'s checks in bounded memory: a staged file above
    ``WHOLE_FILE_LIMIT`` is streamed in chunks (never whole in memory); the bytes are kept only
    when ``keep`` and the file was read whole. ``strict``: also the one strict validation of log
    actions every reader applies (``CommitStreamValidator``), from the same bytes or chunks — for
    a commit about to be copied into the published log; ``keys``: the partition-value keys in
    effect before it (moved on to its own metaData's, if it has one)."""
    if commit.inline_content is not None:
        validate_commit_bytes(store, commit, commit.inline_content, strict=strict, keys=keys)
        return VerifiedCommit(commit, None, len(commit.inline_content), b"", commit.inline_content)
    for name in _staged_candidates(store, commit):
        stat = listing.get(name) if listing is not None else None
        try:
            if (prefetched is not None and name in prefetched) or (stat is not None and stat.size <= WHOLE_FILE_LIMIT):
                data = prefetched[name] if prefetched is not None and name in prefetched else store.read(name)
                _check_recorded(store, commit, name, len(data), stat or store.stat(name))
                validate_commit_bytes(store, commit, data, strict=strict, keys=keys)
                if keep:
                    return VerifiedCommit(commit, name, len(data), b"", data)
                return VerifiedCommit(commit, name, len(data), hashlib.sha256(data).digest())
            size, digest = _with_commit_keys(partial(_stream_validated, store, commit, name, strict, keys))
        except FileNotFoundError:
            continue
        _check_recorded(store, commit, name, size, stat or store.stat(name))
        return VerifiedCommit(commit, name, size, digest)
    raise _missing(store, commit)


def _chunks(f: BinaryIO) -> Iterable[bytes]:
    while chunk := f.read(CHUNK):
        yield chunk


def _with_commit_keys(run: Callable[[frozenset[str] | None], _T]) -> _T:
    """``run(None)`` (the keys in effect); when the commit's metaData, after adds, changes them
    (``RescanCommit``), ``run`` again from the start with the commit's own keys."""
    try:
        return run(None)
    except RescanCommit as again:
        return run(again.keys)


def _strict(
    name: str, strict: bool, keys: PartitionKeys | None, commit_keys: frozenset[str] | None = None
) -> CommitStreamValidator | None:
    return CommitStreamValidator(name, keys=keys, commit_keys=commit_keys) if strict else None


def _stream_validated(
    store: LogStore, commit: RatifiedCommit, name: str, strict: bool, keys: PartitionKeys | None, commit_keys: frozenset[str] | None
) -> tuple[int, bytes]:
    """Validate a staged file chunk by chunk (lines split across chunks are joined); its size and SHA-256."""
    lines = _CommitLines(store, commit, name, _strict(store.display(name), strict, keys, commit_keys))
    h = hashlib.sha256()
    size = 0
    with store.open_input(name) as f:
        for chunk in _chunks(f):
            h.update(chunk)
            size += len(chunk)
            lines.feed(chunk)
    lines.finish()
    return size, h.digest()


def stream_verified_copy(store: LogStore, verified: VerifiedCommit, sink: BinaryIO) -> None:
    """Copy the staged file of ``verified`` into ``sink`` chunk by chunk, and fail (before the caller
    makes the copy visible) unless the bytes copied are the bytes that were verified."""
    assert verified.name is not None
    h = hashlib.sha256()
    size = 0
    try:
        with store.open_input(verified.name) as f:
            for chunk in _chunks(f):
                h.update(chunk)
                size += len(chunk)
                sink.write(chunk)
    except FileNotFoundError:
        raise _missing(store, verified.commit) from None
    if not verified.matches(size, h.digest()):
        raise StagedCommitError(
            f"{store.display(verified.name)}: staged file of ratified version {verified.commit.version} changed after it was "
            f"verified ({size} bytes now, {verified.size} then); nothing was published from it",
            version=verified.commit.version,
            path=verified.name,
        )


def file_digest(store: LogStore, name: str) -> tuple[int, bytes]:
    """Size and SHA-256 of a log file, read in chunks (``FileNotFoundError`` when it is gone)."""
    h = hashlib.sha256()
    size = 0
    with store.open_input(name) as f:
        for chunk in _chunks(f):
            h.update(chunk)
            size += len(chunk)
    return size, h.digest()


_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"  # what json.loads allows around a value
_BLANK = " \t\n\r\x0b\x0c"  # what bytes.strip() removes: such a line is skipped


class _CommitLines:
    """The line rules of a ratified commit, fed whole or in chunks: every non-blank line is one JSON
    action object, there is one, and the first one's in-commit timestamp is the coordinator's.

    Text that is valid UTF-8 is decoded once per block and each line parsed with ``raw_decode``
    (about a third less CPU than ``json.loads`` per line, which detects the encoding and decodes
    each line again); whatever that path refuses is judged by ``json.loads`` on the line's bytes, so
    what is accepted, and the message of what is not, are ``json.loads``'s."""

    def __init__(self, store: LogStore, commit: RatifiedCommit, name: str, strict: CommitStreamValidator | None = None) -> None:
        self.store, self.commit, self.name = store, commit, name
        self.strict = strict  # the one strict validation, fed the same blocks (a commit too large to hold)
        self.number = 0
        self.first: dict[str, Any] | None = None
        self.pending: list[bytes] = []  # the start of a line a chunk cut

    def _error(self, what: str) -> StagedCommitError:
        return StagedCommitError(f"{self.store.display(self.name)}: {what}", version=self.commit.version, path=self.name)

    def _loads(self, line: bytes) -> Any:
        try:
            return json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise self._error(f"line {self.number} of ratified commit {self.commit.version} is not JSON ({exc})") from None

    def _action(self, action: Any) -> None:
        if not isinstance(action, dict) or len(action) != 1:
            raise self._error(f"line {self.number} of ratified commit {self.commit.version} is not one action")
        if self.first is None:
            self.first = action

    def check(self, block: bytes) -> None:
        """Whole lines (the last may lack its newline only at the end of the file). With the strict
        validation, each line is parsed once, by it; these rules judge only what it refuses."""
        if self.strict is not None:
            self.strict.feed(block, self._plain_line)
            self.first = self.strict.first
        else:
            self._check_lines(block)

    def _plain_line(self, number: int, raw_line: bytes) -> None:
        self.number = number
        if raw_line.strip():
            self._action(self._loads(raw_line))

    def _check_lines(self, block: bytes) -> None:
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            for raw_line in block.split(b"\n"):
                self.number += 1
                if raw_line.strip():
                    self._action(self._loads(raw_line))
            return
        decode = _DECODER.raw_decode
        for line in text.split("\n"):
            self.number += 1
            if not line.strip(_BLANK):
                continue
            try:
                action, end = decode(line)
                if end != len(line) and line[end:].strip(_JSON_SPACE):
                    action = self._loads(line.encode())  # "Extra data"
            except (ValueError, RecursionError):
                action = self._loads(line.encode())
            self._action(action)

    def feed(self, chunk: bytes) -> None:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self.pending.append(chunk)
            return
        block = b"".join([*self.pending, chunk[:cut]]) if self.pending else chunk[:cut]
        self.pending = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
        self.check(block)

    def finish(self) -> None:
        if self.pending:
            self.check(b"".join(self.pending))
            self.pending = []
        if self.first is None:
            raise self._error(f"ratified commit {self.commit.version} is empty")
        if self.strict is not None:
            self.strict.finish()
        if self.commit.commit_timestamp >= 0:
            info = self.first.get("commitInfo")
            ict = info.get("inCommitTimestamp") if isinstance(info, dict) else None
            if ict is not None and (not isinstance(ict, int) or isinstance(ict, bool) or ict != self.commit.commit_timestamp):
                raise self._error(
                    f"in-commit timestamp {ict!r} of version {self.commit.version} differs from the coordinator's {self.commit.commit_timestamp}"
                )


def validate_commit_bytes(
    store: LogStore, commit: RatifiedCommit, data: bytes, *, strict: bool = False, keys: PartitionKeys | None = None
) -> None:
    """Every line is one JSON action object; the in-commit timestamp equals the coordinator's;
    with ``strict``, every action passes the one strict validation too (``keys``: the
    partition-value keys in effect, ``verify_ratified_commit``)."""
    name = commit.file_name or f"<inline commit {commit.version}>"
    shown = store.display(name) if commit.file_name else name

    def check(commit_keys: frozenset[str] | None) -> None:
        lines = _CommitLines(store, commit, name, _strict(shown, strict, keys, commit_keys))
        lines.check(data)
        lines.finish()

    _with_commit_keys(check)


def published_matches(store: LogStore, verified: VerifiedCommit, name: str) -> bool:
    """Does the published file ``name`` hold exactly the verified bytes? Read whole when the
    verified bytes are at hand, else compared by size and SHA-256 in chunks. ``FileNotFoundError``
    when it is gone."""
    if verified.data is not None:
        return store.read(name) == verified.data
    return verified.matches(*file_digest(store, name))
