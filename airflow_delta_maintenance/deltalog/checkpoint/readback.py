"""Read a checkpoint a writer just made (or found) back before ``_last_checkpoint`` may point at it.

Opens every top-level file and every sidecar it references (Parquet footers, JSON lines), checks
each sidecar's size against the ``sizeInBytes`` the checkpoint records, and totals the actions the
way ``_last_checkpoint.size`` counts them (sidecar rows, not the rows that name sidecars). A writer
compares the total with what it wrote: a checkpoint missing a sidecar, holding a torn one, or with
fewer rows than written is refused with a typed error naming the file.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError, IncompleteCheckpointError, MissingSidecarError
from ..model.paths import SIDECAR_DIR
from ..model.validation import loads_action
from ..storage import LogStore

__all__ = ["CheckpointReadBack", "parquet_footer", "parquet_sidecars", "read_back_checkpoint"]


@dataclass(frozen=True)
class CheckpointReadBack:
    num_actions: int  # as _last_checkpoint.size counts them
    num_sidecars: int
    size_in_bytes: int  # top-level files and sidecars


def _footer(store: LogStore, name: str, size: int) -> pq.FileMetaData:
    """The Parquet footer alone, by two ranged reads (pyarrow never reads a Python file object)."""
    path = store.path(name)
    if size < 12:
        raise CorruptLogError(f"{store.display(name)}: {size} bytes is too short for Parquet", path=name)
    tail = store.fs.cat_file(path, start=size - 8, end=size)
    if tail[4:] != b"PAR1":
        raise CorruptLogError(f"{store.display(name)}: no Parquet footer (torn or not Parquet)", path=name)
    length = struct.unpack("<i", tail[:4])[0]
    if not 0 < length <= size - 12:
        raise CorruptLogError(f"{store.display(name)}: footer length {length} does not fit in {size} bytes", path=name)
    footer = store.fs.cat_file(path, start=size - 8 - length, end=size)
    return pq.read_metadata(io.BytesIO(b"PAR1" + footer))


def parquet_footer(store: LogStore, name: str, size: int) -> pq.FileMetaData:
    """The footer of the Parquet file ``name`` of ``size`` bytes (two ranged reads); typed errors."""
    try:
        return _footer(store, name, size)
    except FileNotFoundError as exc:
        raise IncompleteCheckpointError(f"{store.display(name)}: vanished while being read", path=name) from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptLogError(f"{store.display(name)}: unreadable Parquet ({exc})", path=name) from exc


def _sidecar_row_groups(meta: pq.FileMetaData) -> list[int]:
    """Row groups whose ``sidecar.path`` may hold a value: the column statistics rule out the rest
    (a classic checkpoint read as V2 has the column, all null)."""
    if "sidecar" not in meta.schema.to_arrow_schema().names:
        return []
    leaf = next((j for j in range(meta.num_columns) if meta.schema.column(j).path == "sidecar.path"), None)
    groups = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        stats = rg.column(leaf).statistics if leaf is not None else None
        if stats is None or not stats.has_null_count or stats.null_count < rg.num_rows:
            groups.append(i)
    return groups


def parquet_sidecars(store: LogStore, name: str, meta: pq.FileMetaData) -> list[dict[str, Any]]:
    """The sidecar rows of a Parquet checkpoint file, reading only the ``sidecar`` column chunks of
    the row groups that may hold one (ranged reads, no read-ahead): never the whole file."""
    groups = _sidecar_row_groups(meta)
    if not groups:
        return []
    found: list[dict[str, Any]] = []
    with store.fs.open(store.path(name), "rb", cache_type="none") as fh:
        pf = pq.ParquetFile(fh, metadata=meta, pre_buffer=False)
        for i in groups:
            found += [s for s in pf.read_row_group(i, columns=["sidecar"]).column("sidecar").to_pylist() if s]
    return found


def _parquet_rows(store: LogStore, name: str, size: int, *, sidecars: bool) -> tuple[int, list[dict[str, Any]]]:
    """(rows in the footer, sidecar rows when asked): the footer, and only the ``sidecar`` column
    of the row groups that may name sidecars (a V2 top-level file)."""
    try:
        meta = _footer(store, name, size)
        found = parquet_sidecars(store, name, meta) if sidecars else []
        return meta.num_rows, found
    except FileNotFoundError as exc:
        raise IncompleteCheckpointError(f"{store.display(name)}: vanished while being read back", path=name) from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptLogError(f"{store.display(name)}: unreadable Parquet ({exc})", path=name) from exc


def read_back_checkpoint(store: LogStore, names: Sequence[str], *, expected_actions: int | None = None) -> CheckpointReadBack:
    """Open the checkpoint files ``names`` (relative to ``_delta_log``) and all their sidecars."""
    actions = size = 0
    sidecars: list[dict[str, Any]] = []
    for name in names:
        stat = store.stat(name)
        if stat is None:
            raise IncompleteCheckpointError(f"{store.display(name)}: checkpoint file is missing", path=name)
        size += stat.size
        if name.endswith(".json"):
            rows = []
            for i, line in enumerate(store.read(name).split(b"\n"), start=1):
                if line.strip():
                    rows.append(loads_action(line, store.display(name), i))
            found = [r["sidecar"] for r in rows if isinstance(r, dict) and r.get("sidecar")]
            actions += len(rows) - len(found)
        else:
            rows_in_file, found = _parquet_rows(store, name, stat.size, sidecars=True)
            actions += rows_in_file - len(found)
        sidecars += found
    for s in sidecars:
        side = f"{SIDECAR_DIR}/{str(s['path']).rsplit('/', 1)[-1]}"
        stat = store.stat(side)
        if stat is None:
            raise MissingSidecarError(f"{store.display(side)}: sidecar of {names[0]} is missing", path=side)
        if s.get("sizeInBytes") is not None and int(s["sizeInBytes"]) != stat.size:
            raise CorruptLogError(f"{store.display(side)}: {stat.size} bytes, the checkpoint records {s['sizeInBytes']}", path=side)
        actions += _parquet_rows(store, side, stat.size, sidecars=False)[0]
        size += stat.size
    if expected_actions is not None and actions != expected_actions:
        raise IncompleteCheckpointError(
            f"{store.display(names[0])}: holds {actions} actions (sidecars included), {expected_actions} were written", path=names[0]
        )
    return CheckpointReadBack(actions, len(sidecars), size)
