"""The vectorised reader of NDJSON log files (commits, compactions, JSON checkpoints) into Arrow.

File actions (the bulk of a log) never go through a Python loop: the lines of all JSON files of a
segment are split and routed with numpy, and ``add``/``remove`` lines are parsed by pyarrow's JSON
reader under a complete explicit schema, all adds in one call and all removes in another, and
checked column by column (``strict_actions``). The few other actions (protocol, metadata,
commitInfo, txn, domain metadata) are parsed and validated one by one (``model.validation``).
Lines that do not fit the fast path are validated one by one too, so every error names the file,
the 1-based line and the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import CorruptLogError
from ..model.action_types import ADD_FIELDS, DV_TYPE, REMOVE_FIELDS
from ..model.partition_keys import check_partition_keys, partition_value_keys
from ..model.validation import CommitRules, loads_action
from .ndjson_lines import FILE_ACTION_PREFIXES, newline_positions, starts_with
from .parsed_actions import ParsedActions, empty_file_actions, file_action_table
from .strict_actions import first_commit_rule_broken, known_tag_keys, learn_tag_keys, read_lines, read_schema, read_strict, rules_hold, take_keys

__all__ = ["parse_ndjson"]


def _python_file_actions(rows: list[tuple[int, dict[str, Any]]], key: str, fields: Sequence[pa.Field]) -> pa.Table:
    """Validated file actions that the columnar path cannot take (another partitioning, too many
    tag keys, lines not in the canonical ``{"add":`` form) as a table, through Python."""
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


# A keys-only read parses a large commit's file actions in blocks of about this many bytes: only
# one block's full columns (statistics, tags, ...) exist at a time, beside the keys kept so far.
_KEYS_BLOCK_BYTES = 32 << 20


def _read_keys_in_blocks(
    kind_text: np.ndarray, kind: str, idx: np.ndarray, text_starts: np.ndarray | None, lengths: np.ndarray, partition_columns: Sequence[str]
) -> pa.ChunkedArray | None:
    """``read_strict`` of ``kind_text``'s lines block by block, keeping only their keys
    (``take_keys``); None when a block needs the line-by-line pass (the caller reads it whole).
    ``text_starts``: the lines' starts when ``kind_text`` is the whole text (other lines blanked),
    None when it holds the kind's lines alone, one after the other."""
    line_lengths = lengths[idx]
    starts = text_starts[idx] if text_starts is not None else np.concatenate([[0], np.cumsum(line_lengths)[:-1]]).astype(np.int64)
    cuts = np.unique(np.concatenate([[0], np.searchsorted(starts, np.arange(_KEYS_BLOCK_BYTES, len(kind_text), _KEYS_BLOCK_BYTES)), [len(starts)]]))
    chunks: list[pa.Array] = []
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        if a == b:
            continue
        end = int(starts[b - 1] + line_lengths[b - 1])
        table = read_strict(kind_text[int(starts[a]) : end], kind, b - a, partition_columns)
        if table is None:
            return None
        chunks.extend(take_keys(table.column(kind)))
        del table
    return pa.chunked_array(chunks, None) if chunks else None


def parse_ndjson(
    sources: Sequence[tuple[str, bytes]],
    base_order: int = 0,
    *,
    keys_only: bool = False,
    partition_columns: Sequence[str] = (),
    keep_lines: bool = True,
    single_commit: Sequence[bool] | None = None,
    consume: bool = False,
    partition_keys: frozenset[str] | None = None,
) -> ParsedActions:
    """Parse NDJSON log files given in replay order as ``(display name, bytes)``.

    ``_order`` of an action is ``base_order`` plus the global index of its line. All files are
    copied once into one buffer; lines are found with numpy; lines that are not canonical file
    actions are blanked (the JSON reader skips blank lines) after being copied out for
    ``json.loads``; ``remove`` lines are gathered into their own buffer. So pyarrow parses all
    adds in one call and all removes in another, every row valid: no per-line work and no filter.
    ``keep_lines`` keeps the original bytes of every line (for ``original_lines``).
    ``single_commit`` says per source whether it is one commit, to which the one-action-per-file
    rules apply (default: every source is; a compaction is checked for repeats by its reader).
    ``consume``: ``sources`` is a list the caller gives up: its bytes are dropped once copied, so
    a large commit is not held twice while it is parsed.
    ``partition_keys``: the ``partitionValues`` keys the table's adds may carry before the first
    source (``model.partition_keys.partition_value_keys``: the metaData in effect there), None when
    unknown; from a source holding a ``metaData`` on, that one's (it rules its whole commit): a
    caller parsing in batches starts the next under the last metaData of this one.
    """
    single_commit = list(single_commit) if single_commit is not None else [True] * len(sources)
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
    data = b""  # (the loop's last file: ``consume`` below may drop every file's bytes)
    text = buf[:pos]
    _require_utf8(sources, text)
    if consume and isinstance(sources, list):
        sources[:] = [(name, b"") for name, _ in sources]
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
    rules = [CommitRules(name) for name, _ in sources]  # non-file actions; file actions below, by column
    partition_sets: set[tuple[str, ...]] = {tuple(sorted(partition_columns))} if partition_columns else set()
    declared_keys: dict[int, frozenset[str] | None] = {}  # source -> the keys its metaData allows
    for i in other_idx:
        s = int(source_index[i])
        raw = buf[starts[i] : ends[i]].tobytes()
        if not raw.strip():
            continue
        line_number = int(i - first_line[s]) + 1
        action = loads_action(raw, sources[s][0], line_number)
        kind = next(iter(action))
        order = int(i) + base_order
        if kind == "add":
            odd_adds.append((order, action))
            odd_lines[int(i)] = raw.rstrip(b"\r") + b"\n"
        elif kind == "remove":
            odd_removes.append((order, action))
            odd_lines[int(i)] = raw.rstrip(b"\r") + b"\n"
        else:
            rules[s].feed(kind, action[kind], line_number)
            others.append((order, s, line_number, action))
            if kind == "metaData":
                partition_sets.add(tuple(sorted(action["metaData"].get("partitionColumns") or ())))
                declared_keys[s] = partition_value_keys(action["metaData"])
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
        # Removes are gathered into their own buffer; when `text` backs `lines` the adds are too
        # (the strict read accepts no other action), otherwise removes are blanked in `text`.
        blank = bool(len(add_idx)) and not keep_lines
        kinds.append(("remove", remove_idx, _gather_lines(text, starts, lengths, is_remove, blank=blank), REMOVE_FIELDS))
        if len(add_idx):
            kinds.insert(0, ("add", add_idx, text if blank else _gather_lines(text, starts, lengths, is_add, blank=False), ADD_FIELDS))
    elif len(add_idx):
        kinds.append(("add", add_idx, text, ADD_FIELDS))

    def locate(order: int) -> tuple[str, int]:
        i = order - base_order
        s_ = int(source_index[i])
        return sources[s_][0], int(i - first_line[s_]) + 1

    # The partition-value keys in effect in each source (a metaData rules its whole commit). The
    # columnar read declares the partition columns and refuses any other key: only the adds read
    # line by line need the check.
    in_effect: list[frozenset[str] | None] = [partition_keys] * len(sources)
    if declared_keys:
        current = partition_keys
        for s_ in range(len(sources)):
            current = declared_keys.get(s_, current)
            in_effect[s_] = current

    def check_partitions(kind: str, actions: list[tuple[int, dict[str, Any]]]) -> None:
        if kind != "add" or all(e is None for e in in_effect):
            return
        for order, action in actions:
            allowed = in_effect[int(source_index[order - base_order])]
            if allowed is not None:
                check_partition_keys(action["add"], allowed, *locate(order))

    def validated(kind: str, idx: np.ndarray, kind_text: np.ndarray) -> list[tuple[int, dict[str, Any]]]:
        """Each line of ``kind`` parsed and validated on its own: the precise error, or the actions."""
        raws = [buf[starts[i] : ends[i]].tobytes() for i in idx] if kind_text is text else _line_bytes(kind_text, lengths[idx])
        return [(int(i) + base_order, loads_action(raw, *locate(int(i) + base_order))) for i, raw in zip(idx, raws, strict=True)]

    adds = [empty_file_actions(ADD_FIELDS)]
    removes = [empty_file_actions(REMOVE_FIELDS)]
    for kind, idx, kind_text, fields in kinds:
        if keys_only and not repartitioned and len(kind_text) > _KEYS_BLOCK_BYTES:
            keys = _read_keys_in_blocks(kind_text, kind, idx, starts if kind_text is text else None, lengths, seen_partitions)
            if keys is not None:
                (adds if kind == "add" else removes).append(file_action_table(keys, fields, idx + base_order))
                continue
        table = None if repartitioned else read_strict(kind_text, kind, len(idx), seen_partitions)
        rows: list[tuple[int, dict[str, Any]]] | None = None
        if table is None:
            # Off the fast path: validate line by line (a real error is raised here, naming its
            # line), then read again declaring the tag keys found, or convert through Python.
            rows = validated(kind, idx, kind_text)
            check_partitions(kind, rows)
            pv_keys = {k for _, a in rows for k in (a[kind].get("partitionValues") or {})}
            tag_keys = {k for _, a in rows for k in (a[kind].get("tags") or {})}
            if not repartitioned and pv_keys <= set(seen_partitions) and learn_tag_keys(tag_keys):
                table = read_lines(kind_text, read_schema(kind, seen_partitions, known_tag_keys()), unknown="ignore")
                if table is not None and (table.num_rows != len(idx) or not rules_hold(table.column(kind), kind)):
                    table = None
        target = adds if kind == "add" else removes
        if table is None:
            target.append(_python_file_actions(rows or [], kind, fields))
            continue
        column = table.column(kind)
        del table
        struct = pa.chunked_array(take_keys(column), None) if keys_only else column
        target.append(file_action_table(struct, fields, idx + base_order))
    if odd_adds:
        check_partitions("add", odd_adds)
        adds.append(_python_file_actions(odd_adds, "add", ADD_FIELDS))
    if odd_removes:
        removes.append(_python_file_actions(odd_removes, "remove", REMOVE_FIELDS))
    if lines is None:  # the parsed columns are copies: the text is no longer needed (the checks below hash every path)
        kinds.clear()
        buf = text = kind_text = np.empty(0, np.uint8)
    adds_table, removes_table = pa.concat_tables(adds), pa.concat_tables(removes)
    first_commit_rule_broken(adds_table, removes_table, locate, lambda order: single_commit[int(source_index[order - base_order])])
    return ParsedActions(
        adds_table, removes_table, others, lines, odd_lines, [int(x) for x in first_line], len(starts)
    )
