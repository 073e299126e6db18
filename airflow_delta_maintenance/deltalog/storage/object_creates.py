"""Create-if-absent on object stores: one conditional request per store, never an exists-check.

- S3 (s3fs): PutObject, or CompleteMultipartUpload for a stream, with ``If-None-Match: *``.
- Azure Blob / ADLS Gen2 (adlfs, Blob API): Put Blob, or Put Block List for a stream, with
  ``If-None-Match: *`` (the staged blocks of a refused stream are never committed).
- GCS (gcsfs): a simple or resumable upload with ``ifGenerationMatch=0`` (checked when it finishes).
- memory: an exclusive insert under one in-process lock.

Every create carries a token of its own in the object's user metadata. Each client resends a
create whose response was lost (a dropped connection, a timeout): the resend finds the object
the first request stored and is refused. On any refusal the object's token is read back (one
HEAD): our own token means our own create succeeded; anything else is another writer's, however
identical its bytes (two publishers of one ratified commit write identical bytes, and exactly
one of them created the file).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import LogFileExistsError, StorageConflictError
from .fsspec_files import AZURE, GCS, MEMORY, S3, forget_listings, is_conflict_in_flight, is_create_conflict

if TYPE_CHECKING:
    import fsspec

__all__ = ["WRITE_TOKEN_KEY", "STREAM_PART_BYTES", "create_object", "create_object_stream"]

# User-metadata key of the create token (lower-case letters only: valid as an S3 x-amz-meta- name,
# an Azure metadata name, which must be a C# identifier, and a GCS metadata key).
WRITE_TOKEN_KEY = "deltamaintenancewrite"
# S3 409 ConditionalRequestConflict (another conditional write of the key in flight): tries, first pause.
IN_FLIGHT_TRIES = 6
IN_FLIGHT_PAUSE_S = 0.05
# Part (S3) / chunk (GCS) size of a streamed create: about the memory one holds (s3fs's default is
# 50 MiB). S3's minimum part is 5 MiB; 10,000 parts of 8 MiB allow objects up to 78 GiB.
STREAM_PART_BYTES = 8 << 20

_MEMORY_LOCK = threading.Lock()


def _new_token() -> str:
    return uuid.uuid4().hex


def create_object(fs: fsspec.AbstractFileSystem, backend: str, path: str, data: bytes, *, name: str, display: str) -> None:
    """Create ``path`` with ``data`` if absent; ``LogFileExistsError`` when another writer did."""
    token = _new_token()
    if backend == MEMORY:
        with _MEMORY_LOCK:
            if fs.exists(path):  # under the lock every create of this process takes: no race
                raise LogFileExistsError(f"{display} already exists", path=name)
            fs.pipe_file(path, data)
        return
    _decided(fs, backend, path, token, name, display, lambda: _put(fs, backend, path, data, token))


def create_object_stream(fs: fsspec.AbstractFileSystem, backend: str, path: str, write: Callable[[Any], None], *, name: str, display: str) -> int:
    """Create ``path`` if absent with what ``write(stream)`` writes, uploaded as it comes (blocks,
    parts or chunks of the client's block size: a big checkpoint is never whole in memory). The
    condition travels on the request that completes the upload; returns the size."""
    if backend == MEMORY:
        import io

        buffer = io.BytesIO()
        write(buffer)
        create_object(fs, backend, path, buffer.getvalue(), name=name, display=display)
        return len(buffer.getvalue())
    token = _new_token()
    sink = _LazyCreate(lambda: _open_exclusive(fs, backend, path, token))
    try:
        write(sink)
    except BaseException:
        sink.abandon()
        raise
    if sink.file is None:  # nothing written: an empty object (a client would "touch" it unconditionally)
        _decided(fs, backend, path, token, name, display, lambda: _put(fs, backend, path, b"", token))
        return 0
    _decided(fs, backend, path, token, name, display, sink.finish, retry=False)
    return sink.size


def _decided(fs: fsspec.AbstractFileSystem, backend: str, path: str, token: str, name: str, display: str,
             attempt: Callable[[], None], *, retry: bool = True) -> None:
    """Run ``attempt`` (one conditional create); map its refusal to ``LogFileExistsError`` unless
    the object holds our own token, and retry S3's undecided 409 a few times."""
    pause = IN_FLIGHT_PAUSE_S
    for tries in range(1, IN_FLIGHT_TRIES + 1):
        try:
            attempt()
            return
        except Exception as exc:
            if is_create_conflict(exc):
                if _token_of(fs, backend, path) == token:
                    return  # a resend of our own create, whose first response was lost
                raise LogFileExistsError(f"{display} already exists", path=name) from exc
            if not is_conflict_in_flight(exc):
                raise
            if not retry or tries == IN_FLIGHT_TRIES:
                raise StorageConflictError(
                    f"{display}: the store reported another conditional write of it in flight {tries} time(s); try again",
                    path=name,
                ) from exc
        time.sleep(pause)
        pause *= 2


def _put(fs: fsspec.AbstractFileSystem, backend: str, path: str, data: bytes, token: str) -> None:
    if backend == S3:
        fs.pipe_file(path, data, mode="create", Metadata={WRITE_TOKEN_KEY: token})
    elif backend == GCS:
        fs.pipe_file(path, data, mode="create", metadata={WRITE_TOKEN_KEY: token})
    elif backend == AZURE:
        # adlfs's pipe_file fixes the blob's metadata: the same Put Blob with our token added
        from fsspec.asyn import sync

        sync(fs.loop, _azure_put_blob, fs, path, data, token)
    else:
        raise ValueError(f"no conditional create for {backend}")


async def _azure_put_blob(fs: Any, path: str, data: bytes, token: str) -> None:
    container, blob, _ = fs.split_path(path)
    async with fs.service_client.get_blob_client(container=container, blob=blob) as client:
        # overwrite=False: If-None-Match: * on the Put Blob (or on Put Block List past the single-put size)
        await client.upload_blob(data, overwrite=False, metadata={"is_directory": "false", WRITE_TOKEN_KEY: token},
                                 max_concurrency=fs.max_concurrency or 1, **getattr(fs, "_timeout_kwargs", {}))
    fs.invalidate_cache(fs._parent(path))


def _open_exclusive(fs: fsspec.AbstractFileSystem, backend: str, path: str, token: str) -> Any:
    if backend == S3:
        return fs.open(path, "xb", block_size=STREAM_PART_BYTES, Metadata={WRITE_TOKEN_KEY: token})
    if backend == GCS:
        return fs.open(path, "xb", metadata={WRITE_TOKEN_KEY: token})
    if backend == AZURE:
        return fs.open(path, "xb", metadata={"is_directory": "false", WRITE_TOKEN_KEY: token})
    raise ValueError(f"no conditional create for {backend}")


def _token_of(fs: fsspec.AbstractFileSystem, backend: str, path: str) -> str | None:
    """The create token of the object now at ``path`` (None: none, or the object is gone again)."""
    forget_listings(fs, path)
    try:
        if backend == S3:
            meta = fs.metadata(path, refresh=True)  # HeadObject's user metadata
        else:
            meta = fs.info(path, refresh=True).get("metadata") if backend == AZURE else fs.info(path).get("metadata")
    except FileNotFoundError:
        return None
    value = (meta or {}).get(WRITE_TOKEN_KEY)
    return str(value) if value is not None else None


class _LazyCreate:
    """A write-only stream that opens the exclusive upload at its first byte (an empty stream is
    created by one conditional put instead: s3fs would commit it with an unconditional touch)."""

    def __init__(self, opener: Callable[[], Any]) -> None:
        self._opener = opener
        self.file: Any = None
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        if n:
            if self.file is None:
                self.file = self._opener()
            self.file.write(data)
            self.size += n
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        """A no-op: the client uploads whole blocks as they fill; the rest goes at ``finish``."""

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        """Callers' ``close`` (a Parquet writer closing its sink) does not complete the upload:
        ``finish`` does, where its refusal is decided."""
        self.closed = True

    def finish(self) -> None:
        try:
            self.file.close()  # the completing request, with the condition
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """The writer failed: drop the upload (S3 aborts its multipart upload, GCS deletes its
        session, Azure's uncommitted blocks expire) and never complete it, not even when collected."""
        file = self.file
        if file is None:
            return
        try:
            file.discard()
        except Exception:  # noqa: BLE001 - best effort: the upload was never completed
            pass
        file.closed = True
