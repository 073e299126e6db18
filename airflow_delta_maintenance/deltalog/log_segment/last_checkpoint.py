"""``_last_checkpoint``: a hint, never the truth. Parsing tolerates anything; writing adds the checksum."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = ["LastCheckpointHint", "json_checksum", "parse_last_checkpoint"]


def _encode(text: str) -> str:
    # RFC 3986 unreserved characters stay; everything else is %XX with uppercase hex (PROTOCOL "JSON checksum").
    return quote(text, safe="-._~")


def _flatten(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for key, child in value.items():
            segment = f'"{_encode(str(key))}"'
            _flatten(child, f"{path}+{segment}" if path else segment, out)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            _flatten(child, f"{path}+{i}" if path else str(i), out)
    elif isinstance(value, str):
        out.append((path, f'"{_encode(value)}"'))
    elif value is True:
        out.append((path, "true"))
    elif value is False:
        out.append((path, "false"))
    elif value is None:
        out.append((path, "null"))
    else:
        out.append((path, json.dumps(value)))


def json_checksum(obj: Mapping[str, Any]) -> str:
    """The protocol's canonical MD5 of a JSON object, ignoring its top-level ``checksum`` key."""
    pairs: list[tuple[str, str]] = []
    _flatten({k: v for k, v in obj.items() if k != "checksum"}, "", pairs)
    pairs.sort(key=lambda kv: kv[0].encode("utf-8"))
    canonical = ",".join(f"{k}={v}" for k, v in pairs)
    return hashlib.md5(canonical.encode("utf-8")).hexdigest()


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class LastCheckpointHint:
    version: int
    size: int
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None
    checkpoint_schema: Mapping[str, Any] | None = None
    tags: Mapping[str, str] | None = None
    v2_checkpoint: Mapping[str, Any] | None = None
    checksum: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "size": self.size}
        if self.parts is not None:
            out["parts"] = self.parts
        if self.size_in_bytes is not None:
            out["sizeInBytes"] = self.size_in_bytes
        if self.num_of_add_files is not None:
            out["numOfAddFiles"] = self.num_of_add_files
        if self.checkpoint_schema is not None:
            out["checkpointSchema"] = self.checkpoint_schema
        if self.tags is not None:
            out["tags"] = dict(self.tags)
        if self.v2_checkpoint is not None:
            out["v2Checkpoint"] = self.v2_checkpoint
        out.update(self.extra)
        return out

    def to_json_bytes(self) -> bytes:
        """Serialised with a fresh ``checksum`` (written last, after the checkpoint is complete)."""
        body = self.to_dict()
        body["checksum"] = json_checksum(body)
        return json.dumps(body, separators=(",", ":")).encode("utf-8")


_LONG_MAX = 2**63 - 1


def _count(value: Any, *, optional: bool = False) -> int | None:
    """A non-negative 64-bit integer (never a float, a string or a boolean); -1 for an optional
    field that is present but not one, None for a required one that is missing or not one."""
    if value is None:
        return 0 if optional else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _LONG_MAX:
        return -1 if optional else None
    return value


def parse_last_checkpoint(data: bytes) -> LastCheckpointHint | None:
    """Parse the hint; ``None`` when it is corrupt, has a wrong checksum or lacks required fields,
    or when ``version``, ``size``, ``parts``, ``sizeInBytes`` or ``numOfAddFiles`` is not a
    non-negative 64-bit integer (``1e400``, ``"3"``, ``true``, ``-1``), or it nests too deep.

    Callers fall back to listing, so a bad hint is never an error (delta-rs #2258, kernel-rs #582,
    delta-spark's "corrupted-last-checkpoint" golden table): it is ignored, and rewritten by the
    next checkpoint.
    """
    try:
        obj = json.loads(data, object_pairs_hook=_no_duplicate_keys)
        if not isinstance(obj, dict):
            return None
        version, size = _count(obj.get("version")), _count(obj.get("size"))
        if version is None or size is None or not all(_count(obj.get(k), optional=True) != -1 for k in ("parts", "sizeInBytes", "numOfAddFiles")):
            return None
        checksum = obj.get("checksum")
        if checksum is not None and checksum != json_checksum(obj):
            return None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError, OverflowError):
        return None  # RecursionError: nested past the limit; OverflowError: a number like 1e400
    known = {"version", "size", "parts", "sizeInBytes", "numOfAddFiles", "checkpointSchema", "tags", "v2Checkpoint", "checksum"}
    return LastCheckpointHint(
        version=version,
        size=size,
        parts=obj.get("parts"),
        size_in_bytes=obj.get("sizeInBytes"),
        num_of_add_files=obj.get("numOfAddFiles"),
        checkpoint_schema=obj.get("checkpointSchema"),
        tags=obj.get("tags"),
        v2_checkpoint=obj.get("v2Checkpoint"),
        checksum=checksum,
        extra={k: v for k, v in obj.items() if k not in known},
    )
