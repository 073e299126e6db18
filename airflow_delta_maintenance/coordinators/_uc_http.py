"""HTTP transport of the Unity Catalog client: JSON requests, error classification, bounded retries.

Unity Catalog answers errors in two shapes: the UC REST API (``all.yaml``, including the preview
commits API) sends ``{"error_code": "RESOURCE_EXHAUSTED", "message": ...}``; the Delta API v1
(``delta.yaml``) sends ``{"error": {"code": 429, "type": "ResourceExhaustedException", ...}}``.

Success: any 2xx. Calls that only need the status (commits, backfill reports: the OSS server
answers them ``200`` ``text/plain`` ``200 OK``) pass ``answer=False`` and ignore the body; calls
that read a JSON document retry a 2xx whose body is not JSON like a transient error.

Classification:
- 429 with ``ResourceExhaustedException`` / ``RESOURCE_EXHAUSTED``: too many unpublished commits →
  ``CommitLimitReachedError`` at once (retrying cannot help until someone publishes);
- any other 429 (``TooManyRequestsException``, ``REQUEST_LIMIT_EXCEEDED``, no body), 5xx except 501,
  and connection errors/timeouts are transient: retried with exponential backoff and full jitter,
  honouring ``Retry-After``, at most ``max_attempts`` times, then raised as retryable
  (``HttpUnknown`` keeps the last failure so a commit can decide by content what happened);
- 409 (and "already exists" under any status: UC REST's 400 ``TABLE_ALREADY_EXISTS``, ≤ 0.4's
  ``ALREADY_EXISTS``) → ``HttpConflict`` (the caller knows whether it was a commit);
- 404 → ``TableNotFoundError`` saying whether the catalog, the schema or the table is missing
  (``missing`` is ``None`` for an untyped 404: no such route);
- 401 → ``AuthenticationError``; 403 → ``PermissionDeniedError`` naming the privilege the call
  needs (the server only says "Access denied."); other 4xx and 501 are fatal (``HttpRefused``).

The bearer token only ever goes into the ``Authorization`` header; every message that leaves this
module passes through ``scrub`` in case a server echoes it.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from .errors import AuthenticationError, CommitLimitReachedError, CoordinatorError, PermissionDeniedError, TableNotFoundError

__all__ = ["UCTransport", "HttpConflict", "HttpFailure", "HttpRefused", "HttpUnknown"]

_LIMIT_TYPES = {"ResourceExhaustedException", "RESOURCE_EXHAUSTED"}
# the UC REST API answers "already exists" with 400 for backward compatibility; the Delta API with 409
_EXISTS_TYPES = {"AlreadyExistsException", "TABLE_ALREADY_EXISTS", "RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"}
# 404s that say what is missing, in both dialects (an untyped 404 is a route the server lacks)
_MISSING = {
    "CATALOG_NOT_FOUND": "catalog", "NoSuchCatalogException": "catalog",
    "SCHEMA_NOT_FOUND": "schema", "NoSuchSchemaException": "schema",
    "TABLE_NOT_FOUND": "table", "NoSuchTableException": "table",
}


@dataclass(frozen=True)
class HttpFailure:
    status: int
    error_type: str
    message: str


class HttpConflict(Exception):
    """A 409; ``failure`` says which (``CommitVersionConflictException``, ``UpdateRequirementConflictException``, …)."""

    def __init__(self, failure: HttpFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class HttpUnknown(CoordinatorError):
    """Retries ran out on transient failures (5xx, lost connections): the call may or may not have
    been applied. ``failure`` is the last HTTP failure, ``None`` when the answer never came."""

    def __init__(self, message: str, failure: HttpFailure | None) -> None:
        super().__init__(message, retryable=True)
        self.failure = failure


class HttpRefused(CoordinatorError):
    """Any other 4xx (and 501): the server refused the request as it is; ``failure`` says how."""

    def __init__(self, message: str, failure: HttpFailure) -> None:
        super().__init__(message, retryable=False)
        self.failure = failure


def body_too_long(failure: HttpFailure) -> bool:
    """UC 0.5.x's authorization decorator evaluates its expression on every chunk of a JSON body it
    peeks at, the first one before the names it needs have arrived: a SpEL error (EL1023E) over a
    null resource, answered 500. A resend fails the same way (and nothing was applied: the handler
    never ran), so it is not retried. 0.6.0 evaluates only once the body parses (unitycatalog#1494)."""
    return failure.status == 500 and "EL1023E" in failure.message and "is null" in failure.message


class UCTransport:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        describe: Callable[[], str],
        max_attempts: int = 5,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token or None
        self._describe = describe
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout_s = timeout_s
        self._sleep = sleep

    def __repr__(self) -> str:  # never show the token
        return f"UCTransport({self.base_url!r})"

    def scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        query: Mapping[str, str] | None = None,
        *,
        answer: bool = True,
        privilege: str = "",
    ) -> dict[str, Any]:
        """Send one call; its JSON answer (``{}`` for an empty body, or whatever the body when not ``answer``).

        ``privilege`` names what the call needs, for the message of a 403.
        """
        url = self.base_url + quote(path, safe="/.-_~")
        if query:
            url += "?" + urlencode(query)
        # compact: UC 0.5.x with authorization on reads only its first ~2 KB (see body_too_long)
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        what = f"{method} {path}"
        last = ""
        failure: HttpFailure | None = None
        for attempt in range(self.max_attempts):
            delay: float | None = None
            content_type = ""
            try:
                req = urllib.request.Request(url, data=data, method=method, headers=headers)
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                    content_type = resp.headers.get("Content-Type", "")
                if not answer:
                    return {}  # a 2xx is the whole answer (the OSS server sends text/plain "200 OK")
                if not raw.strip():
                    return {}
                parsed = json.loads(raw)
                if not isinstance(parsed, dict):
                    raise ValueError("not a JSON object")
                return parsed
            except urllib.error.HTTPError as exc:
                failure = _parse_error(exc)
                if data is not None and body_too_long(failure):
                    raise HttpRefused(self.scrub(
                        f"{self._describe()}: {what} failed with {failure.status} {failure.error_type}: {failure.message} — "
                        f"Unity Catalog 0.5.x with authorization on checks privileges on the first read of a request "
                        f"(about 2 KB) and fails on a longer body (this one is {len(data)} bytes; fixed in 0.6.0): "
                        f"use api=v1, which names the table in the URL, or Unity Catalog 0.6.0 or later"), failure) from None
                self._raise_permanent(what, failure, privilege)
                last = f"{failure.status} {failure.error_type or 'error'}: {failure.message}"
                delay = _retry_after(exc)
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError) as exc:
                failure = None  # no answer at all this time
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except ValueError:
                last = f"the server answered 2xx with a body that is not a JSON object ({content_type or 'no content type'})"
            if attempt + 1 < self.max_attempts:
                cap = min(self.max_backoff_s, self.backoff_s * (2**attempt))
                self._sleep(min(self.max_backoff_s, delay) if delay is not None else random.uniform(0, cap) + cap / 2)
        raise HttpUnknown(self.scrub(f"{self._describe()}: {what} failed after {self.max_attempts} attempts: {last}"), failure)

    def _raise_permanent(self, what: str, failure: HttpFailure, privilege: str) -> None:
        """Raise for errors that a retry cannot fix; return for transient ones."""
        said = f"{failure.status} {failure.error_type}: {failure.message}".replace(" : ", ": ")
        text = self.scrub(f"{self._describe()}: {what} failed with {said}")
        if failure.status == 429:
            if failure.error_type in _LIMIT_TYPES:
                raise CommitLimitReachedError(text)
            return  # plain throttling
        if failure.status >= 500 and failure.status != 501:
            return
        if failure.status == 409 or failure.error_type in _EXISTS_TYPES:
            raise HttpConflict(HttpFailure(failure.status, failure.error_type, self.scrub(failure.message)))
        if failure.status == 404:
            missing = _MISSING.get(failure.error_type)
            if missing:
                text = self.scrub(f"{self._describe()}: the {missing} does not exist ({what} answered {said})")
            raise TableNotFoundError(text, missing=missing)
        if failure.status == 401:
            raise AuthenticationError(self.scrub(
                f"{self._describe()}: {what} was refused as unauthenticated ({said}): "
                f"{'the token is not valid for this server (expired, revoked or issued elsewhere)' if self._token else 'no token was configured'}; "
                "give a Unity Catalog access token in the connection's password or the environment"))
        if failure.status == 403:
            need = f"; the principal needs {privilege}" if privilege else ""
            raise PermissionDeniedError(self.scrub(f"{self._describe()}: {what} was refused ({said}){need}"))
        raise HttpRefused(text, failure)


def _parse_error(exc: urllib.error.HTTPError) -> HttpFailure:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    err = body.get("error")
    if not isinstance(err, dict):
        err = {}
    error_type = str(err.get("type") or body.get("error_code") or "")
    message = str(err.get("message") or body.get("message") or exc.reason or "")
    return HttpFailure(exc.code, error_type, message[:500])


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    value = exc.headers.get("Retry-After") if exc.headers else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
