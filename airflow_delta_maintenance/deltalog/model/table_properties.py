"""Typed ``delta.*`` table properties with the protocol's (and delta-spark's) defaults."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import InvalidTablePropertyError

__all__ = ["TableProperties", "parse_interval_ms", "human_duration", "DAY_MS"]

DAY_MS = 86_400_000


def human_duration(ms: int | float) -> str:
    """A duration as people read it in a message: ``30 days``, ``12 hours``, ``90 seconds``."""
    for unit, size in (("day", DAY_MS), ("hour", 3_600_000), ("minute", 60_000)):
        if abs(ms) >= size:
            value = round(ms / size, 1)
            return f"{value:g} {unit}" + ("" if value == 1 else "s")
    value = round(ms / 1000, 1)
    return f"{value:g} second" + ("" if value == 1 else "s")

LOG_RETENTION_DURATION = "delta.logRetentionDuration"
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
CHECKPOINT_POLICY = "delta.checkpointPolicy"
CHECKPOINT_RETENTION_DURATION = "delta.checkpointRetentionDuration"
DELETED_FILE_RETENTION_DURATION = "delta.deletedFileRetentionDuration"
SET_TRANSACTION_RETENTION_DURATION = "delta.setTransactionRetentionDuration"
WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
COMPRESSION_CODEC = "delta.parquet.compression.codec"
ENABLE_ICT = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
CHECKPOINT_PROTECTION_VERSION = "delta.requireCheckpointProtectionBeforeVersion"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
COORDINATOR_NAME = "delta.coordinatedCommits.commitCoordinator-preview"
COORDINATOR_CONF = "delta.coordinatedCommits.commitCoordinatorConf-preview"
COORDINATOR_TABLE_CONF = "delta.coordinatedCommits.tableConf-preview"
UC_TABLE_ID = "io.unitycatalog.tableId"

_UNIT_MS = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1,
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": DAY_MS,
    "week": 7 * DAY_MS,
}
_PAIR = re.compile(r"(-?\d+)\s+([a-z]+?)s?(?=\s|$)")


def parse_interval_ms(value: str, key: str = "interval") -> int:
    """``interval 30 days`` / ``30 days`` / ``1 day 12 hours`` → milliseconds; months and years refused."""
    text = value.strip().lower()
    if text.startswith("interval"):
        text = text[len("interval") :].strip()
    if not text:
        raise InvalidTablePropertyError(f"{key}: empty interval {value!r}", key=key)
    total = 0.0
    pos = 0
    for m in _PAIR.finditer(text):
        if text[pos : m.start()].strip():
            break
        unit = m.group(2)
        if unit not in _UNIT_MS:
            raise InvalidTablePropertyError(
                f"{key}: unit {unit!r} in {value!r} is not allowed (months and years have no fixed length)", key=key
            )
        total += int(m.group(1)) * _UNIT_MS[unit]
        pos = m.end()
    if pos == 0 or text[pos:].strip():
        raise InvalidTablePropertyError(f"{key}: cannot parse interval {value!r}", key=key)
    if total < 0:
        raise InvalidTablePropertyError(f"{key}: negative interval {value!r}", key=key)
    return int(total)


def _bool(conf: Mapping[str, str], key: str, default: bool) -> bool:
    raw = conf.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidTablePropertyError(f"{key}: expected true or false, got {raw!r}", key=key)
    return text == "true"


def _int(conf: Mapping[str, str], key: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = conf.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidTablePropertyError(f"{key}: expected an integer, got {raw!r}", key=key) from None
    if minimum is not None and value < minimum:
        raise InvalidTablePropertyError(f"{key}: must be >= {minimum}, got {value}", key=key)
    return value


def _interval(conf: Mapping[str, str], key: str, default: str | None) -> int | None:
    raw = conf.get(key, default)
    return None if raw is None else parse_interval_ms(str(raw), key)


def _json_map(conf: Mapping[str, str], key: str) -> dict[str, str]:
    raw = conf.get(key)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        raise InvalidTablePropertyError(f"{key}: not a JSON object: {raw!r}", key=key) from None
    if not isinstance(value, dict):
        raise InvalidTablePropertyError(f"{key}: not a JSON object: {raw!r}", key=key)
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True)
class TableProperties:
    """The properties maintenance depends on, parsed once; ``raw`` keeps every key as written."""

    log_retention_ms: int = 30 * DAY_MS
    enable_expired_log_cleanup: bool = True
    checkpoint_interval: int = 10
    checkpoint_policy: str = "classic"
    checkpoint_retention_ms: int = 2 * DAY_MS
    deleted_file_retention_ms: int = 7 * DAY_MS
    set_transaction_retention_ms: int | None = None
    write_stats_as_json: bool = True
    # delta-spark writes stats_parsed by default (PROTOCOL says false); Unity Catalog requires true.
    write_stats_as_struct: bool = True
    compression_codec: str = "zstd"
    enable_in_commit_timestamps: bool = False
    ict_enablement_version: int | None = None
    ict_enablement_timestamp: int | None = None
    checkpoint_protection_version: int = 0
    column_mapping_mode: str = "none"
    enable_deletion_vectors: bool = False
    coordinator_name: str | None = None
    coordinator_conf: Mapping[str, str] = field(default_factory=dict)
    coordinator_table_conf: Mapping[str, str] = field(default_factory=dict)
    uc_table_id: str | None = None
    raw: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_configuration(cls, conf: Mapping[str, str]) -> TableProperties:
        policy = str(conf.get(CHECKPOINT_POLICY, "classic")).strip().lower()
        if policy not in ("classic", "v2"):
            raise InvalidTablePropertyError(
                f"{CHECKPOINT_POLICY}: expected classic or v2, got {conf[CHECKPOINT_POLICY]!r}", key=CHECKPOINT_POLICY
            )
        mapping = str(conf.get(COLUMN_MAPPING_MODE, "none")).strip().lower()
        if mapping not in ("none", "id", "name"):
            raise InvalidTablePropertyError(
                f"{COLUMN_MAPPING_MODE}: expected none, id or name, got {conf[COLUMN_MAPPING_MODE]!r}",
                key=COLUMN_MAPPING_MODE,
            )
        return cls(
            log_retention_ms=_interval(conf, LOG_RETENTION_DURATION, "interval 30 days"),  # type: ignore[arg-type]
            enable_expired_log_cleanup=_bool(conf, ENABLE_EXPIRED_LOG_CLEANUP, True),
            checkpoint_interval=_int(conf, CHECKPOINT_INTERVAL, 10, minimum=1),  # type: ignore[arg-type]
            checkpoint_policy=policy,
            checkpoint_retention_ms=_interval(conf, CHECKPOINT_RETENTION_DURATION, "interval 2 days"),  # type: ignore[arg-type]
            deleted_file_retention_ms=_interval(conf, DELETED_FILE_RETENTION_DURATION, "interval 1 week"),  # type: ignore[arg-type]
            set_transaction_retention_ms=_interval(conf, SET_TRANSACTION_RETENTION_DURATION, None),
            write_stats_as_json=_bool(conf, WRITE_STATS_AS_JSON, True),
            write_stats_as_struct=_bool(conf, WRITE_STATS_AS_STRUCT, True),
            compression_codec=str(conf.get(COMPRESSION_CODEC, "zstd")).strip().lower(),
            enable_in_commit_timestamps=_bool(conf, ENABLE_ICT, False),
            ict_enablement_version=_int(conf, ICT_ENABLEMENT_VERSION, None, minimum=0),
            ict_enablement_timestamp=_int(conf, ICT_ENABLEMENT_TIMESTAMP, None),
            checkpoint_protection_version=_int(conf, CHECKPOINT_PROTECTION_VERSION, 0, minimum=0),  # type: ignore[arg-type]
            column_mapping_mode=mapping,
            enable_deletion_vectors=_bool(conf, ENABLE_DELETION_VECTORS, False),
            coordinator_name=conf.get(COORDINATOR_NAME),
            coordinator_conf=_json_map(conf, COORDINATOR_CONF),
            coordinator_table_conf=_json_map(conf, COORDINATOR_TABLE_CONF),
            uc_table_id=conf.get(UC_TABLE_ID) or conf.get("ucTableId"),
            raw=dict(conf),
        )
