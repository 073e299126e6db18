"""What ``LogStore`` needs to know about an fsspec file system: which store it is (by class, so that
no optional client is imported to ask), a file's modification time whatever the backend calls it,
and what an error of a conditional create means (by type and service error code, never by text)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import fsspec

__all__ = ["LOCAL", "MEMORY", "S3", "AZURE", "GCS", "OTHER", "ATOMIC_BACKENDS", "backend_of", "is_local_fs", "is_memory_fs",
           "forget_listings", "list_files", "mtime_ms", "to_epoch_ms", "is_create_conflict", "is_conflict_in_flight"]

LOCAL, MEMORY, S3, AZURE, GCS, OTHER = "local", "memory", "s3", "azure", "gcs", "other"
# Stores whose create-if-absent is one atomic request (or completion) of the service itself.
ATOMIC_BACKENDS = frozenset({LOCAL, MEMORY, S3, AZURE, GCS})
# The top-level package of each client's file system classes (subclasses included).
_CLIENT_PACKAGES = {"s3fs": S3, "adlfs": AZURE, "gcsfs": GCS}


def backend_of(fs: fsspec.AbstractFileSystem) -> str:
    """local, memory, s3 (s3fs), azure (adlfs: az://, abfs://, abfss://), gcs (gcsfs) or other."""
    if is_local_fs(fs):
        return LOCAL
    if is_memory_fs(fs):
        return MEMORY
    for cls in type(fs).__mro__:
        backend = _CLIENT_PACKAGES.get(cls.__module__.split(".", 1)[0])
        if backend is not None:
            return backend
    return OTHER


def is_local_fs(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.local import LocalFileSystem  # loaded already: the caller built `fs`

    return isinstance(fs, LocalFileSystem)


def is_memory_fs(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.memory import MemoryFileSystem

    return isinstance(fs, MemoryFileSystem)


def forget_listings(fs: fsspec.AbstractFileSystem, path: str) -> None:
    """Drop fsspec's cached listings of ``path`` and of every directory above it: a client may
    answer ``info``/``exists`` from its parent's listing (adlfs does, and pops only the path itself
    when told to forget it), which misses a file another process wrote after that listing."""
    path = path.rstrip("/")
    while True:
        fs.invalidate_cache(path)
        parent = fs._parent(path).rstrip("/")
        if not parent or parent == path:
            return
        path = parent


def list_files(
    fs: fsspec.AbstractFileSystem, directory: str, prefix: str, display: Callable[[str], str], refuse_dir: Callable[[str], bool] = lambda name: False
) -> list[tuple[str, int, int]]:
    """``(prefix + name, size, mtime ms)`` of the files directly in ``directory``, listed now (never
    from fsspec's cache of an earlier listing); a missing directory is empty. ``SymlinkInLogError``
    for an entry the store reports as a link (``display`` names it), ``CorruptLogError`` for a
    directory whose name ``refuse_dir`` (a log file's name: it would be read as one)."""
    from ..errors import CorruptLogError, SymlinkInLogError

    forget_listings(fs, directory)
    try:
        entries = fs.ls(directory, detail=True)
    except FileNotFoundError:
        return []
    out = []
    for info in entries:
        base = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
        if info.get("islink") or info.get("type") == "link":
            raise SymlinkInLogError(f"{display(prefix + base)} is a symbolic link; refusing to follow it out of the table", path=prefix + base)
        if info.get("type") == "directory":
            if refuse_dir(prefix + base):
                raise CorruptLogError(f"{display(prefix + base)} is a directory, not a log file", path=prefix + base)
            continue
        out.append((prefix + base, int(info.get("size") or 0), mtime_ms(fs, info)))
    return out


# ---- modification times ---------------------------------------------------------------------------

# Where each client puts it: local "mtime" (float seconds), s3fs "LastModified" (datetime), adlfs
# "last_modified" (datetime, whole seconds on Azure), gcsfs "mtime" (datetime) and "updated" (ISO text).
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated")
_FRACTION = re.compile(r"\.(\d+)")


def to_epoch_ms(value: Any) -> int | None:
    """Epoch milliseconds from a datetime (naive = UTC), a date (its midnight UTC), an ISO 8601 text
    or a number of seconds (milliseconds when it is too big to be seconds); None otherwise."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, date):
        return int(datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp() * 1000)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value * 1000) if value < 1e11 else int(value)
    if isinstance(value, str) and value:
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        # Python 3.10's fromisoformat takes 3 or 6 fraction digits only; services send 1 to 9
        text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
        try:
            return to_epoch_ms(datetime.fromisoformat(text))
        except ValueError:
            try:
                return to_epoch_ms(float(text))
            except ValueError:
                return None
    return None


def mtime_ms(fs: fsspec.AbstractFileSystem, info: Mapping[str, Any]) -> int:
    """Modification time in epoch ms from an fsspec ``info`` dict, whatever the backend calls it
    (0 when it has none). Azure's are whole seconds: a file may look up to 999 ms older."""
    for key in _MTIME_KEYS:
        value = info.get(key)
        if value is not None:
            ms = to_epoch_ms(value)
            if ms is not None:
                return ms
    if is_memory_fs(fs):  # memory `ls` only reports "created"
        entry = fs.store.get(info["name"]) or fs.store.get("/" + str(info["name"]).lstrip("/"))
        if entry is not None:
            return int(entry.modified.timestamp() * 1000)
    return to_epoch_ms(info.get("created")) or 0


# ---- errors of a conditional create ---------------------------------------------------------------

# Service error codes meaning "the object exists" to a create with If-None-Match: * (S3, Azure) or
# ifGenerationMatch=0 (GCS, which gcsfs raises as FileExistsError itself).
_EXISTS_CODES = frozenset({"PreconditionFailed", "BlobAlreadyExists", "ConditionNotMet"})
# S3's answer while another conditional write of the key is in flight: undecided, not "exists".
_IN_FLIGHT_CODES = frozenset({"ConditionalRequestConflict"})


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _service_error(exc: BaseException) -> tuple[int | None, str | None]:
    """(HTTP status, service error code) of a client error in ``exc`` or its causes: botocore's
    ClientError (``response`` dict, which s3fs chains as the cause of its OSError) or azure-core's
    HttpResponseError (``status_code``, ``error_code``). Duck-typed: no client is imported."""
    for e in _causes(exc):
        response = getattr(e, "response", None)
        if isinstance(response, Mapping):
            error = response.get("Error") or {}
            meta = response.get("ResponseMetadata") or {}
            return meta.get("HTTPStatusCode"), error.get("Code")
        status = getattr(e, "status_code", None)
        if isinstance(status, int) and type(e).__module__.startswith("azure."):
            code = getattr(e, "error_code", None)
            return status, str(code) if code is not None else None
    return None, None


def is_create_conflict(exc: BaseException) -> bool:
    """Did a conditional create fail because the object exists? FileExistsError (s3fs when S3 names
    the If-None-Match condition, adlfs, gcsfs for every 412), or the service's code for it under
    any error the client made of it (MinIO's 412 has no <Condition>: s3fs raises OSError(EINVAL))."""
    if isinstance(exc, FileExistsError):
        return True
    status, code = _service_error(exc)
    return code in _EXISTS_CODES or (code is None and status == 412)


def is_conflict_in_flight(exc: BaseException) -> bool:
    """S3's 409 ConditionalRequestConflict: another conditional write of the key has not finished."""
    return _service_error(exc)[1] in _IN_FLIGHT_CODES
