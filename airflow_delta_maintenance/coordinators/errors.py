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
    "CoordinatorAnswerError",
    "MalformedAnswerError",
    "InconsistentCommitsError",
    "EXPIRED_CREDENTIAL_CODES",
    "is_expired_credentials",
]

# AWS error codes of a request signed with keys that have expired (DynamoDB, S3, STS and the rest).
# Refreshable credentials or a connection read again fix them: retryable, never a configuration error.
EXPIRED_CREDENTIAL_CODES = frozenset({"ExpiredTokenException", "ExpiredToken", "RequestExpired", "TokenRefreshRequired"})


def is_expired_credentials(exc: BaseException) -> bool:
    """Is ``exc``, or an error it was raised from, an AWS error for expired keys? (s3fs turns
    ``ExpiredToken`` into a ``PermissionError`` whose cause is botocore's ``ClientError``.)"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, dict) and (response.get("Error") or {}).get("Code") in EXPIRED_CREDENTIAL_CODES:
            return True
        if any(code in str(current) for code in ("ExpiredToken", "security token included in the request is expired")):
            return True
        current = current.__cause__ or current.__context__
    return False


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


class CoordinatorAnswerError(CoordinatorError):
    """The coordinator answered, but its answer cannot be trusted: nothing is acted on until its
    state is repaired. Permanent (asking again gets the same answer). ``field`` names the part of
    the answer at fault when there is one."""

    def __init__(self, message: str, *, version: int | None = None, field: str | None = None) -> None:
        super().__init__(message, retryable=False, conflict=False, version=version)
        self.field = field


class MalformedAnswerError(CoordinatorAnswerError):
    """A field of the answer is missing or of the wrong type or range (a DynamoDB item departing
    from delta-spark's schema, a Unity Catalog response departing from its API)."""


class InconsistentCommitsError(CoordinatorAnswerError):
    """The ratified commits contradict each other or the latest ratified version: listed twice,
    out of order, with a gap, above the head, or stopping short of it."""
