"""Which files make up a version: checkpoint, compactions, commits, and a catalog's unpublished tail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import IncompleteCheckpointError, MissingCommitError, TableNotFoundError, VersionNotFoundError
from ..model.paths import ParsedLogPath, commit_name
from .listing import CheckpointGroup, LogSegmentFiles

__all__ = ["CatalogCommit", "JsonSource", "LogSegment", "build_log_segment", "is_single_commit"]


@dataclass(frozen=True)
class CatalogCommit:
    """A ratified commit supplied by a coordinator: a staged file (relative to ``_delta_log``) or inline bytes.

    ``timestamp`` is the coordinator's in-commit timestamp (ms), ``-1`` when unknown.
    """

    version: int
    file_name: str = ""
    inline_content: bytes | None = None
    timestamp: int = -1
    size: int = 0
    modification_time: int = 0

    @property
    def source_name(self) -> str:
        return self.file_name or f"<inline commit {self.version}>"


# A JSON source of actions in replay order: a published commit or compaction file, or a catalog commit.
JsonSource = ParsedLogPath | CatalogCommit


def is_single_commit(source: JsonSource) -> bool:
    """A commit (published or from the catalog), not a compaction of several."""
    return isinstance(source, CatalogCommit) or source.end_version == source.version


@dataclass(frozen=True)
class LogSegment:
    """Files to replay for ``version``: ``checkpoint`` (may be None) then ``deltas`` in ascending order.

    ``deltas`` holds commit files, chosen compaction files and catalog commits; ``commit_versions``
    maps each version after the checkpoint to the commit it came from (for timestamps), except
    versions covered by a compaction.
    """

    version: int
    checkpoint: CheckpointGroup | None
    deltas: tuple[JsonSource, ...]
    latest_version: int  # newest version the table has (published or ratified)
    published_version: int  # newest published commit version in the listing (≤ the catalog's cap)
    files: LogSegmentFiles

    @property
    def checkpoint_version(self) -> int:
        return self.checkpoint.version if self.checkpoint else -1

    @property
    def commit_sources(self) -> dict[int, JsonSource]:
        return {
            (d.version): d
            for d in self.deltas
            if isinstance(d, CatalogCommit) or d.version == d.end_version
        }


def _select_compactions(
    files: LogSegmentFiles, start: int, end: int, commits: dict[int, JsonSource], tail_start: int
) -> list[JsonSource]:
    """delta-spark's greedy rule: walk commits and compactions in listing order (a compaction sorts
    before the commit of its start version, shorter first) and take a file whose start is above
    everything taken so far and whose end is within the segment. Compactions never cover catalog
    commits. Falls back to plain commits if the result does not tile ``(start, end]`` exactly."""
    plain = [commits[v] for v in range(start + 1, end + 1)]
    candidates = [c for c in files.compactions if c.version > start and c.end_version <= end and c.end_version < tail_start]
    if not candidates:
        return plain
    walk: list[tuple[int, int, JsonSource]] = [(c.version, 0, c) for c in candidates]
    walk += [(v, 1, s) for v, s in commits.items() if start < v <= end]
    walk.sort(key=lambda t: (t[0], t[1], t[2].end_version if isinstance(t[2], ParsedLogPath) else t[0]))
    highest = start
    chosen: list[JsonSource] = []
    for first, _, source in walk:
        last = source.end_version if isinstance(source, ParsedLogPath) else source.version
        if highest < first and last <= end:
            chosen.append(source)
            highest = last
    expected = start + 1
    for s in chosen:
        first = s.version
        last = s.end_version if isinstance(s, ParsedLogPath) else s.version
        if first != expected:
            return plain
        expected = last + 1
    return chosen if expected == end + 1 else plain


def build_log_segment(
    files: LogSegmentFiles,
    version: int | None = None,
    *,
    catalog_commits: Sequence[CatalogCommit] = (),
    latest_ratified_version: int | None = None,
    use_compactions: bool = True,
    skip_checkpoints: frozenset[str] = frozenset(),
    table: str = "",
) -> LogSegment:
    """The log segment for ``version`` (default: the latest).

    ``catalog_commits`` are ratified commits from a coordinator; they win over a published file of
    the same version. ``latest_ratified_version`` caps the table: published files above it are
    ignored (they cannot be ratified; PROTOCOL "Reading Catalog-managed Tables").
    ``skip_checkpoints`` names (by first file) checkpoints found unreadable: they are not used.

    Work is bounded by the files present, never by the span of versions: a stray file with a huge
    version is reported by name, not enumerated up to.
    """
    cap = latest_ratified_version if latest_ratified_version is not None and latest_ratified_version >= 0 else None
    commits: dict[int, JsonSource] = {c.version: c for c in files.commits if cap is None or c.version <= cap}
    published_version = max(commits, default=-1)
    tail = sorted((c for c in catalog_commits if cap is None or c.version <= cap), key=lambda c: c.version)
    for c in tail:
        commits[c.version] = c
    tail_start = tail[0].version if tail else 1 << 62

    checkpoints = [
        g for g in files.complete_checkpoints() if (cap is None or g.version <= cap) and g.files[0].name not in skip_checkpoints
    ]
    latest = max(max(commits, default=-1), max((g.version for g in checkpoints), default=-1))
    if latest < 0:
        if files.checkpoints:
            incomplete = [g for g in files.checkpoint_groups() if not g.complete]
            if incomplete:
                g = incomplete[-1]
                raise IncompleteCheckpointError(
                    f"{table}: checkpoint {g.version} ({g.files[0].name}) is missing parts {g.missing_parts} of {g.expected_parts} "
                    f"and no commit can replace it",
                    path=g.files[0].name,
                )
        raise TableNotFoundError(f"{table}: _delta_log holds no commit or checkpoint", path=table)
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFoundError(f"{table}: version {target} does not exist (latest is {latest})", version=target)

    usable = [g for g in checkpoints if g.version <= target]
    checkpoint = usable[-1] if usable else None
    start = checkpoint.version if checkpoint else -1
    present = sorted(v for v in commits if start < v <= target)
    if len(present) != target - start:
        # the first version the files present skip; bounded by their number, not by the span
        first = next((start + 1 + i for i, v in enumerate(present) if v != start + 1 + i), start + 1 + len(present))
        after = next((v for v in present if v > first), None)
        # An incomplete multi-part checkpoint at or before the gap explains it better than "missing commit".
        broken = [g for g in files.checkpoint_groups() if not g.complete and start < g.version <= target]
        if broken and broken[-1].version >= first - 1:
            g = broken[-1]
            raise IncompleteCheckpointError(
                f"{table}: checkpoint {g.version} ({g.files[0].name}) is missing parts {g.missing_parts} of {g.expected_parts}; "
                f"version {first} cannot be reconstructed without it",
                path=g.files[0].name,
            )
        source = commits.get(after) if after is not None else None
        next_name = (source.name if isinstance(source, ParsedLogPath) else source.source_name) if source is not None else None
        raise MissingCommitError(
            f"{table}: commit {commit_name(first)} is missing: versions {start + 1}..{target} must be contiguous"
            + (f" after checkpoint {start}" if checkpoint else " when no checkpoint precedes them")
            + (f"; the next file present is {next_name} (version {after})" if next_name else ""),
            version=first,
            path=commit_name(first),
        )
    if use_compactions:
        deltas = _select_compactions(files, start, target, commits, tail_start)
    else:
        deltas = [commits[v] for v in range(start + 1, target + 1)]
    return LogSegment(
        version=target,
        checkpoint=checkpoint,
        deltas=tuple(deltas),
        latest_version=latest,
        published_version=published_version,
        files=files,
    )
