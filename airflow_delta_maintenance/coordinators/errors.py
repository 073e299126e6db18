"""Typed coordinator errors, classified like delta-spark's ``CommitFailedException(retryable, conflict)``."""

from __future__ import annotations

__all__ = [
    "CoordinatorError",
    "CommitConflictError",
    "CommitLimitReachedError",
    "TableNotFoundError",
    "AuthenticationError",
    "PermissionDeniedError",
    "InvalidCoordinatorSpecError",
    "CoordinatorNotFoundError",
]


class CoordinatorError(Exception):
    """A coordinator call failed.

    ``retryable``: the same call may succeed later (transient). ``conflict``: another writer won
    the version. ``false/false`` is fatal (bad request, permission, schema mismatch).
    """

    def __init__(
        self, message: str, *, retryable: bool = False, conflict: bool = False, version: int | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.conflict = conflict
        self.version = version


class CommitConflictError(CoordinatorError):
    """The proposed version is already ratified (or the table moved on); rebase and retry."""

    def __init__(self, message: str, *, version: int, retryable: bool = True) -> None:
        super().__init__(message, retryable=retryable, conflict=True, version=version)


class CommitLimitReachedError(CoordinatorError):
    """Too many ratified commits are unpublished (Unity Catalog 429): publish and report, then retry."""

    def __init__(self, message: str, *, version: int | None = None) -> None:
        super().__init__(message, retryable=True, conflict=False, version=version)


class TableNotFoundError(CoordinatorError):
    """The coordinator does not know the table (``missing``: ``catalog``, ``schema`` or ``table`` when it says which)."""

    def __init__(self, message: str, *, missing: str | None = None, version: int | None = None) -> None:
        super().__init__(message, version=version)
        self.missing = missing


class AuthenticationError(CoordinatorError):
    """The coordinator refused the credentials themselves (HTTP 401): missing, expired or foreign token."""


class PermissionDeniedError(CoordinatorError):
    """The principal is known but lacks a privilege (HTTP 403); the message names the privilege needed."""


class InvalidCoordinatorSpecError(CoordinatorError, ValueError):
    """A coordinator spec string cannot be parsed; the message names the offending part."""


class CoordinatorNotFoundError(CoordinatorError):
    """The coordinator itself is missing (an embedded database that does not exist or is not one):
    a configuration mistake, never created implicitly."""
