"""The Unity Catalog payloads ``unity_catalog.py`` reads and writes: ratified commits from a
``DeltaCommit`` / ``DeltaCommitInfo`` (typed: ``answers``), table locations as UC stores and compares them, and version
0 of a catalog-managed table (its required features and properties, its ``ColumnInfo`` list)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .answers import Answer, staged_file_name
from .base import RatifiedCommit
from .commit_file import upgrade_protocol
from .errors import CoordinatorError

__all__ = ["UC_TABLE_ID"]

UC_TABLE_ID = "io.unitycatalog.tableId"


@dataclass(frozen=True)
class _Staging:
    table_id: str
    location: str
    reader_features: tuple[str, ...]
    writer_features: tuple[str, ...]
    properties: tuple[tuple[str, str], ...]


def _commit(answer: Answer, entry: Any, sep: str) -> RatifiedCommit:
    """A ``DeltaCommit`` (v1, hyphenated) or ``DeltaCommitInfo`` (preview, underscored), typed."""
    c = answer.json_object(entry, "commits[]")
    version = answer.json_int(c, "version")
    return RatifiedCommit(
        version=version,
        commit_timestamp=answer.json_int(c, "timestamp", version=version),
        file_name=staged_file_name(answer, answer.json_str(c, f"file{sep}name", version=version), version, f"file{sep}name"),
        file_size=answer.json_int(c, f"file{sep}size", version=version),
        file_modification_time=answer.json_int(c, f"file{sep}modification{sep}timestamp", version=version),
    )


def _location_key(location: str) -> str:
    """Compare storage locations: ``file:`` URLs and plain paths alike, s3a/s3n as s3, no trailing slash."""
    loc = location.rstrip("/")
    for prefix in ("file://", "file:"):
        if loc.startswith(prefix):
            loc = loc[len(prefix):]
            break
    for alias in ("s3a://", "s3n://"):
        if loc.startswith(alias):
            loc = "s3://" + loc[len(alias):]
    return loc


def _as_url(uri: str) -> str:
    """The table URI as UC stores locations: local paths become ``file://`` URLs."""
    return f"file://{uri}" if uri.startswith("/") else uri


def _managed_actions(actions: Sequence[Mapping[str, Any]], staging: _Staging) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Version 0 of a catalog-managed table: the catalog's required features and properties added."""
    out: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    for action in actions:
        if "metaData" in action:
            meta = dict(action["metaData"])
            meta["configuration"] = {**dict(meta.get("configuration") or {}), **dict(staging.properties), UC_TABLE_ID: staging.table_id}
            out.append({"metaData": meta})
        elif "protocol" in action:
            out.append({"protocol": upgrade_protocol(action["protocol"], staging.reader_features, staging.writer_features)})
        else:
            out.append(dict(action))
    if not meta or not any("protocol" in a for a in out):
        raise CoordinatorError("version 0 must contain protocol and metaData actions", retryable=False, version=0)
    return out, meta


_TYPE_NAMES = {"integer": "INT", "long": "LONG", "short": "SHORT", "byte": "BYTE", "float": "FLOAT", "double": "DOUBLE",
               "boolean": "BOOLEAN", "string": "STRING", "binary": "BINARY", "date": "DATE", "timestamp": "TIMESTAMP",
               "timestamp_ntz": "TIMESTAMP_NTZ"}


def _column_infos(schema_string: str | None) -> list[dict[str, Any]]:
    """UC REST ``ColumnInfo`` entries for a Delta schema string (top-level fields)."""
    fields = json.loads(schema_string or '{"fields":[]}').get("fields") or []
    out = []
    for i, f in enumerate(fields):
        t = f["type"]
        name = _TYPE_NAMES.get(t) if isinstance(t, str) else str(t.get("type", "")).upper()
        if isinstance(t, str) and name is None:
            name = "DECIMAL" if t.startswith("decimal") else t.upper()
        out.append({"name": f["name"], "type_text": t if isinstance(t, str) else json.dumps(t), "type_json": json.dumps(f),
                    "type_name": name, "position": i, "nullable": bool(f.get("nullable", True))})
    return out
