"""Serialising a proposed commit: NDJSON with ``commitInfo`` first carrying the in-commit timestamp.

Shared by the three clients so that every coordinator writes the same bytes for the same actions,
opens ``commit()`` the same way (``CommittingClient``) and, when the answer to a ratification is
lost, resent or refused, decides the same way whether the version is ours (``decide_owner``).
A new coordinated table's ``protocol`` action is upgraded to table features here too
(``upgrade_protocol``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import LogFileWriter, LogFileWriterFactory, RatifiedCommit, WrittenFile
from .errors import CommitConflictError, CoordinatorAnswerError, CoordinatorError, InconsistentCommitsError

__all__ = [
    "commit_bytes",
    "next_in_commit_timestamp",
    "previous_in_commit_timestamp",
    "staged_name",
    "published_name",
    "writer_for",
    "publish_version_zero",
    "STAGED_DIR",
    "LEGACY_STAGED_DIR",
    "upgrade_protocol",
    "Attempt",
    "stage_commit",
    "decide_owner",
    "reread_failed",
    "CommittingClient",
]

STAGED_DIR = "_staged_commits"
LEGACY_STAGED_DIR = "_commits"  # the rejected managed-commits RFC and delta-spark 3.x


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def next_in_commit_timestamp(previous: int | None, now_ms: int | None = None) -> int:
    """``max(wall clock, previous + 1)`` (PROTOCOL "In-Commit Timestamps")."""
    now = wall_clock_ms() if now_ms is None else now_ms
    return now if previous is None else max(now, previous + 1)


def previous_in_commit_timestamp(writer: LogFileWriter, version: int) -> int | None:
    """The ICT of published ``<version>.json`` (first line), when the coordinator no longer tracks it.

    ``None`` when the file is missing or carries no ICT (the wall clock is then used alone).
    """
    if version < 0:
        return None
    try:
        data = writer.read(published_name(version))
    except OSError:  # FileNotFoundError included (LogFileWriter.read's contract)
        return None
    first = data.split(b"\n", 1)[0]
    try:
        info = json.loads(first).get("commitInfo") or {}
    except (ValueError, AttributeError):
        return None
    ict = info.get("inCommitTimestamp")
    return int(ict) if isinstance(ict, int) else None


def commit_bytes(actions: Sequence[Mapping[str, Any]], in_commit_timestamp: int) -> bytes:
    """The commit file: ``commitInfo`` first (added if missing) with ``inCommitTimestamp`` set.

    A ``txnId`` is added when missing: catalog-managed tables require one in every commit.
    """
    info: dict[str, Any] = {}
    rest = []
    seen_info = False
    for action in actions:
        if "commitInfo" in action:
            if seen_info:
                raise ValueError("a commit holds at most one commitInfo action")
            seen_info = True
            info = dict(action["commitInfo"])
        else:
            rest.append(action)
    info.setdefault("timestamp", in_commit_timestamp)
    info["inCommitTimestamp"] = in_commit_timestamp
    info.setdefault("txnId", str(uuid.uuid4()))
    lines = [{"commitInfo": info}, *rest]
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in lines).encode("utf-8")


def staged_name(version: int, legacy: bool = False) -> str:
    """``_staged_commits/<v>.<uuid>.json`` relative to ``_delta_log`` (``_commits/`` when legacy)."""
    return f"{LEGACY_STAGED_DIR if legacy else STAGED_DIR}/{version:020d}.{uuid.uuid4()}.json"


def published_name(version: int) -> str:
    return f"{version:020d}.json"


def writer_for(factory: LogFileWriterFactory | None, normalize: Callable[[str], str], table_uri: str) -> tuple[str, LogFileWriter]:
    """(normalised table URI, its log writer); clients opened without storage cannot commit."""
    if factory is None:
        raise CoordinatorError("this coordinator client was opened without storage; it cannot stage commits")
    uri = normalize(table_uri)
    return uri, factory(uri)


def publish_version_zero(writer: LogFileWriter, uri: str, actions: Sequence[Mapping[str, Any]], ict: int | None = None) -> RatifiedCommit:
    """Version 0 is published directly, create-if-absent (PROTOCOL "Catalog-managed tables")."""
    ict = next_in_commit_timestamp(None) if ict is None else ict
    try:
        written = writer.write_new(published_name(0), commit_bytes(actions, ict))
    except FileExistsError:
        raise CommitConflictError(f"{uri}: {published_name(0)} already exists", version=0, retryable=False) from None
    return RatifiedCommit(0, ict, written.file_name, written.size, written.modification_time)


# --- a new table's protocol, upgraded to table features (reader 3 / writer 7) ----------------------
# Coordinated and catalog-managed tables need named features (``coordinatedCommits-preview``,
# ``catalogManaged``, ``inCommitTimestamp``, …), which only exist from reader 3 / writer 7; the
# features implied by the legacy versions must then be listed explicitly (PROTOCOL "Table Features").

_IMPLIED_WRITER = ((2, "appendOnly"), (2, "invariants"), (3, "checkConstraints"), (4, "changeDataFeed"),
                   (4, "generatedColumns"), (5, "columnMapping"), (6, "identityColumns"))


def upgrade_protocol(protocol: Mapping[str, Any], reader_features: Iterable[str], writer_features: Iterable[str]) -> dict[str, Any]:
    """``protocol`` at (3, 7) with the given features added (reader features are also writer features)."""
    reader_v, writer_v = int(protocol.get("minReaderVersion", 1)), int(protocol.get("minWriterVersion", 2))
    implied_w = [f for v, f in _IMPLIED_WRITER if writer_v < 7 and writer_v >= v]
    implied_r = ["columnMapping"] if reader_v == 2 else []
    readers = set(protocol.get("readerFeatures") or []) | set(implied_r) | set(reader_features)
    writers = set(protocol.get("writerFeatures") or []) | set(implied_w) | set(writer_features) | readers
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(readers), "writerFeatures": sorted(writers)}


# --- one commit attempt, from staging to "whose is it?" --------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """A proposed commit staged under a fresh name: what we ask the coordinator to ratify."""

    version: int
    ict: int
    data: bytes  # the staged bytes (each attempt carries a fresh txnId: equal bytes are ours)
    written: WrittenFile

    @property
    def bare_name(self) -> str:
        return self.written.file_name.rsplit("/", 1)[-1]

    def ratified(self) -> RatifiedCommit:
        return RatifiedCommit(self.version, self.ict, self.written.file_name, self.written.size, self.written.modification_time)


def stage_commit(writer: LogFileWriter, version: int, actions: Sequence[Mapping[str, Any]], previous_ict: int | None,
                 *, legacy: bool = False) -> Attempt:
    """Write ``actions`` as a new staged file of ``version`` (a unique name: an attempt never overwrites)."""
    ict = next_in_commit_timestamp(previous_ict)
    data = commit_bytes(actions, ict)
    return Attempt(version, ict, data, writer.write_new(staged_name(version, legacy), data))


def decide_owner(describe: str, attempt: Attempt, latest: int, tracked: RatifiedCommit | None, writer: LogFileWriter,
                 cause: str) -> RatifiedCommit:
    """After a ratification whose answer was lost, resent or refused: is ``attempt.version`` ours?

    Decided on a fresh read of the coordinator: ``latest`` ratified version and the commit it
    tracks for the version (``tracked``, or ``None``). Ours when the tracked commit is our staged
    file (the coordinator's record of it is returned), or, once it is published and forgotten, when
    ``<v>.json`` holds exactly our bytes (each attempt carries a fresh ``txnId``); another writer's
    (a retryable ``CommitConflictError``) when either holds something else; not ratified at all (a
    retryable ``CoordinatorError``) when the latest version is below it. A version ratified but
    neither tracked nor published is an ``InconsistentCommitsError``. ``cause`` says what happened
    to our request, for the messages.
    """
    version = attempt.version
    if tracked is not None:
        if tracked.file_name.rsplit("/", 1)[-1] == attempt.bare_name:
            return tracked
        raise CommitConflictError(f"{describe}: version {version} was ratified for another writer ({cause})", version=version)
    if latest < version:
        raise CoordinatorError(f"{describe}: version {version} was not ratified ({cause}); retry", retryable=True, version=version)
    try:  # ratified, published and forgotten since: compare the published bytes (delta-spark's hasSameContent)
        published = writer.read(published_name(version))
    except FileNotFoundError:
        raise InconsistentCommitsError(f"{describe}: version {version} is ratified (latest {latest}) but neither tracked nor "
                                       f"published, so whose it is cannot be told ({cause})", version=version) from None
    except OSError as exc:
        raise CoordinatorError(f"{describe}: the ratification of version {version} is unknown ({cause}) and "
                               f"{published_name(version)} cannot be read: {exc}", retryable=True, version=version) from None
    if published == attempt.data:
        return attempt.ratified()
    raise CommitConflictError(f"{describe}: version {version} was ratified for another writer ({cause})", version=version)


def reread_failed(describe: str, version: int, cause: str, exc: CoordinatorError) -> CoordinatorError:
    """The error to raise when the read that would decide a ratification fails: a permanent failure
    (an unusable answer, a missing table) as it is; otherwise the outcome stays unknown, retryable."""
    if isinstance(exc, CoordinatorAnswerError) or not exc.retryable:
        return exc
    return CoordinatorError(f"{describe}: the ratification of version {version} is unknown ({cause}) and re-reading failed: {exc}",
                            retryable=True, version=version)


class CommittingClient:
    """The one ``commit()`` of the three clients: storage for the table, the version checked,
    version 0 created through the filesystem (``_create``), later versions staged and ratified
    (``_commit_next``). Subclasses set ``writer_factory`` and ``normalize_uri``."""

    writer_factory: LogFileWriterFactory | None
    normalize_uri: Callable[[str], str]

    def describe(self) -> str:
        raise NotImplementedError

    def commit(
        self,
        table_uri: str,
        version: int,
        actions: Sequence[Mapping[str, Any]],
        table_conf: Mapping[str, str] | None = None,
    ) -> RatifiedCommit:
        """Stage and ratify ``actions`` as ``version`` (see ``CommitCoordinatorClient.commit``)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise CoordinatorError(f"{self.describe()}: invalid version {version!r}", retryable=False)
        uri, writer = writer_for(self.writer_factory, self.normalize_uri, table_uri)
        if version == 0:
            return self._create(uri, writer, actions)
        return self._commit_next(uri, writer, version, actions, table_conf)

    def _create(self, uri: str, writer: LogFileWriter, actions: Sequence[Mapping[str, Any]]) -> RatifiedCommit:
        raise NotImplementedError

    def _commit_next(self, uri: str, writer: LogFileWriter, version: int, actions: Sequence[Mapping[str, Any]],
                     table_conf: Mapping[str, str] | None) -> RatifiedCommit:
        raise NotImplementedError
