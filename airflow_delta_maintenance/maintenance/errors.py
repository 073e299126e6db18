"""Errors of the maintenance use cases; each names the table, version and file it is about."""

from __future__ import annotations

from ..deltalog.errors import DeltaLogError

__all__ = [
    "MaintenanceError",
    "PublishForkError",
    "StagedCommitError",
    "CoordinatorMismatchError",
    "CoordinatorNotConfiguredError",
    "CoordinatorUnreachableError",
    "MissingStagedCommitError",
    "InconsistentCoordinatorError",
    "SparkJobError",
    "ChecksumMismatchError",
]


class MaintenanceError(DeltaLogError):
    """Base class of maintenance failures."""

    def __init__(self, message: str, *, version: int | None = None, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.version = version


class PublishForkError(MaintenanceError):
    """``<v>.json`` exists with bytes different from the ratified commit: the table has forked.

    Nothing further is published and nothing is reported to the coordinator.
    """


class StagedCommitError(MaintenanceError):
    """A ratified commit cannot be published as it is: its staged file is missing, is not NDJSON,
    has the wrong name, or its in-commit timestamp differs from the coordinator's."""


class CoordinatorMismatchError(MaintenanceError):
    """The configured coordinator contradicts the one the table declares (kind, DynamoDB table,
    table id, embedded database), or the table's coordinator cannot be determined. Permanent."""


class CoordinatorNotConfiguredError(CoordinatorMismatchError):
    """The table declares a coordinator, none was given, and the declared one cannot be opened from
    what the table says (a Unity Catalog table names no server, a DynamoDB region is unknown, the
    embedded database is not there, an unsupported coordinator): nothing may be acted on without
    it. The message names the declaration and how to configure it. Permanent."""


class CoordinatorUnreachableError(MaintenanceError):
    """The coordinator the table declares (used because none was given) did not answer; the
    message names the declaration and how to configure another endpoint. Transient: a retry may
    reach it."""


class MissingStagedCommitError(StagedCommitError):
    """The staged file of a ratified commit is in neither staged-commit directory."""


class InconsistentCoordinatorError(MaintenanceError):
    """The coordinator's answer contradicts itself or the log (a latest version with nothing to
    reach it, pending commits with gaps): nothing is acted on until it is consistent."""


class SparkJobError(MaintenanceError):
    """The Spark job failed, or finished without the expected files in the log."""


class ChecksumMismatchError(MaintenanceError):
    """A ``<v>.crc`` in the log disagrees with the table's replay, or cannot be read. Never
    rewritten: the log's author (or whoever tampered with it) must look at it. Permanent."""
