"""Typed errors of the log library. Every error names the file (and line or version) it is about."""

from __future__ import annotations

__all__ = [
    "DeltaLogError",
    "TableNotFoundError",
    "MissingCommitError",
    "VersionNotFoundError",
    "CorruptLogError",
    "IncompleteCheckpointError",
    "MissingSidecarError",
    "UnsupportedFeatureError",
    "InvalidLogPathError",
    "LogFileExistsError",
    "AtomicWriteUnsupportedError",
    "StorageConflictError",
    "UnpublishedVersionError",
    "ProtocolViolationError",
    "InvalidTablePropertyError",
    "NonMonotonicTimestampError",
    "SymlinkInLogError",
    "InvalidOptionError",
    "DataPathError",
]


class DeltaLogError(Exception):
    """Base class; ``path`` is the file the error is about, when there is one."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class TableNotFoundError(DeltaLogError):
    """The table root has no ``_delta_log`` directory, or it holds no commit or checkpoint."""


class MissingCommitError(DeltaLogError):
    """A version needed to reconstruct the requested snapshot has no commit file (a gap)."""

    def __init__(self, message: str, *, version: int, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.version = version


class VersionNotFoundError(DeltaLogError):
    """The requested version is newer than the latest version or older than the earliest readable one."""

    def __init__(self, message: str, *, version: int, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.version = version


class CorruptLogError(DeltaLogError):
    """A log file cannot be parsed: a truncated or non-JSON line, a bad Parquet footer, a bad action."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message, path=path)
        self.line = line


class IncompleteCheckpointError(DeltaLogError):
    """A checkpoint named as complete (by ``_last_checkpoint`` or by the caller) lacks a part."""


class MissingSidecarError(DeltaLogError):
    """A V2 checkpoint references a sidecar file that does not exist."""


class UnsupportedFeatureError(DeltaLogError):
    """The table needs a reader (or writer) feature this library does not implement."""

    def __init__(self, message: str, *, features: list[str], path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.features = features


class InvalidLogPathError(DeltaLogError):
    """A file name would resolve outside where it must lie: the table's ``_delta_log`` directory
    (or, ``DataPathError``, the table root)."""


class LogFileExistsError(DeltaLogError):
    """A create-if-absent write found the file already present."""


class AtomicWriteUnsupportedError(DeltaLogError):
    """The storage backend cannot create a file atomically if absent."""


class StorageConflictError(DeltaLogError):
    """A conditional create stayed undecided: the store kept reporting another conditional write of
    the same file in flight (S3's 409 ConditionalRequestConflict). Transient: try again."""


class UnpublishedVersionError(DeltaLogError):
    """An operation that needs published versions was asked to cover an unpublished one."""

    def __init__(self, message: str, *, version: int, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.version = version


class ProtocolViolationError(DeltaLogError):
    """The log contradicts the protocol (for example two protocol actions in one snapshot missing)."""


class InvalidTablePropertyError(DeltaLogError):
    """A ``delta.*`` table property has a value the protocol does not allow; names the key."""

    def __init__(self, message: str, *, key: str, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.key = key


class NonMonotonicTimestampError(CorruptLogError):
    """In-commit timestamps are not strictly increasing from their enablement version on; names both versions."""

    def __init__(self, message: str, *, versions: tuple[int, int], path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.versions = versions


class SymlinkInLogError(InvalidLogPathError):
    """A file or directory inside ``_delta_log`` is a symbolic link: it could lead out of the table."""


class InvalidOptionError(DeltaLogError, ValueError):
    """An option value (a retention, a clock) is out of range; names the option."""

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(message, path=None)
        self.option = option


class DataPathError(InvalidLogPathError):
    """A data file path of the log does not name a file below the table root (``../x``,
    ``/etc/shadow``, another store, the log itself), or names one ambiguously; ``path`` is the path
    as logged. An ``InvalidLogPathError``: no retry can fix it."""
