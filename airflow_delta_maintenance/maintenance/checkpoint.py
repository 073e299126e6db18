"""Checkpoint use case: decide whether a checkpoint is due, then write it over published versions only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..deltalog.checkpoint_writer import CheckpointResult, write_checkpoint
from ..deltalog.errors import UnpublishedVersionError
from ..deltalog.listing import LogSegmentFiles, list_log_files
from ..deltalog.snapshot import load_snapshot
from ..deltalog.storage import LogStore

__all__ = ["CheckpointDecision", "decide_checkpoint", "run_local_checkpoint"]


@dataclass(frozen=True)
class CheckpointDecision:
    version: int  # the version a checkpoint would be written at (latest published), -1 if none
    last_checkpoint_version: int
    commits_since_checkpoint: int
    interval: int
    due: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide_checkpoint(
    files: LogSegmentFiles,
    *,
    interval: int,
    published_version: int | None = None,
    version: int | None = None,
    force: bool = False,
) -> CheckpointDecision:
    """Due when at least ``interval`` published commits follow the last complete checkpoint."""
    latest_published = files.latest_commit_version if published_version is None else min(published_version, files.latest_commit_version)
    target = latest_published if version is None else version
    if target > latest_published:
        raise UnpublishedVersionError(f"version {target} is not published (latest published is {latest_published})", version=target)
    complete = [g.version for g in files.complete_checkpoints() if g.version <= target]
    last = complete[-1] if complete else -1
    since = target - last
    if target < 0:
        return CheckpointDecision(target, last, 0, interval, False, "no published version")
    if last == target:
        return CheckpointDecision(target, last, 0, interval, False, f"a checkpoint already exists at {target}")
    if force:
        return CheckpointDecision(target, last, since, interval, True, "forced")
    if since >= interval:
        return CheckpointDecision(target, last, since, interval, True, f"{since} commits since the last checkpoint (interval {interval})")
    return CheckpointDecision(target, last, since, interval, False, f"only {since} commits since the last checkpoint (interval {interval})")


def run_local_checkpoint(store: LogStore, version: int, *, files: LogSegmentFiles | None = None) -> CheckpointResult:
    """Single-node checkpoint of a published version (the snapshot is read from published files only)."""
    files = files if files is not None else list_log_files(store)
    snapshot = load_snapshot(store, version, files=files)
    return write_checkpoint(store, snapshot, files=files)
