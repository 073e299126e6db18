"""Statistics parsed while the log is still being replayed.

A caller that wants the live files' statistics typed (as ``stats_parsed``) would otherwise parse
them after the replay, on every CPU, while the replay's own serial steps (reading and splitting
each commit batch, finding the newest action per file, copying out the winners) leave a CPU idle.
Here the ``stats`` strings of each part are handed to a thread pool as soon as the part is read,
with the schema known so far; the results are matched to the final schema at the end (a part
read under an older schema is parsed again), and reconciliation filters them with the rows.
Files that lose to a later action are parsed for nothing; their strings were read anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from ..model.actions import Metadata, NonFileState, Protocol
from ..model.schema import StatsPlan, stats_parse_plan
from .parsed_columns import parse_stats, string_slices

__all__ = ["StatsPipeline", "stats_plan_for"]


def stats_plan_for(protocol: Protocol, metadata: Metadata) -> StatsPlan:
    """How ``stats`` strings parse for a table with this protocol and metadata."""
    with_dv = protocol.has_writer_feature("deletionVectors")
    return stats_parse_plan(metadata.schema, metadata.partition_columns, with_dv)


def _same(a: StatsPlan, b: StatsPlan) -> bool:
    return bool(a.read_type == b.read_type and a.final_type == b.final_type)


# A task parses at most about this many bytes of statistics: a checkpoint part's 100k strings are
# shared out between the workers, and small commit batches are not split at all.
_TASK_BYTES = 2 << 20


class StatsPipeline:
    """Parses the ``stats`` column of each part's adds on ``pool`` as parts are fed in replay order."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._seen = NonFileState()  # the protocol and metadata so far
        # per non-empty batch of adds, in replay order: the plan it was parsed with (None: not
        # yet known), its strings, and the parse of each of its slices
        self._batches: list[tuple[StatsPlan | None, pa.Array, list[Future[pa.Array | None]]]] = []

    def observe(self, others: Sequence[tuple[int, int, int, dict[str, Any]]]) -> None:
        """Fold the protocol and metadata among a part's other actions (in order) into the plan.
        A malformed one is skipped here: the replay reports it."""
        for _, _, _, action in others:
            if "protocol" in action or "metaData" in action:
                try:
                    self._seen.take(action)
                except (KeyError, TypeError, ValueError):
                    continue

    def _plan(self) -> StatsPlan | None:
        if self._seen.protocol is None or self._seen.metadata is None:
            return None
        try:
            return stats_plan_for(self._seen.protocol, self._seen.metadata)
        except (KeyError, TypeError, ValueError):
            return None

    def submit(self, adds: pa.Table) -> None:
        """Start parsing the statistics of a part's adds (with the schema seen so far)."""
        plan = self._plan()
        for batch in adds.to_batches():
            if batch.num_rows == 0:
                continue
            stats = batch.column("stats")
            futures = [] if plan is None else [self._pool.submit(parse_stats, s, plan, threads=False) for s in string_slices(stats, _TASK_BYTES)]
            self._batches.append((plan, stats, futures))

    def result(self, plan: StatsPlan, rows: int) -> pa.ChunkedArray | None:
        """Every fed row's statistics parsed with ``plan`` (the table's final schema), in feed
        order; None when a string does not read with the table's types."""
        chunks: list[pa.Array] = []
        for used, stats, futures in self._batches:
            if used is not None and _same(used, plan):
                parsed = [f.result() for f in futures]
                if any(p is None for p in parsed):
                    return None
                chunks.extend(p for p in parsed if p is not None)
            else:  # parsed under an older schema, or before any was known
                again = parse_stats(stats, plan)
                if again is None:
                    return None
                chunks.append(again)
        self._batches.clear()
        if sum(len(c) for c in chunks) != rows:
            raise AssertionError(f"parsed statistics for {sum(len(c) for c in chunks)} of {rows} file actions")
        return pa.chunked_array(chunks, plan.final_type)


def slice_rows(column: pa.ChunkedArray, lengths: Sequence[int]) -> list[pa.Array]:
    """``column`` cut into consecutive arrays of these lengths (zero-copy where a piece lies
    inside one chunk)."""
    out = []
    start = 0
    for n in lengths:
        piece = column.slice(start, n)
        out.append(piece.chunk(0) if piece.num_chunks == 1 else piece.combine_chunks())
        start += n
    return out
