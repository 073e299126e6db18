"""Non-file actions as frozen values, and the derived fields of file actions.

File actions (``add``/``remove``) are never materialised one by one: they stay in Arrow tables
(see ``checkpoint_schema`` and ``replay``). The few other actions of a snapshot are small values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Protocol",
    "Metadata",
    "Txn",
    "DomainMetadata",
    "NonFileState",
    "dv_unique_id",
    "NON_FILE_ACTIONS",
]

# Keys of an NDJSON action line that are not file actions.
NON_FILE_ACTIONS = ("protocol", "metaData", "txn", "domainMetadata", "commitInfo", "cdc", "checkpointMetadata", "sidecar")


def _tuple_or_none(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@dataclass(frozen=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Protocol:
        return cls(
            int(d["minReaderVersion"]),
            int(d["minWriterVersion"]),
            _tuple_or_none(d.get("readerFeatures")),
            _tuple_or_none(d.get("writerFeatures")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        if self.reader_features is not None:
            out["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = list(self.writer_features)
        return out

    def has_writer_feature(self, name: str) -> bool:
        return self.writer_features is not None and name in self.writer_features

    def has_reader_feature(self, name: str) -> bool:
        return self.reader_features is not None and name in self.reader_features


@dataclass(frozen=True)
class Metadata:
    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: Mapping[str, str] = field(default_factory=dict)
    created_time: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metadata:
        fmt = d.get("format") or {}
        return cls(
            id=str(d["id"]),
            schema_string=d.get("schemaString") or "",
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration=dict(_pairs(d.get("configuration"))),
            name=d.get("name"),
            description=d.get("description"),
            format_provider=fmt.get("provider") or "parquet",
            format_options=dict(_pairs(fmt.get("options"))),
            created_time=d.get("createdTime"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out["format"] = {"provider": self.format_provider, "options": dict(self.format_options)}
        out["schemaString"] = self.schema_string
        out["partitionColumns"] = list(self.partition_columns)
        out["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            out["createdTime"] = self.created_time
        return out

    @property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_string) if self.schema_string else {"type": "struct", "fields": []}


def _pairs(value: Any) -> list[tuple[str, str]]:
    """Maps arrive as dicts from JSON and as lists of (key, value) pairs from Parquet."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    return [(k, v) for k, v in value]


@dataclass(frozen=True)
class Txn:
    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Txn:
        return cls(str(d["appId"]), int(d["version"]), d.get("lastUpdated"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out


@dataclass(frozen=True)
class DomainMetadata:
    domain: str
    configuration: str
    removed: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DomainMetadata:
        return cls(str(d["domain"]), d.get("configuration") or "", bool(d.get("removed") or False))

    def to_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}


@dataclass
class NonFileState:
    """Protocol, metadata, txns and domain metadata folded from actions fed in replay order."""

    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, Txn] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)  # tombstones included

    def take(self, action: Mapping[str, Any]) -> bool:
        """Fold ``action`` if it is one of these kinds (the newest wins); False for any other.
        A malformed one raises ``KeyError``, ``TypeError`` or ``ValueError``."""
        if (p := action.get("protocol")) is not None:
            self.protocol = Protocol.from_dict(p)
        elif (m := action.get("metaData")) is not None:
            self.metadata = Metadata.from_dict(m)
        elif (t := action.get("txn")) is not None:
            txn = Txn.from_dict(t)
            self.txns[txn.app_id] = txn
        elif (d := action.get("domainMetadata")) is not None:
            dm = DomainMetadata.from_dict(d)
            self.domains[dm.domain] = dm
        else:
            return False
        return True


def dv_unique_id(dv: Mapping[str, Any] | None) -> str | None:
    """``<storageType><pathOrInlineDv>[@<offset>]`` (PROTOCOL "Derived Fields"); None without a DV."""
    if not dv:
        return None
    uid = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    if dv.get("offset") is not None:
        uid += f"@{dv['offset']}"
    return uid
