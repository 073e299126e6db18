"""Open a checkpoint before trusting it: every part and sidecar, footers, row counts, the hint.

"Complete" in a listing only means every part file exists. A torn or empty part, or a V2
checkpoint whose sidecar is missing or torn, lists as complete but cannot be read. Cleanup must
never delete the commits below such a checkpoint, and readers must not load from it (they fall
back to an older checkpoint, as delta-spark does when a checkpoint fails to load).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import CorruptLogError, DeltaLogError, IncompleteCheckpointError, MissingSidecarError
from .last_checkpoint import LastCheckpointHint
from .listing import CheckpointGroup
from .paths import SIDECAR_DIR, LogFileType
from .storage import LogStore

__all__ = ["CheckpointCheck", "verify_checkpoint", "newest_readable_checkpoint"]


@dataclass(frozen=True)
class CheckpointCheck:
    """What opening a checkpoint found: rows of its own files and of its sidecars, adds, sidecars."""

    version: int
    num_rows: int
    sidecar_rows: int
    num_add_files: int
    sidecars: tuple[str, ...]


def _parquet(store: LogStore, name: str, columns: Sequence[str]) -> tuple[int, pa.Table]:
    """Row count from the footer and the requested (present) columns; typed error when unreadable."""
    try:
        data = store.read(name)
    except FileNotFoundError:
        raise IncompleteCheckpointError(f"{store.display(name)} is listed but cannot be opened", path=name) from None
    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        present = set(pf.schema_arrow.names)
        table = pf.read(columns=[c for c in columns if c.split(".", 1)[0] in present])
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        raise CorruptLogError(f"{store.display(name)}: not a readable Parquet file ({exc})", path=name) from None
    if table.num_rows != pf.metadata.num_rows:
        raise CorruptLogError(f"{store.display(name)}: read {table.num_rows} rows, the footer says {pf.metadata.num_rows}", path=name)
    return pf.metadata.num_rows, table


def _count(table: pa.Table, column: str) -> int:
    return table.num_rows - table.column(column).null_count if column in table.column_names else 0


def _json_actions(store: LogStore, name: str) -> list[dict[str, Any]]:
    try:
        data = store.read(name)
    except FileNotFoundError:
        raise IncompleteCheckpointError(f"{store.display(name)} is listed but cannot be opened", path=name) from None
    out = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            action = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptLogError(f"{store.display(name)}: line {number} is not valid JSON ({exc})", path=name, line=number) from None
        if not isinstance(action, dict) or len(action) != 1:
            raise CorruptLogError(f"{store.display(name)}: line {number} is not exactly one action", path=name, line=number)
        out.append(action)
    if not out:
        raise CorruptLogError(f"{store.display(name)}: empty checkpoint", path=name)
    return out


def verify_checkpoint(store: LogStore, group: CheckpointGroup, hint: LastCheckpointHint | None = None) -> CheckpointCheck:
    """Open every file of ``group`` and its sidecars; raise a typed error naming the first bad one.

    Checked: each Parquet footer and its row count, exactly one protocol and one metaData row, each
    sidecar present, readable and of its declared size; against ``hint`` when it names this
    version: the number of parts and of add files.
    """
    first = group.files[0].name
    if not group.complete:
        raise IncompleteCheckpointError(
            f"{store.display(first)}: checkpoint {group.version} is missing parts {group.missing_parts} of {group.expected_parts}", path=first
        )
    rows = adds = protocols = metadatas = 0
    sidecars: list[dict[str, Any]] = []
    for f in group.files:
        if f.type is LogFileType.CHECKPOINT_UUID and f.extension == "json":
            actions = _json_actions(store, f.name)
            rows += len(actions)
            adds += sum(1 for a in actions if a.get("add") is not None)
            protocols += sum(1 for a in actions if a.get("protocol") is not None)
            metadatas += sum(1 for a in actions if a.get("metaData") is not None)
            sidecars += [a["sidecar"] for a in actions if isinstance(a.get("sidecar"), dict)]
            continue
        n, table = _parquet(store, f.name, ["add.path", "protocol", "metaData.id", "sidecar"])
        rows += n
        adds += _count(table, "add")
        protocols += _count(table, "protocol")
        metadatas += _count(table, "metaData")
        if "sidecar" in table.column_names:
            sidecars += [s for s in table.column("sidecar").to_pylist() if s]
    if protocols != 1 or metadatas != 1:
        raise CorruptLogError(
            f"{store.display(first)}: checkpoint {group.version} holds {protocols} protocol and {metadatas} metaData rows (one each expected)",
            path=first,
        )
    side_rows = 0
    names = []
    for s in sidecars:
        path = str(s.get("path") or "")
        name = f"{SIDECAR_DIR}/{path.rsplit('/', 1)[-1]}"
        stat = store.stat(name)
        if stat is None:
            raise MissingSidecarError(f"{store.display(name)} is referenced by checkpoint {first} but does not exist", path=name)
        declared = s.get("sizeInBytes")
        if isinstance(declared, int) and declared > 0 and declared != stat.size:
            raise CorruptLogError(f"{store.display(name)}: {stat.size} bytes, checkpoint {first} declares {declared}", path=name)
        n, table = _parquet(store, name, ["add.path"])
        side_rows += n
        adds += _count(table, "add")
        names.append(name)
    if hint is not None and hint.version == group.version:
        mismatch = None
        if hint.parts is not None and hint.parts != group.expected_parts and not (hint.parts == 1 and group.expected_parts == 1):
            mismatch = f"{group.expected_parts} part(s), _last_checkpoint says {hint.parts}"
        elif hint.num_of_add_files is not None and hint.num_of_add_files != adds:
            mismatch = f"{adds} add files, _last_checkpoint says {hint.num_of_add_files}"
        # `size` is not compared: writers disagree on it (older delta-rs wrote a byte count there)
        if mismatch:
            raise CorruptLogError(f"{store.display(first)}: checkpoint {group.version} has {mismatch}", path=first)
    return CheckpointCheck(group.version, rows, side_rows, adds, tuple(names))


def newest_readable_checkpoint(
    store: LogStore, groups: Sequence[CheckpointGroup], hint: LastCheckpointHint | None = None
) -> tuple[CheckpointGroup | None, list[DeltaLogError]]:
    """The best of ``groups`` (sorted best last) that verifies, and the errors of those skipped."""
    skipped: list[DeltaLogError] = []
    for group in reversed(groups):
        try:
            verify_checkpoint(store, group, hint)
        except DeltaLogError as exc:
            skipped.append(exc)
            continue
        return group, skipped
    return None, skipped
