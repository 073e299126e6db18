"""Deletion vectors (PROTOCOL "Deletion Vectors"): load a descriptor's bitmap of deleted row indexes.

Storage types: ``i`` (inline: the Z85-encoded bitmap in ``pathOrInlineDv``), ``u`` (a file
``<prefix>/deletion_vector_<uuid>.bin`` next to the data, the UUID Z85-encoded after an optional
random prefix) and ``p`` (an absolute path, which must lie inside the table). A DV file starts with
a version byte (1); at ``offset`` a big-endian int32 size, the bitmap, and a big-endian CRC-32 of
the bitmap, which is checked.

The bitmap is a ``RoaringBitmapArray``: a little-endian magic number, then in the *portable* format
(1681511377, the one delta-spark writes) a 64-bit count of 32-bit Roaring bitmaps each preceded by
its 32-bit high key — exactly CRoaring's 64-bit portable serialisation, which ``pyroaring`` reads
(``BitMap64.deserialize``); the older *native* format (1681511376: a 32-bit count, keys implied
0, 1, …) is read bitmap by bitmap with ``pyroaring.BitMap``.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CorruptLogError, InvalidLogPathError

__all__ = ["DeletionVectorDescriptor", "z85_decode", "dv_log_path", "dv_file_path", "parse_bitmap", "load_deleted_rows", "DeletionVectorError"]

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}


class DeletionVectorError(CorruptLogError):
    """A deletion vector cannot be read or does not match its descriptor; names the data file."""


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None
    max_row_index: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeletionVectorDescriptor:
        return cls(
            storage_type=str(d["storageType"]),
            path_or_inline_dv=str(d["pathOrInlineDv"]),
            size_in_bytes=int(d["sizeInBytes"]),
            cardinality=int(d["cardinality"]),
            offset=None if d.get("offset") is None else int(d["offset"]),
            max_row_index=None if d.get("maxRowIndex") is None else int(d["maxRowIndex"]),
        )


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ RFC 32): 5 characters → 4 bytes, big-endian. A length not a multiple of 5 is
    refused (delta-spark pads inline DVs to a multiple of 4 bytes)."""
    if len(text) % 5:
        raise ValueError(f"Z85 text length {len(text)} is not a multiple of 5")
    out = bytearray()
    try:
        for i in range(0, len(text), 5):
            value = 0
            for c in text[i : i + 5]:
                value = value * 85 + _Z85_INDEX[c]
            out += value.to_bytes(4, "big")
    except (KeyError, OverflowError):
        raise ValueError(f"not Z85 text: {text[:40]!r}") from None
    return bytes(out)


def dv_log_path(storage_type: str, path_or_inline_dv: str) -> str | None:
    """The file of a deletion vector as a log path (to resolve like an ``add.path``): ``u`` →
    ``<prefix>/deletion_vector_<uuid>.bin``, ``p`` → its (absolute) path, ``i`` (inline) → None.
    ``ValueError`` for a ``u`` descriptor whose last 20 characters are not a Z85 UUID."""
    if storage_type == "u":
        prefix, tail = path_or_inline_dv[:-20], path_or_inline_dv[-20:]
        if len(tail) != 20:
            raise ValueError(f"a Z85-encoded UUID has 20 characters, got {len(tail)}")
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(tail))}.bin"
        return f"{prefix}/{name}" if prefix else name
    if storage_type == "p":
        return path_or_inline_dv
    if storage_type == "i":
        return None
    raise ValueError(f"unknown deletion vector storage type {storage_type!r}")


def dv_file_path(descriptor: DeletionVectorDescriptor, resolve: Callable[[str], str]) -> str:
    """The DV file of a ``u`` or ``p`` descriptor, relative to the table root (``resolve``: the
    table's ``DataFiles.resolve``)."""
    logged = dv_log_path(descriptor.storage_type, descriptor.path_or_inline_dv)
    if logged is None:
        raise ValueError(f"storage type {descriptor.storage_type!r} has no file")
    return resolve(logged)


def parse_bitmap(data: bytes) -> np.ndarray:
    """A serialised ``RoaringBitmapArray`` → the sorted deleted row indexes (uint64)."""
    from pyroaring import BitMap, BitMap64

    if len(data) < 4:
        raise ValueError("deletion vector shorter than its magic number")
    magic = struct.unpack_from("<i", data, 0)[0]
    if magic == PORTABLE_MAGIC:
        bitmap = BitMap64.deserialize(data[4:])
        return np.asarray(bitmap.to_array(), dtype=np.uint64)
    if magic == NATIVE_MAGIC:
        (count,) = struct.unpack_from("<i", data, 4)
        pos, parts = 8, []
        for key in range(count):
            bm = BitMap.deserialize(data[pos:])
            pos += len(bm.serialize())
            parts.append(np.asarray(bm.to_array(), dtype=np.uint64) + (np.uint64(key) << np.uint64(32)))
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)
    raise ValueError(f"unknown deletion vector magic number {magic}")


def load_deleted_rows(
    descriptor: DeletionVectorDescriptor,
    resolve: Callable[[str], str],
    read_range: Callable[[str, int, int], bytes],
    *,
    data_file: str = "",
) -> np.ndarray:
    """The deleted row indexes of a descriptor; ``resolve`` turns its log path into a path relative
    to the root (``DataFiles.resolve``), ``read_range(relative_path, offset, length)`` reads DV file
    bytes. The count must equal the descriptor's cardinality."""
    where = data_file or descriptor.path_or_inline_dv
    try:
        if descriptor.storage_type == "i":
            raw = z85_decode(descriptor.path_or_inline_dv)[: descriptor.size_in_bytes]
        elif descriptor.storage_type in ("u", "p"):
            path = dv_file_path(descriptor, resolve)
            offset = descriptor.offset if descriptor.offset is not None else 1
            blob = read_range(path, offset, descriptor.size_in_bytes + 8)
            if len(blob) < descriptor.size_in_bytes + 8:
                raise ValueError(f"{path} ends before offset {offset} + {descriptor.size_in_bytes + 8} bytes")
            (size,) = struct.unpack_from(">i", blob, 0)
            if size != descriptor.size_in_bytes:
                raise ValueError(f"{path} at offset {offset} holds {size} bytes, the descriptor says {descriptor.size_in_bytes}")
            raw = blob[4 : 4 + size]
            (crc,) = struct.unpack_from(">I", blob, 4 + size)
            if crc != zlib.crc32(raw) & 0xFFFFFFFF:
                raise ValueError(f"{path} at offset {offset}: checksum mismatch")
        else:
            raise ValueError(f"unknown storage type {descriptor.storage_type!r}")
        rows = parse_bitmap(raw)
    except InvalidLogPathError:
        raise
    except FileNotFoundError as exc:
        raise DeletionVectorError(f"deletion vector of {where}: file missing ({exc})", path=where) from None
    except (ValueError, struct.error, OSError) as exc:
        raise DeletionVectorError(f"deletion vector of {where}: {exc}", path=where) from None
    if len(rows) != descriptor.cardinality:
        raise DeletionVectorError(
            f"deletion vector of {where} holds {len(rows)} rows, its descriptor says {descriptor.cardinality}", path=where
        )
    return rows
