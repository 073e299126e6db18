"""The coordinator client interface and its value types.

Coordinators speak plain values (versions, file names relative to ``_delta_log``, sizes, times);
they never import the log library. The writer side (``commit``) writes files through a
``LogFileWriter`` obtained from a factory injected at construction (``maintenance`` wires it to the
log library's storage), so that storage and its atomicity rules stay in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "RatifiedCommit",
    "CommitsResponse",
    "WrittenFile",
    "LogFileWriter",
    "LogFileWriterFactory",
    "CommitCoordinatorClient",
]


@dataclass(frozen=True)
class RatifiedCommit:
    """A commit the coordinator ratified for ``version``.

    ``file_name`` is relative to ``_delta_log`` (``_staged_commits/<v>.<uuid>.json`` or the legacy
    ``_commits/…``); ``inline_content`` holds the NDJSON bytes for commits kept by the coordinator
    itself (then ``file_name`` may be empty). ``commit_timestamp`` is the in-commit timestamp (ms).
    """

    version: int
    commit_timestamp: int
    file_name: str = ""
    file_size: int = 0
    file_modification_time: int = 0
    inline_content: bytes | None = None


@dataclass(frozen=True)
class CommitsResponse:
    """Ratified-but-unpublished commits (ascending, contiguous) and the latest ratified version.

    ``latest_table_version`` is ``-1`` when the coordinator never ratified anything for the table
    (DynamoDB until its first coordinated commit, the local coordinator for an unknown table); the
    catalogs (local, Unity Catalog) report ``0`` for a table holding only version 0.
    """

    commits: tuple[RatifiedCommit, ...]
    latest_table_version: int


@dataclass(frozen=True)
class WrittenFile:
    file_name: str  # relative to _delta_log
    size: int
    modification_time: int  # epoch ms


@runtime_checkable
class LogFileWriter(Protocol):
    """One table's ``_delta_log`` as seen by a coordinator client: create files, read them back."""

    def write_new(self, file_name: str, data: bytes) -> WrittenFile:
        """Create ``file_name`` (relative to ``_delta_log``) atomically; ``FileExistsError`` if it exists."""
        ...

    def read(self, file_name: str) -> bytes:
        """The bytes of ``file_name`` (relative to ``_delta_log``); ``FileNotFoundError`` if missing."""
        ...


# table URI -> writer for that table's _delta_log
LogFileWriterFactory = Callable[[str], LogFileWriter]


class CommitCoordinatorClient(Protocol):
    """One interface over the embedded, DynamoDB and Unity Catalog coordinators."""

    def describe(self) -> str:
        """A one-line description for logs; never contains a secret."""
        ...

    def check(self) -> str:
        """A read-only call proving the coordinator is reachable and configured (a connection's
        Test button); a one-line description of what was found, else a ``CoordinatorError``."""
        ...

    def latest_ratified_version(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> int:
        """Latest ratified version, ``-1`` when the coordinator has ratified nothing. One call."""
        ...

    def get_commits(
        self,
        table_uri: str,
        start_version: int | None = None,
        end_version: int | None = None,
        table_conf: Mapping[str, str] | None = None,
    ) -> CommitsResponse:
        """Ratified-but-unpublished commits in ``[start, end]`` (inclusive) plus the latest version."""
        ...

    def report_published(
        self, table_uri: str, version: int, table_conf: Mapping[str, str] | None = None
    ) -> None:
        """Tell the coordinator every version ≤ ``version`` is durably published (idempotent)."""
        ...

    def check_may_report(self, table_uri: str, table_conf: Mapping[str, str] | None = None) -> str:
        """Before anything is published: may we report published versions for this table? One
        cheap call that changes nothing (a refused no-op or an empty report the coordinator
        authorizes exactly like ``report_published``); a one-line description, else a
        ``PermissionDeniedError`` / ``AuthenticationError`` naming what is missing."""
        ...

    def commit(
        self,
        table_uri: str,
        version: int,
        actions: Sequence[Mapping[str, Any]],
        table_conf: Mapping[str, str] | None = None,
    ) -> RatifiedCommit:
        """Stage and ratify ``actions`` as ``version``; ``CommitConflictError`` when it is taken.

        The first action is a ``commitInfo`` carrying ``inCommitTimestamp`` = max(now, previous + 1)
        (added when missing). Version 0 is written directly as ``<0>.json`` (create-if-absent).
        """
        ...

    def close(self) -> None: ...
