"""Names of the files in ``_delta_log``: parsing, formatting and ordering.

This is the only module that formats versions (20 digits) and part numbers (10 digits).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = [
    "LOG_DIR",
    "STAGED_DIR",
    "LEGACY_STAGED_DIR",
    "SIDECAR_DIR",
    "LAST_CHECKPOINT",
    "LogFileType",
    "ParsedLogPath",
    "parse_log_path",
    "commit_name",
    "classic_checkpoint_name",
    "multipart_checkpoint_name",
    "uuid_checkpoint_name",
    "compaction_name",
    "crc_name",
    "staged_commit_name",
    "checkpoint_rank",
]

LOG_DIR = "_delta_log"
STAGED_DIR = "_staged_commits"
LEGACY_STAGED_DIR = "_commits"
SIDECAR_DIR = "_sidecars"
LAST_CHECKPOINT = "_last_checkpoint"

# Readers accept any number of digits like delta-spark; writers always pad to 20 (and 10 for parts).
_COMMIT = re.compile(r"^(\d+)\.json$")
_STAGED = re.compile(r"^(\d+)\.([^.]+)\.json$")
_CKPT_CLASSIC = re.compile(r"^(\d+)\.checkpoint\.parquet$")
_CKPT_MULTI = re.compile(r"^(\d+)\.checkpoint\.(\d+)\.(\d+)\.parquet$")
_CKPT_UUID = re.compile(r"^(\d+)\.checkpoint\.([^.]+)\.(json|parquet)$")
_COMPACTED = re.compile(r"^(\d+)\.(\d+)\.compacted\.json$")
_CRC = re.compile(r"^(\d+)\.crc$")
_SIDECAR = re.compile(r"^[^/.][^/]*\.parquet$")


class LogFileType(enum.Enum):
    COMMIT = "commit"
    STAGED_COMMIT = "staged_commit"
    CHECKPOINT_CLASSIC = "checkpoint_classic"
    CHECKPOINT_MULTIPART = "checkpoint_multipart"
    CHECKPOINT_UUID = "checkpoint_uuid"
    COMPACTION = "compaction"
    CRC = "crc"
    LAST_CHECKPOINT = "last_checkpoint"
    SIDECAR = "sidecar"

    @property
    def is_checkpoint(self) -> bool:
        return self in (
            LogFileType.CHECKPOINT_CLASSIC,
            LogFileType.CHECKPOINT_MULTIPART,
            LogFileType.CHECKPOINT_UUID,
        )


@dataclass(frozen=True, order=False, slots=True)  # slots: a listing holds one per commit
class ParsedLogPath:
    """A recognised file of ``_delta_log``.

    ``name`` is relative to ``_delta_log`` (``"_staged_commits/…json"`` for staged commits,
    ``"_sidecars/…parquet"`` for sidecars). ``modification_time`` is in epoch milliseconds.
    """

    name: str
    type: LogFileType
    version: int = -1
    size: int = 0
    modification_time: int = 0
    end_version: int = -1  # compaction only; equals ``version`` for every other kind
    part: int = 0  # multi-part checkpoint only (1-based)
    num_parts: int = 0  # multi-part checkpoint only
    uuid: str = ""  # staged commits and UUID-named checkpoints
    extension: str = ""  # "json" or "parquet" for files that can be either

    @property
    def filename(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def is_checkpoint(self) -> bool:
        return self.type.is_checkpoint

    def with_stat(self, size: int, modification_time: int) -> ParsedLogPath:
        return ParsedLogPath(
            name=self.name,
            type=self.type,
            version=self.version,
            size=size,
            modification_time=modification_time,
            end_version=self.end_version,
            part=self.part,
            num_parts=self.num_parts,
            uuid=self.uuid,
            extension=self.extension,
        )


def parse_log_path(name: str, size: int = 0, modification_time: int = 0) -> ParsedLogPath | None:
    """Parse a name relative to ``_delta_log``; ``None`` for anything unknown (never misread).

    Dot-prefixed files (Hadoop ``.crc`` shadows, temporary files) are unknown by design.
    """
    directory, _, filename = name.rpartition("/")
    if not filename or filename.startswith("."):
        return None
    if not directory and filename.endswith(".json") and filename[:-5].isdigit() and filename.isascii():
        # The common case (most of a listing), without the regexes; same result as _COMMIT.
        v = int(filename[:-5])
        return ParsedLogPath(name, LogFileType.COMMIT, v, size, modification_time, v, extension="json")
    if directory in (STAGED_DIR, LEGACY_STAGED_DIR):
        m = _STAGED.match(filename)
        if m is None:
            return None
        v = int(m.group(1))
        return ParsedLogPath(name, LogFileType.STAGED_COMMIT, v, size, modification_time, v, uuid=m.group(2))
    if directory == SIDECAR_DIR:
        if _SIDECAR.match(filename) is None:
            return None
        return ParsedLogPath(name, LogFileType.SIDECAR, -1, size, modification_time)
    if directory:
        return None
    if filename == LAST_CHECKPOINT:
        return ParsedLogPath(name, LogFileType.LAST_CHECKPOINT, -1, size, modification_time)
    if m := _COMMIT.match(filename):
        v = int(m.group(1))
        return ParsedLogPath(name, LogFileType.COMMIT, v, size, modification_time, v, extension="json")
    if m := _CKPT_CLASSIC.match(filename):
        v = int(m.group(1))
        return ParsedLogPath(
            name, LogFileType.CHECKPOINT_CLASSIC, v, size, modification_time, v, extension="parquet"
        )
    if m := _CKPT_MULTI.match(filename):
        v, part, num_parts = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if num_parts < 1 or not 1 <= part <= num_parts:
            return None
        return ParsedLogPath(
            name,
            LogFileType.CHECKPOINT_MULTIPART,
            v,
            size,
            modification_time,
            v,
            part=part,
            num_parts=num_parts,
            extension="parquet",
        )
    if m := _CKPT_UUID.match(filename):
        v = int(m.group(1))
        return ParsedLogPath(
            name,
            LogFileType.CHECKPOINT_UUID,
            v,
            size,
            modification_time,
            v,
            uuid=m.group(2),
            extension=m.group(3),
        )
    if m := _COMPACTED.match(filename):
        start, end = int(m.group(1)), int(m.group(2))
        if end <= start:  # the protocol requires y > x strictly
            return None
        return ParsedLogPath(name, LogFileType.COMPACTION, start, size, modification_time, end, extension="json")
    if m := _CRC.match(filename):
        v = int(m.group(1))
        return ParsedLogPath(name, LogFileType.CRC, v, size, modification_time, v, extension="crc")
    return None


def _v(version: int) -> str:
    if version < 0:
        raise ValueError(f"versions are non-negative, got {version}")
    return f"{version:020d}"


def commit_name(version: int) -> str:
    return f"{_v(version)}.json"


def classic_checkpoint_name(version: int) -> str:
    return f"{_v(version)}.checkpoint.parquet"


def multipart_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    return f"{_v(version)}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def uuid_checkpoint_name(version: int, uuid: str, extension: str = "parquet") -> str:
    return f"{_v(version)}.checkpoint.{uuid}.{extension}"


def compaction_name(start: int, end: int) -> str:
    if end <= start:
        raise ValueError(f"a compaction needs end > start, got [{start}, {end}]")
    return f"{_v(start)}.{_v(end)}.compacted.json"


def crc_name(version: int) -> str:
    return f"{_v(version)}.crc"


def staged_commit_name(version: int, uuid: str, legacy: bool = False) -> str:
    return f"{LEGACY_STAGED_DIR if legacy else STAGED_DIR}/{_v(version)}.{uuid}.json"


# delta-spark's CheckpointInstance.Format order: SINGLE < WITH_PARTS < V2. Higher is preferred.
_FORMAT_RANK = {
    LogFileType.CHECKPOINT_CLASSIC: 0,
    LogFileType.CHECKPOINT_MULTIPART: 1,
    LogFileType.CHECKPOINT_UUID: 2,
}


def checkpoint_rank(path: ParsedLogPath) -> tuple[int, int, int, str]:
    """Sort key among complete checkpoints: the greatest key is the one a reader should use."""
    return (path.version, _FORMAT_RANK[path.type], path.num_parts, path.filename)
