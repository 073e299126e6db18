"""Our snapshot against the ``deltalake`` wheel's view of the same version: one comparison used by the
golden-table tests and the randomised differential tests, so both normalise the same way.

Normalisations (each one is a documented difference of representation, not of state):

* paths: compared exactly as the log stores them; both readers report the raw ``add.path``. Only the
  wheel's deletion-vector listing gives fully qualified URIs: those are made relative to the table
  URI and both sides are percent-decoded once;
* partition values: ours keep the log's exact strings keyed as logged (checkpoints must write them
  back unchanged), the wheel parses them into typed values keyed by logical column name; ours are
  parsed with the column's Delta type, ``""`` is null (PROTOCOL "Partition Value Serialization"),
  physical names (column mapping) are mapped to logical ones, and a partition column missing from
  ``partitionValues`` reads as null (the wheel's ``compact_logs`` drops null entries);
* txns: ``Snapshot.txns`` keeps every txn (log compaction must not expire them); the wheel hides
  txns older than ``delta.setTransactionRetentionDuration``, so those are expected as ``None``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_maintenance.deltalog.replay.snapshot import Snapshot

__all__ = ["assert_same_as_wheel", "wheel_files"]


def wheel_files(table: deltalake.DeltaTable) -> set[tuple[str, int]]:
    actions = pa.table(table.get_add_actions(flatten=True))
    return set(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True))


def _dv_deleted_rows(snapshot: Snapshot) -> dict[str, int]:
    with_dv = snapshot.files.filter(pc.is_valid(snapshot.files.column("deletionVector")))
    return {unquote(r["path"]): r["deletionVector"]["cardinality"] for r in with_dv.select(["path", "deletionVector"]).to_pylist()}


def _wheel_dv_deleted_rows(table: deltalake.DeltaTable) -> dict[str, int]:
    """The wheel exposes deletion vectors only materialised, as row masks keyed by file URI."""
    prefix = table.table_uri.rstrip("/") + "/"
    out = {}
    for row in pa.table(table.deletion_vectors()).to_pylist():
        uri = row["filepath"]
        out[unquote(uri[len(prefix) :] if uri.startswith(prefix) else uri)] = row["selection_vector"].count(False)
    return out


def _utc_naive(value: dt.datetime) -> dt.datetime:
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def _typed(raw: str | None, delta_type: Any) -> Any:
    """A partition value string parsed like a reader would, for comparison with the wheel's values."""
    if raw is None or raw == "":
        return None
    if delta_type in ("long", "integer", "short", "byte"):
        return int(raw)
    if delta_type == "boolean":
        return raw == "true"
    if delta_type in ("float", "double"):
        return float(raw)
    if isinstance(delta_type, str) and delta_type.startswith("decimal"):
        return decimal.Decimal(raw)
    if delta_type == "date":
        return dt.date.fromisoformat(raw)
    if delta_type in ("timestamp", "timestamp_ntz"):
        return _utc_naive(dt.datetime.fromisoformat(raw.replace("Z", "+00:00")))
    return raw


def _normalise_wheel_value(value: Any) -> Any:
    return _utc_naive(value) if isinstance(value, dt.datetime) else value


def partition_values(ours: Snapshot, table: deltalake.DeltaTable) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    # Under column mapping partitionValues are keyed by physical name; the wheel reports logical names.
    fields = ours.metadata.schema.get("fields", [])
    logical = {(f.get("metadata") or {}).get("delta.columnMapping.physicalName", f["name"]): f["name"] for f in fields}
    types = {f["name"]: f["type"] for f in fields}
    mine = {}
    for path, values in zip(ours.files.column("path").to_pylist(), ours.files.column("partitionValues").to_pylist(), strict=True):
        typed = {logical.get(k, k): _typed(v, types.get(logical.get(k, k))) for k, v in (values or [])}
        mine[path] = {**{c: None for c in ours.metadata.partition_columns}, **typed}
    actions = pa.table(table.get_add_actions(flatten=False))
    if "partition" not in actions.column_names:
        theirs: dict[str, dict[str, Any]] = {p: {} for p in actions.column("path").to_pylist()}
    else:
        theirs = {
            p: {k: _normalise_wheel_value(v) for k, v in (values or {}).items()}
            for p, values in zip(actions.column("path").to_pylist(), actions.column("partition").to_pylist(), strict=True)
        }
    return mine, theirs


def assert_same_as_wheel(ours: Snapshot, table: deltalake.DeltaTable, why: str, *, check_partition_values: bool = False) -> None:
    """Version, active files, protocol, metadata, txns and deletion vectors equal the wheel's.

    ``why`` goes into every assertion message (table and version, or the seed of a random history).
    """
    assert ours.version == table.version(), why
    theirs = wheel_files(table)
    mine = {(f["path"], f["size"]) for f in ours.file_list()}
    assert mine == theirs, f"{why}: active files differ: only ours {sorted(mine - theirs)[:5]}, only the wheel's {sorted(theirs - mine)[:5]}"
    assert ours.num_files == len(theirs), f"{why}: an active path appears twice in our state"

    proto = table.protocol()
    assert (ours.protocol.min_reader_version, ours.protocol.min_writer_version) == (proto.min_reader_version, proto.min_writer_version), why
    assert set(ours.protocol.reader_features or ()) == set(proto.reader_features or ()), f"{why}: reader features"
    assert set(ours.protocol.writer_features or ()) == set(proto.writer_features or ()), f"{why}: writer features"

    meta = table.metadata()
    assert ours.metadata.id == str(meta.id), why
    assert (ours.metadata.name, ours.metadata.description, ours.metadata.created_time) == (meta.name, meta.description, meta.created_time), why
    assert list(ours.metadata.partition_columns) == list(meta.partition_columns), f"{why}: partition columns"
    assert dict(ours.metadata.configuration) == dict(meta.configuration), f"{why}: configuration"
    assert ours.metadata.schema == json.loads(table.schema().to_json()), f"{why}: schema differs"

    retention = ours.properties.set_transaction_retention_ms
    for app_id, txn in ours.txns.items():
        expired = retention is not None and txn.last_updated is not None and txn.last_updated <= ours.now_ms - retention
        assert table.transaction_version(app_id) == (None if expired else txn.version), f"{why}: txn {app_id}"

    ours_dv = _dv_deleted_rows(ours)
    if ours_dv or ours.protocol.has_reader_feature("deletionVectors"):
        assert ours_dv == _wheel_dv_deleted_rows(table), f"{why}: deletion vectors differ"

    if check_partition_values:
        mine_pv, theirs_pv = partition_values(ours, table)
        assert mine_pv == theirs_pv, f"{why}: partition values differ"
