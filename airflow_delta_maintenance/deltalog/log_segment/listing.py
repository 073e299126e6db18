"""One LIST of ``_delta_log`` sorted into file kinds; no content is read here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..model.paths import LogFileType, ParsedLogPath, checkpoint_rank, parse_log_path
from ..storage import FileStat, LogStore

__all__ = ["LogSegmentFiles", "CheckpointGroup", "list_log_files", "group_checkpoints", "LISTING_ATTEMPTS"]

# Listings a reader tries when files a listing showed vanish while they are read: a concurrent
# cleanup removed them below a newer checkpoint, which a fresh listing shows.
LISTING_ATTEMPTS = 3


@dataclass(frozen=True)
class CheckpointGroup:
    """All files of one checkpoint instance (one file, or the parts of a multi-part set)."""

    version: int
    files: tuple[ParsedLogPath, ...]
    expected_parts: int  # 1 unless multi-part

    @property
    def complete(self) -> bool:
        return len({f.part for f in self.files}) == self.expected_parts if self.expected_parts > 1 else bool(self.files)

    @property
    def missing_parts(self) -> list[int]:
        """The first (at most 10) missing part numbers: a name may claim billions of parts, so
        this never walks the whole range."""
        seen = {f.part for f in self.files}
        out: list[int] = []
        p = 1
        while p <= self.expected_parts and len(out) < 10:
            if p not in seen:
                out.append(p)
            p += 1
        return out

    @property
    def rank(self) -> tuple[int, int, int, str]:
        return checkpoint_rank(self.files[0])

    @property
    def size_in_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class LogSegmentFiles:
    """The recognised top-level files of ``_delta_log`` by kind, each sorted by version."""

    commits: tuple[ParsedLogPath, ...]
    checkpoints: tuple[ParsedLogPath, ...]
    compactions: tuple[ParsedLogPath, ...]
    crcs: tuple[ParsedLogPath, ...]
    last_checkpoint: ParsedLogPath | None
    # Dot-named top-level files of the same LIST (temp files of writers: the leftovers cleanup
    # judges), so that no second LIST of _delta_log is needed for them; None: not recorded.
    hidden: tuple[FileStat, ...] | None = None

    @classmethod
    def from_paths(cls, paths: Iterable[ParsedLogPath], hidden: tuple[FileStat, ...] | None = None) -> LogSegmentFiles:
        commits, checkpoints, compactions, crcs = [], [], [], []
        last: ParsedLogPath | None = None
        for p in paths:
            if p.type is LogFileType.COMMIT:
                commits.append(p)
            elif p.is_checkpoint:
                checkpoints.append(p)
            elif p.type is LogFileType.COMPACTION:
                compactions.append(p)
            elif p.type is LogFileType.CRC:
                crcs.append(p)
            elif p.type is LogFileType.LAST_CHECKPOINT:
                last = p
        commits.sort(key=lambda p: p.version)
        checkpoints.sort(key=lambda p: (p.version, p.filename))
        compactions.sort(key=lambda p: (p.version, p.end_version))
        crcs.sort(key=lambda p: p.version)
        return cls(tuple(commits), tuple(checkpoints), tuple(compactions), tuple(crcs), last, hidden)

    @property
    def is_empty(self) -> bool:
        return not (self.commits or self.checkpoints)

    @property
    def latest_commit_version(self) -> int:
        return self.commits[-1].version if self.commits else -1

    def checkpoint_groups(self) -> list[CheckpointGroup]:
        return group_checkpoints(self.checkpoints)

    def complete_checkpoints(self) -> list[CheckpointGroup]:
        """Complete checkpoint instances, best last for each version (delta-spark's ordering)."""
        return sorted((g for g in self.checkpoint_groups() if g.complete), key=lambda g: g.rank)


def group_checkpoints(checkpoints: Iterable[ParsedLogPath]) -> list[CheckpointGroup]:
    groups: dict[tuple[int, str, int | str], list[ParsedLogPath]] = defaultdict(list)
    for c in checkpoints:
        if c.type is LogFileType.CHECKPOINT_MULTIPART:
            groups[(c.version, "multi", c.num_parts)].append(c)
        else:
            groups[(c.version, c.type.value, c.filename)].append(c)
    out = []
    for key, files in groups.items():
        files.sort(key=lambda f: f.part)
        expected = files[0].num_parts if key[1] == "multi" else 1
        out.append(CheckpointGroup(key[0], tuple(files), expected))
    out.sort(key=lambda g: g.rank)
    return out


def list_log_files(store: LogStore, since: LogSegmentFiles | None = None) -> LogSegmentFiles:
    """One LIST of ``_delta_log``; ``TableNotFoundError`` when there is no log directory at all.

    ``since``: an earlier listing of the same log. Published commits are never rewritten
    (put-if-absent), so a commit it holds keeps its entry: a local listing stats and parses only
    the other files (the re-validation listing of a 20,000-commit log right before a cleanup
    deletes: 0.10 → 0.07 s). What appeared or vanished since is seen as in any listing.
    """
    paths: list[ParsedLogPath] = []
    hidden: list[FileStat] = []
    commit = LogFileType.COMMIT
    known = {c.name: c for c in since.commits} if since is not None and store.is_local else {}
    for name, size, mtime in store.scan_dir(known=known):
        if size < 0:  # a commit of `since`: the same file, the same entry
            paths.append(known[name])
            continue
        if name.endswith(".json") and name[:-5].isdigit() and name.isascii():
            # most of a listing: parse_log_path's commit case, without a call per file
            v = int(name[:-5])
            paths.append(ParsedLogPath(name, commit, v, size, mtime, v, 0, 0, "", "json"))
            continue
        parsed = parse_log_path(name, size, mtime)
        if parsed is not None:
            paths.append(parsed)
        elif name.startswith("."):
            hidden.append(FileStat(name, size, mtime))
    if not paths:
        store.require_log_dir()
    hidden.sort(key=lambda s: s.name)
    return LogSegmentFiles.from_paths(paths, tuple(hidden))
