"""Open a checkpoint before trusting it: every part and sidecar, footers, row counts, the hint.

"Complete" in a listing only means every part file exists. A torn or empty part, or a V2
checkpoint whose sidecar is missing or torn, lists as complete but cannot be read. Cleanup must
never delete the commits below such a checkpoint, and readers must not load from it (they fall
back to an older checkpoint, as delta-spark does when a checkpoint fails to load).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError, DeltaLogError, IncompleteCheckpointError, MissingSidecarError
from ..log_segment.last_checkpoint import LastCheckpointHint
from ..log_segment.listing import CheckpointGroup
from ..model.partition_keys import check_partition_keys, map_keys, partition_value_keys, unknown_key_error, unknown_map_key
from ..model.paths import SIDECAR_DIR, LogFileType
from ..model.validation import loads_action
from ..storage import LogStore

__all__ = ["CheckpointCheck", "verify_checkpoint", "newest_readable_checkpoint"]


@dataclass(frozen=True)
class CheckpointCheck:
    """What opening a checkpoint found: rows of its own files and of its sidecars, adds, sidecars."""

    version: int
    num_rows: int
    sidecar_rows: int
    num_add_files: int
    sidecars: tuple[str, ...]


_BATCH_ROWS = 65_536
# Any leaf of ``add`` carries the struct's validity; a fixed-width one is cheaper to decode than
# the path strings (a 10M-file checkpoint holds gigabytes of paths).
_ADD_PROBES = ("add.size", "add.modificationTime", "add.path")
# Likewise ``protocol``: its reader features are lists, and only its validity is counted here.
_PROTOCOL_PROBES = ("protocol.minReaderVersion", "protocol.minWriterVersion")


@dataclass
class _PartCounts:
    rows: int = 0
    non_null: dict[str, int] = field(default_factory=dict)  # top-level column → non-null rows
    sidecars: list[dict[str, Any]] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    partition_keys: set[str] = field(default_factory=set)  # every key of the adds' partitionValues


def _parquet(store: LogStore, name: str, columns: Sequence[str]) -> _PartCounts:
    """Row count from the footer, checked against the rows read, and the non-null rows of the
    requested (present) columns; typed error when unreadable. ``"add"`` reads one leaf of ``add``.

    The file is opened for random access and read in batches: only the footer and the chunks of
    these columns are fetched, and memory does not grow with the checkpoint."""
    try:
        raw = store.open_input(name)
    except FileNotFoundError:
        raise IncompleteCheckpointError(f"{store.display(name)} is listed but cannot be opened", path=name) from None
    out = _PartCounts()
    try:
        with raw:
            pf = pq.ParquetFile(raw)
            leaves = {pf.schema.column(i).path for i in range(pf.metadata.num_columns)}
            present = set(pf.schema_arrow.names)
            wanted = []
            for c in columns:
                if c == "add":
                    probe = next((p for p in _ADD_PROBES if p in leaves), None)
                    if probe is not None:
                        wanted.append(probe)
                    elif "add" in present:
                        raise CorruptLogError(f"{store.display(name)}: its add column has no path", path=name)
                elif c == "protocol" and any(p in leaves for p in _PROTOCOL_PROBES):
                    wanted.append(next(p for p in _PROTOCOL_PROBES if p in leaves))
                elif c == "add.partitionValues":  # read with the add probe: its keys are collected in the same pass
                    if any(p.startswith("add.partitionValues.") for p in leaves):
                        wanted.append(c)
                elif c.split(".", 1)[0] in present:
                    wanted.append(c)
            tops = list(dict.fromkeys(c.split(".", 1)[0] for c in wanted))
            out.non_null = dict.fromkeys(tops, 0)
            for batch in pf.iter_batches(_BATCH_ROWS, columns=wanted, use_threads=False):
                out.rows += batch.num_rows
                for top in tops:
                    col = batch.column(top)
                    out.non_null[top] += len(col) - col.null_count
                    if top == "sidecar" and col.null_count < len(col):
                        out.sidecars += [s for s in col.to_pylist() if s]
                    elif top == "metaData" and col.null_count < len(col):
                        out.metadata += [m for m in col.to_pylist() if m]
                    elif top == "add" and "add.partitionValues" in wanted:
                        out.partition_keys |= map_keys(col.field("partitionValues"))
    except FileNotFoundError:
        raise IncompleteCheckpointError(f"{store.display(name)} is listed but cannot be opened", path=name) from None
    except (pa.ArrowException, ValueError, OSError) as exc:  # ValueError: a footer whose names are not UTF-8
        raise CorruptLogError(f"{store.display(name)}: not a readable Parquet file ({exc})", path=name) from None
    if out.rows != pf.metadata.num_rows:
        raise CorruptLogError(f"{store.display(name)}: read {out.rows} rows, the footer says {pf.metadata.num_rows}", path=name)
    return out


def _partition_keys_hold(store: LogStore, name: str, allowed: frozenset[str]) -> None:
    """Every key of the ``add.partitionValues`` maps of Parquet file ``name`` is one of ``allowed``
    (the checkpoint's partition columns): a key the table lacks makes every reader refuse the
    checkpoint (``model.partition_keys``). Read in batches, only that column; columnar. Called
    only when ``_parquet`` collected a key outside ``allowed``: this second read finds its row."""
    try:
        with store.open_input(name) as raw:
            pf = pq.ParquetFile(raw)
            if not any(pf.schema.column(i).path.startswith("add.partitionValues.") for i in range(pf.metadata.num_columns)):
                return
            rows = 0
            for batch in pf.iter_batches(_BATCH_ROWS, columns=["add.partitionValues"], use_threads=False):
                found = unknown_map_key(batch.column("add").field("partitionValues"), allowed)
                if found is not None:
                    row = rows + found[0]
                    path = pf.read(columns=["add.path"]).column("add").combine_chunks().field("path")[row].as_py()  # the error's only
                    raise unknown_key_error(f"{store.display(name)}: row {row}", path, found[1], allowed, path=name, line=row + 1)
                rows += batch.num_rows
    except FileNotFoundError:
        raise IncompleteCheckpointError(f"{store.display(name)} is listed but cannot be opened", path=name) from None
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise CorruptLogError(f"{store.display(name)}: not a readable Parquet file ({exc})", path=name) from None


def _json_actions(store: LogStore, name: str) -> list[dict[str, Any]]:
    try:
        data = store.read(name)
    except FileNotFoundError:
        raise IncompleteCheckpointError(f"{store.display(name)} is listed but cannot be opened", path=name) from None
    out = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        out.append(loads_action(raw, store.display(name), number))
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
    bodies: list[dict[str, Any]] = []  # metaData
    parquet: list[tuple[str, set[str]]] = []  # each Parquet file and the partition-value keys its adds carry
    for f in group.files:
        if f.type is LogFileType.CHECKPOINT_UUID and f.extension == "json":
            actions = _json_actions(store, f.name)
            rows += len(actions)
            adds += sum(1 for a in actions if a.get("add") is not None)
            protocols += sum(1 for a in actions if a.get("protocol") is not None)
            metadatas += sum(1 for a in actions if a.get("metaData") is not None)
            sidecars += [a["sidecar"] for a in actions if isinstance(a.get("sidecar"), dict)]
            bodies += [a["metaData"] for a in actions if isinstance(a.get("metaData"), dict)]
            keys = partition_value_keys(bodies[0]) if len(bodies) == 1 else None
            if keys is not None:
                for a in actions:
                    if isinstance(a.get("add"), dict):
                        check_partition_keys(a["add"], keys, store.display(f.name), None)
            continue
        counts = _parquet(store, f.name, ["add", "add.partitionValues", "protocol", "metaData.partitionColumns", "metaData.schemaString", "sidecar"])
        bodies += counts.metadata
        parquet.append((f.name, counts.partition_keys))
        rows += counts.rows
        adds += counts.non_null.get("add", 0)
        protocols += counts.non_null.get("protocol", 0)
        metadatas += counts.non_null.get("metaData", 0)
        sidecars += counts.sidecars
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
        counts = _parquet(store, name, ["add", "add.partitionValues"])
        side_rows += counts.rows
        adds += counts.non_null.get("add", 0)
        names.append(name)
        parquet.append((name, counts.partition_keys))
    allowed = partition_value_keys(bodies[0]) if len(bodies) == 1 else None
    if allowed is not None:
        for name, carried in parquet:
            if not allowed.issuperset(carried):
                _partition_keys_hold(store, name, allowed)
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
