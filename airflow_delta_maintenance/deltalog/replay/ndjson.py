"""The vectorised reader of NDJSON log files (commits, compactions, JSON checkpoints) into Arrow.

File actions (the bulk of a log) never go through a Python loop: the lines of all JSON files of a
segment are split and routed with Arrow compute, and ``add``/``remove`` lines are parsed by
pyarrow's JSON reader in one call. The few other actions (protocol, metadata, commitInfo, txn,
domain metadata) are parsed with ``json.loads``. Errors name the file and the 1-based line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from ..errors import CorruptLogError
from ..model.action_types import ADD_FIELDS, DV_TYPE, REMOVE_FIELDS
from .ndjson_lines import FILE_ACTION_PREFIXES, newline_positions, starts_with
from .parsed_actions import ParsedActions, empty_file_actions, file_action_table, first_nameless

__all__ = ["parse_ndjson"]

_FILE_ACTION_PREFIXES = ('{"add":', '{"remove":')
_JSON_SCHEMA = pa.schema(
    [
        pa.field("add", pa.struct([f for f in ADD_FIELDS if f.name not in ("partitionValues", "tags")])),
        pa.field("remove", pa.struct([f for f in REMOVE_FIELDS if f.name not in ("partitionValues", "tags")])),
    ]
)

# Only what reconciliation needs: the file key and the tombstone time. Everything else is skipped
# by the JSON reader (users that emit the original lines, like compaction, need nothing more).
_KEY_FIELDS = ("path", "deletionVector", "deletionTimestamp", "size")
_JSON_KEYS_SCHEMA = pa.schema(
    [
        pa.field("add", pa.struct([f for f in ADD_FIELDS if f.name in _KEY_FIELDS])),
        pa.field("remove", pa.struct([f for f in REMOVE_FIELDS if f.name in _KEY_FIELDS])),
    ]
)


def _locate_bad_line(sources: Sequence[tuple[str, bytes]]) -> CorruptLogError:
    for name, data in sources:
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                return CorruptLogError(f"{name}: line {number} is not valid JSON ({exc})", path=name, line=number)
            if not isinstance(obj, dict):
                return CorruptLogError(f"{name}: line {number} is not a JSON object", path=name, line=number)
    return CorruptLogError("log files hold actions of the wrong type: " + ", ".join(n for n, _ in sources))


def _python_file_actions(rows: list[tuple[int, dict[str, Any]]], key: str, fields: Sequence[pa.Field]) -> pa.Table:
    """Rare path for file-action lines that are not in the canonical ``{"add":`` form."""
    names = [f.name for f in fields]
    records = []
    for _, action in rows:
        body = action[key]
        rec = {n: body.get(n) for n in names}
        for m in ("partitionValues", "tags"):
            if isinstance(rec.get(m), dict):
                rec[m] = list(rec[m].items())
        if isinstance(rec.get("deletionVector"), dict):
            rec["deletionVector"] = {f.name: rec["deletionVector"].get(f.name) for f in DV_TYPE}
        records.append(rec)
    struct = pa.array(records, type=pa.struct(list(fields)))
    return file_action_table(struct, fields, np.array([o for o, _ in rows], dtype=np.int64))


# Top-level action names: a file-action line is read with these as empty structs beside its own
# action, so a line holding two actions shows as a row with two valid columns.
_ACTION_NAMES = ("add", "remove", "metaData", "protocol", "commitInfo", "txn", "domainMetadata", "cdc", "sidecar", "checkpointMetadata")


def _read_schema(schema: pa.Schema, kind: str, keys_only: bool) -> pa.Schema:
    """The read schema of one file-action kind. Reading keys only, unexpected keys are ignored, so
    the other actions are declared to show up; otherwise the reader infers any other key as a
    column of its own, and declaring nine empty structs would only cost a null per row for each
    (a third of the read's time)."""
    if not keys_only:
        return pa.schema([schema.field(kind)])
    return pa.schema([schema.field(kind), *(pa.field(n, pa.struct([])) for n in _ACTION_NAMES if n != kind)])


def _two_actions(name: str, line: int, action: dict[str, Any]) -> CorruptLogError:
    keys = ", ".join(sorted(action))
    return CorruptLogError(f"{name}: line {line} holds more than one action ({keys}); one action per line", path=name, line=line)


def _require_one_action(table: pa.Table, idx: np.ndarray, source_index: np.ndarray, first_line: np.ndarray, sources: Sequence[tuple[str, bytes]]) -> None:
    """Every row of a file-action read must have exactly one valid top-level column."""
    if table.num_columns == 1:
        return
    valid = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        if column.null_count != len(column):
            valid += np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=np.int64)
    bad = np.flatnonzero(valid > 1)
    if len(bad):
        i = int(idx[bad[0]])
        s = int(source_index[i])
        line = i - int(first_line[s]) + 1
        name = sources[s][0]
        raise CorruptLogError(f"{name}: line {line} holds more than one action; one action per line", path=name, line=line)


def _require_utf8(sources: Sequence[tuple[str, bytes]], text: np.ndarray) -> None:
    """Log files are UTF-8: a path with invalid bytes would be written into checkpoints other
    readers reject. Validated in one Arrow cast; the bad file and line are found only on failure."""
    if not len(text):
        return
    offsets = pa.py_buffer(np.array([0, len(text)], dtype=np.int64))
    try:
        pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(text)]).cast(pa.large_string())
        return
    except pa.ArrowInvalid:
        pass
    for name, data in sources:
        for number, raw in enumerate(data.split(b"\n"), start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptLogError(f"{name}: line {number} is not valid UTF-8 ({exc.reason} at byte {exc.start})", path=name, line=number) from None


def _json_schema(partition_columns: Sequence[str]) -> pa.Schema:
    """Explicit schema with ``partitionValues`` as a struct of string columns: left to inference,
    pyarrow would turn values such as ``2023-12-22`` into timestamps."""
    pv = pa.field("partitionValues", pa.struct([pa.field(c, pa.string()) for c in partition_columns]))
    return pa.schema(
        [pa.field(k, pa.struct([*_JSON_SCHEMA.field(k).type, pv])) for k in ("add", "remove")]
    )


def _only_strings(struct_type: pa.DataType, allowed: Sequence[str] | None) -> bool:
    if not pa.types.is_struct(struct_type):
        return bool(pa.types.is_null(struct_type))
    for f in struct_type:
        if not (pa.types.is_string(f.type) or pa.types.is_null(f.type)):
            return False
        if allowed is not None and f.name not in allowed:
            return False
    return True


def _faithful(struct_type: pa.DataType, partition_columns: Sequence[str]) -> bool:
    """True unless inference changed a map's values (non-string types) or a file's partition
    keys differ from the table's; then the slower exact path is used."""
    names = [f.name for f in struct_type]
    if "partitionValues" in names and not _only_strings(struct_type.field("partitionValues").type, partition_columns):
        return False
    return not ("tags" in names and not _only_strings(struct_type.field("tags").type, None))


def _read_json_lines(data: np.ndarray, schema: pa.Schema, keys_only: bool) -> pa.Table | None:
    """One JSON read of newline-separated objects; None when pyarrow cannot (types clash)."""
    size = len(data)
    buffer = pa.py_buffer(data)
    # Blocks let pyarrow parse in parallel; a single block is the retry for cross-block type trouble.
    for block_size in (max(1 << 20, size // 8 + 1), size + 1):
        try:
            return pj.read_json(
                pa.BufferReader(buffer),
                read_options=pj.ReadOptions(block_size=block_size),
                parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore" if keys_only else "infer"),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue
    return None


# Line masks run over slices of this size: a comparison over a whole large buffer would allocate
# one bool per byte of the log.
_SCAN_BYTES = 32 << 20


def _gather_lines(text: np.ndarray, starts: np.ndarray, lengths: np.ndarray, selected: np.ndarray, *, blank: bool) -> np.ndarray:
    """The selected lines (each with its newline) concatenated; with ``blank`` they are also
    overwritten with spaces in ``text``, newlines kept, so the JSON reader skips them."""
    pieces = []
    bounds = np.unique(np.concatenate([np.searchsorted(starts, np.arange(0, len(text), _SCAN_BYTES)), [len(starts)]]))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        chosen = selected[a:b]
        if not chosen.any():
            continue
        view = text[starts[a] : starts[b - 1] + lengths[b - 1]]
        rows = np.flatnonzero(chosen) + a
        row_lengths = lengths[rows]
        nbytes = int(row_lengths.sum())
        if nbytes * 16 <= len(view):
            # Few lines (a commit's removes among its adds): index their bytes (two int64 per
            # byte, within the region's size) instead of a mask over every byte of the region.
            index = np.repeat(starts[rows] - (np.cumsum(row_lengths) - row_lengths), row_lengths) + np.arange(nbytes)
            pieces.append(text[index])
            if blank:
                text[index] = 32
            continue
        mask = np.repeat(chosen, lengths[a:b])
        pieces.append(view[mask])
        if blank:
            np.putmask(view, mask, 32)
    if blank:
        text[(starts + lengths - 1)[selected]] = 10
    return np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)


def _line_bytes(data: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """Split ``data`` (lines with their newline, of these lengths) into the lines without newline."""
    ends = np.cumsum(lengths)
    return [data[e - n : e - 1].tobytes() for e, n in zip(ends.tolist(), lengths.tolist(), strict=True)]


def parse_ndjson(
    sources: Sequence[tuple[str, bytes]],
    base_order: int = 0,
    *,
    keys_only: bool = False,
    partition_columns: Sequence[str] = (),
    keep_lines: bool = True,
) -> ParsedActions:
    """Parse NDJSON log files given in replay order as ``(display name, bytes)``.

    ``_order`` of an action is ``base_order`` plus the global index of its line. All files are
    copied once into one buffer; lines are found with numpy; lines that are not canonical file
    actions are blanked (the JSON reader skips blank lines) after being copied out for
    ``json.loads``; ``remove`` lines are gathered into their own buffer. So pyarrow parses all
    adds in one call and all removes in another, every row valid: no per-line work and no filter.
    ``keep_lines`` keeps the original bytes of every line (for ``original_lines``).
    """
    total = sum(len(d) + 1 for _, d in sources)
    buf = np.empty(total + 16, dtype=np.uint8)
    buf[total:] = 32  # padding so prefix checks never read past the end
    pos = 0
    file_ends = []
    for _, data in sources:
        n = len(data)
        buf[pos : pos + n] = np.frombuffer(data, dtype=np.uint8)
        pos += n
        if n and data[-1:] != b"\n":
            buf[pos] = 10
            pos += 1
        file_ends.append(pos)
    text = buf[:pos]
    _require_utf8(sources, text)
    newlines = newline_positions(text)
    starts = np.concatenate([[0], newlines[:-1] + 1]).astype(np.int64) if len(newlines) else np.zeros(0, np.int64)
    ends = newlines.astype(np.int64)
    source_index = np.searchsorted(np.asarray(file_ends), starts, side="right")
    first_line = np.searchsorted(starts, np.concatenate([[0], np.asarray(file_ends[:-1])]))
    is_add = starts_with(buf, starts, FILE_ACTION_PREFIXES[0])
    is_remove = starts_with(buf, starts, FILE_ACTION_PREFIXES[1])
    other_idx = np.flatnonzero(~(is_add | is_remove) & (ends > starts))

    others: list[tuple[int, int, int, dict[str, Any]]] = []
    odd_adds: list[tuple[int, dict[str, Any]]] = []
    odd_removes: list[tuple[int, dict[str, Any]]] = []
    odd_lines: dict[int, bytes] = {}
    partition_sets: set[tuple[str, ...]] = {tuple(sorted(partition_columns))} if partition_columns else set()
    for i in other_idx:
        s = int(source_index[i])
        raw = buf[starts[i] : ends[i]].tobytes()
        if not raw.strip():
            continue
        line_number = int(i - first_line[s]) + 1
        name = sources[s][0]
        try:
            action = json.loads(raw)
        except ValueError as exc:
            raise CorruptLogError(f"{name}: line {line_number} is not valid JSON ({exc})", path=name, line=line_number) from None
        if not isinstance(action, dict):
            raise CorruptLogError(f"{name}: line {line_number} is not a JSON object", path=name, line=line_number)
        if len(action) > 1:
            raise _two_actions(name, line_number, action)
        order = int(i) + base_order
        if "add" in action:
            odd_adds.append((order, action))
            odd_lines[int(i)] = raw.rstrip(b"\r") + b"\n"
        elif "remove" in action:
            odd_removes.append((order, action))
            odd_lines[int(i)] = raw.rstrip(b"\r") + b"\n"
        else:
            others.append((order, s, line_number, action))
            if "metaData" in action:
                partition_sets.add(tuple(sorted((action["metaData"] or {}).get("partitionColumns") or ())))
        buf[starts[i] : ends[i]] = 32  # blank it for the JSON reader

    lines = None
    if keep_lines:
        # Each line with its newline: offsets are the line starts plus the end of the last line.
        offsets = np.concatenate([starts, [ends[-1] + 1]]) if len(starts) else np.zeros(1, np.int64)
        lines = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(starts), [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(text)])

    # One partitioning for every file: declare its columns. Partitioning changed inside these files
    # (an overwrite with new partition columns): only the exact path keeps each file's own keys.
    seen_partitions = sorted({c for cols in partition_sets for c in cols})
    repartitioned = len(partition_sets) > 1
    lengths = ends - starts + 1  # every line with its newline; together they cover `text`
    add_idx, remove_idx = np.flatnonzero(is_add), np.flatnonzero(is_remove)
    kinds: list[tuple[str, np.ndarray, np.ndarray, list[pa.Field]]] = []
    if len(remove_idx):
        # `text` backs `lines` when they are kept, so removes stay in it: they come out as null
        # adds, dropped below. Otherwise they are blanked so that every add row is valid.
        blank = bool(len(add_idx)) and not keep_lines
        kinds.append(("remove", remove_idx, _gather_lines(text, starts, lengths, is_remove, blank=blank), REMOVE_FIELDS))
        if len(add_idx):
            kinds.insert(0, ("add", np.flatnonzero(is_add | is_remove) if keep_lines else add_idx, text, ADD_FIELDS))
    elif len(add_idx):
        kinds.append(("add", add_idx, text, ADD_FIELDS))

    adds = [empty_file_actions(ADD_FIELDS)]
    removes = [empty_file_actions(REMOVE_FIELDS)]
    parsed: dict[str, pa.Table] = {}
    exact = False
    for kind, idx, kind_text, _ in kinds:
        schema = _read_schema(_JSON_KEYS_SCHEMA if keys_only else _json_schema(seen_partitions), kind, keys_only)
        table = _read_json_lines(kind_text, schema, keys_only)
        if table is None or table.num_rows != len(idx):
            bad = _locate_bad_line(sources)
            if bad.line is not None:
                raise bad
            exact = True
        else:
            _require_one_action(table, idx, source_index, first_line, sources)
            if not keys_only and (repartitioned or not _faithful(table.schema.field(kind).type, seen_partitions)):
                exact = True  # inference would alter values
            else:
                parsed[kind] = table
    if exact:
        # Types clash (e.g. a string size) or inference would alter values: convert through Python.
        try:
            for kind, idx, kind_text, fields in kinds:
                kind_lines = _line_bytes(kind_text, lengths[idx]) if kind == "remove" else [buf[starts[i] : ends[i]].tobytes() for i in idx]
                rows = []
                for i, raw in zip(idx, kind_lines, strict=True):
                    a = json.loads(raw)
                    if len(a) > 1:
                        s_ = int(source_index[i])
                        raise _two_actions(sources[s_][0], int(i - first_line[s_]) + 1, a)
                    if kind in a:
                        rows.append((int(i) + base_order, a))
                (adds if kind == "add" else removes).append(_python_file_actions(rows, kind, fields))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise CorruptLogError(f"file action of the wrong type in {', '.join(n for n, _ in sources)}: {exc}") from None
    else:
        for kind, idx, _, fields in kinds:
            (adds if kind == "add" else removes).append(file_action_table(parsed[kind].column(kind), fields, idx + base_order))
    if odd_adds:
        adds.append(_python_file_actions(odd_adds, "add", ADD_FIELDS))
    if odd_removes:
        removes.append(_python_file_actions(odd_removes, "remove", REMOVE_FIELDS))
    adds_table, removes_table = pa.concat_tables(adds), pa.concat_tables(removes)
    for kind, t in (("add", adds_table), ("remove", removes_table)):
        if (nameless := first_nameless(t)) is not None:
            order = nameless - base_order
            s_ = int(source_index[order])
            line = order - int(first_line[s_]) + 1
            raise CorruptLogError(f"{sources[s_][0]}: line {line}: {kind} action without a path", path=sources[s_][0], line=line)
    return ParsedActions(
        adds_table, removes_table, others, lines, odd_lines, [int(x) for x in first_line], len(starts)
    )
