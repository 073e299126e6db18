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
    return None if value is None else _strings(value, "feature list")


def _strings(value: Any, what: str) -> tuple[str, ...]:
    """A list of strings as a tuple; anything else is refused, never coerced (a string would
    otherwise become the tuple of its characters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings, got {value!r:.80}")
    return tuple(value)


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r:.80}")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {value!r:.80}")
    return value


@dataclass(frozen=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Protocol:
        return cls(
            _integer(d["minReaderVersion"], "minReaderVersion"),
            _integer(d["minWriterVersion"], "minWriterVersion"),
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
        columns = d.get("partitionColumns")
        return cls(
            id=_text(d["id"], "metaData.id"),
            schema_string=_text(d.get("schemaString") or "", "metaData.schemaString"),
            partition_columns=() if columns is None else _strings(columns, "metaData.partitionColumns"),
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
        return cls(_text(d["appId"], "txn.appId"), _integer(d["version"], "txn.version"), d.get("lastUpdated"))

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
        return cls(_text(d["domain"], "domainMetadata.domain"), _text(d.get("configuration") or "", "domainMetadata.configuration"), d.get("removed") is True)

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
